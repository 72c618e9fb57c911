//! The takeover rule (docs/safety.md, "Holding through an etcd outage"): a node that finds a
//! failsafe record naming another node may take the key (and raise) only once that node is
//! proven not to hold:
//! - Pacemaker's fencing history shows it fenced after it wrote the record; or
//! - it is out of this node's quorate membership and Pacemaker shows its node offline, clean
//!   and running nothing, with fencing applied, startup fencing on, no maintenance (down_clean):
//!   a node that leaves the membership stays unclean until it is fenced (or the operator
//!   confirms it down), and is clean otherwise only after an orderly shutdown whose stop took
//!   its guard's VIP and service down; or
//! - it is in this node's membership, and Pacemaker (whose CIB this membership shares) shows
//!   its instance of the resource not promoted: demoted or stopped, its guard's VIP and service
//!   down; or
//! - it has been out of this node's membership, under one ring, for `wait_after_leaving`: a
//!   holder proves every ASK_EVERY that every node is in its own membership, and its view
//!   changes at most corosync's detection time after ours, so its hold ends by then plus
//!   PROOF_LIFE, and everything it holds is gone FENCE_BOUND later; or
//! - the operator confirms it is down (`hamaster takeover --holder-down NODE`).
//!
//! A holder in this membership and still promoted blocks the takeover; so does a record with
//! no corosync to ask (the cold standby of the runbook), until the operator confirms.

use std::time::Duration;

use super::witness::Cluster;
use super::{Record, FENCE_BOUND, PROOF_LIFE};
use crate::lease::clock::MAX_SLEW;
use crate::rules::{Rule, Rules};

/// What the takeover rule weighs.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    /// This node's name.
    pub me: &'a str,
    pub record: Option<&'a Record>,
    /// This node's corosync, or why it could not be asked.
    pub cluster: Result<&'a Cluster, &'a str>,
    /// Whether Pacemaker's fencing history shows the holder fenced after the record was
    /// written (None: it could not be read).
    pub fenced_since: Option<bool>,
    /// Whether Pacemaker shows the holder's instance promoted (None: it could not be read, or
    /// no Pacemaker runs here).
    pub holder_promoted: Option<bool>,
    /// Whether Pacemaker shows the holder's node offline and clean (None: it could not be
    /// read).
    pub holder_down_clean: Option<bool>,
    /// Whether the cluster has fencing enabled (None: it could not be read).
    pub fencing_enabled: Option<bool>,
    /// Since when (boot clock) this node has seen the holder out of its membership under the
    /// current ring (None: not seen out).
    pub outside_since: Option<Duration>,
    pub now: Duration,
    /// How long after leaving the membership the holder is surely down (wait_after_leaving).
    pub wait: Duration,
    /// The node the operator confirmed down (hamaster takeover --holder-down).
    pub confirmed_down: Option<&'a str>,
}

/// The takeover rule's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clearance {
    /// The key may be taken: why (for the log).
    Clear(String),
    /// Not before `until` (boot clock), unless something changes: why.
    Wait { until: Duration, why: String },
    /// Not while this lasts: why, naming the holder.
    Blocked(String),
}

/// How long after a holder left this node's membership it is surely down: corosync's
/// `detection` (token + consensus + join, as it runs: how much later than ours the holder's
/// own view may change), the proof's life and the fence's bound, each counted on a clock that
/// may run slow or fast by MAX_SLEW.
pub fn wait_after_leaving(detection: Duration) -> Duration {
    let span = detection + PROOF_LIFE + FENCE_BOUND;
    span.mul_f64((1.0 + MAX_SLEW) / (1.0 - MAX_SLEW))
}

