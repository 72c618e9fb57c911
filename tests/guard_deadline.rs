//! The guard's promise, measured from etcd's side at the DEFAULT lease settings (lease_ttl 10,
//! lease_margin 2) and again at lease_ttl 3 / margin 1: a master whose link goes silent
//! (packets dropped, nothing refused), a guard SIGKILLed or SIGSTOPped with no Pacemaker at
//! all — in each, the VIP (and the service) are gone before etcd deletes the leader key, at
//! every phase of the renewal cycle. etcd members run in namespaces of their own.
//! Long (about 8 minutes): `make check-guard`, part of `make check`.

use hamaster_lab as support;

use std::time::{Duration, Instant};

use support::deadline::{guard_pid, trial, Trial, KEY};
use support::etcd::EtcdCluster;
use support::master::{Node, VipObserver};

const TRIALS: u32 = 10;

/// The agent at the defaults: lease_ttl and lease_margin not set at all.
fn at_defaults<'a>(node: &'a Node, etcd: &EtcdCluster) -> support::Agent<'a> {
    let mut agent = node.agent(etcd);
    agent.params.remove("lease_ttl");
    agent.params.remove("lease_margin");
    agent
}

fn report(what: &str, trials: &[Trial]) {
    for (i, t) in trials.iter().enumerate() {
        eprintln!(
            "{what} trial {i}: VIP gone {:.0} ms, key deleted {:.0} ms after the fault: lead {:.0} ms",
            t.vip_gone_ms, t.key_deleted_ms, t.lead_ms
        );
    }
    let min = trials.iter().map(|t| t.lead_ms).fold(f64::MAX, f64::min);
    eprintln!("{what}: {} trials, smallest lead {min:.0} ms", trials.len());
}

