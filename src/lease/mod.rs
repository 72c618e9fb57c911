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
    Acquire, Etcd, Grant, Holder, LeaseError, RecordRead, RecordTake, RenewError, Retake,
};

/// An etcd lease id, shown the way etcdctl shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseId(pub i64);

impl std::fmt::Display for LeaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

/// `{prefix}/{resource}/leader`, with exactly one slash between parts.
pub fn leader_key(prefix: &str, resource: &str) -> String {
    format!("{}/{}/leader", prefix.trim_end_matches('/'), resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_key_joins_prefix_and_resource() {
        assert_eq!(leader_key("/hamaster", "api"), "/hamaster/api/leader");
        assert_eq!(leader_key("/hamaster/", "api"), "/hamaster/api/leader");
        assert_eq!(LeaseId(0x694d7a2b3c1e).to_string(), "0x694d7a2b3c1e");
    }
}
