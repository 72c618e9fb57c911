//! Losing the leader key in the middle of a phase, for tests/guard_phases.rs and the figures
//! of benches/phases.rs: one definition of each trial.

use std::time::{Duration, Instant};

use super::etcd::EtcdCluster;
use super::master::{Node, VipObserver, VIP};
use super::Agent;

pub const KEY: &str = crate::API_KEY;

/// How ownership is lost behind the guard's back.
#[derive(Clone, Copy, Debug)]
pub enum Loss {
    /// `etcdctl del` of the key.
    Deleted,
    /// `etcdctl lease revoke` of its lease (etcd deletes the key with it).
    Revoked,
}

/// The node's agent at the default lease settings with a raise of about 5 s: for IPv4 a
/// foreground burst of 20 frames 250 ms apart; for IPv6 DAD made to take about 5 s (five
/// probes a second apart). Returns the agent and its VIP.
pub fn slow_raise<'a>(a: &'a Node, etcd: &EtcdCluster, v6: bool) -> (Agent<'a>, &'static str) {
    let mut agent = a.agent(etcd);
    agent.params.remove("lease_ttl");
    agent.params.remove("lease_margin");
    if v6 {
        a.ns.ip(&["addr", "add", "2001:db8:5::1/64", "dev", "lan0", "nodad"]);
        a.ns.sysctl("net.ipv6.conf.lan0.dad_transmits=5");
        let agent = agent
            .param("ip", "2001:db8:5::100")
            .param("cidr_netmask", "64");
        (agent, "2001:db8:5::100")
    } else {
        let agent = agent
            .param("arp_bg", "false")
            .param("arp_count", "20")
            .param("arp_interval", "250");
        (agent, VIP)
    }
}

/// Loses the key now and returns how long the VIP (seen by `observer`) outlives the loss,
/// waiting at most `limit` for it to go.
fn time_the_loss(
    etcd: &EtcdCluster,
    observer: &VipObserver,
    loss: Loss,
    limit: Duration,
) -> Duration {
    let lost = Instant::now();
    lose(etcd, loss);
    assert!(
        observer.wait_state(0, false, limit),
        "the VIP goes after {loss:?}"
    );
    lost.elapsed()
}

fn lose(etcd: &EtcdCluster, loss: Loss) {
    let done = match loss {
        Loss::Deleted => etcd.etcdctl(&["del", KEY]),
        Loss::Revoked => {
            let lease = etcd.get(KEY).expect("key").1;
            etcd.etcdctl(&["lease", "revoke", lease.trim_start_matches("0x")])
        }
    };
    assert!(done.status.success(), "{done:?}");
}

/// Promotes, loses the key one second into the raise, and returns how long the VIP outlived
/// the loss; checks that promote failed, the service never started, and demote and stop
/// leave nothing behind.
pub fn lose_during_the_raise(
    etcd: &EtcdCluster,
    a: &Node,
    agent: &Agent,
    vip: &str,
    loss: Loss,
) -> Duration {
    assert_eq!(agent.run("start").code, 0);
    let observer = VipObserver::start_ns(std::slice::from_ref(&a.ns.name), vip);
    let (promote, took) = std::thread::scope(|s| {
        let promoting = s.spawn(|| agent.run("promote"));
        assert!(
            super::wait_for(Duration::from_secs(10), || etcd.get(KEY).is_some()),
            "the key is taken"
        );
        assert!(
            observer.wait_state(0, true, Duration::from_secs(3)),
            "VIP up\n{}",
            a.log()
        );
        std::thread::sleep(Duration::from_secs(1));
        let took = time_the_loss(etcd, &observer, loss, Duration::from_secs(5));
        (promoting.join().unwrap(), took)
    });
    observer.finish();
    eprintln!("{loss:?} 1 s into the raise of {vip}: VIP gone after {took:?}");
    assert_eq!(promote.code, 1, "promote fails: {}", promote.stderr);
    assert!(a.tokens().is_empty(), "the service never started");
    assert!(a.service_pids().is_empty());
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
    assert!(!a.ns.holds(vip));
    took
}

/// Promotes fully, loses the key (or its lease) while leading, and returns how long the VIP
/// outlived the loss; demote and stop afterwards.
pub fn lose_while_leading(etcd: &EtcdCluster, a: &Node, agent: &Agent, loss: Loss) -> Duration {
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let observer = VipObserver::start(&[a]);
    assert!(observer.wait_state(0, true, Duration::from_secs(2)));
    let took = time_the_loss(etcd, &observer, loss, Duration::from_secs(12));
    observer.finish();
    agent.run("monitor").expect(9, "fenced");
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
    took
}