/// The takeover rule (the module's comment).
pub fn clearance(f: &Facts, rules: &Rules) -> Clearance {
    let Some(record) = f.record else {
        return Clearance::Clear("no failsafe record".into());
    };
    let holder = record.node.as_str();
    if holder == f.me {
        return Clearance::Clear("the failsafe record names this node".into());
    }
    if !rules.holds(Rule::RecordWait) {
        // The mistake: the record ignored, as if the lease alone mattered.
        return Clearance::Clear("record not honoured".into());
    }
    if f.confirmed_down == Some(holder) {
        return Clearance::Clear(format!("{holder} confirmed down by the operator"));
    }
    if f.fenced_since == Some(true) {
        return Clearance::Clear(format!(
            "{holder} was fenced after it wrote the failsafe record"
        ));
    }
    let may_hold = format!(
        "the failsafe record names {holder}, which may be holding the master through an etcd \
         outage"
    );
    let cluster = match f.cluster {
        Ok(c) => c,
        Err(why) => {
            return Clearance::Blocked(format!(
                "{may_hold}, and this node's corosync cannot tell ({why}): make sure {holder} \
                 is down, then say so with `hamaster takeover --holder-down {holder}`"
            ))
        }
    };
    match cluster.has_member(holder) {
        Some(true) => match f.holder_promoted {
            Some(false) => Clearance::Clear(format!(
                "{holder} is in this membership and its instance is not promoted"
            )),
            Some(true) => Clearance::Blocked(format!(
                "{may_hold}: it is in this node's membership and still promoted"
            )),
            None => Clearance::Blocked(format!(
                "{may_hold}: it is in this node's membership, and whether its instance is \
                 promoted cannot be read"
            )),
        },
        // Out of the membership (of a quorate partition), and Pacemaker saw to it: fenced, or
        // shut down in order.
        Some(false)
            if cluster.quorate
                && f.fencing_enabled == Some(true)
                && f.holder_down_clean == Some(true) =>
        {
            Clearance::Clear(format!(
                "{holder} is out of this node's membership, and Pacemaker (fencing enabled) \
                 shows its node offline and clean"
            ))
        }
        // Out of the membership (or no longer in the nodelist): the time bound.
        _ => {
            let since = f.outside_since.unwrap_or(f.now);
            let until = since + f.wait;
            if f.now >= until {
                Clearance::Clear(format!(
                    "{holder} has been out of this node's membership for {:.1} s",
                    f.now.saturating_sub(since).as_secs_f64()
                ))
            } else {
                Clearance::Wait {
                    until,
                    why: format!(
                        "{may_hold}: out of this node's membership since {:.1} s ago, it is \
                         surely down {:.1} s after it left",
                        f.now.saturating_sub(since).as_secs_f64(),
                        f.wait.as_secs_f64()
                    ),
                }
            }
        }
    }
}

/// Since when the holder has been out of this membership: kept across looks while the ring
/// stays the same and the holder stays out; a new ring (the membership changed: the holder may
/// have been back in between) starts the count again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outside {
    ring: Option<String>,
    since: Option<Duration>,
}

impl Outside {
    /// One look at `now`: the time the holder was first seen out under the current ring.
    pub fn look(&mut self, cluster: &Cluster, holder: &str, now: Duration) -> Option<Duration> {
        let out = cluster.has_member(holder) != Some(true);
        if !out {
            *self = Outside::default();
            return None;
        }
        if self.ring.as_deref() != Some(cluster.ring.as_str()) {
            self.ring = Some(cluster.ring.clone());
            self.since = Some(now);
        }
        self.since
    }
}

/// An XML element's attribute, unescaped.
pub(crate) fn attr(e: &quick_xml::events::BytesStart, key: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.as_ref() == key.as_bytes())
        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
}

/// Whether `stonith_admin --history NODE --output-as=xml` shows a successful fencing of `node`
/// completed after `since_unix_ms` (None: no history could be read from it).
pub fn fenced_after(xml: &str, node: &str, since_unix_ms: u64) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut answered = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let attr = |key: &str| attr(&e, key);
                match e.name().as_ref() {
                    b"pacemaker-result" | b"fence_history" => answered = true,
                    b"fence_event" => {
                        answered = true;
                        let ok = attr("status").as_deref() == Some("success")
                            || attr("state").as_deref() == Some("completed");
                        let done = attr("completed").as_deref().and_then(unix_ms_of);
                        if attr("target").as_deref() == Some(node)
                            && ok
                            && done.is_some_and(|d| d > since_unix_ms)
                        {
                            return Some(true);
                        }
                    }
                    _ => {}
                }
            }
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(false)
}

