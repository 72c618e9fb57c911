//! The master agent against a real three-member etcd cluster in namespaces, with a real
//! HTTPS service in command mode and the VIP on a veth.

mod support;

use std::time::{Duration, Instant};

use support::etcd::EtcdCluster;
use support::master::{Node, VipObserver, RESOURCE, VIP};

const KEY: &str = "/hamaster/api/leader";

#[test]
fn promote_monitor_demote_on_one_node() {
    let mut etcd = EtcdCluster::new("m1");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    assert_eq!(agent.probe().code, 7);
    assert_eq!(agent.run("start").code, 0);
    assert_eq!(agent.run("monitor").code, 0, "started, unpromoted");
    let t = Instant::now();
    let run = agent.run("promote");
    assert_eq!(run.code, 0, "promote: {}\n{}", run.stderr, a.log());
    eprintln!("promote took {:?}", t.elapsed());
    assert!(a.holds_vip());
    let (holder, _lease, token) = etcd.get(KEY).expect("leader key");
    assert_eq!(holder, "na");
    assert_eq!(a.tokens(), vec![token], "the service got the fencing token");
    assert_eq!(
        agent.run("monitor").code,
        8,
        "{}",
        agent.run("monitor").stderr
    );
    assert_eq!(agent.run("demote").code, 0);
    assert!(!a.holds_vip());
    assert!(a.service_pids().is_empty());
    assert!(etcd.get(KEY).is_none(), "key released");
    assert_eq!(agent.run("monitor").code, 0);
    assert_eq!(agent.run("stop").code, 0);
    assert_eq!(agent.run("monitor").code, 7);
    let _ = RESOURCE;
    let _ = VIP;
    let _ = VipObserver::start(&[]).finish();
    let _ = Duration::ZERO;
}
