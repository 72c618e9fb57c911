//! `make bench-failover`: failover of hamaster (topology master-with-vip) against the IPaddr2
//! baseline (ipaddr2-group-baseline), on the same 3-node lab cluster settings (corosync token
//! 1000 ms; lease_ttl 3 s, lease_margin 1 s): N trials each of a crash and of a partition of
//! the VIP holder with fencing on (the lab's fence agent as a STONITH device, as in
//! `make check`), and a two-node split without fencing (unsafe by design: the demonstration).
//! A client in the switch namespace polls /healthz through the VIP every 20 ms; an observer
//! samples every node every 5 ms; a capture on the switch sees the announcements. Writes its tables into docs/benchmarks.md and
//! the failover timelines (phase by phase, from the nodes' corosync and Pacemaker logs) into
//! docs/failover-timeline-{crash,partition}.svg.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::time::{Duration, Instant};

use support::cluster::{
    create_topology, create_topology_with, first_ok_after, outage, Etcd, HealthClient, Lab, VIP,
};
use support::peers::Peer;
use support::timeline::{first_logged, phase, render_svg, spread, Series, PHASES};

const MARK_START: &str = "<!-- bench:failover:start -->";
const MARK_END: &str = "<!-- bench:failover:end -->";
const KILL_START: &str = "<!-- bench:kill:start -->";
const KILL_END: &str = "<!-- bench:kill:end -->";
const TIMELINE_START: &str = "<!-- bench:timeline:start -->";
const TIMELINE_END: &str = "<!-- bench:timeline:end -->";
const PEERS_START: &str = "<!-- bench:peers:start -->";
const PEERS_END: &str = "<!-- bench:peers:end -->";
/// How long the peers' partition lasts: past vip-manager's takeover at Patroni's defaults
/// (the key's 30 s TTL, then a loop of 10 s), so that every tool has failed over within it.
const PEER_PARTITION: Duration = Duration::from_secs(45);
/// How long every etcd member is down in the peers' etcd outage.
const PEER_ETCD_OUTAGE: Duration = Duration::from_secs(20);

/// Per trial, each of PHASES in ms after the fault (None: does not apply, or not seen).
type Phases = [Option<f64>; PHASES.len()];

#[derive(Default)]
struct Stats {
    outages: Vec<f64>,
    overlaps: Vec<f64>,
    phases: Vec<Phases>,
    /// Per trial with phases: whether the node lost was Pacemaker's DC.
    lost_dc: Vec<bool>,
    /// Per trial whose node was fenced: from the fault to its power cut (ms).
    fences: Vec<f64>,
}

impl Stats {
    fn row(&self, scenario: &str, topology: &str) -> String {
        // Two-node splits measure overlap only: no outage columns for them.
        let ms = |v: f64| {
            if v.is_nan() {
                "-".to_string()
            } else {
                format!("{v:.0}")
            }
        };
        let (med, max) = (
            ms(common::median(&self.outages)),
            ms(common::quantile(&self.outages, 1.0)),
        );
        let ov_max = self.overlaps.iter().copied().fold(0.0, f64::max);
        let ov_trials = self.overlaps.iter().filter(|&&x| x > 0.0).count();
        format!(
            "| {scenario} | {topology} | {} | {med} | {max} | {ov_max:.0} | {ov_trials}/{} |\n",
            self.outages.len().max(self.overlaps.len()),
            self.overlaps.len()
        )
    }
}

fn topology(lab: &Lab, script: &str) {
    create_topology(lab, script, false);
}

fn holder(lab: &Lab, limit: Duration) -> usize {
    lab.vip_holder(limit, None)
        .unwrap_or_else(|| panic!("nobody holds the VIP:\n{}", lab.crm_mon_text()))
}

/// What one fault on the VIP holder left to measure.
struct Trial {
    fault: Instant,
    /// Served again by another node, plus a second.
    end: Instant,
    new_holder: usize,
    /// The node lost was Pacemaker's DC (the survivors elect one before anything is scheduled).
    lost_dc: bool,
    /// From the fault to the node's power cut by its fence (ms), when it was fenced.
    fenced: Option<f64>,
    /// The phases read from logs, the guard and the capture (VIP up and first 200 come from
    /// the observer and the client, after the run).
    phases: Phases,
}

/// The log lines that mark promote invoked and returned: hamaster's promote of api, the
/// baseline's start of its group (base-vip first, base-svc last).
fn promote_lines(script: &str) -> (&'static str, &'static str) {
    if script.starts_with("ipaddr2") {
        (
            "execution of start operation for base-vip on",
            "Result of start operation for base-svc on",
        )
    } else {
        (
            "execution of promote operation for api on",
            "Result of promote operation for api on",
        )
    }
}

/// The announcement frames seen on the switch: ARP (request or reply) whose sender address is
/// the VIP.
fn first_announcement(frames: &[support::Frame], after: Instant) -> Option<Instant> {
    let vip: std::net::Ipv4Addr = VIP.parse().unwrap();
    frames
        .iter()
        .filter(|f| f.at >= after && f.bytes.len() >= 32)
        .find(|f| f.bytes[12..14] == [0x08, 0x06] && f.bytes[28..32] == vip.octets())
        .map(|f| f.at)
}

/// A fault of the crash section.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    Crash,
    Partition,
    /// A partition while the fence device fails its next two power-offs, 3 s each.
    PartitionFailingFence,
}

