//! Holding through an etcd outage (docs/safety.md, "Holding through an etcd outage"): while
//! etcd cannot be reached, a master keeps its VIP and service only on a fresh proof from its
//! own corosync that the cluster is whole (quorate, every node of the nodelist in its
//! membership), and other nodes honour the failsafe record it left in etcd before they take
//! over. Here: the constants both sides share, the record, what corosync's answer means
//! (`witness`), and the takeover rule (`clearance`). The guard machine's side is
//! guard::machine::hold.

pub mod clearance;
pub mod pacemaker;
pub mod witness;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// W: a proof that the cluster is whole lets the guard hold until this long after it was
/// asked for.
pub const PROOF_LIFE: Duration = Duration::from_secs(3);
/// How often corosync is asked while the guard holds, or is within PROOF_LIFE of its lease's
/// deadline.
pub const ASK_EVERY: Duration = Duration::from_millis(500);
/// One ask's bound: corosync not answering within it is "cannot tell".
pub const ASK_LIMIT: Duration = Duration::from_secs(1);
/// F: everything a guard holds on a proof is gone by the proof's deadline plus this — the
/// fence's own latency, the SIGKILL, the VIP's kernel lifetime and the watchdog's reset are
/// all set to end before it (guard::machine::Leadership::cover).
pub const FENCE_BOUND: Duration = Duration::from_secs(1);

/// What a holder's own node says at an ask, beside its corosync: from its Pacemaker, how the
/// cluster fences and whether this node is online with its controller; and its RTC's reading
/// (None: not asked, or no answer within the bound — "cannot tell", never "no").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnView {
    pub fencing: Option<clearance::Fencing>,
    pub online: Option<bool>,
    /// The RTC's seconds since the epoch (`/sys/class/rtc/rtc0/since_epoch`), read as the ask
    /// began: a clock that a hypervisor's pause of the VM does not stop where the boot clock
    /// stops (qemu's default RTC follows the host's clock).
    pub rtc: Option<u64>,
}

/// The RTC's reading, where this node has one (failsafe::OwnView::rtc).
pub fn rtc_seconds() -> Option<u64> {
    std::fs::read_to_string("/sys/class/rtc/rtc0/since_epoch")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The failsafe record's key, next to the leader key: `{scope}/{resource}/failsafe`
/// (`EtcdConfig::scope`).
pub fn record_key(scope: &str, resource: &str) -> String {
    format!("{}/{resource}/failsafe", scope.trim_end_matches('/'))
}

/// What a master leaves in etcd, without a lease, while it leads: that it may hold through an
/// etcd outage. Written with the leader key in one transaction; deleted with it by an orderly
/// release; left by a fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The node that may hold, as Pacemaker names it.
    pub node: String,
    /// Its lease when it took the key (hex, as the leader key's lease is shown).
    pub lease: String,
    /// The cluster's nodelist as corosync had it, by name.
    pub nodes: Vec<String>,
    /// When it was written (Unix ms, the writer's clock: for people, never compared with
    /// another node's clock).
    pub written_unix_ms: u64,
    /// The cluster the holder proves itself whole in (None: a record of a release before it
    /// was written; clearance then knows the holder by name only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<Home>,
}

/// The holder's cluster, as its corosync had it when the record was written: only a node of
/// this cluster can see the holder leave the membership its proofs come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Home {
    /// totem.cluster_name ("" where none is set).
    pub cluster: String,
    /// The holder's own corosync node id: the membership is matched by id, never by a name
    /// that Pacemaker and corosync may spell differently.
    pub id: u32,
    /// The nodelist's ids: every one must be in the holder's membership for a proof.
    pub nodelist: Vec<u32>,
    /// The holder's corosync membership time (token + consensus + join, ms): the takeover's
    /// time bound uses the larger of the holder's and the taker's.
    pub membership_ms: u64,
}

impl Home {
    /// Where this corosync's node stands: its cluster, id, nodelist and timing.
    pub fn of(c: &witness::Cluster) -> Home {
        Home {
            cluster: c.name.clone().unwrap_or_default(),
            id: c.me,
            nodelist: c.ids(),
            membership_ms: c
                .membership_time
                .unwrap_or(crate::lease::cluster::FALLBACK_MEMBERSHIP_TIME)
                .as_millis() as u64,
        }
    }
}

impl Record {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// None: not a record (someone else's value under the key).
    pub fn from_json(text: &[u8]) -> Option<Record> {
        serde_json::from_slice(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_sits_next_to_the_leader_key() {
        let r = Record {
            node: "n1".into(),
            lease: "0x1f".into(),
            nodes: vec!["n1".into(), "n2".into(), "n3".into()],
            written_unix_ms: 1_700_000_000_000,
            home: Some(Home::of(&witness::three_nodes(1, &[1, 2, 3], "1.a"))),
        };
        assert_eq!(Record::from_json(r.to_json().as_bytes()), Some(r.clone()));
        // A record of an earlier release (no home) still reads.
        let old = r#"{"node":"n1","lease":"0x1f","nodes":["n1"],"written_unix_ms":1}"#;
        assert_eq!(Record::from_json(old.as_bytes()).unwrap().home, None);
        let home = r.home.unwrap();
        assert_eq!((home.cluster.as_str(), home.id), ("lab", 1));
        assert_eq!((home.nodelist, home.membership_ms), (vec![1, 2, 3], 3680));
        assert_eq!(Record::from_json(b"n1"), None);
        assert_eq!(record_key("/hamaster/", "api"), "/hamaster/api/failsafe");
        assert_eq!(
            crate::lease::leader_key("/hamaster/", "api"),
            "/hamaster/api/leader"
        );
    }
}
