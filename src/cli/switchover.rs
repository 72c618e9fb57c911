//! `hamaster switchover RESOURCE [--to NODE]`: a planned move of the master, as
//! `patronictl switchover` is — asked of Pacemaker, never done behind its back. It checks that
//! a standby can be promoted (its promotion score, which the standby's own monitor sets only
//! while etcd answers it), asks Pacemaker to move the promoted role (`crm_resource --move`
//! onto NODE, or `--ban` off the current master; `--promoted`, or `--master` on Pacemaker
//! 2.0), waits until the new master holds the leader key in etcd and Pacemaker's scores say
//! so, then removes the constraint it made, so nothing is pinned afterwards.

use std::time::{Duration, Instant};

use clap::Args;

use super::CliError;
use crate::lease::{leader_key, legacy_leader_key, Etcd, EtcdConfig, Holder, LeaseError};
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;

#[derive(Debug, Args)]
pub struct SwitchoverArgs {
    /// The resource (the ocf:hamaster:master primitive's id; its parameters are read from
    /// this node's CIB).
    #[arg(value_name = "RESOURCE")]
    pub resource: String,
    /// The node to promote; default: the one Pacemaker chooses among the promotable
    /// standbys.
    #[arg(long, value_name = "NODE")]
    pub to: Option<String>,
    /// Seconds to wait for the new master (at most an hour). When it runs out the
    /// constraint stays, and the command says how to remove it.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wait: u64,
}

/// The bound of one Pacemaker tool's run.
const TOOL: Duration = Duration::from_secs(10);
/// How often the new master is looked for.
const POLL: Duration = Duration::from_millis(100);

impl super::Verb for SwitchoverArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init("hamaster-switchover");
        run(self).map_err(Failed::from)
    }
}

/// The promotable clone that holds the primitive `resource` (ocf:hamaster:master) in a CIB
/// resources section: Ok(clone id); Err: not in a clone, or in one that is not promotable.
/// None: no such primitive.
pub fn promotable_clone_of(xml: &str, resource: &str) -> Option<Result<String, String>> {
    use crate::failsafe::clearance::attr;
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    // The open elements: (name, id, a promotable=true meta attribute seen in it).
    let mut open: Vec<(String, Option<String>, bool)> = Vec::new();
    // The depth of the matching primitive's parent, once it is found: the answer is known
    // when that parent closes (pcs writes a clone's meta attributes after its primitive).
    let mut parent: Option<usize> = None;
    loop {
        let event = reader.read_event().ok()?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if parent.is_none()
                    && name == "primitive"
                    && attr(e, "id").as_deref() == Some(resource)
                    && attr(e, "class").as_deref() == Some("ocf")
                    && attr(e, "provider").as_deref() == Some("hamaster")
                    && attr(e, "type").as_deref() == Some("master")
                {
                    match open.last() {
                        Some((p, Some(_), _)) if p == "clone" || p == "master" => {
                            parent = Some(open.len() - 1)
                        }
                        _ => return Some(Err("it is not in a promotable clone".into())),
                    }
                }
                if name == "nvpair"
                    && attr(e, "name").as_deref() == Some("promotable")
                    && attr(e, "value").and_then(|v| crate::params::parse_bool(&v)) == Some(true)
                {
                    let clone = open.iter_mut().rev().find(|(n, _, _)| n == "clone");
                    if let Some((_, _, promotable)) = clone {
                        *promotable = true;
                    }
                }
                if matches!(event, Event::Start(_)) {
                    open.push((name, attr(e, "id"), false));
                }
            }
            Event::End(_) => {
                let closed = open.pop();
                if parent.is_some_and(|d| d == open.len()) {
                    let (name, id, promotable) = closed?;
                    let id = id?;
                    // Pacemaker 1.1's schema: a master/slave resource.
                    return Some(if name == "master" || promotable {
                        Ok(id)
                    } else {
                        Err(format!("its clone {id:?} is not promotable"))
                    });
                }
            }
            Event::Eof => return None,
            _ => {}
        }
    }
}

/// The ids of move/ban constraints (`cli-prefer-ID`, `cli-ban-ID-on-NODE`) for `clone` in a
/// CIB constraints section.
pub fn cli_constraints(xml: &str, clone: &str) -> Vec<String> {
    use crate::failsafe::clearance::attr;
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut ids = Vec::new();
    let prefer = format!("cli-prefer-{clone}");
    let ban = format!("cli-ban-{clone}-on-");
    loop {
        match reader.read_event() {
            Ok(Event::Start(ref e)) | Ok(Event::Empty(ref e))
                if e.name().as_ref() == b"rsc_location" =>
            {
                if let Some(id) = attr(e, "id") {
                    if id == prefer || id.starts_with(&ban) {
                        ids.push(id);
                    }
                }
            }
            Ok(Event::Eof) | Err(_) => return ids,
            _ => {}
        }
    }
}