/// One fault on the VIP holder, then served by another node; then repairs the fault and
/// waits until the cluster is whole again. None when the VIP did not move.
fn trial(lab: &mut Lab, client: &HealthClient, fault: Fault, script: &str) -> Option<Trial> {
    let crash = fault == Fault::Crash;
    let h = holder(lab, Duration::from_secs(60));
    assert!(
        client.wait_ok(Duration::from_secs(30)),
        "client served before the fault"
    );
    std::thread::sleep(Duration::from_secs(2));
    let lost_dc = lab.dc().as_deref() == Some(lab.nodes[h].name.as_str());
    let capture = support::Capture::start(&lab.switch, "br0");
    if fault == Fault::PartitionFailingFence {
        let desk = lab.fence.as_ref().expect("fencing on");
        desk.fail_next(2, Duration::from_secs(3));
    }
    let t = Instant::now();
    let fault_unix = hamaster::lease::clock::unix_ms();
    if crash {
        lab.crash(h);
    } else {
        lab.cut(h);
    }
    let new_holder = lab.vip_holder(Duration::from_secs(60), Some(h));
    let served = new_holder.is_some() && client.wait_ok(Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    let end = Instant::now();
    let frames = capture.finish();
    let result = new_holder.filter(|_| served).map(|n| {
        let ms = |unix: u64| Some(unix.checked_sub(fault_unix)? as f64);
        let survivors: Vec<usize> = (0..lab.nodes.len()).filter(|&i| i != h).collect();
        let earliest = |file: &str, needle: &str, from: u64| {
            survivors
                .iter()
                .filter_map(|&i| first_logged(&lab.log_text(i, file), needle, from))
                .min()
        };
        let membership = earliest("corosync.log", "A new membership (", fault_unix);
        let transition = earliest(
            "pacemaker.log",
            "Calculated transition",
            membership.unwrap_or(fault_unix),
        );
        let (invoked_line, returned_line) = promote_lines(script);
        let log = lab.log_text(n, "pacemaker.log");
        let invoked = first_logged(&log, invoked_line, fault_unix);
        let returned = first_logged(&log, returned_line, invoked.unwrap_or(fault_unix));
        let key = lab
            .guard_leader_since(n)
            .filter(|&k| k >= fault_unix && !script.starts_with("ipaddr2"));
        let wire = first_announcement(&frames, t).map(|a| (a - t).as_secs_f64() * 1000.0);
        let mut phases: Phases = Default::default();
        phases[phase::MEMBERSHIP] = membership.and_then(ms);
        phases[phase::TRANSITION] = transition.and_then(ms);
        phases[phase::INVOKED] = invoked.and_then(ms);
        phases[phase::KEY] = key.and_then(ms);
        phases[phase::ANNOUNCED] = wire;
        phases[phase::RETURNED] = returned.and_then(ms);
        Trial {
            fault: t,
            end,
            new_holder: n,
            lost_dc,
            fenced: None,
            phases,
        }
    });
    let fence_at = lab
        .fenced()
        .iter()
        .find(|f| f.node == lab.nodes[h].name && f.at_unix_ms >= fault_unix)
        .map(|f| (f.at_unix_ms - fault_unix) as f64);
    let fenced = fence_at.is_some();
    let result = result.map(|r| Trial {
        fenced: fence_at,
        ..r
    });
    if crash {
        lab.restart(h);
    } else if fenced {
        // The majority fenced the cut-off node: it is off until brought back.
        lab.bring_back(h);
    } else {
        lab.heal(h);
    }
    assert!(
        lab.wait_online(&lab.node_names(), Duration::from_secs(180)),
        "cluster whole again:\n{}",
        lab.crm_mon_text()
    );
    // Let the rejoined node settle (probes, unpromoted start) before the next fault.
    std::thread::sleep(Duration::from_secs(5));
    result
}

/// N crash and N partition trials of one topology on a fresh 3-node lab, then `failing`'s
/// count of partitions with a fence device that fails twice.
fn three_node(
    script: &str,
    n: usize,
    crash: &mut Stats,
    cut: &mut Stats,
    failing: (usize, &mut Stats),
) {
    three_node_with(script, "", Fencing::Lab, n, crash, cut, failing)
}

/// The STONITH devices of a bench lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fencing {
    /// The lab's fence agent (a power cut the moment it is asked).
    Lab,
    /// fence_ipmilan through each node's simulated BMC (lab/src/bmc.rs).
    Ipmi,
}

/// As three_node, with more `NAME=value` words for the topology script.
fn three_node_with(
    script: &str,
    extra: &str,
    fencing: Fencing,
    n: usize,
    crash: &mut Stats,
    cut: &mut Stats,
    failing: (usize, &mut Stats),
) {
    let mut lab = Lab::new(&format!("f{}", &script[..1]), 3, Etcd::OnNodes);
    match fencing {
        Fencing::Lab => lab.enable_fencing(),
        Fencing::Ipmi => lab.enable_ipmi_fencing(false),
    }
    create_topology_with(&lab, script, false, extra);
    holder(&lab, Duration::from_secs(90));
    let obs = lab.observe_vip();
    let client = HealthClient::start(&lab, VIP, 8443);
    let mut trials = Vec::new();
    let (n_failing, failing) = failing;
    let faults = (0..n)
        .flat_map(|_| [Fault::Crash, Fault::Partition])
        .chain((0..n_failing).map(|_| Fault::PartitionFailingFence));
    for (k, fault) in faults.enumerate() {
        let w = trial(&mut lab, &client, fault, script);
        eprintln!(
            "{script} trial {k} {fault:?}: {:?}",
            w.as_ref().map(|w| (w.end - w.fault, w.lost_dc, w.phases))
        );
        trials.push((fault, w));
    }
    let samples = client.finish();
    let seen = obs.finish();
    seen.assert_complete();
    for (fault, w) in trials {
        let stats = match fault {
            Fault::Crash => &mut *crash,
            Fault::Partition => &mut *cut,
            Fault::PartitionFailingFence => &mut *failing,
        };
        match w {
            Some(mut w) => {
                let t = w.fault;
                if let Some(o) = outage(&samples, t) {
                    stats.outages.push(o.as_secs_f64() * 1000.0);
                }
                stats
                    .overlaps
                    .push(seen.overlap_between(t, w.end).as_secs_f64() * 1000.0);
                let after = |a: Instant| (a - t).as_secs_f64() * 1000.0;
                let up = seen.per_node[w.new_holder]
                    .iter()
                    .find(|s| s.0 >= t && s.1)
                    .map(|s| s.0);
                w.phases[phase::VIP_UP] = up.map(after);
                w.phases[phase::FIRST_200] = first_ok_after(&samples, t).map(after);
                stats.phases.push(w.phases);
                stats.lost_dc.push(w.lost_dc);
                stats.fences.extend(w.fenced);
            }
            None => stats.outages.push(f64::INFINITY),
        }
    }
}

