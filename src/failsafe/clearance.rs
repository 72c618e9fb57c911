//! The takeover rule (docs/safety.md, "Holding through an etcd outage"): a node that finds a
//! failsafe record naming another node may take the key (and raise) only once that node is
//! proven not to hold. A proof about the holder holds only inside the holder's own cluster:
//! the taker's corosync must be of the cluster the record names (its name, and the taker in
//! its nodelist), and the holder is matched by its corosync node id. There:
//! - it is out of this node's quorate membership and Pacemaker shows its node offline, clean
//!   and running nothing, with power fencing (fencing enabled, no fabric device), startup
//!   fencing on, no maintenance (down_clean): a node that leaves the membership stays unclean
//!   until it is fenced (or the operator confirms it down), and is clean otherwise only after
//!   an orderly shutdown whose stop took its guard's VIP and service down; or
//! - it is in this node's membership, Pacemaker shows its node online with its controller
//!   (clean, not pending) and its instance neither promoted nor failed, with power fencing: a
//!   node whose controller is gone is offline to Pacemaker, and with fencing it is fenced
//!   before its resources are recovered; or
//! - it has been out of this node's membership, under one ring, for `wait_after_leaving`: a
//!   holder proves every ASK_EVERY that every node is in its own membership, and its view
//!   changes at most corosync's membership time after ours, so its hold ends by then plus
//!   PROOF_LIFE, and everything it holds is gone FENCE_BOUND later; or
//! - the operator confirms it is down (`hamaster takeover --holder-down NODE`).
//!
//! A holder in this membership and not shown demoted blocks the takeover; so does a record
//! with no corosync to ask (the cold standby of the runbook), or a corosync of another
//! cluster, until the operator confirms.

use std::time::Duration;

use super::witness::Cluster;
use super::{Record, FENCE_BOUND, PROOF_LIFE};
use crate::lease::clock::MAX_SLEW;
use crate::rules::{Rule, Rules};

/// How the cluster fences, from its configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fencing {
    /// Fencing enabled (stonith-enabled / fencing-enabled).
    pub enabled: bool,
    /// The fence devices (primitives or templates of class stonith) that cut a node off its
    /// storage or network and leave its processes running: their ids.
    pub fabric: Vec<String>,
}

impl Fencing {
    /// A fence ends every process of the fenced node: fencing is on and no device is fabric.
    pub fn ends_processes(&self) -> bool {
        self.enabled && self.fabric.is_empty()
    }

    /// In words, for the log and the reasons.
    pub fn describe(&self) -> String {
        match (self.enabled, self.fabric.as_slice()) {
            (false, _) => "fencing disabled".into(),
            (true, []) => "power fencing".into(),
            (true, f) => format!(
                "fencing with fabric device {} (it leaves a node's processes running)",
                f.join(", ")
            ),
        }
    }
}

/// What Pacemaker on the taker's node shows of the holder's node, from one crm_mon run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSeen {
    /// Whether an instance of the resource is promoted there, or failed there (None: not
    /// read, or no resource named).
    pub promoted: Option<bool>,
    /// Whether the node is online with its controller: a cluster member, online, clean, not
    /// pending, not in maintenance (None: not read).
    pub online: Option<bool>,
    /// Whether the node is down as only a fence or an orderly stop leaves it (down_clean, with
    /// startup fencing on). None: not read.
    pub down_clean: Option<bool>,
}

/// What the takeover rule weighs.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    /// This node's name.
    pub me: &'a str,
    pub record: Option<&'a Record>,
    /// This node's corosync, or why it could not be asked.
    pub cluster: Result<&'a Cluster, &'a str>,
    /// What Pacemaker here shows of the holder's node.
    pub holder: NodeSeen,
    /// How the cluster fences (None: it could not be read).
    pub fencing: Option<&'a Fencing>,
    /// Since when (boot clock) this node has seen the holder out of its membership under the
    /// current ring (None: not seen out).
    pub outside_since: Option<Duration>,
    pub now: Duration,
    /// This node's corosync membership time (the time bound takes the larger of it and the
    /// holder's, from the record).
    pub membership_time: Duration,
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

