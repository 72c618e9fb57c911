//! Every node reports what a promotion here would need (issue 30, item 3): the unpromoted
//! instance's monitor asks every etcd member (its answer and release), picks the watchdog the
//! guard would arm and finds the VIP's interface, and sets the answers as transient node
//! attributes (`crm_attribute --lifetime reboot`), which `crm_mon -A1` and `pcs status --full`
//! show beside the promotion score:
//!
//! | attribute | value |
//! |---|---|
//! | `hamaster-RESOURCE-etcd` | `3/3 members, etcd 3.5.16`; `2/3 members, etcd 3.5.16; silent: URL`; `0/3 members: why` |
//! | `hamaster-RESOURCE-watchdog` | `/dev/watchdog1` (the first the guard would try), `off`, `none: why` |
//! | `hamaster-RESOURCE-vip` | the interface (`lan0`), `none: why` (only with `ip`) |
//!
//! A node that cannot be promoted (no etcd member answers, `watchdog=required` without a
//! device, no interface for the VIP) answers OCF_DEGRADED where Pacemaker knows it (2.1 and
//! later: shown among the failed actions, nothing recovered), a warning in the log before.
//! Each value is set only when it changed, or again after `score::REASSERT_AFTER` (Pacemaker
//! drops transient attributes when a node leaves the membership).

use std::time::{Duration, Instant};

use crate::lease::{MemberAnswers, MemberStatus};
use crate::ocf::OcfEnv;
use crate::resource::config::MasterConfig;
use crate::resource::dir::ResourceDir;
use crate::resource::status::EtcdSpace;
use crate::resource::watchdog::Choice;

/// What this node would bring to a promotion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Each etcd member's endpoint and release, or why it did not answer; None: etcd was not
    /// asked (outside a cluster, or watchdog=required without a device: no score either).
    pub etcd: Option<MemberAnswers>,
    pub watchdog: Result<Choice, String>,
    /// The VIP's interface, or why there is none; None without a VIP.
    pub vip: Option<Result<String, String>>,
}

impl Readiness {
    /// The VIP's interface, as the guard would find it now; `etcd` as the members answered,
    /// `watchdog` as resource::watchdog::choose found it.
    pub fn of(
        cfg: &MasterConfig,
        etcd: Option<MemberAnswers>,
        watchdog: Result<Choice, String>,
    ) -> Self {
        // Each VIP's interface (extra_vips' after ip's), or why the first without one has none.
        let vip = cfg.vip.is_some().then(|| {
            let mut nics: Vec<String> = Vec::new();
            for v in cfg.vips() {
                let ip = v.ip;
                let nic = crate::vip::Vip::new(v.clone())
                    .and_then(|mut vip| vip.resolve())
                    .map(|r| r.nic)
                    .map_err(|e| match cfg.extra_vips.is_empty() {
                        true => e.to_string(),
                        false => format!("{ip}: {e}"),
                    })?;
                if !nics.contains(&nic) {
                    nics.push(nic);
                }
            }
            Ok(nics.join(","))
        });
        Readiness {
            etcd,
            watchdog,
            vip,
        }
    }

    /// (name suffix, value) of each attribute.
    pub fn attributes(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(members) = &self.etcd {
            out.push(("etcd", etcd_value(members)));
        }
        out.push((
            "watchdog",
            match &self.watchdog {
                Ok(Choice::Off) => "off".to_string(),
                Ok(Choice::Use(devices)) => devices
                    .first()
                    .map_or("none".to_string(), |d| d.display().to_string()),
                Ok(Choice::Without(why)) | Err(why) => format!("none: {why}"),
            },
        ));
        if let Some(vip) = &self.vip {
            out.push((
                "vip",
                match vip {
                    Ok(nic) => nic.clone(),
                    Err(why) => format!("none: {why}"),
                },
            ));
        }
        out
    }

    /// What the standby's listener serves of it (guard::exporter), as of now.
    pub fn report(&self) -> crate::resource::status::StandbyReport {
        let members = self.etcd.as_ref().map(|m| {
            let answering = m.iter().filter(|(_, a)| a.is_ok()).count();
            (answering, m.len())
        });
        crate::resource::status::StandbyReport {
            at_unix_ms: crate::lease::clock::unix_ms(),
            etcd_members: members,
            etcd_alarms: self
                .etcd
                .as_ref()
                .and_then(EtcdSpace::of)
                .map(|s| s.alarms)
                .unwrap_or_default(),
            unpromotable: self.unpromotable(),
        }
    }