/// Two nodes, two_node: 1, no fencing, etcd witness on the switch side: cut the VIP holder
/// off for 10 s, `n` times; returns the overlap per trial.
fn two_node(script: &str, n: usize, stats: &mut Stats) {
    let lab = Lab::new(&format!("t{}", &script[..1]), 2, Etcd::WithWitness);
    topology(&lab, script);
    holder(&lab, Duration::from_secs(90));
    let obs = lab.observe_vip();
    let mut windows = Vec::new();
    for _ in 0..n {
        let h = holder(&lab, Duration::from_secs(60));
        std::thread::sleep(Duration::from_secs(2));
        let t = Instant::now();
        lab.cut(h);
        std::thread::sleep(Duration::from_secs(10));
        windows.push((t, Instant::now()));
        lab.heal(h);
        assert!(lab.wait_online(&lab.node_names(), Duration::from_secs(180)));
        std::thread::sleep(Duration::from_secs(10));
    }
    let seen = obs.finish();
    seen.assert_complete();
    for (t, end) in windows {
        stats
            .overlaps
            .push(seen.overlap_between(t, end).as_secs_f64() * 1000.0);
    }
}

/// `n` trials of killing the service (SIGKILL) on the node that serves it, on a fresh 3-node
/// lab with `extra` for the topology script; returns the client's outage per trial (ms).
fn service_kill(script: &str, extra: &str, n: usize) -> Vec<f64> {
    let mut lab = Lab::new(&format!("k{}", &script[..1]), 3, Etcd::OnNodes);
    lab.enable_fencing();
    create_topology_with(&lab, script, false, extra);
    holder(&lab, Duration::from_secs(90));
    let client = HealthClient::start(&lab, VIP, 8443);
    // The kill lands at a random point of the monitor's 10 s period (cleanup restarts the
    // monitors, so a fixed pause would kill at the same phase every time). Seeded: replayable.
    let mut rng = hamaster::splitmix::SplitMix64(0x6b696c6c);
    let mut kills = Vec::new();
    for k in 0..n {
        let h = holder(&lab, Duration::from_secs(60));
        assert!(
            client.wait_ok(Duration::from_secs(60)),
            "client served before the kill:\n{}",
            lab.crm_mon_text()
        );
        std::thread::sleep(Duration::from_millis(2000 + rng.next_u64() % 10_000));
        let t = Instant::now();
        assert!(lab.kill_service(h) > 0, "no service to kill on node {h}");
        let back =
            client.wait_failing(Duration::from_secs(5)) && client.wait_ok(Duration::from_secs(60));
        eprintln!(
            "{script} {extra} kill {k}: served again: {back}, {:?}",
            t.elapsed()
        );
        kills.push(t);
        // Fail counts and failed actions off, so that every trial starts alike.
        let _ = lab.pcs(0, &["resource", "cleanup"]);
        std::thread::sleep(Duration::from_secs(5));
    }
    let samples = client.finish();
    kills
        .into_iter()
        .map(|t| outage(&samples, t).map_or(f64::INFINITY, |o| o.as_secs_f64() * 1000.0))
        .collect()
}

/// The service-kill comparison: hamaster with and without push_failures and the IPaddr2 +
/// anything baseline, all with monitor interval 10 s.
fn kill_section(n: usize) -> String {
    let monitor = "MONITOR_INTERVAL=10s UNPROMOTED_INTERVAL=11s";
    let pushed = service_kill(
        "master-with-vip",
        &format!("{monitor} PUSH_FAILURES=true"),
        n,
    );
    let polled = service_kill(
        "master-with-vip",
        &format!("{monitor} PUSH_FAILURES=false"),
        n,
    );
    let base = service_kill("ipaddr2-group-baseline", monitor, n);
    let row = |name: &str, v: &[f64]| {
        format!(
            "| {name} | {} | {:.0} | {:.0} | {:.0} |\n",
            v.len(),
            common::quantile(v, 0.0),
            common::median(v),
            common::quantile(v, 1.0)
        )
    };
    let mut t = format!(
        "{KILL_START}\n## Service killed on the master\n\nCommand: `make bench-failover` (or \
         `BENCH_ONLY=kill`; BENCH_KILL_TRIALS={n}). 3-node lab as above; the service (SIGKILL) dies \
         on the node that serves it, at a random point (seeded) of the 10 s monitor interval \
         (unpromoted 11 s); outage as seen by the client polling through the VIP every 20 ms. Measured {} on this machine.\n\n\
         | configuration | trials | min outage (ms) | median (ms) | max (ms) |\n|---|---|---|---|---|\n",
        common::now_utc()
    );
    t.push_str(&row("hamaster, push_failures=true (default)", &pushed));
    t.push_str(&row(
        "hamaster, push_failures=false (monitor only)",
        &polled,
    ));
    t.push_str(&row("IPaddr2 + ocf:heartbeat:anything baseline", &base));
    let m = common::median(&pushed);
    t.push_str(&format!(
        "\nTarget: median ≤ 2000 ms with push_failures — measured {m:.0} ms ({}).\n{KILL_END}\n",
        if m <= 2000.0 { "met" } else { "NOT met" }
    ));
    t
}