/// The flag that limits crm_resource's --move/--ban/--clear to the promoted role:
/// `--promoted` from Pacemaker 2.1 on, `--master` before (from `crm_resource --version`'s
/// line "Pacemaker X.Y.Z"). None: the version could not be read.
pub fn promoted_flag(version: &str) -> Option<&'static str> {
    let v = version.lines().find_map(|l| l.strip_prefix("Pacemaker "))?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(if (major, minor) < (2, 1) {
        "--master"
    } else {
        "--promoted"
    })
}

fn tool(program: &str, args: &[&str]) -> Result<String, String> {
    crate::service::tool_run(TOOL, program, args)
}

/// Node `node`'s transient attribute `name` (`crm_attribute --lifetime reboot --query`).
fn node_attribute(node: &str, name: &str) -> Option<String> {
    let args = [
        "--node",
        node,
        "--name",
        name,
        "--lifetime",
        "reboot",
        "--query",
        "--quiet",
    ];
    tool("crm_attribute", &args)
        .ok()
        .map(|v| v.trim().to_string())
}

/// Node `node`'s promotion score for `resource` (Pacemaker names it master-RESOURCE on every
/// generation); None: none set (the node cannot be promoted).
fn score(resource: &str, node: &str) -> Option<i64> {
    node_attribute(node, &format!("master-{resource}"))?
        .parse()
        .ok()
}

/// The cluster's nodes (`crm_node --list`: "ID NAME STATE" lines), with whether each is a
/// member now.
fn nodes() -> Result<Vec<(String, bool)>, CliError> {
    let text = tool("crm_node", &["--list"]).map_err(CliError::CibUnreadable)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let _id = w.next()?;
            let name = w.next()?.to_string();
            Some((name, w.next() == Some("member")))
        })
        .collect())
}

/// What a node brings to a promotion, from its report (docs/metrics.md).
fn report_of(resource: &str, node: &str) -> String {
    match node_attribute(node, &format!("hamaster-{resource}-etcd")) {
        Some(v) if !v.is_empty() => format!("etcd as it sees it: {v}"),
        _ => "no report from its monitor".into(),
    }
}

/// The promotable clone of `resource`, with no move or ban constraint on it already (ours
/// would be added, and removed, beside it).
fn movable_clone(resources: &str, resource: &str) -> Result<String, CliError> {
    let clone = promotable_clone_of(resources, resource)
        .ok_or_else(|| CliError::NotInCib {
            resource: resource.into(),
        })?
        .map_err(|why| CliError::Refused(format!("{resource}: {why}")))?;
    let constraints = tool("cibadmin", &["--query", "--scope", "constraints"])
        .map_err(CliError::CibUnreadable)?;
    let left = cli_constraints(&constraints, &clone);
    if !left.is_empty() {
        return Err(CliError::Refused(format!(
            "{clone} has a move or ban constraint already ({}): remove it first (`pcs resource \
             clear {clone}` or `crm_resource --clear --resource {clone}`), then ask again",
            left.join(", ")
        )));
    }
    Ok(clone)
}

/// The role flag this cluster's crm_resource takes (`--promoted`, or `--master` before
/// Pacemaker 2.1); Pacemaker 2.0's crm_resource prints its version on stderr and exits 64.
fn this_pacemakers_promoted_flag() -> Result<&'static str, CliError> {
    let version = std::process::Command::new("timeout")
        .args([&TOOL.as_secs().to_string(), "crm_resource", "--version"])
        .stdin(std::process::Stdio::null())
        .output()
        .map(|o| {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            text
        })
        .unwrap_or_default();
    promoted_flag(&version).ok_or_else(|| {
        CliError::CibUnreadable(format!(
            "cannot tell the Pacemaker release from `crm_resource --version`: {:?}",
            version.lines().next().unwrap_or_default()
        ))
    })
}

