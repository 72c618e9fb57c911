//! What Pacemaker on this node says that the failsafe needs, each within a bound: how the
//! cluster fences (enabled, and whether any device is a fabric one: etcd_outage=auto, the
//! hold's proofs, clearance), and what it shows of a node — its instance promoted, the node
//! online with its controller, or offline and clean (clearance; the hold's own node). None:
//! Pacemaker did not answer (not running, or too slow) — never taken for "no".

use std::time::Duration;

use super::clearance::{self, Fencing, NodeSeen};
use super::OwnView;
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

/// How the cluster fences (clearance::fencing_in_config), from one query of the CIB's
/// configuration. None: no Pacemaker answered, or a value it cannot read.
pub fn fencing() -> Option<Fencing> {
    tool_output(LOOK, "cibadmin", &["--query", "--scope", "configuration"])
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
    let Some(xml) = crm_mon() else {
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

/// What a holder's own Pacemaker says at an ask, from one query of the whole CIB within
/// `limit` (never crm_mon, which asks pacemakerd first and so does not answer while it is
/// stuck): how the cluster fences (`fencing`), and whether this node (`node`, as Pacemaker
/// names it) is online with its controller (`online`) — a holder whose controller is gone has
/// its resource recovered elsewhere, so no proof stands without it. What was not asked, or
/// not answered, is None.
pub fn own_view(node: &str, fencing: bool, online: bool, limit: Duration) -> OwnView {
    if !fencing && !online {
        return OwnView::default();
    }
    let Some(xml) = tool_output(limit, "cibadmin", &["--query"]) else {
        return OwnView::default();
    };
    OwnView {
        fencing: fencing
            .then(|| clearance::fencing_in_config(&xml))
            .flatten(),
        online: online
            .then(|| clearance::online_in_status(&xml, node))
            .flatten(),
        rtc: None,
    }
}