/// The timeline of one scenario: per phase, the trials' values of one topology.
fn per_phase(stats: &Stats) -> Vec<Vec<f64>> {
    (0..PHASES.len())
        .map(|p| stats.phases.iter().filter_map(|t| t[p]).collect())
        .collect()
}

/// "k of n trials (j of them lost the DC; the DC was lost in d of n)".
fn late_transitions(stats: &Stats) -> String {
    let late: Vec<bool> = stats
        .phases
        .iter()
        .map(|p| matches!((p[phase::MEMBERSHIP], p[phase::TRANSITION]), (Some(m), Some(t)) if t - m >= 500.0))
        .collect();
    let both = late.iter().zip(&stats.lost_dc).filter(|(l, d)| **l && **d);
    format!(
        "{} of {} trials ({} of them lost the DC; the DC was lost in {})",
        late.iter().filter(|l| **l).count(),
        late.len(),
        both.count(),
        stats.lost_dc.iter().filter(|d| **d).count()
    )
}

/// The failover timelines (crash, partition): an SVG each under docs/ and a table per
/// scenario, phase by phase, hamaster beside the baseline.
fn timeline_section(ham: [&Stats; 2], base: [&Stats; 2]) -> String {
    let cell = |v: &[f64]| match spread(v) {
        Some((lo, med, hi)) => format!("{med:.0} ({lo:.0}–{hi:.0})"),
        None => "-".into(),
    };
    let mut t = format!(
        "{TIMELINE_START}\n## Failover timeline, phase by phase\n\nCommand: `make bench-failover` \
         (the crash and partition trials above, same run). Per trial, in ms after the fault: \
         corosync's new membership and the DC's transition from the surviving nodes' corosync.log \
         and pacemaker.log (time stamps in ms), promote invoked and returned from the new \
         holder's pacemaker.log (the baseline: its group's start of base-vip, and base-svc's \
         start returned), the leader key from the new master's guard (when its transaction \
         that took the key returned), VIP up from the 5 ms observer, the first ARP with the VIP as sender from \
         a capture on the switch's bridge, the first 200 from the client. Figures: median (min–max). \
         Measured {} on this machine.\n",
        common::now_utc()
    );
    for (k, scenario) in ["crash", "partition"].iter().enumerate() {
        let (h, b) = (per_phase(ham[k]), per_phase(base[k]));
        let file = format!("failover-timeline-{scenario}.svg");
        let svg = render_svg(
            &format!(
                "{} of the VIP holder, 3-node lab (token 1000, lease_ttl 3): ms after the fault",
                if k == 0 { "Crash" } else { "Partition" }
            ),
            &PHASES,
            &[
                Series {
                    name: format!("hamaster ({} trials)", ham[k].phases.len()),
                    colour: "#1f6fb4",
                    per_phase: h.clone(),
                },
                Series {
                    name: format!("IPaddr2 baseline ({} trials)", base[k].phases.len()),
                    colour: "#c8402a",
                    per_phase: b.clone(),
                },
            ],
        );
        std::fs::write(format!("{}/docs/{file}", env!("CARGO_MANIFEST_DIR")), svg)
            .expect("write the timeline");
        t.push_str(&format!(
            "\n### {scenario}\n\n![failover timeline, {scenario}]({file})\n\n\
             | phase | hamaster (ms) | IPaddr2 baseline (ms) |\n|---|---|---|\n"
        ));
        for (p, phase) in PHASES.iter().enumerate() {
            t.push_str(&format!(
                "| {phase} | {} | {} |\n",
                cell(&h[p]),
                cell(&b[p])
            ));
        }
        t.push_str(&format!(
            "\nThe DC's transition came 500 ms or more after the membership in: hamaster {}, \
             the baseline {}.\n",
            late_transitions(ham[k]),
            late_transitions(base[k])
        ));
    }
    t.push_str(&format!("{TIMELINE_END}\n"));
    t
}

/// The table's head and its crash and partition rows, hamaster beside the baseline; the
/// medians (hamaster crash, baseline crash, hamaster partition, baseline partition).
fn crash_and_cut_rows(t: &mut String, ham: [&Stats; 2], base: [&Stats; 2]) -> (f64, f64, f64, f64) {
    t.push_str(
        "| scenario | topology | trials | median outage (ms) | max outage (ms) | max overlap (ms) | \
         trials with overlap |\n|---|---|---|---|---|---|---|\n",
    );
    for (k, scenario) in [
        "crash of the VIP holder (3 nodes)",
        "partition of the VIP holder (3 nodes)",
    ]
    .iter()
    .enumerate()
    {
        t.push_str(&ham[k].row(scenario, "hamaster"));
        t.push_str(&base[k].row(scenario, "IPaddr2 baseline"));
    }
    let m = |s: &Stats| common::median(&s.outages);
    (m(ham[0]), m(base[0]), m(ham[1]), m(base[1]))
}

/// A corosync + hamaster profile for docs/tuning.md.
struct Profile {
    name: &'static str,
    /// totem settings (LAB_TOTEM).
    totem: &'static str,
    /// For the topology script: lease and monitor settings.
    script: &'static str,
}

