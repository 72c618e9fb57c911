//! `make bench-guard`: the guard's promise in figures, at the DEFAULT lease settings
//! (lease_ttl 10, lease_margin 2), against a real three-member etcd in namespaces:
//! - the lead of VIP removal over etcd's deletion of the key, master link silent (dropped,
//!   not refused), N trials at spread phases of the renewal cycle (target: minimum ≥
//!   lease_margin − 0.5 s);
//! - a SIGKILLed guard: VIP gone by the kernel's lifetime, and its lead over the deletion;
//! - deadline → VIP gone, for the real fencing thread with both cores busy (target p99 ≤
//!   50 ms), seen by a separate observer thread over netlink.
//!
//! Writes its section into docs/benchmarks.md. `GUARD_TRIALS` sets N (default 20).

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::net::IpAddr;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hamaster::guard::fence::{Fence, Host};
use hamaster::guard::machine::{Machine, Plan, VipState, WatchdogPlan};
use hamaster::lease::clock::boottime;
use hamaster::lease::LeaseClock;
use hamaster::vip::netlink::{NewAddr, Rtnl};
use support::deadline::{guard_pid, trial, Trial};
use support::etcd::EtcdCluster;
use support::master::Node;

const MARK_START: &str = "<!-- bench:guard:start -->";
const MARK_END: &str = "<!-- bench:guard:end -->";
const DEFAULTS: LeaseClock = LeaseClock {
    ttl: Duration::from_secs(10),
    margin: Duration::from_secs(2),
};