/// Whether `crm_mon --output-as=xml` shows an instance of `resource` (its primitive's id, or
/// an anonymous clone's instance `resource:N`) promoted on `node` (Pacemaker 2.0 says
/// "Master"). None: no resources section (crm_mon did not answer).
pub fn promoted_on(xml: &str, resource: &str, node: &str) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut answered = false;
    // Inside a matching, promoted <resource>: its <node> children.
    let mut in_promoted = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let attr = |key: &str| attr(&e, key);
                match e.name().as_ref() {
                    b"resources" => answered = true,
                    b"resource" => {
                        let id = attr("id").unwrap_or_default();
                        let ours = id == resource
                            || id.split_once(':').is_some_and(|(base, n)| {
                                base == resource && n.parse::<u32>().is_ok()
                            });
                        let role = attr("role").unwrap_or_default();
                        in_promoted = ours && matches!(role.as_str(), "Promoted" | "Master");
                    }
                    b"node" if in_promoted && attr("name").as_deref() == Some(node) => {
                        return Some(true);
                    }
                    _ => {}
                }
            }
            Ok(Event::End(e)) if e.name().as_ref() == b"resource" => in_promoted = false,
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(false)
}

/// Whether `crm_mon --output-as=xml` shows fencing enabled, as the scheduler applies it
/// (`fencing-enabled` from Pacemaker 3.0.2, `stonith-enabled` before and beside it). None: no
/// cluster options (crm_mon did not answer).
pub fn fencing_in(xml: &str) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e))
                if e.name().as_ref() == b"cluster_options" =>
            {
                return attr(&e, "fencing-enabled")
                    .or_else(|| attr(&e, "stonith-enabled"))
                    .map(|v| v == "true");
            }
            Ok(Event::Eof) | Err(_) => return None,
            _ => {}
        }
    }
}

/// The values of every `nvpair` named `name` in `cibadmin --query --scope crm_config`'s
/// answer, in every property set (a value missing: empty). None: not a crm_config section.
fn properties_in(xml: &str, name: &str) -> Option<Vec<String>> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut answered = false;
    let mut values = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => match e.name().as_ref() {
                b"crm_config" => answered = true,
                b"nvpair" if attr(&e, "name").as_deref() == Some(name) => {
                    values.push(attr(&e, "value").unwrap_or_default());
                }
                _ => {}
            },
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(values)
}

/// Whether `cibadmin --query --scope crm_config` leaves startup fencing on: no
/// `startup-fencing` set to a false value in any property set (unset: Pacemaker's default,
/// on). None: not a crm_config section.
pub fn startup_fencing_in(xml: &str) -> Option<bool> {
    let values = properties_in(xml, "startup-fencing")?;
    Some(
        values
            .iter()
            .all(|v| crate::params::parse_bool(v.trim()) == Some(true)),
    )
}

/// Whether `cibadmin --query --scope crm_config` has fencing on: neither `fencing-enabled`
/// (Pacemaker 3.0.2) nor `stonith-enabled` set to false in any property set — a stray
/// `fencing-enabled=true` beside `stonith-enabled=false` on a Pacemaker that ignores the
/// former is no fencing — and on where neither is set (Pacemaker's default). None: not a
/// crm_config section, or a value that is no boolean.
pub fn fencing_enabled_in(xml: &str) -> Option<bool> {
    let mut on = true;
    for name in ["fencing-enabled", "stonith-enabled"] {
        for v in properties_in(xml, name)? {
            on &= crate::params::parse_bool(v.trim())?;
        }
    }
    Some(on)
}

/// Whether `crm_mon --output-as=xml` shows `node` down in a way only a fence or an orderly
/// stop can make it: the scheduler applies fencing, the cluster is not in maintenance mode,
/// its DC has quorum, and the node is a cluster member, offline, clean (not unclean, not
/// pending), not in maintenance, and runs nothing (`resources_running="0"`: an unmanaged
/// instance recorded there still counts). An attribute missing is not taken for the safe
/// value. None: no nodes section (crm_mon did not answer); a node it does not list is not
/// shown down.
pub fn down_clean(xml: &str, node: &str) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let fencing = fencing_in(xml) == Some(true);
    let mut no_maintenance = false;
    let mut dc_quorate = false;
    let mut answered = false;
    let mut down = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let is = |key: &str, value: &str| attr(&e, key).as_deref() == Some(value);
                match e.name().as_ref() {
                    b"cluster_options" => no_maintenance = is("maintenance-mode", "false"),
                    b"current_dc" => {
                        dc_quorate = is("present", "true") && is("with_quorum", "true")
                    }
                    b"nodes" => answered = true,
                    b"node" if answered && attr(&e, "name").as_deref() == Some(node) => {
                        down = is("type", "member")
                            && is("online", "false")
                            && is("unclean", "false")
                            && !is("pending", "true")
                            && is("maintenance", "false")
                            && is("resources_running", "0");
                    }
                    _ => {}
                }
            }
            Ok(Event::End(e)) if e.name().as_ref() == b"nodes" => break,
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(fencing && no_maintenance && dc_quorate && down)
}