const PROFILES: [Profile; 3] = [
    Profile {
        name: "RHEL defaults: corosync token 3000 (+650 per node over 2), hamaster's default lease (follows corosync: 8 s), monitors 10 s/11 s",
        totem: "token: 3000",
        script: "LEASE_TTL= LEASE_MARGIN= MONITOR_INTERVAL=10s UNPROMOTED_INTERVAL=11s",
    },
    Profile {
        name: "lab: token 1000 (+650 per node over 2), lease_ttl 3, lease_margin 1, monitors 2 s/3 s",
        totem: "token: 1000",
        script: "LEASE_TTL=3 LEASE_MARGIN=1",
    },
    Profile {
        name: "tuned: token 500, token_coefficient 0, lease_ttl 2, lease_margin 1, monitors 2 s/3 s",
        totem: "token: 500\n  token_coefficient: 0",
        script: "LEASE_TTL=2 LEASE_MARGIN=1",
    },
];

/// `n` crashes of the master's node per profile: the outage the client sees.
fn tuning_section(n: usize) -> String {
    const START: &str = "<!-- bench:tuning:start -->";
    const END: &str = "<!-- bench:tuning:end -->";
    let mut t = format!(
        "{START}\n## Crash failover by profile (docs/tuning.md)\n\nCommand: `BENCH_ONLY=tuning make \
         bench-failover` (BENCH_TUNING_TRIALS={n}). 3-node lab, master-with-vip, etcd on every node; \
         the master's node crashes; outage as seen by the client polling through the VIP every \
         20 ms. Measured {} on this machine.\n\n\
         | profile | trials | min outage (ms) | median (ms) | max (ms) |\n|---|---|---|---|---|\n",
        common::now_utc()
    );
    for (k, p) in PROFILES.iter().enumerate() {
        // Read by the lab when it writes corosync.conf; nothing else runs meanwhile.
        std::env::set_var("LAB_TOTEM", p.totem);
        let mut lab = Lab::new(&format!("p{k}"), 3, Etcd::OnNodes);
        lab.enable_fencing();
        create_topology_with(&lab, "master-with-vip", false, p.script);
        holder(&lab, Duration::from_secs(90));
        let client = HealthClient::start(&lab, VIP, 8443);
        let mut faults = Vec::new();
        for i in 0..n {
            let w = trial(&mut lab, &client, Fault::Crash, "master-with-vip");
            eprintln!(
                "profile {k} crash {i}: {:?}",
                w.as_ref().map(|w| w.end - w.fault)
            );
            faults.push(w.map(|w| w.fault));
        }
        let samples = client.finish();
        let v: Vec<f64> = faults
            .into_iter()
            .map(|f| {
                f.and_then(|t| outage(&samples, t))
                    .map_or(f64::INFINITY, |o| o.as_secs_f64() * 1000.0)
            })
            .collect();
        t.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} |\n",
            p.name,
            v.len(),
            common::quantile(&v, 0.0),
            common::median(&v),
            common::quantile(&v, 1.0)
        ));
    }
    std::env::remove_var("LAB_TOTEM");
    t.push_str(&format!("{END}\n"));
    common::write_section(START, END, &t);
    t
}

const IPMI_START: &str = "<!-- bench:ipmi:start -->";
const IPMI_END: &str = "<!-- bench:ipmi:end -->";

/// What a real power fence adds: crash and partition of the VIP holder with the lab's fence
/// (a power cut the moment it is asked) beside fence_ipmilan through each node's simulated BMC
/// (ipmitool over RMCP+, fence_ipmilan's power_wait and status polls), hamaster and the IPaddr2
/// baseline on the same settings.
fn ipmi_section(n: usize) -> String {
    let runs = [
        (
            "master-with-vip",
            Fencing::Lab,
            "hamaster",
            "the lab's fence agent",
        ),
        (
            "master-with-vip",
            Fencing::Ipmi,
            "hamaster",
            "fence_ipmilan, simulated BMC",
        ),
        (
            "ipaddr2-group-baseline",
            Fencing::Ipmi,
            "IPaddr2 baseline",
            "fence_ipmilan, simulated BMC",
        ),
    ];
    let mut t = format!(
        "{IPMI_START}\n## Failover with fence_ipmilan: what a real power fence adds\n\nCommand: \
         `BENCH_ONLY=ipmi make bench-failover` (BENCH_IPMI_TRIALS={n}). 3-node lab as above (token \
         1000 ms, lease_ttl 3 s, lease_margin 1 s); fencing by the lab's fence agent, or by \
         cib/fence-ipmilan.sh: Debian's fence_ipmilan 4.12 and ipmitool over RMCP+ to one OpenIPMI \
         ipmi_sim per node, whose power off cuts the node (every process, its links). Fence = \
         from the fault to the node's power cut; outage and overlap as above. Measured {} on this \
         machine.\n\n\
         | scenario | topology | fencing | trials | median fence (ms) | median outage (ms) | max \
         outage (ms) | max overlap (ms) |\n|---|---|---|---|---|---|---|---|\n",
        common::now_utc()
    );
    for (script, fencing, name, device) in runs {
        let (mut crash, mut cut) = (Stats::default(), Stats::default());
        three_node_with(
            script,
            "",
            fencing,
            n,
            &mut crash,
            &mut cut,
            (0, &mut Stats::default()),
        );
        for (scenario, st) in [
            ("crash of the VIP holder", &crash),
            ("partition of the VIP holder", &cut),
        ] {
            let ov = st.overlaps.iter().copied().fold(0.0, f64::max);
            t.push_str(&format!(
                "| {scenario} | {name} | {device} | {} | {:.0} | {:.0} | {:.0} | {ov:.0} |\n",
                st.outages.len(),
                common::median(&st.fences),
                common::median(&st.outages),
                common::quantile(&st.outages, 1.0),
            ));
        }
    }
    t.push_str(
        "\nThe power is cut as soon with fence_ipmilan as with the lab's agent; what it adds is \
         its confirmation (after `chassis power off` it waits power_wait, 2 s, and polls the \
         status until the BMC says off), and Pacemaker promotes only then: the outage grows by \
         that much, for hamaster and the baseline alike.\n",
    );
    t.push_str(&format!("{IPMI_END}\n"));
    common::write_section(IPMI_START, IPMI_END, &t);
    t
}

