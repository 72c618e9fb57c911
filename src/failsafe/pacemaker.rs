//! What Pacemaker on this node says that the failsafe needs, each within a bound: how the
//! cluster fences (enabled, and whether any device is a fabric one: etcd_outage=auto, the
//! hold's proofs, clearance), and what it shows of a node — its instance promoted, the node
//! online with its controller, or offline and clean (clearance; the hold's own node). None:
//! Pacemaker did not answer (not running, or too slow) — never taken for "no".

use std::time::Duration;

use super::clearance::{self, Fencing, NodeSeen};
use crate::service::tool_output;

/// The bound of one Pacemaker tool run.
pub const LOOK: Duration = Duration::from_secs(3);

/// crm_mon's view of the cluster, as its scheduler sees it (rules applied).
fn crm_mon(limit: Duration) -> Option<String> {
    tool_output(
        limit,
        "crm_mon",
        &["--one-shot", "--inactive", "--output-as=xml"],
    )
}

/// How the cluster fences (clearance::fencing_in_config), from one query of the CIB's
/// configuration within `limit`. None: no Pacemaker answered, or a value it cannot read.
pub fn fencing(limit: Duration) -> Option<Fencing> {
    tool_output(limit, "cibadmin", &["--query", "--scope", "configuration"])
        .and_then(|xml| clearance::fencing_in_config(&xml))
}

/// Whether the cluster property startup-fencing is on (clearance::startup_fencing_in). None:
/// the CIB did not answer.
fn startup_fencing() -> Option<bool> {
    tool_output(LOOK, "cibadmin", &["--query", "--scope", "crm_config"])
        .and_then(|xml| clearance::startup_fencing_in(&xml))
}

/// What Pacemaker shows of `node`: whether an instance of `resource` (its name without a clone
/// suffix) is promoted (or failed) there, whether the node is online with its controller, and
/// whether it is offline and clean.
///
/// Down and clean also needs startup fencing on: without it, a node the DC has not seen since
/// its partition's Pacemaker started counts as clean.
pub fn node_seen(resource: Option<&str>, node: &str) -> NodeSeen {
    let Some(xml) = crm_mon(LOOK) else {
        return NodeSeen::default();
    };
    let down_clean = match clearance::down_clean(&xml, node) {
        Some(true) => startup_fencing(),
        other => other,
    };
    NodeSeen {
        promoted: resource.and_then(|r| clearance::promoted_on(&xml, r, node)),
        online: clearance::online_on(&xml, node),
        down_clean,
    }
}

/// Whether Pacemaker shows this node (`node`) online with its controller, within `limit`:
/// a holder's own Pacemaker gone (its controller killed) makes the cluster recover the
/// resource elsewhere, so no proof stands without it. None: no answer.
pub fn online(node: &str, limit: Duration) -> Option<bool> {
    crm_mon(limit).and_then(|xml| clearance::online_on(&xml, node))
}