/// A fencing event's completion as Pacemaker writes it — "2026-12-02 09:10:37Z" (2.1),
/// "2026-12-02 08:30:00 +01:00", "+0100", an ISO "T" between date and time, fractions of a
/// second, no zone at all (UTC) — in Unix ms.
fn unix_ms_of(text: &str) -> Option<u64> {
    let text = text.trim().replacen('T', " ", 1);
    let mut parts = text.split_whitespace();
    let date = parts.next()?;
    let mut time = parts.next()?.to_string();
    let mut zone = parts.next().map(str::to_string);
    // A zone glued to the time: "09:10:37Z", "09:10:37+01:00".
    if let Some(i) = time.find(['Z', '+', '-']) {
        zone = Some(time[i..].to_string());
        time.truncate(i);
    }
    let zone = zone.as_deref();
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (hh, mm) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let ss: f64 = t.next().unwrap_or("0").parse().ok()?;
    let offset = match zone {
        None | Some("Z") | Some("UTC") => 0,
        Some(z) => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let digits: String = z.chars().filter(char::is_ascii_digit).collect();
            if digits.len() != 4 {
                return None;
            }
            let h: i64 = digits[..2].parse().ok()?;
            let mi: i64 = digits[2..].parse().ok()?;
            sign * (h * 3600 + mi * 60)
        }
    };
    let days = crate::lease::clock::days_from_civil(y, m, day);
    let secs = days * 86_400 + hh * 3600 + mm * 60 - offset;
    let ms = secs as f64 * 1000.0 + ss * 1000.0;
    (ms >= 0.0).then_some(ms as u64)
}

#[cfg(test)]
mod tests {
    use super::super::witness::Cluster;
    use super::*;

    fn cluster(members: &[u32], ring: &str) -> Cluster {
        super::super::witness::three_nodes(2, members, ring)
    }

    fn record(node: &str) -> Record {
        Record {
            node: node.into(),
            lease: "0x1".into(),
            nodes: vec![],
            written_unix_ms: 1_000,
        }
    }

    fn facts<'a>(c: &'a Cluster, r: &'a Record, now: u64) -> Facts<'a> {
        Facts {
            me: "n2",
            record: Some(r),
            cluster: Ok(c),
            fenced_since: Some(false),
            holder_promoted: Some(true),
            holder_down_clean: Some(false),
            fencing_enabled: Some(true),
            outside_since: None,
            now: Duration::from_secs(now),
            wait: Duration::from_secs(10),
            confirmed_down: None,
        }
    }

    #[test]
    fn a_holder_in_the_membership_and_promoted_blocks_until_it_is_demoted_or_fenced() {
        let (c, r) = (cluster(&[1, 2, 3], "1.a"), record("n1"));
        let rules = Rules::all();
        let f = facts(&c, &r, 100);
        assert!(
            matches!(clearance(&f, &rules), Clearance::Blocked(w) if w.contains("n1") && w.contains("still promoted"))
        );
        let demoted = Facts {
            holder_promoted: Some(false),
            ..f.clone()
        };
        assert!(matches!(clearance(&demoted, &rules), Clearance::Clear(_)));
        let unknown = Facts {
            holder_promoted: None,
            ..f.clone()
        };
        assert!(matches!(clearance(&unknown, &rules), Clearance::Blocked(_)));
        let fenced = Facts {
            fenced_since: Some(true),
            ..f.clone()
        };
        assert!(matches!(clearance(&fenced, &rules), Clearance::Clear(w) if w.contains("fenced")));
        // The record ignored (the mutation): clear at once.
        assert!(matches!(
            clearance(&f, &Rules::without(Rule::RecordWait)),
            Clearance::Clear(_)
        ));
    }