const RHEL_START: &str = "<!-- bench:rhel:start -->";
const RHEL_END: &str = "<!-- bench:rhel:end -->";

/// Crash and partition at RHEL's settings: corosync's default token (3000 ms), hamaster's
/// default lease (no lease setting given), the default monitor intervals — hamaster beside the
/// IPaddr2 baseline on the same lab settings.
fn rhel_section(n: usize) -> String {
    std::env::set_var("LAB_TOTEM", "token: 3000");
    let (mut ham_crash, mut ham_cut, mut base_crash, mut base_cut) = Default::default();
    // Empty words: the script passes no lease setting, so the agent's defaults apply.
    three_node_with(
        "master-with-vip",
        "LEASE_TTL= LEASE_MARGIN= MONITOR_INTERVAL=10s UNPROMOTED_INTERVAL=11s",
        Fencing::Lab,
        n,
        &mut ham_crash,
        &mut ham_cut,
        (0, &mut Stats::default()),
    );
    three_node_with(
        "ipaddr2-group-baseline",
        "MONITOR_INTERVAL=10s",
        Fencing::Lab,
        n,
        &mut base_crash,
        &mut base_cut,
        (0, &mut Stats::default()),
    );
    std::env::remove_var("LAB_TOTEM");
    let mut t = format!(
        "{RHEL_START}\n## Failover at RHEL's defaults: hamaster vs the IPaddr2 baseline\n\nCommand: \
         `BENCH_ONLY=rhel make bench-failover` (BENCH_RHEL_TRIALS={n}). 3-node lab, corosync token 3000 ms \
         (corosync 3's default; +650 ms per node over 2), etcd member on every node; hamaster = \
         cib/master-with-vip.sh with the default lease settings and monitors 10 s/11 s; baseline = \
         cib/ipaddr2-group-baseline.sh with monitors 10 s. Outage and overlap measured as in the table \
         above. Measured {} on this machine.\n\n\
\n",
        common::now_utc()
    );
    let (hc, bc, hp, bp) =
        crash_and_cut_rows(&mut t, [&ham_crash, &ham_cut], [&base_crash, &base_cut]);
    // What each resource adds once Pacemaker has decided: from promote invoked (the
    // baseline's group start) to the first 200, and hamaster's wait for the old lease.
    let between = |st: &Stats, from: usize, to: usize| -> Vec<f64> {
        st.phases
            .iter()
            .filter_map(|p| Some(p[to]? - p[from]?))
            .collect()
    };
    let added = |a: &Stats, b: &Stats| {
        let mut v = between(a, phase::INVOKED, phase::FIRST_200);
        v.extend(between(b, phase::INVOKED, phase::FIRST_200));
        common::median(&v)
    };
    let mut lease_wait = between(&ham_crash, phase::INVOKED, phase::KEY);
    lease_wait.extend(between(&ham_cut, phase::INVOKED, phase::KEY));
    t.push_str(&format!(
        "\nhamaster's median minus the baseline's: crash {:+.0} ms, partition {:+.0} ms. Both depend \
         mostly on Pacemaker: its transition comes about 0 or 1 s after the membership (docs/tuning.md). \
         Once promote is invoked (the baseline: its group's start), the first 200 follows after a median of \
         {:.0} ms for hamaster and {:.0} ms for the baseline (crash and partition trials together); \
         hamaster's key was taken {:.0}–{:.0} ms after promote was invoked: no wait for the old lease.\n{RHEL_END}\n",
        hc - bc,
        hp - bp,
        added(&ham_crash, &ham_cut),
        added(&base_crash, &base_cut),
        common::quantile(&lease_wait, 0.0),
        common::quantile(&lease_wait, 1.0),
    ));
    common::write_section(RHEL_START, RHEL_END, &t);
    t
}

/// A tool in the peers' table: hamaster (fencing on, as supported) or a peer.
#[derive(Clone, Copy)]
enum Tool {
    Hamaster,
    Peer(Peer),
}

impl Tool {
    fn label(&self) -> String {
        match self {
            Tool::Hamaster => "hamaster (master-with-vip, fencing on, lease 3/1 s)".into(),
            Tool::Peer(p) => p.label(),
        }
    }

    fn faults(&self) -> Vec<PeerFault> {
        let mut f = vec![
            PeerFault::Crash,
            PeerFault::Partition,
            PeerFault::ServiceKilled,
        ];
        if matches!(self, Tool::Hamaster | Tool::Peer(Peer::VipManager)) {
            f.push(PeerFault::EtcdOutage);
        }
        f
    }

