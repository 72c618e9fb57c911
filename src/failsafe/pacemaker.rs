//! What Pacemaker on this node says that the failsafe needs, each within a bound: whether the
//! cluster has fencing enabled (etcd_outage=auto, clearance), whether a node was fenced after
//! a moment, whether a node's instance of the resource is promoted and whether the node is
//! offline and clean (clearance). None: Pacemaker did not answer (not running, or too slow) —
//! never taken for "no".

use std::time::Duration;

use super::clearance;
use crate::service::tool_output;

/// The bound of one Pacemaker tool run.
pub const LOOK: Duration = Duration::from_secs(3);

/// crm_mon's view of the cluster, as its scheduler sees it (rules applied).
fn crm_mon() -> Option<String> {
    tool_output(
        LOOK,
        "crm_mon",
        &["--one-shot", "--inactive", "--output-as=xml"],
    )
}

/// Whether the cluster has fencing enabled (clearance::fencing_enabled_in), from one CIB
/// query. The takeover rule's node-state clause reads crm_mon's own `stonith-enabled` as well
/// (clearance::down_clean). None: no Pacemaker answered, or a value it cannot read.
pub fn fencing_enabled() -> Option<bool> {
    tool_output(LOOK, "cibadmin", &["--query", "--scope", "crm_config"])
        .and_then(|xml| clearance::fencing_enabled_in(&xml))
}

/// Whether the cluster property startup-fencing is on (clearance::startup_fencing_in). None:
/// the CIB did not answer.
fn startup_fencing() -> Option<bool> {
    tool_output(LOOK, "cibadmin", &["--query", "--scope", "crm_config"])
        .and_then(|xml| clearance::startup_fencing_in(&xml))
}

/// Whether Pacemaker's fencing history shows `node` fenced after `since_unix_ms`.
pub fn fenced_after(node: &str, since_unix_ms: u64) -> Option<bool> {
    tool_output(
        LOOK,
        "stonith_admin",
        &["--history", node, "--output-as=xml"],
    )
    .and_then(|xml| clearance::fenced_after(&xml, node, since_unix_ms))
}

/// What Pacemaker shows of a failsafe record's node, from one crm_mon run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSeen {
    /// Whether an instance of the resource is promoted there (None: not read, or no resource
    /// named).
    pub promoted: Option<bool>,
    /// Whether the node is down as only a fence or an orderly stop leaves it
    /// (clearance::down_clean, with startup fencing on). None: not read.
    pub down_clean: Option<bool>,
}

/// What Pacemaker shows of `node`: whether an instance of `resource` (its name without a clone
/// suffix) is promoted there, and whether the node is offline and clean.
///
/// Down and clean also needs startup fencing on: without it, a node the DC has not seen since
/// its partition's Pacemaker started counts as clean.
pub fn node_seen(resource: Option<&str>, node: &str) -> NodeSeen {
    let Some(xml) = crm_mon() else {
        return NodeSeen::default();
    };
    let down_clean = match clearance::down_clean(&xml, node) {
        Some(true) => startup_fencing(),
        other => other,
    };
    NodeSeen {
        promoted: resource.and_then(|r| clearance::promoted_on(&xml, r, node)),
        down_clean,
    }
}
