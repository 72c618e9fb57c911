//! hamaster's lab, one crate for the tests, the benchmarks and the demo: network namespaces
//! with veth pairs and bridges (never the host's interfaces), the built agent laid out as an
//! OCF directory, agent runs inside a namespace, frame capture on the peer end of a veth; a
//! real etcd cluster (etcd), real Pacemaker clusters (cluster), VMs with a hardware watchdog
//! (vm), Prometheus (prometheus), and what the benchmarks share (bench). Everything a test
//! creates is removed when its guard drops, also when the test fails.

pub mod bench;
pub mod cluster;
pub mod deadline;
pub mod etcd;
pub mod fence;
pub mod master;
pub mod phases;
pub mod prometheus;
pub mod systemd;
pub mod timeline;
pub mod vm;

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The repository's root: the lab crate lives in its lab/ folder.
pub fn repo() -> &'static str {
    static REPO: OnceLock<String> = OnceLock::new();
    REPO.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the lab crate sits in the repository")
            .display()
            .to_string()
    })
}

/// A name unique to this process and call, short enough for interface names too.
pub fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("hmt-{tag}-{}-{n}", std::process::id() % 100_000)
}

pub fn sh(cmd: &str, args: &[&str]) -> Output {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    out
}

/// A command's standard output and error, one after the other, as text.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn must(cmd: &str, args: &[&str]) -> String {
    let out = sh(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted (with every process in it) on drop.
pub struct Netns {
    pub name: String,
}

/// Every namespace topology starts here: no test may run where a guard could arm this host's
/// own watchdog (the default watchdog=auto would; a test that kills or freezes that guard would
/// then reset the host). `make` runs the tests through scripts/without-host-watchdog, which
/// hides the host's devices; run alone, `cargo test` on such a host stops here.
fn refuse_host_watchdog() {
    let sysfs = std::fs::read_dir("/sys/class/watchdog")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with("watchdog"))
        })
        .unwrap_or(false);
    assert!(
        !sysfs,
        "this host has a watchdog device (/sys/class/watchdog): run the tests through make \
         (scripts/without-host-watchdog), never beside the host's own watchdog"
    );
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        refuse_host_watchdog();
        let name = unique(tag);
        must("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The hamaster run directory (HAMASTER_RUN_DIR) of agents in this namespace; removed
    /// with the namespace, so that agents and guards can come and go within a test.
    pub fn run_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("hamaster-run-{}", self.name))
    }

    /// `ip -n NS ARGS...`, asserting success.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        must("ip", &full)
    }

    /// `sysctl -w SETTING` (`key=value`) inside this namespace, asserting success.
    pub fn sysctl(&self, setting: &str) {
        must(
            "ip",
            &["netns", "exec", &self.name, "sysctl", "-q", "-w", setting],
        );
    }

    /// Addresses (`ip/prefix`) on `dev` in this namespace.
    pub fn addresses(&self, dev: &str) -> Vec<String> {
        let out = sh("ip", &["-n", &self.name, "-o", "addr", "show", "dev", dev]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                words.find(|w| *w == "inet" || *w == "inet6")?;
                words.next().map(str::to_string)
            })
            .collect()
    }

    /// Full `ip -o addr` lines for `dev` (flags, labels).
    pub fn address_lines(&self, dev: &str) -> String {
        self.ip(&["-o", "addr", "show", "dev", dev])
    }

    pub fn mac(&self, dev: &str) -> [u8; 6] {
        let out = self.ip(&["-o", "link", "show", "dev", dev]);
        let hex = out
            .split("link/ether ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .expect("link/ether");
        let mut mac = [0u8; 6];
        for (i, part) in hex.split(':').enumerate() {
            mac[i] = u8::from_str_radix(part, 16).unwrap();
        }
        mac
    }

    /// Any address anywhere in the namespace equal to `ip`?
    pub fn holds(&self, ip: &str) -> bool {
        let out = sh("ip", &["-n", &self.name, "-o", "addr", "show"]);
        String::from_utf8_lossy(&out.stdout).lines().any(|l| {
            l.split_whitespace()
                .any(|w| w.split('/').next() == Some(ip))
        })
    }
}