/// What crm_resource is asked: the master moved to `--to`, or banned from `from` (any
/// promotable standby then); refused when `from` is not a member that is up (Pacemaker cannot
/// move what it does not run) or no such node can be promoted now.
fn crm_order(
    a: &SwitchoverArgs,
    clone: &str,
    flag: &str,
    from: &str,
    key: &str,
    members: &[(String, bool)],
) -> Result<Vec<String>, CliError> {
    let resource = a.resource.as_str();
    if !members.iter().any(|(n, up)| *n == from && *up) {
        return Err(CliError::Refused(format!(
            "{from} holds {key} but is not a cluster member that is up (a cold-standby \
             takeover?): Pacemaker cannot move what it does not run"
        )));
    }
    let promotable = |n: &str| score(resource, n).is_some_and(|s| s > 0);
    let standbys: Vec<&str> = members
        .iter()
        .filter(|(n, member)| *member && *n != from)
        .map(|(n, _)| n.as_str())
        .collect();
    Ok(match &a.to {
        Some(to) if to == from => {
            return Err(CliError::Refused(format!(
                "{to} is the master already (it holds {key})"
            )))
        }
        Some(to) if !members.iter().any(|(n, m)| n == to && *m) => {
            let known: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
            return Err(CliError::Refused(format!(
                "{to} is not a cluster member that is up (nodes: {})",
                known.join(", ")
            )));
        }
        Some(to) if !promotable(to) => {
            return Err(CliError::Refused(format!(
                "{to} cannot be promoted now (no promotion score for {resource}; {})",
                report_of(resource, to)
            )))
        }
        Some(to) => vec![
            "--move".into(),
            "--resource".into(),
            clone.into(),
            "--node".into(),
            to.clone(),
            flag.into(),
        ],
        None => {
            if !standbys.iter().any(|n| promotable(n)) {
                let why: Vec<String> = standbys
                    .iter()
                    .map(|n| format!("{n}: {}", report_of(resource, n)))
                    .collect();
                return Err(CliError::Refused(format!(
                    "no standby can be promoted now ({})",
                    if why.is_empty() {
                        "no other node is up".into()
                    } else {
                        why.join("; ")
                    }
                )));
            }
            vec![
                "--ban".into(),
                "--resource".into(),
                clone.into(),
                "--node".into(),
                from.into(),
                flag.into(),
            ]
        }
    })
}

/// Waits until `until` for another node (the one asked for, if any) to hold the key with a
/// promotion score above the old master's, so that removing the constraint leaves the master
/// where it is (the new master's promote sets 100, the old one's demote what a standby has):
/// the new holder, and what was seen last.
fn wait_for_another<'k>(
    a: &SwitchoverArgs,
    from: &str,
    until: Instant,
    leader: impl Fn() -> Result<Option<(&'k str, Holder)>, LeaseError>,
) -> (Option<Holder>, String) {
    let resource = a.resource.as_str();
    let mut last = String::from("nothing seen yet");
    let done = loop {
        if Instant::now() >= until {
            break None;
        }
        match leader().map(|l| l.map(|(_, h)| h)) {
            Ok(Some(h)) if h.node != from && a.to.as_ref().is_none_or(|t| *t == h.node) => {
                let new = score(resource, &h.node);
                let old = score(resource, from);
                if new.is_some_and(|n| old.is_none_or(|o| n > o)) {
                    break Some(h);
                }
                last = format!(
                    "{} holds the key; promotion scores {}: {new:?}, {from}: {old:?}",
                    h.node, h.node
                );
            }
            Ok(Some(h)) => last = format!("{} holds the key", h.node),
            Ok(None) => last = "nobody holds the key".into(),
            Err(e) => last = format!("cannot tell who holds the key: {e}"),
        }
        std::thread::sleep(POLL);
    };
    (done, last)
}

/// Why a switchover is refused while etcd does not answer.
fn outage(e: &LeaseError) -> String {
    format!(
        "etcd does not answer ({e}): refused, as a switchover now would be an outage, not a \
         move — no node can take the leader key until etcd answers, and the master stays \
         where it is (holding through the outage where etcd_outage lets it). Restore etcd \
         first (docs/oncall.md, \"etcd down\")"
    )
}

