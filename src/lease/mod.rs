//! The etcd side of the split-brain guard: the leader key, its lease, the fencing token, and
//! the local deadline arithmetic. It owns every etcd request hamaster makes and nothing else:
//! it never touches addresses or services.

pub mod clock;
pub mod cluster;
pub mod config;
pub mod etcd;

pub use clock::LeaseClock;
pub use config::EtcdConfig;
pub use etcd::{
    Acquire, Etcd, Grant, Holder, LeaseError, MemberAnswers, MemberStatus, RecordRead, RecordTake,
    RenewError, Retake,
};

/// An etcd lease id, shown the way etcdctl shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseId(pub i64);

impl std::fmt::Display for LeaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

/// The leader key's last part.
const LEADER_SUFFIX: &str = "/leader";

/// `{scope}/{resource}/leader`, with exactly one slash between parts. The scope is
/// `{etcd_prefix}/{cluster_name}` (`EtcdConfig::scope`); with the bare etcd_prefix it is the
/// key of hamaster releases before the cluster's name was part of it (`legacy_leader_key`).
pub fn leader_key(scope: &str, resource: &str) -> String {
    format!("{}/{resource}{LEADER_SUFFIX}", scope.trim_end_matches('/'))
}

/// The scope of a leader key of `resource` (what `leader_key` joined it from).
pub fn scope_of<'k>(key: &'k str, resource: &str) -> Option<&'k str> {
    key.strip_suffix(LEADER_SUFFIX)?
        .strip_suffix(resource)?
        .strip_suffix('/')
}

/// `{etcd_prefix}/{resource}/leader`: where hamaster releases before the cluster's name was
/// part of the key put it. A master mid-upgrade may hold it: the acquire transaction takes
/// our key only while this one is absent too.
pub fn legacy_leader_key(prefix: &str, resource: &str) -> String {
    leader_key(prefix, resource)
}

/// `{scope}/{resource}/seen`: written (without a lease) with every taking of the leader key,
/// so that the key's name is known to this etcd after the key itself has gone. The cold
/// standby's takeover refuses a resource that has no such mark and no key (a TOML named
/// unlike the cluster's resource, another etcd_prefix or cluster_name): it would lead beside
/// the cluster's master under a key that master never looks at.
pub fn seen_key(scope: &str, resource: &str) -> String {
    format!("{}/{}/seen", scope.trim_end_matches('/'), resource)
}

/// What a leader key or seen mark under `prefix` names: `cluster/resource`, or `resource` for
/// a key of the legacy layout; None for other keys.
pub fn resource_of<'k>(prefix: &str, key: &'k str) -> Option<&'k str> {
    let rest = key
        .strip_prefix(prefix.trim_end_matches('/'))?
        .strip_prefix('/')?;
    let named = rest
        .strip_suffix(LEADER_SUFFIX)
        .or_else(|| rest.strip_suffix("/seen"))?;
    let parts: Vec<&str> = named.split('/').collect();
    (parts.len() <= 2 && parts.iter().all(|p| !p.is_empty())).then_some(named)
}

/// The value of the seen mark: who took the key last, when, and as what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    pub node: String,
    pub at_unix_ms: u64,
    /// "pacemaker" (the agent's guard) or "takeover" (the cold standby).
    pub by: String,
}

impl Seen {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Option<Seen> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_key_joins_prefix_and_resource() {
        assert_eq!(leader_key("/hamaster", "api"), "/hamaster/api/leader");
        assert_eq!(leader_key("/hamaster/", "api"), "/hamaster/api/leader");
        assert_eq!(LeaseId(0x694d7a2b3c1e).to_string(), "0x694d7a2b3c1e");
        assert_eq!(seen_key("/hamaster/", "api"), "/hamaster/api/seen");
        for key in [leader_key("/hamaster", "db"), seen_key("/hamaster/", "db")] {
            assert_eq!(resource_of("/hamaster/", &key), Some("db"));
        }
        assert_eq!(resource_of("/hamaster", "/hamaster/db/failsafe"), None);
        assert_eq!(
            resource_of("/hamaster", &leader_key("/hamasterx", "db")),
            None
        );
        // The cluster's name in the key: named as cluster/resource.
        assert_eq!(
            resource_of("/hamaster", &leader_key("/hamaster/lab", "api")),
            Some("lab/api")
        );
        assert_eq!(
            resource_of("/hamaster", &seen_key("/hamaster/lab", "api")),
            Some("lab/api")
        );
        assert_eq!(
            resource_of("/hamaster", &leader_key("/hamaster/a/b", "c")),
            None
        );
        assert_eq!(resource_of("/hamaster", "/hamaster//api/leader"), None);
        assert_eq!(
            legacy_leader_key("/hamaster/", "api"),
            "/hamaster/api/leader"
        );
        let key = leader_key("/hamaster/lab", "api");
        assert_eq!(scope_of(&key, "api"), Some("/hamaster/lab"));
        assert_eq!(scope_of(&key, "db"), None);
        let seen = Seen {
            node: "n1".into(),
            at_unix_ms: 5,
            by: "takeover".into(),
        };
        assert_eq!(Seen::from_json(seen.to_json().as_bytes()), Some(seen));
        assert_eq!(Seen::from_json(b"n1"), None);
    }
}
