//! `make bench` (second part): the master agent against a real 3-member etcd cluster in
//! namespaces, with the HTTPS test service: promote-to-healthy and demote times, monitor
//! time (promoted and unpromoted), and the guard's memory and CPU while idle at TTL 3 s;
//! then promote with one etcd member silent (link down: dropped) or stopped (refused), each
//! position of the endpoint list in turn, against promote with all members alive in the same
//! run. Writes its tables into docs/benchmarks.md.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{cpu_ns, rss_kib};
use support::etcd::EtcdCluster;
use support::master::Node;
use support::{Agent, OcfDir};

const MARK_START: &str = "<!-- bench:master:start -->";
const MARK_END: &str = "<!-- bench:master:end -->";
const SILENT_START: &str = "<!-- bench:silent:start -->";
const SILENT_END: &str = "<!-- bench:silent:end -->";
const KEY: &str = support::API_KEY;

/// The agent command without `ip netns exec` (this process is inside the namespace already),
/// so that its cost is not counted.
fn direct(agent: &Agent, action: &str, interval_ms: u64) -> Command {
    let wrapped = agent.command(action, interval_ms);
    let mut cmd = Command::new(OcfDir::get().agent("master"));
    cmd.arg(action).env_clear();
    for (k, v) in wrapped.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

fn timed(mut cmd: Command, want: i32) -> f64 {
    let t = Instant::now();
    let status = cmd.status().expect("agent");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(status.code(), Some(want), "agent exit code");
    ms
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn main() {
    support::clean_stale_ocf_dirs();
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let idle_secs: u64 = std::env::var("BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut etcd = EtcdCluster::new("bm");
    let node = Node::new(&mut etcd, "na");
    let agent = node.agent(&etcd);
    // Measure from a thread inside the node's namespace (children inherit it); the main
    // thread stays outside, so tearing the namespace down does not take this process with it.
    let table = std::thread::scope(|s| {
        s.spawn(|| measure(&node, &agent, rounds, idle_secs))
            .join()
            .expect("measuring thread")
    });
    print!("{table}");
    common::write_section(MARK_START, MARK_END, &table);
    let silent = std::thread::scope(|s| {
        s.spawn(|| silent_members(&node, &agent, &mut etcd, rounds))
            .join()
            .expect("measuring thread")
    });
    print!("{silent}");
    common::write_section(SILENT_START, SILENT_END, &silent);
}

/// `rounds` promotes (each undone by a demote, and the key gone, before the next): wall ms.
fn promotes(agent: &Agent, etcd: &EtcdCluster, rounds: usize) -> Vec<f64> {
    (0..rounds)
        .map(|_| {
            let ms = timed(direct(agent, "promote", 0), 0);
            timed(direct(agent, "demote", 0), 0);
            assert!(
                support::wait_for(Duration::from_secs(10), || etcd.get(KEY).is_none()),
                "key released after demote"
            );
            ms
        })
        .collect()
}

/// Promote with all members alive, then with member k (k-th in etcd_endpoints) silent and
/// stopped in turn.
fn silent_members(node: &Node, agent: &Agent, etcd: &mut EtcdCluster, rounds: usize) -> String {
    support::enter_netns(&node.ns.name);
    assert_eq!(direct(agent, "start", 0).status().unwrap().code(), Some(0));
    let alive = promotes(agent, etcd, rounds);
    let base = common::median(&alive);
    let mut t = format!(
        "{SILENT_START}\n## promote with an etcd member gone\n\nCommand: `make bench` (BENCH_ROUNDS={rounds} \
         promotes per row, each followed by demote). The same etcd cluster and node as above (lease_ttl 3 s: one \
         attempt on a member is bounded by 1 s); a member is silent when its link is down (requests are dropped, \
         nothing refuses) and stopped when its process is killed (connections are refused). Target: promote with a \
         silent member anywhere in the endpoint list within 200 ms of promote with all members alive. Measured {} \
         on this machine.\n\n\
         | etcd members | median (ms) | max (ms) | median − all alive (ms) | target |\n|---|---|---|---|---|\n\
         | all 3 alive | {base:.1} | {:.1} | | |\n",
        common::now_utc(),
        common::quantile(&alive, 1.0)
    );
    let mut worst = f64::NEG_INFINITY;
    for silent in [true, false] {
        for k in 0..3 {
            if silent {
                etcd.cut_member(k);
            } else {
                etcd.stop_member(k);
            }
            assert!(etcd.wait_writable(Duration::from_secs(30)));
            let v = promotes(agent, etcd, rounds);
            if silent {
                etcd.heal_member(k);
            } else {
                etcd.start_member(k);
            }
            assert!(etcd.wait_healthy(Duration::from_secs(60)));
            let d = common::median(&v) - base;
            if silent {
                worst = worst.max(d);
            }
            t.push_str(&format!(
                "| endpoint {} of 3 {} | {:.1} | {:.1} | {d:+.1} | {} |\n",
                k + 1,
                if silent {
                    "silent (dropped)"
                } else {
                    "stopped (refused)"
                },
                common::median(&v),
                common::quantile(&v, 1.0),
                if !silent {
                    ""
                } else if d <= 200.0 {
                    "≤ 200 ms: met"
                } else {
                    "≤ 200 ms: NOT met"
                }
            ));
        }
    }
    timed(direct(agent, "stop", 0), 0);
    t.push_str(&format!(
        "\nWorst silent member: {worst:+.1} ms against all alive (target ≤ +200 ms: {}).\n{SILENT_END}\n",
        if worst <= 200.0 { "met" } else { "NOT met" }
    ));
    t
}

fn measure(node: &Node, agent: &Agent, rounds: usize, idle_secs: u64) -> String {
    support::enter_netns(&node.ns.name);
    assert_eq!(direct(agent, "start", 0).status().unwrap().code(), Some(0));

    let (mut promote, mut demote, mut mon_promoted, mut mon_unpromoted) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        promote.push(timed(direct(agent, "promote", 0), 0));
        for _ in 0..5 {
            mon_promoted.push(timed(direct(agent, "monitor", 10_000), 8));
        }
        demote.push(timed(direct(agent, "demote", 0), 0));
        for _ in 0..5 {
            mon_unpromoted.push(timed(direct(agent, "monitor", 11_000), 0));
        }
    }

    timed(direct(agent, "promote", 0), 0);
    let pid = node.guard_status(agent).expect("guard").pid;
    std::thread::sleep(Duration::from_secs(2));
    let (t0, c0, n0) = (Instant::now(), cpu_ticks(pid), cpu_ns(pid));
    std::thread::sleep(Duration::from_secs(idle_secs));
    let (elapsed, ticks, ns) = (
        t0.elapsed(),
        cpu_ticks(pid) - c0,
        cpu_ns(pid).saturating_sub(n0),
    );
    let hz = 100.0; // USER_HZ on Linux
    let tick_pct = ticks as f64 / hz / elapsed.as_secs_f64() * 100.0;
    let cpu_pct = ns as f64 / 1e9 / elapsed.as_secs_f64() * 100.0;
    let cpu_ms_per_min = ns as f64 / 1e6 * 60.0 / elapsed.as_secs_f64();
    let rss = rss_kib(pid);
    timed(direct(agent, "demote", 0), 0);
    timed(direct(agent, "stop", 0), 0);

    let mut t = String::new();
    t.push_str(&format!(
        "{MARK_START}\n## master agent\n\nCommand: `make bench` (BENCH_ROUNDS={rounds}: promote, 5 promoted monitors, demote, 5 unpromoted \
         monitors per round; BENCH_IDLE_SECS={idle_secs}). Real 3-member etcd (Debian etcd-server) in namespaces, lease_ttl 3 s, \
         lease_margin 1 s, the HTTPS test service (lab/healthz.py) in command mode, a VIP on a veth; release build; \
         agents spawned from inside the node's namespace. Measured {} on this machine.\n\n\
         | measure | median | p90 | target |\n|---|---|---|---|\n",
        common::now_utc()
    ));
    t.push_str(&format!(
        "| promote → healthy leader (ms, wall) | {:.1} | {:.1} | |\n",
        common::median(&promote),
        common::p90(&promote)
    ));
    t.push_str(&format!(
        "| demote (ms, wall) | {:.1} | {:.1} | |\n",
        common::median(&demote),
        common::p90(&demote)
    ));
    t.push_str(&format!(
        "| monitor, promoted (ms, wall) | {:.2} | {:.2} | ≤ 5 ms: {} |\n",
        common::median(&mon_promoted),
        common::p90(&mon_promoted),
        if common::median(&mon_promoted) <= 5.0 {
            "met"
        } else {
            "NOT met"
        }
    ));
    t.push_str(&format!(
        "| monitor, unpromoted (ms, wall) | {:.2} | {:.2} | |\n",
        common::median(&mon_unpromoted),
        common::p90(&mon_unpromoted)
    ));
    t.push_str(&format!(
        "| guard RSS after {idle_secs} s idle (MiB) | {:.1} | | ≤ 10 MiB: {} |\n",
        rss as f64 / 1024.0,
        if rss <= 10 * 1024 { "met" } else { "NOT met" }
    ));
    t.push_str(&format!(
        "| guard CPU while idle, scheduler runtime (% of one core; ms per minute) | {cpu_pct:.3} % ({cpu_ms_per_min:.0} ms/min) | | ≤ 0.5 %: {} |\n",
        if cpu_pct <= 0.5 { "met" } else { "NOT met" }
    ));
    t.push_str(&format!(
        "| guard CPU while idle, utime+stime at the tick (% of one core; for reference) | {tick_pct:.3} % | | |\n"
    ));
    t.push_str(&format!(
        "\nThe guard renews every lease_ttl/3 = 1 s, checks health every 1 s over a kept-alive HTTPS connection, and \
         otherwise sleeps until its deadline on a CLOCK_BOOTTIME timer. CPU: the scheduler's runtime \
         (/proc/PID/task/*/schedstat) is the measure; the tick-sampled utime+stime is shown beside it.\n{MARK_END}\n"
    ));
    t
}