    /// Why this node cannot be promoted, if it cannot.
    pub fn unpromotable(&self) -> Option<String> {
        let mut why = Vec::new();
        if let Some(members) = &self.etcd {
            match EtcdSpace::of(members) {
                None => why.push(format!("no etcd member answers ({})", etcd_value(members))),
                Some(space) if space.blocks_writes() => why.extend(space.trouble()),
                Some(_) => {}
            }
        }
        if let Err(e) = &self.watchdog {
            why.push(e.clone());
        }
        if let Some(Err(e)) = &self.vip {
            why.push(format!("no interface for the VIP: {e}"));
        }
        (!why.is_empty()).then(|| format!("this node cannot be promoted: {}", why.join("; ")))
    }
}

/// `3/3 members, etcd 3.5.16`, with the silent members, releases with etcd issue 15247, and
/// the alarms raised (`ALARM NOSPACE`). Not the database's size: it changes all the time, and
/// each change would be a CIB write from every standby (the master's guard shows it).
fn etcd_value(members: &MemberAnswers) -> String {
    let answered: Vec<&MemberStatus> = members
        .iter()
        .filter_map(|(_, a)| a.as_ref().ok())
        .collect();
    let mut releases: Vec<&str> = answered.iter().map(|m| m.version.as_str()).collect();
    releases.sort_unstable();
    releases.dedup();
    let head = format!("{}/{} members", answered.len(), members.len());
    if answered.is_empty() {
        let why = members
            .first()
            .and_then(|(_, a)| a.as_ref().err())
            .map_or("no members", String::as_str);
        return format!("{head}: {why}");
    }
    let mut value = format!("{head}, etcd {}", releases.join(" "));
    let silent: Vec<&str> = members
        .iter()
        .filter(|(_, a)| a.is_err())
        .map(|(e, _)| e.as_str())
        .collect();
    if !silent.is_empty() {
        value.push_str(&format!("; silent: {}", silent.join(" ")));
    }
    let old: Vec<&str> = releases
        .iter()
        .copied()
        .filter(|v| crate::lease::etcd::has_lease_revoke_fix(v) == Some(false))
        .collect();
    if !old.is_empty() {
        value.push_str(&format!("; {} has etcd issue 15247", old.join(" ")));
    }
    for alarm in EtcdSpace::of(members).map(|s| s.alarms).unwrap_or_default() {
        value.push_str(&format!("; ALARM {alarm}"));
    }
    value
}

/// The attribute's name in the CIB.
pub fn attribute_name(resource: &str, suffix: &str) -> String {
    format!("hamaster-{resource}-{suffix}")
}

/// What one call of crm_attribute may take: `most`, within what is left before `until`.
fn call_limit(until: Instant, most: Duration) -> Duration {
    until.saturating_duration_since(Instant::now()).min(most)
}

/// Sets each attribute that changed (or was last set REASSERT_AFTER ago), each call within
/// `most` and all before `until`; the values last set are kept in `dir` (one file per
/// attribute).
pub fn publish(
    env: &OcfEnv,
    dir: &ResourceDir,
    resource: &str,
    r: &Readiness,
    until: Instant,
    most: Duration,
) {
    if !super::score::in_cluster(env) {
        return;
    }
    for (suffix, value) in r.attributes() {
        let name = attribute_name(resource, suffix);
        let cache = dir.attribute(suffix);
        if super::score::recently_set(&cache, &value) {
            continue;
        }
        let args = [
            "--lifetime",
            "reboot",
            "--name",
            name.as_str(),
            "--update",
            value.as_str(),
        ];
        let limit = call_limit(until, most);
        if crate::service::tool_output(limit, "crm_attribute", &args).is_some() {
            super::score::remember(&cache, &value);
        } else {
            log::warn!(
                "node attribute {name}={value:?} not set: crm_attribute failed or did not \
                 finish within {} ms",
                limit.as_millis()
            );
        }
    }
}

/// Every attribute's suffix, for withdraw.
const SUFFIXES: [&str; 3] = ["etcd", "watchdog", "vip"];

