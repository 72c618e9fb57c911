//! Timing the guard's promise from both sides: when the VIP (and the service) went on the
//! master, and when etcd deleted the leader key, seen by `etcdctl watch` from a member's
//! namespace. Shared by tests/guard_deadline.rs and benches/guard.rs.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use super::etcd::{EtcdCluster, KeyWatch};
use super::master::{Node, VipObserver};
use super::Agent;

pub const KEY: &str = crate::API_KEY;

/// The first deletion of the leader key seen from etcd's side, and whether the node's service
/// was still running at that moment.
pub struct KeyDeletion(KeyWatch<bool>);

impl KeyDeletion {
    pub fn watch(etcd: &EtcdCluster, node: &Node) -> KeyDeletion {
        let state = node.state.display().to_string();
        KeyDeletion(KeyWatch::start(etcd, KEY, move || {
            !Node::service_pids_in(&state).is_empty()
        }))
    }

    /// Waits (bounded) for the DELETE; when it came and whether the service was alive then.
    pub fn wait(&self, limit: Duration) -> Option<(Instant, bool)> {
        self.0
            .first(limit, |e| e.kind == "DELETE")
            .map(|e| (e.at, e.found))
    }
}

/// One trial's figures, in milliseconds from the fault.
#[derive(Debug, Clone, Copy)]
pub struct Trial {
    pub vip_gone_ms: f64,
    pub key_deleted_ms: f64,
    /// Key deletion − VIP removal: how long before another node could take over the VIP was
    /// already gone.
    pub lead_ms: f64,
}

/// The guard's pid, from its pid file.
pub fn guard_pid(agent: &Agent) -> i32 {
    let text = std::fs::read_to_string(agent.run_dir.join("api/guard.pid")).expect("guard.pid");
    text.trim().parse().expect("a pid")
}

/// Promotes, waits until `phase` after a renewal, applies `fault`, and measures VIP removal and
/// key deletion from the fault on. The service must be gone before the key is deleted; with
/// `service_too` false (a SIGSTOPped guard), that is not asked.
pub fn trial(
    etcd: &EtcdCluster,
    node: &Node,
    agent: &Agent,
    phase: Duration,
    service_too: bool,
    fault: impl FnOnce(),
) -> Trial {
    let promote = agent.run("promote");
    assert_eq!(
        promote.code,
        0,
        "promote: {}\n{}",
        promote.stderr,
        node.log()
    );
    let deletion = KeyDeletion::watch(etcd, node);
    let observer = VipObserver::start(&[node]);
    assert!(observer.wait_state(0, true, Duration::from_secs(3)));
    // Just after a renewal, then the phase into the renewal cycle.
    let before = node
        .guard_status(agent)
        .and_then(|s| s.last_renewal_unix_ms);
    assert!(
        super::wait_for(Duration::from_secs(15), || node
            .guard_status(agent)
            .and_then(|s| s.last_renewal_unix_ms)
            != before),
        "a renewal"
    );
    std::thread::sleep(phase);
    let cut = Instant::now();
    fault();
    let deleted = deletion.wait(Duration::from_secs(40));
    let seen = observer.finish();
    seen.assert_complete();
    let (deleted_at, service_alive) = deleted.expect("etcd deleted the key");
    let vip_gone = seen.first_loss(0).expect("the VIP went");
    if service_too {
        assert!(
            !service_alive,
            "the service was gone before etcd deleted the key"
        );
    }
    let ms = |t: Instant| (t - cut).as_secs_f64() * 1000.0;
    Trial {
        vip_gone_ms: ms(vip_gone),
        key_deleted_ms: ms(deleted_at),
        lead_ms: ms(deleted_at) - ms(vip_gone),
    }
}
