//! lease_ttl when it is not set follows the cluster: corosync's failure detection time (the
//! token timeout, with its per-node coefficient, plus the consensus timeout) in whole
//! seconds, within 6..=10. A crashed holder's lease is then gone by the time corosync has
//! noticed the crash and Pacemaker can promote elsewhere, so the lease adds no wait to a
//! failover (at RHEL's defaults: 8 s on 3 nodes, 6 s on 2). The floor keeps a default lease
//! from turning fragile on a cluster tuned for speed (token 1000: 3.6 s), where the lease is
//! the administrator's to shorten with the token. The cost: the guard fences after lease_ttl −
//! lease_margin without a renewal, earlier than with 10 (docs/tuning.md). Without a running
//! corosync (`hamaster takeover`, tests) it is 10, the TTL before this rule.

use std::time::Duration;

/// The default when corosync does not answer, and the most the rule gives.
pub const FALLBACK_TTL_SECS: u64 = 10;
/// The least the rule gives: a derived margin of 2 s and a renewal every ttl/3 leave 2 s
/// to reach etcd in.
pub const MIN_DERIVED_TTL_SECS: u64 = 6;

/// The TTL for a cluster whose corosync detects a silent node after `detection`.
pub fn ttl_for_detection(detection: Duration) -> u64 {
    detection
        .as_secs()
        .clamp(MIN_DERIVED_TTL_SECS, FALLBACK_TTL_SECS)
}

/// corosync's failure detection time as it runs now (`corosync-cmapctl`'s runtime token and
/// consensus timeouts, one call of at most a second), or None when no corosync answers.
pub fn corosync_detection() -> Option<Duration> {
    let listing = crate::service::tool_output(
        std::time::Duration::from_secs(1),
        "corosync-cmapctl",
        &["runtime.config.totem."],
    )?;
    detection_from(&listing)
}

/// Token plus consensus from `corosync-cmapctl` lines such as
/// `runtime.config.totem.token (u32) = 3650`.
fn detection_from(listing: &str) -> Option<Duration> {
    let token = value_of(listing, "runtime.config.totem.token")?;
    let consensus = value_of(listing, "runtime.config.totem.consensus")?;
    Some(Duration::from_millis(token + consensus))
}

/// One number from `corosync-cmapctl` lines.
fn value_of(listing: &str, key: &str) -> Option<u64> {
    listing.lines().find_map(|l| {
        let (name, value) = l.split_once('=')?;
        (name.split_whitespace().next()? == key)
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// How long corosync may take to form a membership without a node after losing contact with
/// it — the most by which two nodes' views of one change may differ (failsafe::clearance):
/// token + consensus + join from `corosync-cmapctl` lines (the join timeout missing: 0), as
/// failsafe::witness reads them with the nodelist.
pub(crate) fn membership_time_from(listing: &str) -> Option<Duration> {
    let join = value_of(listing, "runtime.config.totem.join").unwrap_or(0);
    Some(detection_from(listing)? + Duration::from_millis(join))
}

/// corosync's totem.cluster_name (one call of at most a second, the first time it answers in
/// this process: the name changes only with a restart of the cluster stack, and an agent
/// action reads its parameters more than once): Ok(None) when corosync answers and has none,
/// Err when no corosync answers (asked again next time).
pub fn corosync_cluster_name() -> Result<Option<String>, String> {
    static ANSWER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if let Some(name) = ANSWER.get() {
        return Ok(name.clone());
    }
    let listing = crate::service::tool_output(
        std::time::Duration::from_secs(1),
        "corosync-cmapctl",
        &["totem."],
    )
    .ok_or("corosync-cmapctl does not answer (no corosync runs here)")?;
    Ok(ANSWER
        .get_or_init(|| text_of(&listing, "totem.cluster_name"))
        .clone())
}

/// One string from `corosync-cmapctl` lines such as `totem.cluster_name (str) = lab`.
pub(crate) fn text_of(listing: &str, key: &str) -> Option<String> {
    listing.lines().find_map(|l| {
        let (name, value) = l.split_once(" = ")?;
        (name.split_whitespace().next()? == key).then(|| value.to_string())
    })
}

/// Where no corosync answers: a membership time long enough for any sane totem setting.
pub const FALLBACK_MEMBERSHIP_TIME: Duration = Duration::from_secs(30);

/// lease_ttl's default on this node.
pub fn default_ttl() -> u64 {
    corosync_detection().map_or(FALLBACK_TTL_SECS, ttl_for_detection)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corosync_cmapctls_listing_gives_token_plus_consensus() {
        let listing = "runtime.config.totem.consensus (u32) = 4380\n\
                       runtime.config.totem.token (u32) = 3650\n\
                       runtime.config.totem.token_retransmit (u32) = 869\n\
                       runtime.config.totem.token_retransmits_before_loss_const (u32) = 4\n";
        assert_eq!(detection_from(listing), Some(Duration::from_millis(8030)));
        assert_eq!(
            detection_from("runtime.config.totem.token (u32) = 3650\n"),
            None
        );
        assert_eq!(detection_from(""), None);
    }

    #[test]
    fn corosyncs_cluster_name_is_read_from_its_listing() {
        let listing = "totem.cluster_name (str) = hamaster-lab\n\
                       totem.crypto_cipher (str) = none\n\
                       totem.token (u32) = 1000\n";
        assert_eq!(
            text_of(listing, "totem.cluster_name").as_deref(),
            Some("hamaster-lab")
        );
        assert_eq!(
            text_of("totem.token (u32) = 1000\n", "totem.cluster_name"),
            None
        );
        assert_eq!(text_of("", "totem.cluster_name"), None);
    }

    #[test]
    fn the_default_lease_ends_before_corosync_declares_the_holder_lost() {
        // RHEL's defaults on 3 nodes: token 3000 + 650 = 3650 ms, consensus 1.2 × 3650.
        assert_eq!(ttl_for_detection(Duration::from_millis(3650 + 4380)), 8);
        // 2 nodes: no coefficient.
        assert_eq!(ttl_for_detection(Duration::from_millis(3000 + 3600)), 6);
        // 4 nodes: 3000 + 2 × 650, consensus 1.2 × that.
        assert_eq!(ttl_for_detection(Duration::from_millis(4300 + 5160)), 9);
        // token 1000 on 3 nodes (the lab): 1650 + 1980, below the floor.
        assert_eq!(ttl_for_detection(Duration::from_millis(1650 + 1980)), 6);
        // Tuned far down, or up: within 6..=10.
        assert_eq!(ttl_for_detection(Duration::from_millis(500 + 600)), 6);
        assert_eq!(
            ttl_for_detection(Duration::from_millis(10_650 + 12_780)),
            10
        );
    }
}
