//! Network namespaces and their wiring, never the host's interfaces: `Netns` (removed when
//! dropped, its processes with it), the veth `Pair` the vip tests capture on, the `Switch`
//! (a namespace of bridges) the clusters are built on, and an HTTP GET from inside one.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use crate::*;

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

    /// The valid lifetime the kernel gives `ip` on `dev` (valid_lft_in).
    pub fn valid_lft(&self, dev: &str, ip: &str) -> Option<u32> {
        valid_lft_in(&self.name, dev, ip)
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
/// The valid lifetime the kernel gives `ip` on `dev` in namespace `ns`, in whole seconds
/// (None: forever, or no such address).
pub fn valid_lft_in(ns: &str, dev: &str, ip: &str) -> Option<u32> {
    let out = sh("ip", &["-n", ns, "-o", "addr", "show", "dev", dev]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains(&format!(" {ip}/")))
        .and_then(|l| l.split("valid_lft ").nth(1))
        .and_then(|l| l.split("sec").next())
        .and_then(|s| s.trim().parse().ok())
}

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

/// SIGKILL to every process in network namespace `ns` whose arguments `keep` accepts (argv[0]
/// first); returns how many.
pub fn kill_argv_in(ns: &str, keep: impl Fn(&[String]) -> bool) -> usize {
    let mut killed = 0;
    for pid in pids_in(ns) {
        let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv: Vec<String> = raw
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if keep(&argv) && sh("kill", &["-9", &pid]).status.success() {
            killed += 1;
        }
    }
    killed
}

/// SIGKILL to every process in network namespace `ns`: a crashed host.
pub fn kill_all_in(ns: &str) {
    kill_in(ns, |_| true);
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
