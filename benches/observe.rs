//! `make bench-observe`: the figures of what the guard shows and sees (issue 19), with real
//! parts:
//! - the promoted guard's memory and CPU over BENCH_IDLE_SECS, not scraped and then with
//!   /metrics scraped every second (TTL 3 s, as the master agent's bench);
//! - conflict → detected: a claiming ARP frame (iputils arping from a host outside the cluster
//!   on the same bridge) seen arriving on the master's interface by a capture in the master's
//!   namespace, to the guard's record of it (status), OBSERVE_TRIALS times;
//! - VIP deleted → failure recorded by Pacemaker: a real 3-node cluster in namespaces, the
//!   promoted monitor at 10 s, `ip addr del` of the VIP on the master until Pacemaker's status
//!   section holds the pushed failure (`api_asyncmon_0`), OBSERVE_TRIALS times.
//!
//! Writes its section into docs/benchmarks.md.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::time::{Duration, Instant};

use common::{cpu_ns, rss_kib};
use support::cluster::{create_topology_with, Etcd as LabEtcd, Lab, VIP};
use support::etcd::EtcdCluster;
use support::master::Node;

const MARK_START: &str = "<!-- bench:observe:start -->";
const MARK_END: &str = "<!-- bench:observe:end -->";
const METRICS: &str = "127.0.0.1:9405";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU (% of one core, scheduler runtime) and RSS (KiB) of `pid` over `secs`.
fn usage(pid: u32, secs: u64) -> (f64, u64) {
    let (t0, n0) = (Instant::now(), cpu_ns(pid));
    std::thread::sleep(Duration::from_secs(secs));
    let ns = cpu_ns(pid).saturating_sub(n0);
    (
        ns as f64 / 1e9 / t0.elapsed().as_secs_f64() * 100.0,
        rss_kib(pid),
    )
}

struct Figures {
    idle: (f64, u64),
    scraped: (f64, u64),
    scrapes: usize,
    detect_ms: Vec<f64>,
    recorded_ms: Vec<f64>,
}

