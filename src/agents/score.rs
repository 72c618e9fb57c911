//! Promotion scores, the way each supported Pacemaker takes them, as resource-agents'
//! `ocf_promotion_score` does: `crm_attribute --promotion` from CRM feature set 3.10.0
//! (Pacemaker 2.1, RHEL 8.5+ and 9), `crm_master -l reboot` before it (Pacemaker 1.1 on RHEL 7,
//! 2.0 on RHEL 8.0–8.4). Feature sets below 3.0.0 (Pacemaker 1.0 and older) are not supported.
//!
//! A cache under /run spares a process per monitor, but only for a while: Pacemaker drops a
//! node's transient attributes when the node leaves the membership (a respawned controller, a
//! rejoin), and a score that is never set again leaves the node unpromotable for good.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::ocf::OcfEnv;

/// How long a score that was set counts as still known to Pacemaker.
pub const REASSERT_AFTER: Duration = Duration::from_secs(60);

/// The first feature set whose crm_attribute knows `--promotion`.
const PROMOTION_OPTION: Version = (3, 10, 0);
/// The oldest feature set supported: Pacemaker 1.1.
const OLDEST: Version = (3, 0, 0);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `crm_attribute --promotion --lifetime reboot`.
    Promotion,
    /// `crm_master -l reboot` (it names the attribute after OCF_RESOURCE_INSTANCE itself).
    CrmMaster,
}

/// Promotion scores exist only under a cluster (Pacemaker passes CRM_meta_on_node);
/// ocf-tester and crm_resource --force-* run without.
pub fn in_cluster(env: &OcfEnv) -> bool {
    env.meta.contains_key("on_node")
}

/// A CRM feature set: major, minor, patch.
type Version = (u32, u32, u32);

/// The CRM feature set Pacemaker announced (`OCF_RESKEY_crm_feature_set`), as text and, when
/// it parses, as a version.
fn feature_set(env: &OcfEnv) -> Option<(String, Option<Version>)> {
    let text = env.params.get("crm_feature_set")?.trim().to_string();
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    let version = match (parts.next(), parts.next(), parts.next()) {
        (Some(Some(a)), Some(Some(b)), c) => Some((a, b, c.flatten().unwrap_or(0))),
        _ => None,
    };
    Some((text, version))
}

/// Which tool sets scores here; Err: why this Pacemaker is not supported.
pub fn tool(env: &OcfEnv, crm_master: impl Fn() -> bool) -> Result<Tool, String> {
    match feature_set(env) {
        Some((_, Some(v))) if v >= PROMOTION_OPTION => Ok(Tool::Promotion),
        Some((text, Some(v))) if v < OLDEST => Err(format!(
            "Pacemaker with CRM feature set {text} is not supported: hamaster needs Pacemaker \
             1.1 or later (feature set 3.0.0 or later)"
        )),
        Some((text, _)) if !crm_master() => Err(format!(
            "Pacemaker with CRM feature set {text} has no crm_attribute --promotion, and \
             crm_master is not installed: install Pacemaker's command-line tools"
        )),
        Some(_) => Ok(Tool::CrmMaster),
        // Not announced (never under Pacemaker itself): as ocf_promotion_score, crm_master if
        // it is there.
        None if crm_master() => Ok(Tool::CrmMaster),
        None => Ok(Tool::Promotion),
    }
}

/// Whether the Pacemaker that calls us (its announced CRM feature set: every action gets it,
/// validate-all and probes included) is one hamaster supports; Err names the version.
/// Outside Pacemaker (no feature set) there is nothing to check.
pub fn check_supported(env: &OcfEnv) -> Result<(), String> {
    match feature_set(env) {
        Some(_) => tool(env, crm_master_installed).map(drop),
        None => Ok(()),
    }
}

