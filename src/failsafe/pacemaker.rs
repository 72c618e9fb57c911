//! What Pacemaker on this node says that the failsafe needs, each within a bound: whether the
//! cluster has fencing enabled (etcd_outage=auto), whether a node was fenced after a moment,
//! whether a node's instance of the resource is promoted (clearance). None: Pacemaker did not
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

/// Whether Pacemaker shows an instance of `resource` (its name without a clone suffix)
/// promoted on `node`.
pub fn promoted_on(resource: &str, node: &str) -> Option<bool> {
    tool_output(
        LOOK,
        "crm_mon",
        &["--one-shot", "--inactive", "--output-as=xml"],
    )
    .and_then(|xml| clearance::promoted_on(&xml, resource, node))
}