/// The pids of every process in network namespace `ns` (named).
pub fn pids_in(ns: &str) -> Vec<String> {
    let out = sh("ip", &["netns", "pids", ns]);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// SIGKILL to every process in network namespace `ns` whose command name `keep` accepts
/// (never pkill: pids are shared with the host and every other namespace).
pub fn kill_in(ns: &str, keep: impl Fn(&str) -> bool) {
    for pid in pids_in(ns) {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if keep(comm.trim()) {
            let _ = sh("kill", &["-9", &pid]);
        }
    }
}

/// SIGKILL to every process in network namespace `ns`: a crashed host.
pub fn kill_all_in(ns: &str) {
    kill_in(ns, |_| true);
}

/// A guard's status from its socket (None: no guard answers within 2 s).
pub fn guard_status(socket: &Path) -> Option<hamaster::resource::status::GuardStatus> {
    hamaster::resource::status::block_on(hamaster::resource::status::get_status(
        socket,
        Duration::from_secs(2),
    ))
    .ok()
}

impl Drop for Netns {
    fn drop(&mut self) {
        kill_all_in(&self.name);
        let _ = sh("ip", &["netns", "del", &self.name]);
        let _ = fs::remove_dir_all(self.run_dir());
    }
}

/// Two namespaces joined by a veth: `node` (where the agent runs, interface `vip0`) and
/// `peer` (interface `peer0`, where frames are captured).
pub struct Pair {
    pub node: Netns,
    pub peer: Netns,
}

pub const NODE_IF: &str = "vip0";
pub const PEER_IF: &str = "peer0";

impl Pair {
    pub fn new(tag: &str) -> Pair {
        let node = Netns::new(&format!("{tag}n"));
        let peer = Netns::new(&format!("{tag}p"));
        // Created directly inside the namespaces: nothing ever appears in the host's.
        must(
            "ip",
            &[
                "-n", &node.name, "link", "add", NODE_IF, "type", "veth", "peer", "name", PEER_IF,
                "netns", &peer.name,
            ],
        );
        node.ip(&["link", "set", NODE_IF, "up"]);
        peer.ip(&["link", "set", PEER_IF, "up"]);
        node.ip(&["addr", "add", "192.0.2.1/24", "dev", NODE_IF]);
        node.ip(&["addr", "add", "2001:db8::1/64", "dev", NODE_IF, "nodad"]);
        peer.ip(&["addr", "add", "192.0.2.2/24", "dev", PEER_IF]);
        peer.ip(&["addr", "add", "2001:db8::2/64", "dev", PEER_IF, "nodad"]);
        Pair { node, peer }
    }
}

/// The hamaster binary under test: `HAMASTER_BIN` when set (the demo), else the one cargo
/// built beside the running test, bench or example (target/PROFILE/hamaster: they run from
/// target/PROFILE/deps or target/PROFILE/examples, and cargo builds the package's binary for
/// its tests and benches).
pub fn hamaster_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("HAMASTER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the running executable's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("hamaster"))
        .filter(|b| b.is_file());
    bin.unwrap_or_else(|| {
        panic!(
            "no hamaster binary beside {}: set HAMASTER_BIN",
            exe.display()
        )
    })
}

/// The built binary laid out as an OCF provider directory, in a world-readable place so
/// that ocf-tester's "meta-data as nobody" check can execute it.
pub struct OcfDir {
    pub root: PathBuf,
}

impl OcfDir {
    pub fn get() -> &'static OcfDir {
        static DIR: OnceLock<OcfDir> = OnceLock::new();
        DIR.get_or_init(|| {
            clean_stale_ocf_dirs();
            let root = std::env::temp_dir().join(format!("hamaster-tests-{}", std::process::id()));
            let provider = root.join("resource.d/hamaster");
            fs::create_dir_all(&provider).unwrap();
            let bin = root.join("hamaster");
            fs::copy(hamaster_bin(), &bin).unwrap();
            for agent in ["vip", "master"] {
                let link = provider.join(agent);
                let _ = fs::remove_file(&link);
                // Absolute: the directory is bind-mounted elsewhere, where a relative
                // target would point nowhere.
                std::os::unix::fs::symlink(&bin, &link).unwrap();
            }
            must("chmod", &["-R", "a+rX", root.to_str().unwrap()]);
            OcfDir { root }
        })
    }

    pub fn provider(&self) -> PathBuf {
        self.root.join("resource.d/hamaster")
    }

    pub fn agent(&self, name: &str) -> PathBuf {
        self.provider().join(name)
    }
}

/// A test process cannot clean up after its last test, so each one removes the copies left
/// by test processes that are gone.
pub fn clean_stale_ocf_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name
            .strip_prefix("hamaster-tests-")
            .and_then(|p| p.parse::<u32>().ok())
        {
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The `ocf-exit-reason:` lines on stderr.
    pub fn reasons(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("ocf-exit-reason:"))
            .collect()
    }

    /// Asserts the exit code and exactly one reason line containing `needle`.
    pub fn expect(&self, code: i32, needle: &str) {
        assert_eq!(self.code, code, "exit code; stderr:\n{}", self.stderr);
        let reasons = self.reasons();
        assert_eq!(
            reasons.len(),
            1,
            "want exactly one reason line; stderr:\n{}",
            self.stderr
        );
        assert!(
            reasons[0].contains(needle),
            "reason {:?} should contain {needle:?}",
            reasons[0]
        );
    }
}