fn guard_and_conflicts(idle_secs: u64, trials: usize) -> (f64, u64, f64, u64, usize, Vec<f64>) {
    let mut etcd = EtcdCluster::new("bo");
    let node = Node::new(&mut etcd, "na");
    let outsider = etcd.node("bout");
    let agent = node.agent(&etcd).param("metrics_address", METRICS);
    assert_eq!(agent.run("start").code, 0);
    let r = agent.run("promote");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let pid = node.guard_status(&agent).expect("guard").pid;
    std::thread::sleep(Duration::from_secs(2));
    let idle = usage(pid, idle_secs);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scraper = {
        let (ns, stop) = (node.ns.name.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let t = Instant::now();
                if support::http_get(&ns, METRICS, "/metrics").is_some_and(|(c, _)| c == 200) {
                    n += 1;
                }
                std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
            }
            n
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let scraped = usage(pid, idle_secs);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let scrapes = scraper.join().unwrap();

    // Conflicts: each trial one claiming frame; the guard's record against the frame's arrival.
    outsider.ip(&["addr", "add", &format!("{VIP}/24"), "dev", "lan0"]);
    let mut detect = Vec::new();
    for _ in 0..trials {
        let before = node
            .guard_status(&agent)
            .and_then(|s| s.vip_conflict)
            .map_or(0, |c| c.frames);
        let cap = support::Capture::start(&node.ns, "lan0");
        let out = support::sh(
            "ip",
            &[
                "netns",
                "exec",
                &outsider.name,
                "arping",
                "-U",
                "-c",
                "1",
                "-I",
                "lan0",
                "-s",
                VIP,
                VIP,
            ],
        );
        assert!(
            out.status.success() || out.status.code() == Some(1),
            "{out:?}"
        );
        let mut st = None;
        support::wait_for(Duration::from_secs(3), || {
            st = node.guard_status(&agent).and_then(|s| s.vip_conflict);
            st.as_ref().is_some_and(|c| c.frames > before)
        });
        let frames = cap.finish();
        let c = st.expect("conflict recorded");
        let mac = outsider.mac("lan0");
        let arrived = frames
            .iter()
            .find(|f| f.bytes.len() >= 42 && f.bytes[12..14] == [8, 6] && f.bytes[22..28] == mac)
            .expect("the claiming frame captured")
            .at;
        let arrived_unix = hamaster::lease::clock::unix_ms() as f64
            - Instant::now().duration_since(arrived).as_secs_f64() * 1000.0;
        detect.push((c.last_unix_ms as f64 - arrived_unix).max(0.0));
        std::thread::sleep(Duration::from_millis(300));
    }
    outsider.ip(&["addr", "del", &format!("{VIP}/24"), "dev", "lan0"]);
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
    (idle.0, idle.1, scraped.0, scraped.1, scrapes, detect)
}

fn asyncmon_recorded(lab: &Lab, i: usize) -> bool {
    let q = lab.on(i, &["cibadmin", "--query", "--scope", "status"]);
    String::from_utf8_lossy(&q.stdout).contains("api_asyncmon_0")
}

fn the_master(lab: &Lab) -> Option<usize> {
    let p = lab.promoted_seen_from(0, "api");
    (p.len() == 1)
        .then(|| lab.index(&p[0]))
        .filter(|&i| lab.nodes[i].ns.holds(VIP))
}

fn deletion_recorded(trials: usize) -> Vec<f64> {
    let lab = Lab::new("bop", 3, LabEtcd::OnNodes);
    create_topology_with(&lab, "master-with-vip", false, "MONITOR_INTERVAL=10s");
    let mut recorded = Vec::new();
    for trial in 0..trials {
        let mut m = None;
        assert!(
            support::wait_for(Duration::from_secs(120), || {
                m = the_master(&lab);
                m.is_some() && !asyncmon_recorded(&lab, 0)
            }),
            "trial {trial}: a master with the VIP:\n{}",
            lab.crm_mon_text()
        );
        let i = m.unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let t = Instant::now();
        let del = lab.on(
            i,
            &["ip", "addr", "del", &format!("{VIP}/24"), "dev", "lan0"],
        );
        assert!(del.status.success(), "{del:?}");
        assert!(
            support::wait_for(Duration::from_secs(10), || asyncmon_recorded(&lab, i)),
            "trial {trial}: not recorded"
        );
        recorded.push(t.elapsed().as_secs_f64() * 1000.0);
        let _ = lab.pcs(0, &["resource", "cleanup", "api"]);
    }
    recorded
}

fn main() {
    support::clean_stale_ocf_dirs();
    let idle_secs: u64 = env_or("BENCH_IDLE_SECS", 60);
    let trials: usize = env_or("OBSERVE_TRIALS", 10);
    let (idle_cpu, idle_rss, cpu, rss, scrapes, detect_ms) = guard_and_conflicts(idle_secs, trials);
    let recorded_ms = deletion_recorded(trials.min(5));
    let f = Figures {
        idle: (idle_cpu, idle_rss),
        scraped: (cpu, rss),
        scrapes,
        detect_ms,
        recorded_ms,
    };
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    let stats = |v: &[f64]| {
        format!(
            "{:.1} | {:.1} | {:.1}",
            common::quantile(v, 0.0),
            common::median(v),
            common::quantile(v, 1.0)
        )
    };
    let section = format!(
        "{MARK_START}\n## Metrics scraped, conflicts, the VIP deleted (`make bench-observe`, {})\n\n\
         The promoted guard (TTL 3 s, the HTTPS test service, a VIP; release build) over {idle_secs} s, \
         first not scraped, then with `GET /metrics` every second ({} scrapes answered):\n\n\
         | measure | not scraped | scraped every 1 s | target |\n|---|---|---|---|\n\
         | guard CPU, scheduler runtime (% of one core) | {:.3} % | {:.3} % | ≤ 0.5 %: {} |\n\
         | guard RSS (MiB) | {:.1} | {:.1} | ≤ 10 MiB: {} |\n\n\
         | what | trials | min (ms) | median (ms) | max (ms) | target |\n|---|---|---|---|---|---|\n\
         | VIP conflict: claiming ARP frame arrives on the master's NIC → the guard has recorded it | {} | {} | ≤ 1000 ms: {} |\n\
         | VIP deleted (`ip addr del`) → failure in Pacemaker's status (real 3-node cluster, promoted monitor 10 s) | {} | {} | ≤ 1000 ms: {} |\n\n\
         The conflict is timed from a capture of the frame in the master's namespace to the time \
         stamp the guard gives its record (ms resolution); the deletion from the `ip addr del` \
         command's return to `api_asyncmon_0` in `cibadmin --query --scope status` on the master \
         (polled, each poll a process of its own). Without the guard's push the failure would \
         wait for the next promoted monitor: up to 10 s here.\n{MARK_END}\n",
        common::now_utc(),
        f.scrapes,
        f.idle.0,
        f.scraped.0,
        met(f.scraped.0 <= 0.5),
        f.idle.1 as f64 / 1024.0,
        f.scraped.1 as f64 / 1024.0,
        met(f.scraped.1 <= 10 * 1024),
        f.detect_ms.len(),
        stats(&f.detect_ms),
        met(common::quantile(&f.detect_ms, 1.0) <= 1000.0),
        f.recorded_ms.len(),
        stats(&f.recorded_ms),
        met(common::quantile(&f.recorded_ms, 1.0) <= 1000.0),
    );
    print!("{section}");
    common::write_section(MARK_START, MARK_END, &section);
}
