//! What Pacemaker on this node says that the failsafe needs, each within a bound: whether the
//! cluster has fencing enabled (etcd_outage=auto, clearance), whether a node was fenced after
//! a moment, whether a node's instance of the resource is promoted and whether the node is
//! offline and clean (clearance). None: Pacemaker did not
//! answer (not running, or too slow) — never taken for "no".

use std::time::Duration;

use super::clearance;
use crate::service::tool_output;

/// The bound of one Pacemaker tool run.
pub const LOOK: Duration = Duration::from_secs(3);

/// Whether the cluster has fencing enabled: the cluster property `fencing-enabled`
/// (Pacemaker 3) or `stonith-enabled`, true where neither is set (Pacemaker's default). None:
/// no Pacemaker answered.
pub fn fencing_enabled() -> Option<bool> {
    let query = |name: &str| {
        tool_output(
            LOOK,
            "crm_attribute",
            &["--type", "crm_config", "--name", name, "--query", "--quiet"],
        )
    };
    for name in ["fencing-enabled", "stonith-enabled"] {
        if let Some(v) = query(name) {
            return crate::params::parse_bool(v.trim());
        }
    }
    // Neither is set (crm_attribute fails on an unset property): the default, provided the
    // CIB answers at all.
    tool_output(LOOK, "cibadmin", &["--query", "--scope", "crm_config"]).map(|_| true)
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
    /// Whether the node is offline and clean (None: not read).
    pub down_clean: Option<bool>,
}

/// What Pacemaker shows of `node`: whether an instance of `resource` (its name without a clone
/// suffix) is promoted there, and whether the node is offline and clean.
pub fn node_seen(resource: Option<&str>, node: &str) -> NodeSeen {
    let xml = tool_output(
        LOOK,
        "crm_mon",
        &["--one-shot", "--inactive", "--output-as=xml"],
    );
    let Some(xml) = xml else {
        return NodeSeen::default();
    };
    NodeSeen {
        promoted: resource.and_then(|r| clearance::promoted_on(&xml, r, node)),
        down_clean: clearance::down_clean(&xml, node),
    }
}