/// Stand-in files under /etc as the agent alone sees them, for `Agent::private_mounts`: /etc
/// overlaid (the upper layer on a tmpfs of the private mount namespace, so nothing reaches the
/// host's /etc), then each (path, text) written — or, for a text starting with "->", a
/// symbolic link to the rest made.
pub fn etc_stand_in(files: &[(&str, &str)]) -> String {
    let mut sh = String::from(
        "d=$(mktemp -d) && mount -t tmpfs none \"$d\" && mkdir \"$d/u\" \"$d/w\" && \
         mount -t overlay overlay -o lowerdir=/etc,upperdir=\"$d/u\",workdir=\"$d/w\" /etc",
    );
    for (path, text) in files {
        assert!(path.starts_with("/etc/") && !text.contains('\''));
        sh.push_str(&format!(" && mkdir -p \"$(dirname {path})\""));
        match text.strip_prefix("->") {
            Some(target) => sh.push_str(&format!(" && ln -s '{target}' {path}")),
            None => sh.push_str(&format!(" && printf '%s' '{text}' > {path}")),
        }
    }
    sh
}

/// An agent invocation context: namespace, parameters, and a private run directory.
#[derive(Clone)]
pub struct Agent<'a> {
    pub ns: &'a Netns,
    pub name: &'static str,
    pub params: BTreeMap<String, String>,
    pub extra_env: BTreeMap<String, String>,
    pub run_dir: PathBuf,
    pub instance: String,
    /// Run in a UTS namespace with this host name (the node name the agent sees).
    pub hostname: Option<String>,
    /// A shell snippet run first in a private mount namespace of the agent's own (stand-in
    /// files under /etc, seen by the agent and the guard it spawns, never by the host).
    pub private_mounts: Option<String>,
    /// Run through this command instead of `ip netns exec` (inside a real systemd's
    /// namespaces: systemd::Systemd::agent).
    pub inside: Option<Vec<String>>,
}

impl<'a> Agent<'a> {
    pub fn new(ns: &'a Netns, name: &'static str, params: &[(&str, &str)]) -> Agent<'a> {
        let run_dir = ns.run_dir();
        Agent {
            ns,
            name,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_env: BTreeMap::new(),
            run_dir,
            instance: format!("test-{name}"),
            hostname: None,
            private_mounts: None,
            inside: None,
        }
    }

    /// Runs the agent through `prefix` (a command that enters another set of namespaces and
    /// runs the rest of its arguments there) instead of `ip netns exec`.
    pub fn inside(mut self, prefix: Vec<String>) -> Self {
        self.inside = Some(prefix);
        self
    }

    /// Runs the agent (and its guard) in a private mount namespace prepared by `setup`.
    pub fn private_mounts(mut self, setup: &str) -> Self {
        self.private_mounts = Some(setup.into());
        self
    }

    pub fn hostname(mut self, name: &str) -> Self {
        self.hostname = Some(name.into());
        self
    }

    pub fn instance(mut self, name: &str) -> Self {
        self.instance = name.into();
        self
    }

    pub fn param(mut self, key: &str, value: &str) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.extra_env.insert(key.into(), value.into());
        self
    }

    pub fn command(&self, action: &str, interval_ms: u64) -> Command {
        let mut cmd = match &self.inside {
            Some(prefix) => {
                let mut c = Command::new(&prefix[0]);
                c.args(&prefix[1..]);
                c
            }
            None => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &self.ns.name]);
                c
            }
        };
        if let Some(h) = &self.hostname {
            cmd.args([
                "unshare",
                "--uts",
                "sh",
                "-c",
                "hostname \"$0\" && exec \"$@\"",
                h,
            ]);
        }
        if let Some(setup) = &self.private_mounts {
            cmd.args(["unshare", "--mount", "--propagation", "private", "sh", "-c"]);
            cmd.arg(format!("set -e; {setup}; exec \"$@\""));
            cmd.arg("sh");
        }
        cmd.arg(OcfDir::get().agent(self.name)).arg(action);
        cmd.env_clear();
        cmd.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        cmd.env("OCF_ROOT", "/usr/lib/ocf");
        cmd.env("OCF_RESOURCE_INSTANCE", &self.instance);
        cmd.env("HAMASTER_RUN_DIR", &self.run_dir);
        cmd.env("OCF_RESKEY_CRM_meta_interval", interval_ms.to_string());
        cmd.env("OCF_RESKEY_CRM_meta_timeout", "20000");
        for (k, v) in &self.params {
            cmd.env(format!("OCF_RESKEY_{k}"), v);
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs an action as a recurring operation (interval 10 s), which is what most actions are.
    pub fn run(&self, action: &str) -> Run {
        self.run_with_interval(action, 10_000)
    }

    /// A probe: monitor with interval 0.
    pub fn probe(&self) -> Run {
        self.run_with_interval("monitor", 0)
    }

    pub fn run_with_interval(&self, action: &str, interval_ms: u64) -> Run {
        let begun = std::time::Instant::now();
        let run = run_command(self.command(action, interval_ms));
        self.record(action, begun.elapsed());
        run
    }

    /// Appends the action's duration and its timeout to target/action-durations.tsv, for
    /// `scripts/action-durations` (the worst duration of each action against its timeout).
    fn record(&self, action: &str, took: std::time::Duration) {
        use std::io::Write;
        let timeout = self
            .extra_env
            .get("OCF_RESKEY_CRM_meta_timeout")
            .map_or("20000", String::as_str);
        let path = format!("{}/target/action-durations.tsv", repo());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write of the whole line: tests run in parallel and append to the same file,
            // and O_APPEND keeps a single short write whole where writeln!'s pieces interleave.
            let line = format!("{}\t{action}\t{}\t{timeout}\n", self.name, took.as_millis());
            let _ = f.write_all(line.as_bytes());
        }
    }
}