    /// The tool (and its service) on node `i` again after the node came back.
    fn start_on(&self, lab: &mut Lab, i: usize) {
        if let Tool::Peer(p) = self {
            p.start_on(lab, i);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum PeerFault {
    Crash,
    Partition,
    ServiceKilled,
    EtcdOutage,
}

impl PeerFault {
    fn label(&self) -> String {
        match self {
            PeerFault::Crash => "crash of the VIP holder".into(),
            PeerFault::Partition => format!(
                "VIP holder cut off for {} s (port off the bridge, carrier kept)",
                PEER_PARTITION.as_secs()
            ),
            PeerFault::ServiceKilled => "service SIGKILLed on the VIP holder".into(),
            PeerFault::EtcdOutage => format!(
                "every etcd member stopped for {} s",
                PEER_ETCD_OUTAGE.as_secs()
            ),
        }
    }
}

/// `n` trials of each fault the tool has on a fresh 3-node lab: outage (the client's) and
/// overlap (from the fault until the lab is whole again) per fault.
fn peer_trials(tool: Tool, tag: &str, n: usize) -> Vec<(PeerFault, Stats)> {
    // Read by the lab when it starts etcd's members; nothing else runs meanwhile.
    if let Tool::Peer(Peer::VipManager) = tool {
        std::env::set_var("LAB_ETCD_V2", "1");
    }
    let mut lab = Lab::new(tag, 3, Etcd::OnNodes);
    match tool {
        Tool::Hamaster => {
            lab.enable_fencing();
            create_topology_with(&lab, "master-with-vip", false, "");
        }
        Tool::Peer(p) => {
            for i in 0..3 {
                p.start_on(&mut lab, i);
            }
        }
    }
    holder(&lab, Duration::from_secs(120));
    let obs = lab.observe_vip();
    let client = HealthClient::start(&lab, VIP, 8443);
    let label = tool.label();
    let mut windows = Vec::new();
    for k in 0..n {
        for fault in tool.faults() {
            let h = holder(&lab, Duration::from_secs(120));
            assert!(
                client.wait_ok(Duration::from_secs(120)),
                "{label}: served before {fault:?}"
            );
            std::thread::sleep(Duration::from_secs(2));
            let t = Instant::now();
            let fault_unix = hamaster::lease::clock::unix_ms();
            match fault {
                PeerFault::Crash => lab.crash(h),
                PeerFault::Partition => lab.detach(h),
                PeerFault::ServiceKilled => {
                    assert!(lab.kill_service(h) > 0, "{label}: no service on node {h}");
                }
                PeerFault::EtcdOutage => (0..3).for_each(|i| lab.stop_etcd(i)),
            }
            match fault {
                PeerFault::Partition => std::thread::sleep(PEER_PARTITION),
                PeerFault::EtcdOutage => std::thread::sleep(PEER_ETCD_OUTAGE),
                _ => {
                    client.wait_failing(Duration::from_secs(5));
                    client.wait_ok(Duration::from_secs(90));
                }
            }
            match fault {
                PeerFault::Crash => {
                    lab.restart(h);
                    tool.start_on(&mut lab, h);
                }
                PeerFault::Partition => {
                    lab.reattach(h);
                    let fenced = lab
                        .fenced()
                        .iter()
                        .any(|f| f.node == lab.nodes[h].name && f.at_unix_ms >= fault_unix);
                    if fenced {
                        lab.bring_back(h);
                        tool.start_on(&mut lab, h);
                    }
                }
                PeerFault::ServiceKilled => {}
                PeerFault::EtcdOutage => {
                    (0..3).for_each(|i| lab.start_etcd(i));
                    assert!(lab.etcd.wait_healthy(Duration::from_secs(60)));
                }
            }
            if matches!(tool, Tool::Hamaster) {
                assert!(
                    lab.wait_online(&lab.node_names(), Duration::from_secs(180)),
                    "cluster whole again:\n{}",
                    lab.crm_mon_text()
                );
                let _ = lab.pcs(0, &["resource", "cleanup"]);
            }
            let served = client.wait_ok(Duration::from_secs(120));
            std::thread::sleep(Duration::from_secs(5));
            let settled = Instant::now();
            eprintln!(
                "{label} trial {k} {fault:?}: served again {served}, {:?}",
                settled - t
            );
            windows.push((fault, t, settled));
        }
    }
    std::env::remove_var("LAB_ETCD_V2");
    let samples = client.finish();
    let seen = obs.finish();
    seen.assert_complete();
    let mut per: Vec<(PeerFault, Stats)> = tool
        .faults()
        .into_iter()
        .map(|f| (f, Stats::default()))
        .collect();
    for (fault, t, settled) in windows {
        // This trial's own samples only: a trial without a failure must not borrow the next
        // trial's outage.
        let own: Vec<(Instant, bool)> =
            samples.iter().copied().filter(|s| s.0 <= settled).collect();
        let failed = own.iter().any(|s| s.0 >= t && !s.1);
        let out = match outage(&own, t) {
            Some(o) => o.as_secs_f64() * 1000.0,
            None if failed => f64::INFINITY,
            None => 0.0,
        };
        let stats = &mut per.iter_mut().find(|(f, _)| *f == fault).unwrap().1;
        stats.outages.push(out);
        stats
            .overlaps
            .push(seen.overlap_between(t, settled).as_secs_f64() * 1000.0);
    }
    per
}

/// The peers' table: hamaster and the tools users would pick instead, the same lab, client,
/// faults and measures, one run.
fn peers_section(n: usize) -> String {
    let tools = [
        (Tool::Hamaster, "qh"),
        (Tool::Peer(Peer::Keepalived { advert_ms: 1000 }), "qk"),
        (Tool::Peer(Peer::Keepalived { advert_ms: 100 }), "qs"),
        (Tool::Peer(Peer::VipManager), "qv"),
    ];
    let mut t = format!(
        "{PEERS_START}\n## The peers side by side\n\nCommand: `BENCH_ONLY=peers make bench-failover` \
         (BENCH_PEER_TRIALS={n}). The same 3-node lab for every tool (namespaces on one bridge, an etcd member on \
         every node, corosync token 1000 ms, Pacemaker idle under the peers), the same service (lab/healthz.py on \
         every node for the peers: under keepalived restarted 100 ms after it dies, as systemd's Restart=always \
         would; under the elector restarted at its next loop, as Patroni restarts postgres), the same client \
         (/healthz through the VIP every 20 ms) and the same faults, {n} trial(s) each. Outage: last 200 before → \
         first 200 after (0: never failed). Overlap: time two nodes held the VIP at once, from the fault until the \
         lab was whole again. keepalived: every node BACKUP with nopreempt, priorities 150/100/50, a track_script \
         (curl, every second); vip-manager: its defaults, following a key kept the way Patroni keeps it \
         (lab/leader_elector.py: ttl 30 s, loop_wait 10 s, retry_timeout 10 s). Measured {} on this machine.\n\n\
         | tool | fault | trials | median outage (ms) | max outage (ms) | max overlap (ms) | trials with overlap |\n\
         |---|---|---|---|---|---|---|\n",
        common::now_utc()
    );
    // BENCH_PEERS=qk,qv (the tags above) runs some of them: a table of part of the tools.
    let only = std::env::var("BENCH_PEERS").unwrap_or_default();
    for (tool, tag) in tools {
        if !only.is_empty() && !only.split(',').any(|t| t == tag) {
            continue;
        }
        for (fault, stats) in peer_trials(tool, tag, n) {
            t.push_str(&stats.row(&tool.label(), &fault.label()));
        }
    }
    t.push_str(&format!("{PEERS_END}\n"));
    t
}

fn main() {
    support::clean_stale_ocf_dirs();
    if std::env::var("BENCH_ONLY").as_deref() == Ok("peers") {
        let n = std::env::var("BENCH_PEER_TRIALS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3);
        let peers = peers_section(n);
        print!("{peers}");
        common::write_section(PEERS_START, PEERS_END, &peers);
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("rhel") {
        let n = std::env::var("BENCH_RHEL_TRIALS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        print!("{}", rhel_section(n));
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("ipmi") {
        let n = std::env::var("BENCH_IPMI_TRIALS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        print!("{}", ipmi_section(n));
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("tuning") {
        let n = std::env::var("BENCH_TUNING_TRIALS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        print!("{}", tuning_section(n));
        return;
    }
    let kill_trials: usize = std::env::var("BENCH_KILL_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    // BENCH_ONLY=kill or BENCH_ONLY=crash runs one half (the crash half is the long one).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    if only != "crash" {
        let kill = kill_section(kill_trials);
        print!("{kill}");
        common::write_section(KILL_START, KILL_END, &kill);
    }
    if only == "kill" {
        return;
    }
    let n: usize = std::env::var("BENCH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let n2: usize = std::env::var("BENCH_SPLIT_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let n_failing: usize = std::env::var("BENCH_FAILING_FENCE_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let (mut ham_crash, mut ham_cut, mut base_crash, mut base_cut) = Default::default();
    let (mut ham_failing, mut base_failing) = (Stats::default(), Stats::default());
    three_node(
        "master-with-vip",
        n,
        &mut ham_crash,
        &mut ham_cut,
        (n_failing, &mut ham_failing),
    );
    three_node(
        "ipaddr2-group-baseline",
        n,
        &mut base_crash,
        &mut base_cut,
        (n_failing, &mut base_failing),
    );
    let (mut ham_split, mut base_split) = (Stats::default(), Stats::default());
    two_node("master-with-vip", n2, &mut ham_split);
    two_node("ipaddr2-group-baseline", n2, &mut base_split);

    let all_zero = [&ham_crash, &ham_cut, &ham_failing, &ham_split]
        .iter()
        .all(|s| s.overlaps.iter().all(|&x| x == 0.0));
    let mut t = format!(
        "{MARK_START}\n## Failover: hamaster vs the IPaddr2 baseline\n\nCommand: `make bench-failover` (BENCH_TRIALS={n}, \
         BENCH_SPLIT_TRIALS={n2}, BENCH_FAILING_FENCE_TRIALS={n_failing}). Lab clusters in namespaces (Debian corosync 3.1 + pacemaker 2.1, token 1000 ms, \
         fencing on: the lab's fence agent as a STONITH device, stonith-enabled=true), etcd member on every node; hamaster = cib/master-with-vip.sh with lease_ttl 3 s, lease_margin 1 s; \
         baseline = cib/ipaddr2-group-baseline.sh (IPaddr2 + ocf:heartbeat:anything in a group). Outage = last 200 before → \
         first 200 after, seen by a client polling /healthz through the VIP every 20 ms. Overlap = time two nodes may have \
         held the VIP at once, from the kernel's address events on each node (each hold widened to its proven bounds). \
         Measured {} on this machine.\n\n\
\n",
        common::now_utc()
    );
    let (hc, bc, hp, bp) =
        crash_and_cut_rows(&mut t, [&ham_crash, &ham_cut], [&base_crash, &base_cut]);
    let failing = "partition of the VIP holder, fence device failing twice (3 s each)";
    t.push_str(&ham_failing.row(failing, "hamaster"));
    t.push_str(&base_failing.row(failing, "IPaddr2 baseline"));
    t.push_str(&ham_split.row("two-node split, no fencing, 10 s", "hamaster"));
    t.push_str(&base_split.row("two-node split, no fencing, 10 s", "IPaddr2 baseline"));
    t.push_str(&format!(
        "\nTargets: hamaster's median outage no worse than the baseline's + 500 ms — crash {hc:.0} vs {bc:.0} ms ({}), \
         partition {hp:.0} vs {bp:.0} ms ({}); 0 ms overlap in every hamaster trial ({}); the baseline overlaps in the \
         two-node split ({}).\n{MARK_END}\n",
        if hc <= bc + 500.0 { "met" } else { "NOT met" },
        if hp <= bp + 500.0 { "met" } else { "NOT met" },
        if all_zero { "met" } else { "NOT met" },
        if base_split.overlaps.iter().any(|&x| x > 0.0) { "yes" } else { "no" },
    ));
    print!("{t}");
    common::write_section(MARK_START, MARK_END, &t);
    let timeline = timeline_section([&ham_crash, &ham_cut], [&base_crash, &base_cut]);
    print!("{timeline}");
    common::write_section(TIMELINE_START, TIMELINE_END, &timeline);
    if only.is_empty() {
        let peers = peers_section(3);
        print!("{peers}");
        common::write_section(PEERS_START, PEERS_END, &peers);
    }
}