    #[test]
    fn a_holder_out_of_the_membership_is_waited_for_from_when_it_was_first_seen_out() {
        let (c, r) = (cluster(&[2, 3], "2.b"), record("n1"));
        let rules = Rules::all();
        let mut out = Outside::default();
        let t = Duration::from_secs;
        assert_eq!(out.look(&c, "n1", t(100)), Some(t(100)));
        assert_eq!(out.look(&c, "n1", t(104)), Some(t(100)), "same ring: kept");
        let f = Facts {
            outside_since: Some(t(100)),
            ..facts(&c, &r, 104)
        };
        assert_eq!(
            clearance(&f, &rules),
            Clearance::Wait {
                until: t(110),
                why: "the failsafe record names n1, which may be holding the master through an \
                      etcd outage: out of this node's membership since 4.0 s ago, it is surely \
                      down 10.0 s after it left"
                    .into()
            }
        );
        let later = Facts {
            now: t(110),
            ..f.clone()
        };
        assert!(matches!(clearance(&later, &rules), Clearance::Clear(_)));
        // Another ring: the holder may have been back in between; counted again.
        let c2 = cluster(&[2, 3], "2.c");
        assert_eq!(out.look(&c2, "n1", t(106)), Some(t(106)));
        // Back in: no count.
        let c3 = cluster(&[1, 2, 3], "1.d");
        assert_eq!(out.look(&c3, "n1", t(107)), None);
        assert_eq!(out.look(&c, "n1", t(108)), Some(t(108)));
    }

    #[test]
    fn without_corosync_only_the_operator_or_a_fence_clears_a_record() {
        let (c, r) = (cluster(&[1, 2, 3], "1.a"), record("n1"));
        let rules = Rules::all();
        let f = Facts {
            cluster: Err("corosync-quorumtool: cannot run"),
            holder_promoted: None,
            ..facts(&c, &r, 100)
        };
        let Clearance::Blocked(why) = clearance(&f, &rules) else {
            panic!()
        };
        assert!(why.contains("--holder-down n1"), "{why}");
        let confirmed = Facts {
            confirmed_down: Some("n1"),
            ..f.clone()
        };
        assert!(matches!(clearance(&confirmed, &rules), Clearance::Clear(_)));
        // Another node confirmed down is no confirmation of this one.
        let other = Facts {
            confirmed_down: Some("n3"),
            ..f.clone()
        };
        assert!(matches!(clearance(&other, &rules), Clearance::Blocked(_)));
        // No record, or our own: clear.
        let none = Facts {
            record: None,
            ..f.clone()
        };
        assert!(matches!(clearance(&none, &rules), Clearance::Clear(_)));
        let own = record("n2");
        let mine = Facts {
            record: Some(&own),
            ..f.clone()
        };
        assert!(matches!(clearance(&mine, &rules), Clearance::Clear(_)));
    }

    #[test]
    fn the_wait_covers_detection_proof_and_fence_on_slewed_clocks() {
        let w = wait_after_leaving(Duration::from_millis(3680));
        // (3.68 + 3 + 1) × 1.083833 / 0.916167 = 9.09 s
        assert!((w.as_secs_f64() - 9.085).abs() < 0.01, "{w:?}");
    }

    #[test]
    fn pacemakers_xml_is_read_for_fences_and_roles() {
        // Pacemaker 2.1.5's answer after the lab's fence desk powered n1 off.
        let history = r#"<pacemaker-result api-version="2.25" request="stonith_admin --history n1 --output-as=xml">
  <list name="fencing history" count="1">
    <fence_event action="reboot" target="n1" client="pacemaker-controld.27843" origin="n2" status="success" delegate="n2" completed="2026-12-02 08:30:00Z"/>
  </list>
  <status code="0" message="OK"/>
</pacemaker-result>"#;
        let at = unix_ms_of("2026-12-02 08:30:00 +00:00").unwrap();
        assert_eq!(at, 1_796_200_200_000);
        assert_eq!(fenced_after(history, "n1", at - 1), Some(true));
        assert_eq!(fenced_after(history, "n1", at), Some(false), "not after");
        assert_eq!(fenced_after(history, "n3", 0), Some(false));
        let empty = r#"<pacemaker-result api-version="2.25" request="x">
  <list name="fencing history" count="0"/>
  <status code="0" message="OK"/>
</pacemaker-result>"#;
        assert_eq!(fenced_after(empty, "n1", 0), Some(false));
        assert_eq!(fenced_after("", "n1", 0), None);
        for other in [
            "2026-12-02 09:30:00 +01:00",
            "2026-12-02 09:30:00 +0100",
            "2026-12-02T08:30:00Z",
            "2026-12-02 08:30:00",
            "2026-12-02 07:30:00-01:00",
        ] {
            assert_eq!(unix_ms_of(other), Some(at), "{other}");
        }
        assert_eq!(unix_ms_of("2026-12-02 08:30:00.250Z"), Some(at + 250));
        assert_eq!(unix_ms_of("yesterday"), None);
        let mon = r#"<pacemaker-result>
  <resources>
    <clone id="api-clone" multi_state="true">
      <resource id="api" resource_agent="ocf:hamaster:master" role="Promoted" active="true" failed="false">
        <node name="n1" id="1" cached="true"/>
      </resource>
      <resource id="api" resource_agent="ocf:hamaster:master" role="Unpromoted" active="true">
        <node name="n2" id="2" cached="true"/>
      </resource>
      <resource id="api" resource_agent="ocf:hamaster:master" role="Stopped" active="false"/>
    </clone>
  </resources>
</pacemaker-result>"#;
        assert_eq!(promoted_on(mon, "api", "n1"), Some(true));
        assert_eq!(promoted_on(mon, "api", "n2"), Some(false));
        assert_eq!(
            promoted_on(&mon.replace("Promoted\"", "Master\""), "api", "n1"),
            Some(true)
        );
        assert_eq!(
            promoted_on(&mon.replace("\"api\"", "\"api:0\""), "api", "n1"),
            Some(true)
        );
        assert_eq!(promoted_on(mon, "web", "n1"), Some(false));
        assert_eq!(promoted_on("", "api", "n1"), None);
    }