pub fn run_command(mut cmd: Command) -> Run {
    let started = Instant::now();
    let out = cmd.output().expect("spawn agent");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Moves the calling thread into the named network namespace.
pub fn enter_netns(name: &str) {
    let f = fs::File::open(format!("/run/netns/{name}")).expect("open netns");
    // SAFETY: setns on a valid namespace fd; affects only this thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {name}: {}", std::io::Error::last_os_error());
}

/// A switch: a namespace holding bridge `br0` (and more with `add_bridge`). Every topology on
/// a shared segment is built on one — the etcd cluster's members and nodes, the Pacemaker
/// lab's nodes, its witness and its service network — by plugging namespaces into it.
pub struct Switch {
    ns: Netns,
}

impl Switch {
    pub fn new(tag: &str) -> Switch {
        let switch = Switch {
            ns: Netns::new(tag),
        };
        switch.add_bridge("br0", None);
        switch
    }

    /// Another bridge (up), with the switch's own address `cidr` on it when given.
    pub fn add_bridge(&self, bridge: &str, cidr: Option<&str>) {
        self.ns.ip(&["link", "add", bridge, "type", "bridge"]);
        self.ns.ip(&["link", "set", bridge, "up"]);
        if let Some(cidr) = cidr {
            self.ns.ip(&["addr", "add", cidr, "dev", bridge]);
        }
    }

    /// Plugs namespace `ns` into `bridge`: a veth, `dev` in `ns` (with `cidr` when given) and
    /// `port` on the bridge.
    pub fn plug(&self, ns: &Netns, dev: &str, port: &str, bridge: &str, cidr: Option<&str>) {
        veth_to_bridge(ns, dev, &self.ns, port, bridge, cidr);
    }

    /// A new namespace plugged into br0 as `lan0` with `cidr`.
    pub fn attach(&self, tag: &str, port: &str, cidr: &str) -> Netns {
        let ns = Netns::new(tag);
        self.plug(&ns, "lan0", port, "br0", Some(cidr));
        ns
    }

    /// The port leaves its bridge: what it sends is dropped, nothing is refused, the link
    /// behind it stays up.
    pub fn unplug(&self, port: &str) {
        self.ns.ip(&["link", "set", port, "nomaster"]);
    }

    pub fn replug(&self, port: &str, bridge: &str) {
        self.ns.ip(&["link", "set", port, "master", bridge]);
    }

    /// The port's link down (up again with `port_up`): the host behind it is cut off.
    pub fn port_down(&self, port: &str) {
        self.ns.ip(&["link", "set", port, "down"]);
    }

    pub fn port_up(&self, port: &str) {
        self.ns.ip(&["link", "set", port, "up"]);
    }
}

impl std::ops::Deref for Switch {
    type Target = Netns;

    fn deref(&self) -> &Netns {
        &self.ns
    }
}

/// A veth from namespace `ns` (its end `dev`, up) to bridge `bridge` in namespace `switch`
/// (its end `port`, enslaved and up), with `cidr` (address/prefix) on `dev` when given.
fn veth_to_bridge(
    ns: &Netns,
    dev: &str,
    switch: &Netns,
    port: &str,
    bridge: &str,
    cidr: Option<&str>,
) {
    must(
        "ip",
        &[
            "-n",
            &ns.name,
            "link",
            "add",
            dev,
            "type",
            "veth",
            "peer",
            "name",
            port,
            "netns",
            &switch.name,
        ],
    );
    switch.ip(&["link", "set", port, "master", bridge, "up"]);
    ns.ip(&["link", "set", dev, "up"]);
    if let Some(cidr) = cidr {
        ns.ip(&["addr", "add", cidr, "dev", dev]);
    }
}

/// An HTTP/1.0 GET of `path` from `addr` (host:port), made from inside namespace `ns` by a
/// thread of this process: the status code and body, None when nothing answers (2 s bounds).
pub fn http_get(ns: &str, addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let (ns, addr, path) = (ns.to_string(), addr.to_string(), path.to_string());
    std::thread::spawn(move || -> Option<(u16, String)> {
        enter_netns(&ns);
        let to: std::net::SocketAddr = addr.parse().ok()?;
        let mut s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .ok()?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).ok()?;
        let text = String::from_utf8_lossy(&reply).into_owned();
        let code = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        Some((code, body))
    })
    .join()
    .ok()
    .flatten()
}