/// How long after a holder left this node's membership it is surely down: the larger of the
/// holder's and this node's corosync membership time (token + consensus + join, as it runs:
/// how much later than ours the holder's own view may change), doubled — the margin covers a
/// corosync whose timers fire late by as much again (a starved process, the token's last
/// rotation before the cut) —, the proof's life and the fence's bound, each counted on a clock
/// that may run slow or fast by MAX_SLEW.
pub fn wait_after_leaving(holder: Option<Duration>, here: Duration) -> Duration {
    let membership = holder.unwrap_or(here).max(here);
    let span = membership * 2 + PROOF_LIFE + FENCE_BOUND;
    span.mul_f64((1.0 + MAX_SLEW) / (1.0 - MAX_SLEW))
}

/// Where the record's holder stands in this node's corosync: Ok(in the membership or not),
/// Err(why this node cannot tell) where this node is not of the holder's cluster.
pub fn whereabouts(record: &Record, c: &Cluster, rules: &Rules) -> Result<bool, String> {
    let holder = record.node.as_str();
    if !rules.holds(Rule::HomeCluster) {
        // The mistake: a node this corosync does not know counts as out.
        return Ok(c.has_member(holder) == Some(true));
    }
    let Some(home) = &record.home else {
        // A record of an earlier release names the holder only: it must be in this nodelist.
        return c
            .has_member(holder)
            .ok_or_else(|| format!("{holder} is not in this node's corosync nodelist"));
    };
    // The same cluster: its name, and the nodelist the holder's proofs count (a leftover
    // one-node corosync of the same name has another).
    let here = c.name.as_deref().unwrap_or_default();
    if here != home.cluster || c.ids() != home.nodelist || !home.nodelist.contains(&c.me) {
        return Err(format!(
            "this node (corosync id {}, cluster \"{here}\", node ids {:?}) is not of \
             {holder}'s cluster \"{}\" (node ids {:?}): it cannot see {holder} leave the \
             membership {holder}'s proofs come from",
            c.me,
            c.ids(),
            home.cluster,
            home.nodelist
        ));
    }
    c.has_id(home.id).ok_or_else(|| {
        format!(
            "{holder}'s corosync id {} is not in this node's nodelist",
            home.id
        )
    })
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
    let may_hold = format!(
        "the failsafe record names {holder}, which may be holding the master through an etcd \
         outage"
    );
    let operator = format!(
        "make sure {holder} is down, then say so with `hamaster takeover --holder-down {holder}`"
    );
    let cluster = match f.cluster {
        Ok(c) => c,
        Err(why) => {
            return Clearance::Blocked(format!(
                "{may_hold}, and this node's corosync cannot tell ({why}): {operator}"
            ))
        }
    };
    let member = match whereabouts(record, cluster, rules) {
        Ok(m) => m,
        Err(why) => return Clearance::Blocked(format!("{may_hold}, and {why}: {operator}")),
    };
    // A fence, or a stop Pacemaker would answer with one, proves something only where every
    // fence ends the node's processes.
    let power = match rules.holds(Rule::PowerFence) {
        true => f.fencing.is_some_and(Fencing::ends_processes),
        false => f.fencing.is_some_and(|fe| fe.enabled),
    };
    let pacemaker_says = match f.fencing {
        Some(fe) => fe.describe(),
        None => "fencing cannot be read".into(),
    };
    if member {
        // Why Pacemaker's "not promoted" is not believed, if it is not.
        let doubt = match (f.holder.promoted, f.holder.online) {
            (Some(true), _) => Some("still promoted (or failed there)".to_string()),
            (None, _) => Some("whether its instance is promoted cannot be read".to_string()),
            _ if !rules.holds(Rule::LiveController) => None,
            (Some(false), online) if online != Some(true) => Some(
                "Pacemaker does not show it online with its controller: its view of the \
                 instance may be stale"
                    .to_string(),
            ),
            _ if !power => Some(format!(
                "not promoted, which proves nothing without power fencing ({pacemaker_says})"
            )),
            _ => None,
        };
        // Pacemaker's view in a partition without quorum may be stale too.
        let doubt = doubt.or_else(|| {
            (!cluster.quorate).then(|| "not promoted, in a partition without quorum".to_string())
        });
        return match doubt {
            None => Clearance::Clear(format!(
                "{holder} is in this membership, online with its controller, and its instance \
                 is not promoted ({pacemaker_says})"
            )),
            Some(why) => Clearance::Blocked(format!(
                "{may_hold}: it is in this node's membership and {why}"
            )),
        };
    }
    // Out of the membership (of a quorate partition), and Pacemaker saw to it: fenced, or
    // shut down in order.
    if cluster.quorate && power && f.holder.down_clean == Some(true) {
        return Clearance::Clear(format!(
            "{holder} is out of this node's membership, and Pacemaker ({pacemaker_says}) shows \
             its node offline and clean"
        ));
    }
    // Out of the membership: the time bound.
    let wait = wait_after_leaving(
        record
            .home
            .as_ref()
            .map(|h| Duration::from_millis(h.membership_ms)),
        f.membership_time,
    );
    let since = f.outside_since.unwrap_or(f.now);
    let until = since + wait;
    if f.now >= until {
        Clearance::Clear(format!(
            "{holder} has been out of this node's membership for {:.1} s",
            f.now.saturating_sub(since).as_secs_f64()
        ))
    } else {
        Clearance::Wait {
            until,
            why: format!(
                "{may_hold}: out of this node's membership since {:.1} s ago, it is surely \
                 down {:.1} s after it left",
                f.now.saturating_sub(since).as_secs_f64(),
                wait.as_secs_f64()
            ),
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
    /// One look at `now`, where the holder is (`member`, from whereabouts): the time it was
    /// first seen out under the current ring.
    pub fn look(&mut self, cluster: &Cluster, member: bool, now: Duration) -> Option<Duration> {
        if member {
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

/// Whether crm_mon's resource id `id` is `resource`: its primitive's id, or an anonymous
/// clone's instance `resource:N`.
pub(crate) fn instance_of(id: &str, resource: &str) -> bool {
    id == resource
        || id
            .split_once(':')
            .is_some_and(|(base, n)| base == resource && n.parse::<u32>().is_ok())
}

/// Whether `crm_mon --output-as=xml` shows an instance of `resource` (its primitive's id, or
/// an anonymous clone's instance `resource:N`) promoted on `node` (Pacemaker 2.0 says
/// "Master"), or failed there (a failed demote shows the instance unpromoted while its stop is
/// still to come). None: no resources section (crm_mon did not answer).
pub fn promoted_on(xml: &str, resource: &str, node: &str) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut answered = false;
    // Inside a matching, promoted or failed <resource>: its <node> children.
    let mut in_promoted = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let attr = |key: &str| attr(&e, key);
                match e.name().as_ref() {
                    b"resources" => answered = true,
                    b"resource" => {
                        let id = attr("id").unwrap_or_default();
                        let ours = instance_of(&id, resource);
                        let role = attr("role").unwrap_or_default();
                        let failed = attr("failed").as_deref() != Some("false");
                        in_promoted =
                            ours && (failed || matches!(role.as_str(), "Promoted" | "Master"));
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

/// Whether `crm_mon --output-as=xml` shows `node` online with its controller: a cluster member,
/// `online="true"` (its controller has joined: a node whose controller died is offline to
/// Pacemaker even while its corosync is a member), clean, not pending, not in maintenance. An
/// attribute missing is not taken for the safe value. None: no nodes section.
pub fn online_on(xml: &str, node: &str) -> Option<bool> {
    node_flags(xml, node, |is| {
        is("type", "member")
            && is("online", "true")
            && is("unclean", "false")
            && !is("pending", "true")
            && is("maintenance", "false")
    })
}

/// One node's entry of `crm_mon --output-as=xml`'s nodes section judged by `judge` (given a
/// test of one attribute's value); a node not listed is judged false. None: no nodes section.
fn node_flags(
    xml: &str,
    node: &str,
    judge: impl Fn(&dyn Fn(&str, &str) -> bool) -> bool,
) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut answered = false;
    let mut verdict = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => match e.name().as_ref() {
                b"nodes" => answered = true,
                b"node" if answered && attr(&e, "name").as_deref() == Some(node) => {
                    verdict =
                        judge(&|key: &str, value: &str| attr(&e, key).as_deref() == Some(value));
                }
                _ => {}
            },
            Ok(Event::End(e)) if e.name().as_ref() == b"nodes" => break,
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(verdict)
}

/// The agents whose fence cuts a node off its storage or network and leaves its processes
/// running (fence-agents' fabric devices; a device with `provides=unfencing` counts as well,
/// as Pacemaker requires it of them).
pub const FABRIC_AGENTS: &[&str] = &[
    "fence_scsi",
    "fence_mpath",
    "fence_sanlock",
    "fence_brocade",
    "fence_cisco_mds",
    "fence_ifmib",
    "fence_sanbox2",
    "fence_hds_cb",
];

/// How `cibadmin --query --scope configuration` says the cluster fences: enabled (as
/// fencing_enabled_in), and which of its devices are fabric devices — a stonith primitive or
/// template whose agent is one of FABRIC_AGENTS or whose meta attributes say
/// `provides=unfencing`. None: no crm_config section, or a value that is no boolean.
pub fn fencing_in_config(xml: &str) -> Option<Fencing> {
    use quick_xml::events::Event;
    let enabled = fencing_enabled_in(xml)?;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut fabric = Vec::new();
    // Inside a stonith device: its id, and whether it is fabric so far.
    let mut device: Option<(String, bool)> = None;
    let mut in_meta = false;
    loop {
        let (e, empty) = match reader.read_event() {
            Ok(Event::Start(e)) => (e, false),
            Ok(Event::Empty(e)) => (e, true),
            Ok(Event::End(e)) => {
                match e.name().as_ref() {
                    b"primitive" | b"template" => {
                        if let Some((id, true)) = device.take() {
                            fabric.push(id);
                        }
                    }
                    b"meta_attributes" => in_meta = false,
                    _ => {}
                }
                continue;
            }
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => continue,
        };
        match e.name().as_ref() {
            b"primitive" | b"template" => {
                let stonith = attr(&e, "class").as_deref() == Some("stonith");
                let agent = attr(&e, "type").unwrap_or_default();
                let d = (
                    attr(&e, "id").unwrap_or_default(),
                    FABRIC_AGENTS.contains(&agent.as_str()),
                );
                match (stonith, empty) {
                    (false, _) => device = None,
                    (true, false) => device = Some(d),
                    (true, true) if d.1 => fabric.push(d.0),
                    (true, true) => {}
                }
            }
            b"meta_attributes" => in_meta = !empty,
            b"nvpair" if in_meta => {
                if let Some(d) = device.as_mut() {
                    d.1 |= attr(&e, "name").as_deref() == Some("provides")
                        && attr(&e, "value").as_deref() == Some("unfencing");
                }
            }
            _ => {}
        }
    }
    Some(Fencing { enabled, fabric })
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
    // Only inside <crm_config>: a whole CIB has node attributes and resources' nvpairs too.
    let mut inside = false;
    let mut values = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == b"crm_config" => {
                answered = true;
                inside = true;
            }
            Ok(Event::Empty(e)) if e.name().as_ref() == b"crm_config" => answered = true,
            Ok(Event::End(e)) if e.name().as_ref() == b"crm_config" => inside = false,
            Ok(Event::Start(e)) | Ok(Event::Empty(e))
                if inside
                    && e.name().as_ref() == b"nvpair"
                    && attr(&e, "name").as_deref() == Some(name) =>
            {
                values.push(attr(&e, "value").unwrap_or_default());
            }
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(values)
}

/// Whether the CIB's status section (`cibadmin --query`) shows `node` (its `uname`) online
/// with its controller, as the DC wrote it: in corosync's membership (`in_ccm` "true", or the
/// time it joined from Pacemaker 2.1.7 on), its controller up (`crmd` "online", or the time it
/// came up), and joined (`join="member"`). Read from the CIB alone, so that it answers while
/// this node's own pacemakerd or controller does not (crm_mon asks pacemakerd first). None: no
/// status section.
pub fn online_in_status(xml: &str, node: &str) -> Option<bool> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut answered = false;
    let up = |v: Option<String>, down: &[&str]| {
        v.is_some_and(|v| !v.is_empty() && !down.contains(&v.as_str()))
    };
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => match e.name().as_ref() {
                b"status" => answered = true,
                b"node_state" if answered && attr(&e, "uname").as_deref() == Some(node) => {
                    return Some(
                        up(attr(&e, "in_ccm"), &["false", "0"])
                            && up(attr(&e, "crmd"), &["offline", "false", "0"])
                            && attr(&e, "join").as_deref() == Some("member"),
                    );
                }
                _ => {}
            },
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    answered.then_some(false)
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
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let is = |key: &str, value: &str| attr(&e, key).as_deref() == Some(value);
                match e.name().as_ref() {
                    b"cluster_options" => no_maintenance = is("maintenance-mode", "false"),
                    b"current_dc" => {
                        dc_quorate = is("present", "true") && is("with_quorum", "true")
                    }
                    b"nodes" => break,
                    _ => {}
                }
            }
            Ok(Event::Eof) => break,
            Err(_) => return None,
            _ => {}
        }
    }
    let down = node_flags(xml, node, |is| {
        is("type", "member")
            && is("online", "false")
            && is("unclean", "false")
            && !is("pending", "true")
            && is("maintenance", "false")
            && is("resources_running", "0")
    })?;
    Some(fencing && no_maintenance && dc_quorate && down)
}

#[cfg(test)]
mod tests {
    use super::super::witness::Cluster;
    use super::super::Home;
    use super::*;

    fn cluster(members: &[u32], ring: &str) -> Cluster {
        super::super::witness::three_nodes(2, members, ring)
    }

    /// A record of n1 in the lab's cluster (node ids 1-3, membership time 3.68 s).
    fn record(node: &str) -> Record {
        let id = node.trim_start_matches('n').parse().unwrap_or(99);
        Record {
            node: node.into(),
            lease: "0x1".into(),
            nodes: vec![],
            written_unix_ms: 1_000,
            home: Some(Home {
                id,
                ..Home::of(&super::super::witness::three_nodes(1, &[1, 2, 3], "1.a"))
            }),
        }
    }

    static POWER: Fencing = Fencing {
        enabled: true,
        fabric: Vec::new(),
    };

    fn facts<'a>(c: &'a Cluster, r: &'a Record, now: u64) -> Facts<'a> {
        Facts {
            me: "n2",
            record: Some(r),
            cluster: Ok(c),
            holder: NodeSeen {
                promoted: Some(true),
                online: Some(true),
                down_clean: Some(false),
            },
            fencing: Some(&POWER),
            outside_since: None,
            now: Duration::from_secs(now),
            membership_time: Duration::from_millis(3680),
            confirmed_down: None,
        }
    }

    fn seen(promoted: Option<bool>, online: Option<bool>) -> NodeSeen {
        NodeSeen {
            promoted,
            online,
            down_clean: Some(false),
        }
    }

    #[test]
    fn a_holder_in_the_membership_blocks_until_pacemaker_shows_it_demoted_and_online() {
        let (c, r) = (cluster(&[1, 2, 3], "1.a"), record("n1"));
        let rules = Rules::all();
        let f = facts(&c, &r, 100);
        assert!(
            matches!(clearance(&f, &rules), Clearance::Blocked(w) if w.contains("n1") && w.contains("still promoted"))
        );
        let demoted = Facts {
            holder: seen(Some(false), Some(true)),
            ..f.clone()
        };
        assert!(
            matches!(clearance(&demoted, &rules), Clearance::Clear(w) if w.contains("online with its controller"))
        );
        let unknown = Facts {
            holder: seen(None, Some(true)),
            ..f.clone()
        };
        assert!(matches!(clearance(&unknown, &rules), Clearance::Blocked(_)));
        // Its controller gone (offline to Pacemaker while its corosync is a member), or not
        // known: the instance's "stopped" may be Pacemaker forgetting it.
        for online in [Some(false), None] {
            let g = Facts {
                holder: seen(Some(false), online),
                ..f.clone()
            };
            let Clearance::Blocked(why) = clearance(&g, &rules) else {
                panic!("{online:?}")
            };
            assert!(why.contains("may be stale"), "{why}");
            // The mistake: believed whatever the node's state.
            assert!(matches!(
                clearance(&g, &Rules::without(Rule::LiveController)),
                Clearance::Clear(_)
            ));
        }
        // Without fencing, or with a fabric device, a failed stop is not answered by a
        // fence that ends the guard: "not promoted" proves nothing.
        let off = Fencing::default();
        let fabric = Fencing {
            enabled: true,
            fabric: vec!["scsi".into()],
        };
        for fencing in [Some(&off), Some(&fabric), None] {
            let g = Facts {
                holder: seen(Some(false), Some(true)),
                fencing,
                ..f.clone()
            };
            assert!(
                matches!(clearance(&g, &rules), Clearance::Blocked(w) if w.contains("proves nothing") || w.contains("stale")),
                "{fencing:?}"
            );
        }
        // In a partition without quorum, the CIB may be stale.
        let mut lost = cluster(&[1, 2], "1.b");
        lost.quorate = false;
        let g = Facts {
            cluster: Ok(&lost),
            holder: seen(Some(false), Some(true)),
            ..f.clone()
        };
        assert!(matches!(clearance(&g, &rules), Clearance::Blocked(_)));
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
        assert_eq!(out.look(&c, false, t(100)), Some(t(100)));
        assert_eq!(out.look(&c, false, t(104)), Some(t(100)), "same ring: kept");
        let f = Facts {
            outside_since: Some(t(100)),
            ..facts(&c, &r, 104)
        };
        let wait = wait_after_leaving(Some(Duration::from_millis(3680)), f.membership_time);
        assert_eq!(
            clearance(&f, &rules),
            Clearance::Wait {
                until: t(100) + wait,
                why: format!(
                    "the failsafe record names n1, which may be holding the master through an \
                     etcd outage: out of this node's membership since 4.0 s ago, it is surely \
                     down {:.1} s after it left",
                    wait.as_secs_f64()
                )
            }
        );
        let later = Facts {
            now: t(100) + wait,
            ..f.clone()
        };
        assert!(matches!(clearance(&later, &rules), Clearance::Clear(_)));
        // Another ring: the holder may have been back in between; counted again.
        let c2 = cluster(&[2, 3], "2.c");
        assert_eq!(out.look(&c2, false, t(106)), Some(t(106)));
        // Back in: no count.
        let c3 = cluster(&[1, 2, 3], "1.d");
        assert_eq!(out.look(&c3, true, t(107)), None);
        assert_eq!(out.look(&c, false, t(108)), Some(t(108)));
    }

    #[test]
    fn without_corosync_only_the_operator_clears_a_record() {
        let (c, r) = (cluster(&[1, 2, 3], "1.a"), record("n1"));
        let rules = Rules::all();
        let f = Facts {
            cluster: Err("corosync-quorumtool: cannot run"),
            holder: seen(None, None),
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
    fn a_taker_outside_the_holders_cluster_never_clears_by_the_time_bound() {
        // The DR host of the runbook with a one-node corosync of its own (another cluster, or
        // a leftover one of the same name whose nodelist does not hold it).
        let r = record("n1");
        let rules = Rules::all();
        let mut dr = cluster(&[7], "7.1");
        dr.me = 7;
        dr.nodelist = vec![super::super::witness::Node {
            id: Some(7),
            name: "dr1".into(),
        }];
        let t = Duration::from_secs;
        let f = Facts {
            me: "dr1",
            cluster: Ok(&dr),
            holder: NodeSeen::default(),
            fencing: None,
            outside_since: Some(t(0)),
            ..facts(&dr, &r, 10_000)
        };
        let Clearance::Blocked(why) = clearance(&f, &rules) else {
            panic!()
        };
        assert!(why.contains("is not of n1's cluster \"lab\""), "{why}");
        assert!(why.contains("--holder-down n1"), "{why}");
        // The same name, another nodelist — even one that gives it the holder's id: still
        // not the holder's cluster.
        let mut same_name = Cluster {
            name: Some("lab".into()),
            me: 1,
            members: vec![1],
            ..dr.clone()
        };
        same_name.nodelist[0].id = Some(1);
        let f = Facts {
            cluster: Ok(&same_name),
            ..f.clone()
        };
        assert!(matches!(clearance(&f, &rules), Clearance::Blocked(_)));
        // The mistake: a node this corosync does not know counts as out, and the time bound
        // clears it.
        assert!(matches!(
            clearance(&f, &Rules::without(Rule::HomeCluster)),
            Clearance::Clear(_)
        ));
        // The operator's word still counts.
        let confirmed = Facts {
            confirmed_down: Some("n1"),
            ..f.clone()
        };
        assert!(matches!(clearance(&confirmed, &rules), Clearance::Clear(_)));
    }

    #[test]
    fn the_holder_is_found_by_its_node_id_whatever_corosync_calls_it() {
        // ring0_addr and no name: corosync shows the node by its address, Pacemaker by its
        // uname; the record's id still finds it in the membership.
        let r = record("n1");
        let mut c = cluster(&[1, 2, 3], "1.a");
        c.nodelist[0].name = "198.51.100.11".into();
        assert_eq!(whereabouts(&r, &c, &Rules::all()), Ok(true));
        let f = facts(&c, &r, 100);
        assert!(
            matches!(clearance(&f, &Rules::all()), Clearance::Blocked(w) if w.contains("still promoted"))
        );
        // A record of an earlier release (no home): by name, and only within this nodelist.
        let old = Record { home: None, ..r };
        assert!(whereabouts(&old, &c, &Rules::all()).is_err());
        let c = cluster(&[2, 3], "2.a");
        assert_eq!(whereabouts(&old, &c, &Rules::all()), Ok(false));
    }

    #[test]
    fn the_wait_covers_twice_the_larger_membership_time_proof_and_fence_on_slewed_clocks() {
        let w = wait_after_leaving(None, Duration::from_millis(3680));
        // (2 × 3.68 + 3 + 1) × 1.083833 / 0.916167 = 13.44 s
        assert!((w.as_secs_f64() - 13.439).abs() < 0.01, "{w:?}");
        // The holder's corosync slower than ours (RHEL's token 3000 there): its time counts.
        let w = wait_after_leaving(
            Some(Duration::from_millis(8080)),
            Duration::from_millis(3680),
        );
        assert!((w.as_secs_f64() - 23.85).abs() < 0.01, "{w:?}");
    }

    #[test]
    fn pacemakers_xml_is_read_for_roles_and_fence_devices() {
        let mon = r#"<pacemaker-result>
  <resources>
    <clone id="api-clone" multi_state="true">
      <resource id="api" resource_agent="ocf:hamaster:master" role="Promoted" active="true" failed="false">
        <node name="n1" id="1" cached="true"/>
      </resource>
      <resource id="api" resource_agent="ocf:hamaster:master" role="Unpromoted" active="true" failed="false">
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
        // A failed instance counts as promoted: a failed demote shows it unpromoted.
        let failed = mon.replace(
            r#"role="Unpromoted" active="true" failed="false">"#,
            r#"role="Unpromoted" active="true" failed="true">"#,
        );
        assert_eq!(promoted_on(&failed, "api", "n2"), Some(true));
        // The fence devices of `cibadmin --query --scope configuration`: fabric by agent, or
        // by provides=unfencing.
        let config = |devices: &str| {
            format!(
                r#"<configuration><crm_config><cluster_property_set id="o"><nvpair id="o1" name="stonith-enabled" value="true"/></cluster_property_set></crm_config><resources>{devices}<primitive id="api" class="ocf" provider="hamaster" type="master"><meta_attributes id="m"><nvpair id="m1" name="provides" value="unfencing"/></meta_attributes></primitive></resources></configuration>"#
            )
        };
        let ipmi = r#"<primitive id="ipmi-n1" class="stonith" type="fence_ipmilan"><instance_attributes id="i"><nvpair id="i1" name="ip" value="x"/></instance_attributes></primitive>"#;
        let power = fencing_in_config(&config(ipmi)).unwrap();
        assert_eq!(power, POWER);
        assert!(power.ends_processes());
        let scsi = r#"<primitive id="scsi" class="stonith" type="fence_scsi"/>"#;
        let lab = r#"<primitive id="lab" class="stonith" type="fence_lab"><meta_attributes id="l"><nvpair id="l1" name="provides" value="unfencing"/></meta_attributes></primitive>"#;
        let both = fencing_in_config(&config(&format!("{ipmi}{scsi}{lab}"))).unwrap();
        assert_eq!(both.fabric, ["scsi", "lab"]);
        assert!(!both.ends_processes());
        assert!(both.describe().contains("scsi, lab"), "{}", both.describe());
        let off = config(ipmi).replace(r#"value="true""#, r#"value="false""#);
        assert!(!fencing_in_config(&off).unwrap().ends_processes());
        assert_eq!(fencing_in_config(""), None);
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
        assert_eq!(online_on(mon, "n3"), Some(true));
        assert_eq!(online_on(mon, "n1"), Some(false));
        assert_eq!(online_on(mon, "n2"), Some(false), "lost, unclean");
        assert_eq!(online_on(mon, "n4"), Some(false), "not listed");
        assert_eq!(online_on("", "n3"), None);
        // The CIB's own status, as 2.1.5 writes it and as 2.1.7+ does (times for true).
        let status = |n1: &str| {
            format!(
                r#"<cib><configuration><crm_config/></configuration><status>{n1}<node_state id="2" uname="n2" in_ccm="true" crmd="online" join="member" expected="member"/></status></cib>"#
            )
        };
        let n1 = r#"<node_state id="1" uname="n1" in_ccm="true" crmd="online" join="member" expected="member"/>"#;
        assert_eq!(online_in_status(&status(n1), "n1"), Some(true));
        let timed = n1
            .replace(r#"in_ccm="true""#, r#"in_ccm="1796200200""#)
            .replace(r#"crmd="online""#, r#"crmd="1796200201""#);
        assert_eq!(online_in_status(&status(&timed), "n1"), Some(true));
        for (from, to) in [
            (r#"crmd="online""#, r#"crmd="offline""#),
            (r#"crmd="online""#, ""),
            (r#"in_ccm="true""#, r#"in_ccm="false""#),
            (r#"join="member""#, r#"join="down""#),
            (r#"join="member""#, r#"join="pending""#),
        ] {
            let changed = status(&n1.replacen(from, to, 1));
            assert_eq!(online_in_status(&changed, "n1"), Some(false), "{to}");
        }
        assert_eq!(
            online_in_status(&status(""), "n1"),
            Some(false),
            "not listed"
        );
        assert_eq!(online_in_status("<cib/>", "n1"), None);
        // A whole CIB's configuration still reads: fencing from crm_config only.
        let whole = status(n1).replace(
            "<crm_config/>",
            r#"<crm_config><cluster_property_set id="o"><nvpair id="o1" name="stonith-enabled" value="false"/></cluster_property_set></crm_config><resources><primitive id="x" class="ocf" provider="p" type="t"><instance_attributes id="i"><nvpair id="i1" name="stonith-enabled" value="true"/></instance_attributes></primitive></resources>"#,
        );
        assert_eq!(fencing_in_config(&whole).map(|f| f.enabled), Some(false));
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
            holder: NodeSeen {
                promoted: Some(false),
                online: Some(false),
                down_clean: Some(true),
            },
            ..facts(&c, &r, 101)
        };
        assert!(
            matches!(clearance(&f, &rules), Clearance::Clear(w) if w.contains("offline and clean"))
        );
        // Not without fencing (a lost node is not unclean then), with a fabric device (its
        // fence leaves the guard running), nor when either is unknown.
        let off = Fencing::default();
        let fabric = Fencing {
            enabled: true,
            fabric: vec!["scsi".into()],
        };
        for (fencing, clean) in [
            (Some(&off), Some(true)),
            (Some(&fabric), Some(true)),
            (None, Some(true)),
            (Some(&POWER), None),
        ] {
            let g = Facts {
                fencing,
                holder: NodeSeen {
                    down_clean: clean,
                    ..f.holder
                },
                ..f.clone()
            };
            assert!(
                matches!(clearance(&g, &rules), Clearance::Wait { .. }),
                "{fencing:?} {clean:?}"
            );
        }
        // The mistake: a fabric fence believed.
        let g = Facts {
            fencing: Some(&fabric),
            ..f.clone()
        };
        assert!(matches!(
            clearance(&g, &Rules::without(Rule::PowerFence)),
            Clearance::Clear(_)
        ));
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
        assert!(matches!(clearance(&g, &rules), Clearance::Blocked(_)));
        // In the membership, Pacemaker's node-down view is not asked: the instance decides.
        let inside = cluster(&[1, 2, 3], "1.c");
        let g = Facts {
            cluster: Ok(&inside),
            holder: seen(Some(true), Some(true)),
            ..f.clone()
        };
        assert!(matches!(clearance(&g, &rules), Clearance::Blocked(_)));
    }
}