fn run(a: &SwitchoverArgs) -> Result<OcfExit, CliError> {
    let resource = a.resource.as_str();
    let resources = super::config::cib_resources()?;
    let cfg = super::config::from_resources(&resources, resource, EtcdConfig::from_values)?;
    let clone = movable_clone(&resources, resource)?;
    let flag = this_pacemakers_promoted_flag()?;

    // Who leads now: etcd's word (Pacemaker promotes, the key decides).
    let key = leader_key(
        &cfg.scope()
            .map_err(|why| CliError::Etcd(format!("cannot tell who leads: {why}")))?,
        resource,
    );
    // One runtime for every question: the client's connections live in it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Etcd(format!("cannot start a runtime: {e}")))?;
    let etcd = rt
        .block_on(Etcd::connect(&cfg, Duration::from_secs(2)))
        .map_err(|e| CliError::Etcd(format!("cannot tell who leads: {e}")))?;
    // A master of a release before the cluster's name was in the key (mid-upgrade, or the
    // target of a downgrade) holds the legacy key: ours first, then that one.
    let legacy = legacy_leader_key(&cfg.prefix, resource);
    let leader = || -> Result<Option<(&str, Holder)>, LeaseError> {
        for k in [key.as_str(), legacy.as_str()] {
            if let Some(h) = rt.block_on(etcd.holder(k))? {
                return Ok(Some((k, h)));
            }
        }
        Ok(None)
    };
    let (key, holder) = leader()
        .map_err(|e| match e {
            e @ LeaseError::Etcd { .. } => CliError::Refused(outage(&e)),
            // etcd answered and refused, or the TLS files: the configuration's problem.
            e => CliError::Etcd(format!("cannot tell who leads: {e}")),
        })?
        .ok_or_else(|| {
            CliError::Refused(format!(
                "nobody holds {key} (nor {legacy}): there is no master to switch over from \
                 (Pacemaker promotes one by itself)"
            ))
        })?;
    let from = holder.node.clone();
    let order = crm_order(a, &clone, flag, &from, key, &nodes()?)?;
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    let asked = Instant::now();
    tool("crm_resource", &order).map_err(CliError::Refused)?;
    println!(
        "{resource}: asked Pacemaker to move the master off {from} (crm_resource {})",
        order.join(" ")
    );

    let until = asked + Duration::from_secs(a.wait);
    let (done, last) = wait_for_another(a, &from, until, leader);
    let Some(new) = done else {
        return Err(CliError::Refused(format!(
            "no new master within {} s ({last}); the constraint stays so that Pacemaker does \
             not move the master back while you look: `crm_resource --clear --resource \
             {clone}` (pcs resource clear {clone}) removes it",
            a.wait
        )));
    };
    let took = asked.elapsed();
    tool("crm_resource", &["--clear", "--resource", &clone]).map_err(|e| {
        CliError::Refused(format!(
            "{} is the master, but the constraint could not be removed: {e}",
            new.node
        ))
    })?;
    println!(
        "{resource}: {} is the master (fencing token {}) {:.2} s after the request; the \
         constraint is removed",
        new.node,
        new.token,
        took.as_secs_f64()
    );
    Ok(OcfExit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PCS_0_11: &str = r#"<resources>
  <clone id="api-clone">
    <primitive id="api" class="ocf" provider="hamaster" type="master">
      <instance_attributes id="api-instance_attributes"/>
    </primitive>
    <meta_attributes id="api-clone-meta_attributes">
      <nvpair id="api-clone-meta_attributes-promotable" name="promotable" value="true"/>
    </meta_attributes>
  </clone>
  <clone id="plain-clone">
    <primitive id="plain" class="ocf" provider="hamaster" type="master"/>
  </clone>
  <primitive id="alone" class="ocf" provider="hamaster" type="master"/>
  <master id="old-ms"><primitive id="old" class="ocf" provider="hamaster" type="master"/></master>
</resources>"#;

    #[test]
    fn the_clone_is_found_and_must_be_promotable() {
        // pcs writes the clone's meta attributes after the primitive.
        assert_eq!(
            promotable_clone_of(PCS_0_11, "api"),
            Some(Ok("api-clone".into()))
        );
        assert_eq!(
            promotable_clone_of(PCS_0_11, "old"),
            Some(Ok("old-ms".into()))
        );
        assert!(
            matches!(promotable_clone_of(PCS_0_11, "plain"), Some(Err(e)) if e.contains("plain-clone"))
        );
        assert!(matches!(
            promotable_clone_of(PCS_0_11, "alone"),
            Some(Err(_))
        ));
        assert_eq!(promotable_clone_of(PCS_0_11, "nosuch"), None);
    }

    #[test]
    fn only_the_clones_own_move_and_ban_constraints_count() {
        let xml = r#"<constraints>
  <rsc_location id="cli-prefer-api-clone" rsc="api-clone" role="Promoted" node="n2" score="INFINITY"/>
  <rsc_location id="cli-ban-api-clone-on-n1" rsc="api-clone" role="Promoted" node="n1" score="-INFINITY"/>
  <rsc_location id="cli-prefer-api-clone-2" rsc="api-clone-2" node="n2" score="INFINITY"/>
  <rsc_location id="location-api-clone" rsc="api-clone" node="n3" score="50"/>
</constraints>"#;
        assert_eq!(
            cli_constraints(xml, "api-clone"),
            ["cli-prefer-api-clone", "cli-ban-api-clone-on-n1"]
        );
        assert!(cli_constraints("<constraints/>", "api-clone").is_empty());
    }

    #[test]
    fn the_promoted_role_flag_follows_the_release() {
        let flag = |v: &str| promoted_flag(v);
        assert_eq!(flag("Pacemaker 2.0.5\nWritten by …"), Some("--master"));
        assert_eq!(flag("Pacemaker 2.1.5"), Some("--promoted"));
        assert_eq!(flag("Pacemaker 3.0.0"), Some("--promoted"));
        assert_eq!(flag("Pacemaker 1.1.23-rc1"), Some("--master"));
        assert_eq!(flag("something else"), None);
    }
}