/// Gives the calling thread a real-time priority, so that a sampler keeps its cadence on a
/// loaded 2-core machine (a dozen cluster daemons compete with it). Best effort.
pub fn realtime_thread() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: pid 0 = the calling thread; param is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}

/// One captured frame with the time it was seen.
#[derive(Debug, Clone)]
pub struct Frame {
    pub at: Instant,
    pub bytes: Vec<u8>,
}

/// A capture of every frame arriving on an interface in a namespace, from a thread of this
/// test process (AF_PACKET through pnet, not promiscuous: broadcast and multicast suffice).
pub struct Capture {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<Frame>>>,
}

impl Capture {
    pub fn start(ns: &Netns, dev: &str) -> Capture {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (ns_name, dev, stop2) = (ns.name.clone(), dev.to_string(), stop.clone());
        let handle = std::thread::spawn(move || {
            enter_netns(&ns_name);
            let iface = pnet_datalink::interfaces()
                .into_iter()
                .find(|i| i.name == dev)
                .expect("capture interface");
            let config = pnet_datalink::Config {
                read_timeout: Some(Duration::from_millis(10)),
                promiscuous: false,
                ..Default::default()
            };
            let pnet_datalink::Channel::Ethernet(_tx, mut rx) =
                pnet_datalink::channel(&iface, config).expect("channel")
            else {
                panic!("not ethernet")
            };
            ready_tx.send(()).unwrap();
            let mut frames = Vec::new();
            let hard_stop = Instant::now() + Duration::from_secs(120);
            while !stop2.load(Ordering::SeqCst) && Instant::now() < hard_stop {
                if let Ok(bytes) = rx.next() {
                    frames.push(Frame {
                        at: Instant::now(),
                        bytes: bytes.to_vec(),
                    });
                }
            }
            frames
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("capture ready");
        Capture {
            stop,
            handle: Some(handle),
        }
    }

    pub fn finish(mut self) -> Vec<Frame> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.take().unwrap().join().expect("capture thread")
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Polls `cond` every 10 ms until it holds or `limit` passes.
/// Every file under `path`, recursively (`path` itself when it is a file; none when it is
/// missing).
pub fn files_under(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|e| files_under(&e.path()))
        .collect()
}

/// The newest package under target/rpm/DIR (RPMS, SRPMS) whose file name is `name-` and a
/// version (so `hamaster` is not `hamaster-debuginfo`) ending in `suffix`; None before
/// `make rpm`.
pub fn built_rpm(dir: &str, name: &str, suffix: &str) -> Option<PathBuf> {
    let root = Path::new(repo()).join("target/rpm").join(dir);
    let mut found: Vec<PathBuf> = files_under(&root)
        .into_iter()
        .filter(|p| {
            let file = p.file_name().unwrap_or_default().to_string_lossy();
            file.ends_with(suffix)
                && file
                    .strip_prefix(&format!("{name}-"))
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    found.sort();
    found.pop()
}

/// Unpacks `rpm` into `dir`, made anew (rpm2cpio | cpio).
pub fn unpack_rpm(rpm: &Path, dir: &Path) {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("rpm2cpio {} | cpio -idm --quiet", rpm.display()))
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "unpacking {}", rpm.display());
}

pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