/// Whether the Pacemaker that calls us takes OCF_DEGRADED and OCF_DEGRADED_PROMOTED (OCF 1.1,
/// Pacemaker 2.1 and later: the same feature set as `--promotion`); older ones would read them
/// as failures.
pub fn understands_degraded(env: &OcfEnv) -> bool {
    matches!(feature_set(env), Some((_, Some(v))) if v >= PROMOTION_OPTION)
}

pub fn crm_master_installed() -> bool {
    crate::service::find_in_path("crm_master").is_some()
}

/// Sets (Some) or deletes (None) this node's score, unless the same value was set less than
/// `REASSERT_AFTER` ago (recorded in `cache`); the tool runs within `limit`.
pub fn set(env: &OcfEnv, cache: &Path, score: Option<i32>, limit: Duration) {
    if !in_cluster(env) {
        return;
    }
    let text = score.map_or("none".to_string(), |s| s.to_string());
    if recently_set(cache, &text) {
        return;
    }
    let tool = match tool(env, crm_master_installed) {
        Ok(t) => t,
        Err(why) => return log::warn!("no promotion score: {why}"),
    };
    let value = score.map(|s| s.to_string());
    let (program, mut args): (&str, Vec<&str>) = match tool {
        Tool::Promotion => ("crm_attribute", vec!["--promotion", "--lifetime", "reboot"]),
        Tool::CrmMaster => ("crm_master", vec!["-l", "reboot"]),
    };
    match &value {
        Some(v) => args.extend(["-v", v]),
        None => args.push("-D"),
    }
    if crate::service::tool_output(limit, program, &args).is_some() {
        remember(cache, &text);
    } else {
        log::warn!(
            "{tool:?} score ({text}) failed or did not finish within {} ms",
            limit.as_millis()
        );
    }
}

/// Whether `text` is what `cache` says was set, less than `REASSERT_AFTER` ago.
pub fn recently_set(cache: &Path, text: &str) -> bool {
    let fresh = std::fs::metadata(cache)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < REASSERT_AFTER);
    fresh && std::fs::read_to_string(cache).is_ok_and(|t| t == text)
}

/// Records in `cache` that `text` was set now.
pub fn remember(cache: &Path, text: &str) {
    if let Some(dir) = cache.parent() {
        let _ = crate::runfiles::private_dir(dir);
    }
    let _ = crate::runfiles::write_private(cache, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(fs: Option<&str>) -> OcfEnv {
        let mut vars = vec![("OCF_RESKEY_CRM_meta_on_node", "n1")];
        if let Some(f) = fs {
            vars.push(("OCF_RESKEY_crm_feature_set", f));
        }
        OcfEnv::from_vars(vars)
    }

    #[test]
    fn each_pacemaker_gets_the_tool_it_has() {
        // RHEL 9 / 8.5+: Pacemaker 2.1.
        assert_eq!(tool(&env(Some("3.16.2")), || true), Ok(Tool::Promotion));
        assert_eq!(tool(&env(Some("3.10.0")), || true), Ok(Tool::Promotion));
        // RHEL 8.0–8.4 (Pacemaker 2.0) and RHEL 7 (1.1).
        assert_eq!(tool(&env(Some("3.2.0")), || true), Ok(Tool::CrmMaster));
        assert_eq!(tool(&env(Some("3.0.14")), || true), Ok(Tool::CrmMaster));
        let missing = tool(&env(Some("3.2.0")), || false).unwrap_err();
        assert!(missing.contains("crm_master is not installed"), "{missing}");
        let old = tool(&env(Some("2.0")), || true).unwrap_err();
        assert!(old.contains("feature set 2.0 is not supported"), "{old}");
        assert_eq!(tool(&env(None), || true), Ok(Tool::CrmMaster));
        assert_eq!(tool(&env(None), || false), Ok(Tool::Promotion));
        // Degraded results only where Pacemaker knows them.
        assert!(understands_degraded(&env(Some("3.16.2"))));
        assert!(!understands_degraded(&env(Some("3.2.0"))));
        assert!(!understands_degraded(&env(None)));
    }
}