fn main() {
    let trials: u32 = std::env::var("GUARD_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let latency = fence_latency_under_load(200);
    let (silent, killed) = etcd_trials(trials);
    let leads: Vec<f64> = silent.iter().map(|t| t.lead_ms).collect();
    let kill_leads: Vec<f64> = killed.iter().map(|t| t.lead_ms).collect();
    let kill_gone: Vec<f64> = killed.iter().map(|t| t.vip_gone_ms).collect();
    let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    let section = format!(
        "{MARK_START}\n## The guard's deadline (`make bench-guard`, {})\n\n\
         Default lease settings where no corosync runs (lease_ttl 10 s, lease_margin 2 s), three etcd members in their own\n\
         namespaces, the master in a fourth; key deletion timed from etcd's side (`etcdctl watch`),\n\
         the VIP by a 5 ms netlink observer on the master.\n\n\
         | what | trials | min | median | max | target |\n|---|---|---|---|---|---|\n\
         | master link silent (dropped): lead of VIP removal over key deletion | {} | {:.0} ms | {:.0} ms | {:.0} ms | min ≥ 1500 ms |\n\
         | SIGKILLed guard: VIP gone (kernel lifetime) after the kill | {} | {:.0} ms | {:.0} ms | {:.0} ms | before the key |\n\
         | SIGKILLed guard: lead of VIP removal over key deletion | {} | {:.0} ms | {:.0} ms | {:.0} ms | > 0 |\n\n\
         Deadline → VIP gone for the fencing thread itself, both cores busy (two spinning processes),\n\
         {} samples, seen by an observer thread polling netlink every 1 ms: p50 {:.1} ms, p99 {:.1} ms,\n\
         max {:.1} ms (target p99 ≤ 50 ms).\n{MARK_END}\n",
        common::now_utc(),
        leads.len(),
        min(&leads),
        common::median(&leads),
        leads.iter().copied().fold(0.0, f64::max),
        kill_gone.len(),
        min(&kill_gone),
        common::median(&kill_gone),
        kill_gone.iter().copied().fold(0.0, f64::max),
        kill_leads.len(),
        min(&kill_leads),
        common::median(&kill_leads),
        kill_leads.iter().copied().fold(0.0, f64::max),
        latency.len(),
        common::median(&latency),
        common::quantile(&latency, 0.99),
        latency.iter().copied().fold(0.0, f64::max),
    );
    println!("{section}");
    common::write_section(MARK_START, MARK_END, &section);
}

fn etcd_trials(n: u32) -> (Vec<Trial>, Vec<Trial>) {
    let mut etcd = EtcdCluster::new("bgd");
    let a = Node::new(&mut etcd, "na");
    let mut agent = a.agent(&etcd);
    agent.params.remove("lease_ttl");
    agent.params.remove("lease_margin");
    assert_eq!(agent.run("start").code, 0);
    let cycle = DEFAULTS.keepalive_interval();
    let mut silent = Vec::new();
    for i in 0..n {
        let t = trial(&etcd, &a, &agent, cycle * i / n, true, || {
            etcd.silence(&a.ns)
        });
        etcd.unsilence(&a.ns);
        eprintln!("silent trial {i}: {t:?}");
        silent.push(t);
        assert_eq!(agent.run("demote").code, 0);
        support::wait_for(Duration::from_secs(15), || {
            etcd.get(support::deadline::KEY).is_none()
        });
    }
    let mut killed = Vec::new();
    for i in 0..(n / 4).max(3) {
        let t = trial(&etcd, &a, &agent, cycle * i / 5, true, || {
            support::must("kill", &["-KILL", &guard_pid(&agent).to_string()]);
        });
        eprintln!("SIGKILL trial {i}: {t:?}");
        killed.push(t);
        assert_eq!(agent.run("demote").code, 0);
    }
    assert_eq!(agent.run("stop").code, 0);
    (silent, killed)
}

/// Deadline → VIP gone, in milliseconds, for `n` fences of the real fencing thread in a
/// namespace of its own, while two processes keep both cores busy.
fn fence_latency_under_load(n: usize) -> Vec<f64> {
    let pair = support::Pair::new("bgl");
    // In a thread of its own: the namespace's cleanup kills every process whose (main
    // thread's) namespace it is, and this process must not be one of them.
    let node = pair.node.name.clone();
    let peer = pair.peer.name.clone();
    std::thread::spawn(move || fence_latency_in(&node, &peer, n))
        .join()
        .expect("latency thread")
}

fn fence_latency_in(node: &str, peer: &str, n: usize) -> Vec<f64> {
    support::enter_netns(node);
    let load: Vec<Child> = (0..2)
        .map(|_| {
            Command::new("ip")
                .args(["netns", "exec", peer, "sh", "-c", "while :; do :; done"])
                .spawn()
                .expect("load")
        })
        .collect();
    let mut rtnl = Rtnl::open().expect("netlink");
    let index = rtnl
        .link_by_name(support::NODE_IF)
        .expect("netlink")
        .expect("vip0")
        .index;
    let ip: IpAddr = "192.0.2.77".parse().unwrap();
    let mut samples = Vec::new();
    for _ in 0..n {
        let new = NewAddr {
            index,
            ip,
            prefix: 24,
            label: None,
            broadcast: None,
            nodad: false,
            noprefixroute: false,
            preferred_lft: None,
            valid_lft: None,
        };
        // A lease whose deadline is 100 ms from now; the machine raises the VIP at once.
        let now = boottime();
        let plan = Plan {
            clock: DEFAULTS,
            vip: true,
            unit: None,
            watchdog: WatchdogPlan::Off,
        };
        let sent = now + Duration::from_millis(100) - (DEFAULTS.ttl - DEFAULTS.margin);
        let machine = Machine::new(
            plan,
            sent,
            DEFAULTS.ttl,
            Host::new(Some(new), None).expect("host"),
        );
        let deadline = machine.deadline();
        // The orders (settle, persist) go nowhere: only the fence's own path is measured.
        let (orders, _unread) = tokio::sync::mpsc::unbounded_channel();
        let fence = Fence::start(machine, orders).expect("fence");
        assert_eq!(fence.view(|m| m.vip()), VipState::Up);
        let gone = Arc::new(AtomicBool::new(false));
        let observed = observe_removal(ip, gone.clone());
        let at = observed.join().expect("observer");
        samples.push(at.saturating_sub(deadline).as_secs_f64() * 1000.0);
        fence.stop();
        let _ = gone;
    }
    for mut c in load {
        let _ = c.kill();
        let _ = c.wait();
    }
    samples
}

/// A real-time thread that polls the namespace's addresses every millisecond and returns the
/// boot-clock time it first saw `ip` gone.
fn observe_removal(ip: IpAddr, done: Arc<AtomicBool>) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        support::realtime_thread();
        let mut rtnl = Rtnl::open().expect("netlink");
        let limit = boottime() + Duration::from_secs(5);
        loop {
            let now = boottime();
            let present = rtnl
                .addresses(false)
                .map(|a| a.iter().any(|x| x.ip == ip))
                .unwrap_or(true);
            if !present || now > limit {
                done.store(true, Ordering::SeqCst);
                return now;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}
