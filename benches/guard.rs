//! `make bench-guard`: the guard's promise in figures, at the DEFAULT lease settings
//! (lease_ttl 10, lease_margin 2), against a real three-member etcd in namespaces:
//! - the lead of VIP removal over etcd's deletion of the key, master link silent (dropped,
//!   not refused), N trials at spread phases of the renewal cycle (target: minimum ≥
//!   lease_margin − 0.5 s);
//! - a SIGKILLed guard: VIP gone by the kernel's lifetime, and its lead over the deletion;
//! - deadline → VIP gone, for the real fencing thread with both cores busy (target p99 ≤
//!   50 ms), with the VIP alone and beside 100,000 other addresses in the namespace, seen by a
//!   separate observer thread through rtnetlink events.
//!
//! Writes its section into docs/benchmarks.md. `GUARD_TRIALS` sets N (default 20).

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::net::IpAddr;
use std::process::{Child, Command};
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
/// For the fencing thread's own latency: a margin wide enough that the VIP's kernel lifetime
/// (which must end before the lease's earliest end at the largest slew: at the defaults about
/// a second before the deadline) outlives the deadline, so the removal timed is the fence's.
const FENCE_CLOCK: LeaseClock = LeaseClock {
    ttl: Duration::from_secs(10),
    margin: Duration::from_secs(4),
};

fn main() {
    let trials: u32 = std::env::var("GUARD_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let latency = fence_latency_under_load(150, 0);
    let crowded = fence_latency_under_load(150, 100_000);
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
         Deadline → VIP gone for the fencing thread itself (lease_ttl 10 s, lease_margin 4 s: at the\n\
         defaults the VIP's kernel lifetime ends about a second before the deadline, docs/safety.md),\n\
         both cores busy (two spinning processes),\n\
         seen by an observer thread at real-time priority subscribed to the namespace's address\n\
         events (the deletion timed where it arrives), target p99 ≤ 50 ms:\n\n\
         | addresses in the guard's namespace | samples | p50 | p99 | max |\n|---|---|---|---|---|\n\
         | the VIP alone | {} | {:.1} ms | {:.1} ms | {:.1} ms |\n\
         | the VIP and 100,000 others | {} | {:.1} ms | {:.1} ms | {:.1} ms |\n{MARK_END}\n",
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
        crowded.len(),
        common::median(&crowded),
        common::quantile(&crowded, 0.99),
        crowded.iter().copied().fold(0.0, f64::max),
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
/// namespace of its own, while two processes keep both cores busy, and `bulk` other addresses
/// sit in that namespace (on an interface of their own).
fn fence_latency_under_load(n: usize, bulk: usize) -> Vec<f64> {
    let pair = support::Pair::new("bgl");
    if bulk > 0 {
        add_bulk_addresses(&pair.node, bulk);
    }
    // In a thread of its own: the namespace's cleanup kills every process whose (main
    // thread's) namespace it is, and this process must not be one of them.
    let node = pair.node.name.clone();
    let peer = pair.peer.name.clone();
    std::thread::spawn(move || fence_latency_in(&node, &peer, n))
        .join()
        .expect("latency thread")
}

/// `count` /32 addresses from 198.18.0.0/15 (RFC 2544's benchmarking range) on a veth pair
/// inside the namespace, added by one `ip -batch`.
fn add_bulk_addresses(ns: &support::Netns, count: usize) {
    ns.ip(&[
        "link", "add", "bulk0", "type", "veth", "peer", "name", "bulk1",
    ]);
    ns.ip(&["link", "set", "bulk0", "up"]);
    let batch: String = (0..count)
        .map(|i| {
            let (hi, lo) = (i / 256, i % 256);
            format!(
                "address add 198.{}.{}.{lo}/32 dev bulk0\n",
                18 + hi / 256,
                hi % 256
            )
        })
        .collect();
    let path = std::env::temp_dir().join(format!("{}-bulk.batch", ns.name));
    std::fs::write(&path, batch).unwrap();
    support::must("ip", &["-n", &ns.name, "-batch", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(path);
    let listed = support::must(
        "ip",
        &[
            "-n", &ns.name, "-4", "-o", "address", "show", "dev", "bulk0",
        ],
    );
    assert_eq!(
        listed.lines().count(),
        count,
        "the bulk addresses are there"
    );
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
        // A lease whose deadline is 1.2 s from now; the machine raises the VIP at once, with a
        // kernel lifetime of 2 s.
        let now = boottime();
        let plan = Plan {
            clock: FENCE_CLOCK,
            vip: true,
            known: None,
            watchdog: WatchdogPlan::Off,
            hold: None,
            take_back: false,
            campaign: false,
        };
        let sent = now + Duration::from_millis(1200) - (FENCE_CLOCK.ttl - FENCE_CLOCK.margin);
        let machine = Machine::new(
            plan,
            sent,
            FENCE_CLOCK.ttl,
            Host::new(vec![new], None).expect("host"),
        );
        let deadline = machine.deadline();
        // Subscribed before the raise: the deletion is an event, timed where it arrives.
        let observed = observe_removal(ip);
        // The orders (settle, persist) go nowhere: only the fence's own path is measured.
        let (orders, _unread) = tokio::sync::mpsc::unbounded_channel();
        let fence = Fence::start(machine, orders).expect("fence");
        let at = observed.join().expect("observer");
        // The view is published right after the fencing thread's step.
        let until = boottime() + Duration::from_millis(100);
        while fence.view().vip != VipState::Absent && boottime() < until {
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(fence.view().vip, VipState::Absent, "fenced");
        samples.push(at.saturating_sub(deadline).as_secs_f64() * 1000.0);
        fence.stop();
    }
    for mut c in load {
        let _ = c.kill();
        let _ = c.wait();
    }
    samples
}

/// A real-time thread subscribed to the namespace's address events (no dumps: beside 100,000
/// addresses a dump would be the measurement) that returns the boot-clock time the deletion
/// of `ip` arrived, after its addition.
fn observe_removal(ip: IpAddr) -> std::thread::JoinHandle<Duration> {
    use hamaster::vip::netlink::{Event, Events};
    let events = Events::open().expect("rtnetlink events");
    std::thread::spawn(move || {
        support::realtime_thread();
        let mut buf = Vec::with_capacity(64 * 1024);
        let limit = boottime() + Duration::from_secs(5);
        let mut added = false;
        loop {
            let now = boottime();
            assert!(now < limit, "the VIP was not removed within 5 s");
            match events.read(&mut buf) {
                Ok(list) => {
                    for e in list {
                        match e {
                            Event::AddressAdded(a) if a.ip == ip => added = true,
                            Event::AddressDeleted(a) if a.ip == ip && added => return boottime(),
                            Event::Undecodable => panic!("an event could not be decoded"),
                            _ => {}
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_micros(200))
                }
                Err(e) => panic!("rtnetlink events: {e}"),
            }
        }
    })
}