fn silent_link_trials(etcd: &EtcdCluster, node: &Node, agent: &support::Agent, ttl: u64) {
    assert_eq!(agent.run("start").code, 0);
    let cycle = Duration::from_millis(ttl * 1000 / 3);
    let mut trials = Vec::new();
    for i in 0..TRIALS {
        let phase = cycle * i / TRIALS;
        let t = trial(etcd, node, agent, phase, true, || etcd.silence(&node.ns));
        etcd.unsilence(&node.ns);
        assert!(
            t.lead_ms > 0.0,
            "trial {i} (phase {phase:?}): the VIP went {:.0} ms AFTER etcd deleted the key",
            -t.lead_ms
        );
        trials.push(t);
        let demote = agent.run("demote");
        assert_eq!(demote.code, 0, "{}", demote.stderr);
        assert!(support::wait_for(Duration::from_secs(15), || etcd
            .get(KEY)
            .is_none()));
    }
    report(&format!("silent link, lease_ttl {ttl}"), &trials);
    // The margin is 2 s at the defaults, 1 s at ttl 3: the VIP goes about that long before
    // the key. Half a second of it may go to scheduling on a loaded 2-core machine.
    let margin_ms = if ttl == 10 { 2000.0 } else { 1000.0 };
    for t in &trials {
        assert!(
            t.lead_ms >= margin_ms - 1000.0,
            "lead {:.0} ms is far below the margin",
            t.lead_ms
        );
    }
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
#[ignore = "long: make check-guard"]
fn a_silent_master_link_at_the_default_settings_drops_the_vip_before_etcd_deletes_the_key() {
    let mut etcd = EtcdCluster::new("gsd");
    let a = Node::new(&mut etcd, "na");
    let agent = at_defaults(&a, &etcd);
    silent_link_trials(&etcd, &a, &agent, 10);
}

#[test]
#[ignore = "long: make check-guard"]
fn a_silent_master_link_at_ttl_3_drops_the_vip_before_etcd_deletes_the_key() {
    let mut etcd = EtcdCluster::new("gs3");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    silent_link_trials(&etcd, &a, &agent, 3);
}

#[test]
#[ignore = "long: make check-guard"]
fn a_killed_or_stopped_guard_loses_its_vip_to_the_kernel_before_etcd_deletes_the_key() {
    let mut etcd = EtcdCluster::new("gkd");
    let a = Node::new(&mut etcd, "na");
    let agent = at_defaults(&a, &etcd);
    assert_eq!(agent.run("start").code, 0);
    let phases = [Duration::ZERO, Duration::from_millis(1700)];
    for phase in phases {
        // SIGKILL: the service dies with its guard (PR_SET_PDEATHSIG); the VIP by the kernel.
        let t = trial(&etcd, &a, &agent, phase, true, || {
            support::must("kill", &["-KILL", &guard_pid(&agent).to_string()]);
        });
        report("SIGKILLed guard", &[t]);
        assert!(t.lead_ms > 0.0, "VIP outlived the lease: {t:?}");
        assert_eq!(agent.run("demote").code, 0);
        assert!(a.service_pids().is_empty() && !a.holds_vip());

        // SIGSTOP: nothing of the guard runs; the kernel removes the VIP all the same.
        let pid = std::cell::Cell::new(0);
        let t = trial(&etcd, &a, &agent, phase, false, || {
            pid.set(guard_pid(&agent));
            support::must("kill", &["-STOP", &pid.get().to_string()]);
        });
        report("SIGSTOPped guard", &[t]);
        assert!(t.lead_ms > 0.0, "VIP outlived the lease: {t:?}");
        support::must("kill", &["-CONT", &pid.get().to_string()]);
        assert!(
            support::wait_for(Duration::from_secs(3), || a.service_pids().is_empty()),
            "the woken guard stops its service at once"
        );
        let monitor = agent.run("monitor");
        assert!(
            monitor.code == 9 && monitor.reasons().iter().any(|r| r.contains("fenced")),
            "the woken guard answers that it was fenced: {monitor:?}\nlog:\n{}\nguard's stderr:\n{}",
            a.log(),
            std::fs::read_to_string(agent.run_dir.join(support::master::RESOURCE).join("guard.stderr")).unwrap_or_default()
        );
        assert_eq!(agent.run("demote").code, 0);
    }
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
#[ignore = "long: make check-guard"]
fn compaction_and_member_restarts_keep_the_watch_and_a_revoked_lease_fences_at_once() {
    let mut etcd = EtcdCluster::new("gcw");
    let a = Node::new(&mut etcd, "na");
    let agent = at_defaults(&a, &etcd);
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let token = etcd.get(KEY).expect("leader key").2;

    // History moves on and is compacted (OpenShift compacts every 5 minutes); every member
    // restarts in turn, so the guard's watch stream breaks and is set up again.
    for i in 0..20 {
        assert!(etcd
            .etcdctl(&["put", "/other/key", &i.to_string()])
            .status
            .success());
    }
    let status = etcd.etcdctl(&["endpoint", "status", "-w", "fields"]);
    let rev = support::etcd::field(&String::from_utf8_lossy(&status.stdout), "Revision")
        .expect("revision");
    let compact = etcd.etcdctl(&["compact", &rev]);
    assert!(compact.status.success(), "{compact:?}");
    let observer = VipObserver::start(&[&a]);
    for m in 0..3 {
        etcd.stop_member(m);
        std::thread::sleep(Duration::from_secs(2));
        etcd.start_member(m);
        assert!(etcd.wait_healthy(Duration::from_secs(30)));
        assert_eq!(agent.run("monitor").code, 8, "{}", a.log());
    }
    assert_eq!(etcd.get(KEY).map(|k| k.2), Some(token), "the same key");
    let st = a.guard_status(&agent).expect("guard answers");
    assert!(st.fenced_at_unix_ms.is_none(), "never fenced: {st:?}");

    // The watch was set up again after the restarts, from a fresh read (a watch restarted
    // from the compacted revision would have been refused): a deletion fences at once.
    let deleted = Instant::now();
    assert!(etcd.etcdctl(&["del", KEY]).status.success());
    assert!(
        observer.wait_state(0, false, Duration::from_secs(2)),
        "the re-established watch saw the key go"
    );
    eprintln!(
        "deleted key after compaction and restarts: VIP gone after {:?}",
        deleted.elapsed()
    );
    observer.finish();
    agent
        .run("monitor")
        .expect(9, "leader key was deleted in etcd");
    assert_eq!(agent.run("demote").code, 0);

    // The lease revoked behind the guard's back (`etcdctl lease revoke`): etcd deletes the
    // key with it; fenced within one renewal interval, not at the deadline. (Without a watch
    // the same case belongs to the simulation: production code has no switch to turn it off.)
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let observer = VipObserver::start(&[&a]);
    assert!(observer.wait_state(0, true, Duration::from_secs(2)));
    let st = a.guard_status(&agent).expect("guard answers");
    let lease = st
        .lease_id
        .expect("lease")
        .trim_start_matches("0x")
        .to_string();
    let revoked = Instant::now();
    assert!(etcd.etcdctl(&["lease", "revoke", &lease]).status.success());
    assert!(
        observer.wait_state(0, false, Duration::from_secs(8)),
        "fenced after the lease was revoked"
    );
    let took = revoked.elapsed();
    let within = Duration::from_millis(10_000 / 3);
    eprintln!("revoked lease: VIP gone after {took:?} (bound: one renewal interval, {within:?})");
    assert!(took <= within, "{took:?} > {within:?}");
    observer.finish();
    agent.run("monitor").expect(9, "fenced");
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
}
