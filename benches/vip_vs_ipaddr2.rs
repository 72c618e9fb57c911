//! `make bench`: the vip agent against ocf:heartbeat:IPaddr2, alternating, in the same pair
//! of namespaces and the same run. Measures wall and CPU time of start, monitor and stop, and
//! the time from invoking start to the first announcement seen on the peer end of the veth.
//! Writes its table into docs/benchmarks.md. Not a test: these machines are noisy, so it
//! reports ratios measured side by side rather than asserting absolute times.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::process::Command;
use std::time::{Duration, Instant};

use pnet_packet::arp::ArpPacket;
use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use pnet_packet::Packet;
use support::{Capture, OcfDir, Pair, NODE_IF, PEER_IF};

const IPADDR2: &str = "/usr/lib/ocf/resource.d/heartbeat/IPaddr2";
const OURS_VIP: &str = "192.0.2.10";
const PEER_VIP: &str = "192.0.2.11";
const MARK_START: &str = "<!-- bench:vip:start -->";
const MARK_END: &str = "<!-- bench:vip:end -->";

fn main() {
    if std::env::args().any(|a| a == "--inner") {
        return inner();
    }
    support::clean_stale_ocf_dirs();
    let iterations: u32 = std::env::var("BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let pair = Pair::new("bench");
    let agent = OcfDir::get().agent("vip");
    // The measuring loop itself runs inside the node namespace, so that neither agent pays
    // for `ip netns exec` in its figures.
    let status = Command::new("ip")
        .args(["netns", "exec", &pair.node.name])
        .arg(std::env::current_exe().unwrap())
        .arg("--inner")
        .env("BENCH_PEER_NS", &pair.peer.name)
        .env("BENCH_AGENT", &agent)
        .env("BENCH_ITERS", iterations.to_string())
        .status()
        .expect("run inner bench");
    drop(pair);
    std::process::exit(status.code().unwrap_or(1));
}

/// Wall and CPU (user + system, including waited-for children) of one agent call.
struct Measured {
    code: i32,
    wall: Duration,
    cpu: Duration,
}

// The child is reaped by wait4 below, which also returns its resource usage.
#[allow(clippy::zombie_processes)]
fn measured(mut cmd: Command) -> Measured {
    let started = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(rc, pid, "wait4");
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Measured {
        code,
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Ours,
    Ipaddr2,
}

fn agent_cmd(which: Which, action: &str, interval_ms: u64) -> Command {
    let (path, ip) = match which {
        Which::Ours => (std::env::var("BENCH_AGENT").unwrap(), OURS_VIP),
        Which::Ipaddr2 => (IPADDR2.to_string(), PEER_VIP),
    };
    let mut cmd = Command::new(path);
    cmd.arg(action)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("OCF_ROOT", "/usr/lib/ocf")
        .env("OCF_RESOURCE_INSTANCE", "bench-vip")
        .env(
            "HAMASTER_RUN_DIR",
            std::env::temp_dir().join("hamaster-bench-run"),
        )
        .env("OCF_RESKEY_CRM_meta_interval", interval_ms.to_string())
        .env("OCF_RESKEY_CRM_meta_timeout", "20000")
        .env("OCF_RESKEY_ip", ip)
        .env("OCF_RESKEY_cidr_netmask", "24")
        .env("OCF_RESKEY_nic", NODE_IF)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

#[derive(Default)]
struct Samples {
    start_wall: Vec<f64>,
    start_cpu: Vec<f64>,
    first_frame: Vec<f64>,
    monitor_wall: Vec<f64>,
    monitor_cpu: Vec<f64>,
    stop_wall: Vec<f64>,
    stop_cpu: Vec<f64>,
    floor_wall: Vec<f64>,
    floor_cpu: Vec<f64>,
    rust_floor_wall: Vec<f64>,
}

/// `/bin/true` with the agent's environment: what any program costs to start here.
fn exec_floor(agent: &Command) -> Command {
    same_env(std::path::Path::new("/bin/true"), agent)
}

/// `program` with the agent's environment, its output discarded.
fn same_env(program: &std::path::Path, agent: &Command) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in agent.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd
}

/// examples/exec_floor.rs as `make bench` builds it (release profile), when it is there.
fn rust_floor() -> Option<std::path::PathBuf> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/examples/exec_floor");
    path.exists().then_some(path)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn first_arp_after(frames: &[support::Frame], ip: &str, t0: Instant) -> Option<Duration> {
    frames.iter().find_map(|f| {
        let eth = EthernetPacket::new(&f.bytes)?;
        if eth.get_ethertype() != EtherTypes::Arp || f.at < t0 {
            return None;
        }
        let arp = ArpPacket::new(eth.payload())?;
        (arp.get_sender_proto_addr().to_string() == ip).then(|| f.at - t0)
    })
}

fn one_round(which: Which, peer: &support::Netns, s: &mut Samples) {
    let ip = if which == Which::Ours {
        OURS_VIP
    } else {
        PEER_VIP
    };
    let cap = Capture::start(peer, PEER_IF);
    let t0 = Instant::now();
    let start = measured(agent_cmd(which, "start", 0));
    assert_eq!(start.code, 0, "start failed");
    // The first frame must be seen; give a slow agent up to a second.
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && !support::wait_for(Duration::from_millis(50), || false) {}
    let frames = cap.finish();
    let first = first_arp_after(&frames, ip, t0).expect("no announcement seen");
    s.start_wall.push(ms(start.wall));
    s.start_cpu.push(ms(start.cpu));
    s.first_frame.push(ms(first));
    for _ in 0..5 {
        let m = measured(agent_cmd(which, "monitor", 10_000));
        assert_eq!(m.code, 0, "monitor failed");
        s.monitor_wall.push(ms(m.wall));
        s.monitor_cpu.push(ms(m.cpu));
        // The exec floor, next to each monitor: the cheapest program there is, same env.
        let t = measured(exec_floor(&agent_cmd(which, "monitor", 10_000)));
        s.floor_wall.push(ms(t.wall));
        s.floor_cpu.push(ms(t.cpu));
        // And a Rust program that does nothing (examples/exec_floor.rs), same env.
        if let Some(noop) = rust_floor() {
            let t = measured(same_env(&noop, &agent_cmd(which, "monitor", 10_000)));
            s.rust_floor_wall.push(ms(t.wall));
        }
    }
    let stop = measured(agent_cmd(which, "stop", 0));
    assert_eq!(stop.code, 0, "stop failed");
    s.stop_wall.push(ms(stop.wall));
    s.stop_cpu.push(ms(stop.cpu));
}

fn inner() {
    let iterations: u32 = std::env::var("BENCH_ITERS").unwrap().parse().unwrap();
    let peer = support::Netns {
        name: std::env::var("BENCH_PEER_NS").unwrap(),
    };
    let (mut ours, mut theirs) = (Samples::default(), Samples::default());
    for i in 0..iterations {
        // Alternate who goes first, so drift on the machine hits both alike.
        if i % 2 == 0 {
            one_round(Which::Ours, &peer, &mut ours);
            one_round(Which::Ipaddr2, &peer, &mut theirs);
        } else {
            one_round(Which::Ipaddr2, &peer, &mut theirs);
            one_round(Which::Ours, &peer, &mut ours);
        }
    }
    // The peer namespace belongs to the outer process; do not delete it from here.
    std::mem::forget(peer);

    let rows = [
        (
            "exec floor (/bin/true), wall",
            &ours.floor_wall,
            &theirs.floor_wall,
        ),
        (
            "exec floor of a Rust program (fn main() {}, same toolchain and profile), wall",
            &ours.rust_floor_wall,
            &theirs.rust_floor_wall,
        ),
        ("monitor, wall", &ours.monitor_wall, &theirs.monitor_wall),
        ("monitor, CPU", &ours.monitor_cpu, &theirs.monitor_cpu),
        ("start, wall", &ours.start_wall, &theirs.start_wall),
        ("start, CPU", &ours.start_cpu, &theirs.start_cpu),
        ("stop, wall", &ours.stop_wall, &theirs.stop_wall),
        ("stop, CPU", &ours.stop_cpu, &theirs.stop_cpu),
        (
            "start invoked → first announcement on the peer",
            &ours.first_frame,
            &theirs.first_frame,
        ),
    ];
    let mut table = String::new();
    table.push_str(&format!(
        "{MARK_START}\n## vip agent vs IPaddr2\n\nCommand: `make bench` (BENCH_ITERS={iterations}: {iterations} rounds per agent, alternating, \
         5 monitors per round; release build; one pair of namespaces joined by a veth).\n\
         Measured {} on this machine ({} cores).\n\n\
         | measure (ms) | hamaster vip median | p90 | IPaddr2 median | p90 | IPaddr2 / vip (medians) |\n|---|---|---|---|---|---|\n",
        common::now_utc(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    ));
    for (name, a, b) in rows {
        table.push_str(&format!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1}× |\n",
            common::median(a),
            common::p90(a),
            common::median(b),
            common::p90(b),
            common::median(b) / common::median(a)
        ));
    }
    let monitor_ratio = common::median(&theirs.monitor_wall) / common::median(&ours.monitor_wall);
    let floor = common::median(&ours.monitor_wall) / common::median(&ours.floor_wall);
    let rust_floor = common::median(&ours.rust_floor_wall) / common::median(&ours.floor_wall);
    let first = common::median(&ours.first_frame);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    table.push_str(&format!(
        "\nTargets: monitor within 1.3× of the exec floor (/bin/true in the same rounds) — measured \
         {floor:.2}× ({}); monitor at most 1/15 of IPaddr2's wall time — measured \
         1/{monitor_ratio:.0} ({}); first announcement within 5 ms of invoking start — measured \
         {first:.2} ms median, {:.2} ms p90 ({}).\n\nA Rust program that does nothing, linked as \
         hamaster is (dynamically, PIE), costs {rust_floor:.2}× /bin/true in the same rounds: std's start-up and \
         libgcc_s's loading. See \"Where a monitor's time goes\" below.\n{MARK_END}\n",
        verdict(floor <= 1.3),
        verdict(monitor_ratio >= 15.0),
        common::p90(&ours.first_frame),
        verdict(first <= 5.0),
    ));
    print!("{table}");
    common::write_section(MARK_START, MARK_END, &table);
}