/// Deletes the attributes this node set (stop: a stopped or deleted resource reports nothing),
/// each call within `most` and all before `until`.
pub fn withdraw(env: &OcfEnv, dir: &ResourceDir, resource: &str, until: Instant, most: Duration) {
    if !super::score::in_cluster(env) {
        return;
    }
    for suffix in SUFFIXES {
        let cache = dir.attribute(suffix);
        if !cache.exists() {
            continue;
        }
        let name = attribute_name(resource, suffix);
        let args = ["--lifetime", "reboot", "--name", name.as_str(), "--delete"];
        if crate::service::tool_output(call_limit(until, most), "crm_attribute", &args).is_some() {
            let _ = std::fs::remove_file(&cache);
        } else {
            log::warn!("node attribute {name} not deleted: crm_attribute failed or timed out");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Members that answer with their release (a 25.3 MB database, no alarm), or do not.
    fn members(answers: &[Result<&str, &str>]) -> MemberAnswers {
        answers
            .iter()
            .enumerate()
            .map(|(i, a)| {
                (
                    format!("http://192.0.2.{}:2379", i + 1),
                    a.map(|v| MemberStatus {
                        version: v.into(),
                        db_size: 25_300_000,
                        ..MemberStatus::default()
                    })
                    .map_err(String::from),
                )
            })
            .collect()
    }

    fn readiness(etcd: &[Result<&str, &str>]) -> Readiness {
        Readiness {
            etcd: Some(members(etcd)),
            watchdog: Ok(Choice::Use(vec![PathBuf::from("/dev/watchdog1")])),
            vip: Some(Ok("lan0".into())),
        }
    }

    #[test]
    fn each_attribute_says_what_a_promotion_would_find() {
        let all = readiness(&[Ok("3.5.16"), Ok("3.5.16"), Ok("3.5.16")]);
        assert_eq!(
            all.attributes(),
            vec![
                ("etcd", "3/3 members, etcd 3.5.16".to_string()),
                ("watchdog", "/dev/watchdog1".to_string()),
                ("vip", "lan0".to_string()),
            ]
        );
        assert_eq!(all.unpromotable(), None);
        let one_silent = readiness(&[Ok("3.4.23"), Err("no answer within 1000 ms"), Ok("3.5.16")]);
        assert_eq!(
            one_silent.attributes()[0].1,
            "2/3 members, etcd 3.4.23 3.5.16; silent: http://192.0.2.2:2379; 3.4.23 has etcd \
             issue 15247"
        );
        // A silent member is worth seeing, not a reason against promotion.
        assert_eq!(one_silent.unpromotable(), None);
        let none = readiness(&[Err("no answer within 1000 ms"), Err("refused")]);
        assert_eq!(
            none.attributes()[0].1,
            "0/2 members: no answer within 1000 ms"
        );
        let why = none.unpromotable().unwrap();
        assert!(why.contains("no etcd member answers"), "{why}");
    }

    /// An alarm any member reports is shown, and one that stops writes (NOSPACE, CORRUPT)
    /// makes the node unpromotable, with what to do; a database near its quota (etcd 3.6
    /// says the quota) is said by the guard, not held against a standby.
    #[test]
    fn an_etcd_alarm_is_shown_and_one_that_stops_writes_bars_a_promotion() {
        let mut r = readiness(&[Ok("3.5.16"), Ok("3.5.16")]);
        if let Some(Ok(m)) = r.etcd.as_mut().and_then(|e| e.get_mut(1)).map(|(_, a)| a) {
            m.alarms = crate::lease::etcd::alarms_in(&[
                "memberID:10276657743932975437 alarm:NOSPACE ".to_string(),
                "etcdserver: no leader".to_string(),
            ]);
        }
        assert_eq!(
            r.attributes()[0].1,
            "2/2 members, etcd 3.5.16; ALARM NOSPACE"
        );
        let why = r.unpromotable().unwrap();
        assert!(
            why.contains("etcd raised the NOSPACE alarm") && why.contains("no node can take"),
            "{why}"
        );
        let near = EtcdSpace {
            db_size_bytes: 1_900_000_000,
            quota_bytes: Some(2_000_000_000),
            alarms: Vec::new(),
        };
        assert!(!near.blocks_writes());
        assert!(
            near.trouble()
                .unwrap()
                .starts_with("etcd's database is at 95 % of its quota"),
            "{:?}",
            near.trouble()
        );
        let roomy = EtcdSpace {
            quota_bytes: Some(8_000_000_000),
            ..near
        };
        assert_eq!(roomy.trouble(), None);
    }

    #[test]
    fn a_missing_watchdog_or_interface_is_named() {
        let every = readiness(&[Ok("3.5.16")]).attributes();
        assert_eq!(every.iter().map(|a| a.0).collect::<Vec<_>>(), SUFFIXES);
        let mut r = readiness(&[Ok("3.5.16")]);
        r.watchdog = Ok(Choice::Without("no watchdog device on this node".into()));
        r.vip = None;
        assert_eq!(
            r.attributes(),
            vec![
                ("etcd", "1/1 members, etcd 3.5.16".to_string()),
                (
                    "watchdog",
                    "none: no watchdog device on this node".to_string()
                ),
            ]
        );
        // auto without a device still promotes.
        assert_eq!(r.unpromotable(), None);
        r.watchdog = Err("watchdog=required: no watchdog device on this node".into());
        r.vip = Some(Err("no route to 192.0.2.10".into()));
        assert_eq!(
            r.attributes()[1].1,
            "none: watchdog=required: no watchdog device on this node"
        );
        assert_eq!(r.attributes()[2].1, "none: no route to 192.0.2.10");
        let why = r.unpromotable().unwrap();
        assert!(
            why.contains("watchdog=required") && why.contains("no interface for the VIP"),
            "{why}"
        );
        r.watchdog = Ok(Choice::Off);
        assert_eq!(r.attributes()[1].1, "off");
        assert_eq!(attribute_name("api", "etcd"), "hamaster-api-etcd");
    }
}