    #[test]
    fn a_node_is_down_and_clean_only_as_a_fence_or_an_orderly_stop_leaves_it() {
        // As crm_mon 2.1 writes them: n1 fenced, n2 lost and not fenced yet, n3 up.
        let mon = r#"<pacemaker-result>
  <summary>
    <current_dc present="true" version="2.1.5" name="n3" id="3" with_quorum="true"/>
    <cluster_options stonith-enabled="true" symmetric-cluster="true" no-quorum-policy="stop" maintenance-mode="false" stop-all-resources="false"/>
  </summary>
  <nodes>
    <node name="n1" id="1" online="false" standby="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" resources_running="0" type="member"/>
    <node name="n2" id="2" online="false" standby="false" maintenance="false" pending="false" unclean="true" shutdown="false" expected_up="true" resources_running="1" type="member"/>
    <node name="n3" id="3" online="true" standby="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" resources_running="1" type="member"/>
  </nodes>
  <resources/>
</pacemaker-result>"#;
        assert_eq!(fencing_in(mon), Some(true));
        assert_eq!(down_clean(mon, "n1"), Some(true));
        assert_eq!(
            down_clean(mon, "n2"),
            Some(false),
            "unclean: not fenced yet"
        );
        assert_eq!(down_clean(mon, "n3"), Some(false), "online");
        assert_eq!(
            down_clean(mon, "n4"),
            Some(false),
            "not listed: not shown down"
        );
        // Each condition alone keeps n1 from counting as down.
        let n1 = r#"<node name="n1" id="1" online="false" standby="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" resources_running="0" type="member"/>"#;
        for (from, to) in [
            // An unmanaged instance still recorded there (maintenance, is-managed=false).
            (r#"resources_running="0""#, r#"resources_running="1""#),
            (r#"maintenance="false""#, r#"maintenance="true""#),
            (r#"maintenance="false""#, ""),
            (r#"pending="false""#, r#"pending="true""#),
            (r#"type="member""#, r#"type="remote""#),
        ] {
            let changed = mon.replace(n1, &n1.replacen(from, to, 1));
            assert_eq!(down_clean(&changed, "n1"), Some(false), "{to}");
        }
        for (from, to) in [
            (r#"maintenance-mode="false""#, r#"maintenance-mode="true""#),
            (r#"stonith-enabled="true""#, r#"stonith-enabled="false""#),
            (r#"with_quorum="true""#, r#"with_quorum="false""#),
            (r#"present="true""#, r#"present="false""#),
        ] {
            let changed = mon.replacen(from, to, 1);
            assert_eq!(down_clean(&changed, "n1"), Some(false), "{to}");
        }
        // Pacemaker 3.0.2 writes both; fencing-enabled is the one the scheduler applies.
        let both = mon.replace(
            r#"stonith-enabled="true""#,
            r#"fencing-enabled="false" stonith-enabled="true""#,
        );
        assert_eq!(fencing_in(&both), Some(false));
        assert_eq!(down_clean(&both, "n1"), Some(false));
        // startup-fencing: unset is on; false in any set is off.
        let config = |v: &str| {
            format!(
                r#"<crm_config><cluster_property_set id="cib-bootstrap-options">{v}<nvpair id="o1" name="stonith-enabled" value="true"/></cluster_property_set></crm_config>"#
            )
        };
        assert_eq!(startup_fencing_in(&config("")), Some(true));
        let off = r#"<nvpair id="o2" name="startup-fencing" value="false"/>"#;
        assert_eq!(startup_fencing_in(&config(off)), Some(false));
        let on = r#"<nvpair id="o2" name="startup-fencing" value="true"/>"#;
        assert_eq!(startup_fencing_in(&config(on)), Some(true));
        assert_eq!(
            startup_fencing_in(&config("<nvpair name=\"startup-fencing\"/>")),
            Some(false)
        );
        assert_eq!(startup_fencing_in(""), None);
        // fencing: on unless fencing-enabled or stonith-enabled is false; unset is on.
        assert_eq!(fencing_enabled_in(&config("")), Some(true));
        assert_eq!(fencing_enabled_in(&config(off)), Some(true));
        let no_fencing = r#"<nvpair id="o3" name="fencing-enabled" value="false"/>"#;
        assert_eq!(fencing_enabled_in(&config(no_fencing)), Some(false));
        let stray = config(r#"<nvpair id="o3" name="fencing-enabled" value="true"/>"#).replace(
            r#"name="stonith-enabled" value="true""#,
            r#"name="stonith-enabled" value="false""#,
        );
        assert_eq!(fencing_enabled_in(&stray), Some(false));
        let unreadable = r#"<nvpair id="o3" name="fencing-enabled" value="maybe"/>"#;
        assert_eq!(fencing_enabled_in(&config(unreadable)), None);
        assert_eq!(
            fencing_enabled_in("<crm_config><cluster_property_set/></crm_config>"),
            Some(true)
        );
        assert_eq!(fencing_enabled_in(""), None);
        // A node named in the resources section only is no node entry.
        let resources_only = r#"<pacemaker-result><resources><resource id="api"><node name="n1" online="false" unclean="false"/></resource></resources></pacemaker-result>"#;
        assert_eq!(down_clean(resources_only, "n1"), None);
        assert_eq!(fencing_in(resources_only), None);
        assert_eq!(down_clean("", "n1"), None);
    }

    #[test]
    fn a_holder_out_of_the_membership_is_clear_once_pacemaker_shows_it_down_and_clean() {
        let (c, r) = (cluster(&[2, 3], "2.b"), record("n1"));
        let rules = Rules::all();
        let t = Duration::from_secs;
        let f = Facts {
            outside_since: Some(t(100)),
            holder_promoted: Some(false),
            holder_down_clean: Some(true),
            ..facts(&c, &r, 101)
        };
        assert!(
            matches!(clearance(&f, &rules), Clearance::Clear(w) if w.contains("offline and clean"))
        );
        // Not without fencing (a lost node is not unclean then), nor when either is unknown.
        for (fencing, clean) in [
            (Some(false), Some(true)),
            (None, Some(true)),
            (Some(true), None),
        ] {
            let g = Facts {
                fencing_enabled: fencing,
                holder_down_clean: clean,
                ..f.clone()
            };
            assert!(
                matches!(clearance(&g, &rules), Clearance::Wait { .. }),
                "{fencing:?} {clean:?}"
            );
        }
        // Not in a partition without quorum, nor for a node corosync does not know.
        let mut lost = cluster(&[2, 3], "2.b");
        lost.quorate = false;
        let g = Facts {
            cluster: Ok(&lost),
            ..f.clone()
        };
        assert!(matches!(clearance(&g, &rules), Clearance::Wait { .. }));
        let stranger = record("guest1");
        let g = Facts {
            record: Some(&stranger),
            ..f.clone()
        };
        assert!(matches!(clearance(&g, &rules), Clearance::Wait { .. }));
        // In the membership, Pacemaker's node view is not asked: the instance's role decides.
        let inside = cluster(&[1, 2, 3], "1.c");
        let g = Facts {
            cluster: Ok(&inside),
            holder_promoted: Some(true),
            ..f.clone()
        };
        assert!(matches!(clearance(&g, &rules), Clearance::Blocked(_)));
    }
}
