//! A node running the master agent against an etcd cluster: its namespace, the test service
//! (lab/healthz.py over HTTPS with its own CA), and the agent's parameters.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::etcd::{EtcdCluster, TestCa};
use super::{Agent, Netns};

pub const VIP: &str = "198.51.100.100";
pub const RESOURCE: &str = "api";
pub const HEALTH_PORT: &str = "8443";

pub struct Node {
    pub ns: Netns,
    pub state: PathBuf,
    pub ca: TestCa,
    pub name: String,
}

impl Node {
    pub fn new(cluster: &mut EtcdCluster, name: &str) -> Node {
        let ns = cluster.node(name);
        let state = cluster.dir.join(format!("svc-{name}"));
        std::fs::create_dir_all(&state).unwrap();
        let ca = TestCa::new(&state, "svc-ca", &["127.0.0.1"]);
        Node {
            ns,
            state,
            ca,
            name: name.to_string(),
        }
    }

    /// The master agent with the test service, a VIP on lan0, TTL 3 s and margin 1 s.
    pub fn agent(&self, cluster: &EtcdCluster) -> Agent<'_> {
        let script = format!("{}/lab/healthz.py", super::repo());
        let args = format!(
            "{script} {HEALTH_PORT} {} {} {}",
            self.state.display(),
            self.ca.path("server.crt"),
            self.ca.path("server.key")
        );
        let mut a = Agent::new(&self.ns, "master", &[])
            .instance(RESOURCE)
            .param("etcd_endpoints", &cluster.endpoints())
            .param("lease_ttl", "3")
            .param("lease_margin", "1")
            .param("command", "/usr/bin/python3")
            .param("args", &args)
            .param(
                "health_url",
                &format!("https://127.0.0.1:{HEALTH_PORT}/healthz"),
            )
            .param("health_cacert", &self.ca.path("ca.crt"))
            .param("ip", VIP)
            .param("cidr_netmask", "24")
            .param("arp_count", "1")
            .env(
                "HA_LOGFILE",
                &self.state.join("agent.log").display().to_string(),
            )
            .hostname(&self.name);
        if let Some(ca) = &cluster.tls {
            a = a
                .param("etcd_cacert", &ca.path("ca.crt"))
                .param("etcd_cert", &ca.path("client.crt"))
                .param("etcd_key", &ca.path("client.key"));
        }
        a
    }

    pub fn holds_vip(&self) -> bool {
        self.ns.holds(VIP)
    }

    /// Pids of the test service running in this node (from /proc, by its state dir).
    pub fn service_pids(&self) -> Vec<u32> {
        Node::service_pids_in(&self.state.display().to_string())
    }

    /// Pids of the test service whose state dir is `needle`.
    pub fn service_pids_in(needle: &str) -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| {
                        String::from_utf8_lossy(&c).contains("healthz.py")
                            && String::from_utf8_lossy(&c).contains(needle)
                    })
                    .unwrap_or(false)
            })
            .collect()
    }

    /// Fencing tokens the service was started with, in order.
    pub fn tokens(&self) -> Vec<i64> {
        std::fs::read_to_string(self.state.join("token"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }

    /// How many connections the test service has accepted so far.
    pub fn connections(&self) -> usize {
        std::fs::read_to_string(self.state.join("connections"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    pub fn set_unhealthy(&self, bad: bool) {
        let f = self.state.join("unhealthy");
        if bad {
            std::fs::write(f, "").unwrap();
        } else {
            let _ = std::fs::remove_file(f);
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.join("agent.log")).unwrap_or_default()
    }
}

/// Samples which nodes hold the VIP every few milliseconds, from its own threads (one per
/// namespace, each entered with setns and reading addresses over netlink).
pub struct VipObserver {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<Vec<(Instant, bool)>>>,
    /// Latest sample per node: 0 none yet, 1 held, 2 not held.
    latest: Vec<Arc<AtomicU8>>,
    /// The same moment on both clocks, to relate samples to wall-clock times.
    pub origin: (Instant, std::time::SystemTime),
}

impl VipObserver {
    pub fn start(nodes: &[&Node]) -> VipObserver {
        VipObserver::start_ns(
            &nodes.iter().map(|n| n.ns.name.clone()).collect::<Vec<_>>(),
            VIP,
        )
    }

    /// Observes `vip` in the named namespaces.
    pub fn start_ns(namespaces: &[String], vip: &str) -> VipObserver {
        let stop = Arc::new(AtomicBool::new(false));
        let ip: std::net::IpAddr = vip.parse().unwrap();
        let latest: Vec<Arc<AtomicU8>> = namespaces
            .iter()
            .map(|_| Arc::new(AtomicU8::new(0)))
            .collect();
        let handles = namespaces
            .iter()
            .zip(&latest)
            .map(|(ns, latest)| {
                let (ns, stop, latest) = (ns.clone(), stop.clone(), latest.clone());
                std::thread::spawn(move || {
                    super::enter_netns(&ns);
                    super::realtime_thread();
                    let mut rtnl = hamaster::vip::netlink::Rtnl::open().unwrap();
                    let mut samples = Vec::new();
                    let limit = Instant::now() + Duration::from_secs(1800);
                    while !stop.load(Ordering::SeqCst) && Instant::now() < limit {
                        let held = rtnl
                            .addresses(ip.is_ipv6())
                            .map(|a| a.iter().any(|x| x.ip == ip))
                            .unwrap_or(false);
                        samples.push((Instant::now(), held));
                        latest.store(if held { 1 } else { 2 }, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    // One last sample at the moment of `finish`, so that a change the test
                    // saw by other means before finishing is in the record too.
                    let held = rtnl
                        .addresses(ip.is_ipv6())
                        .map(|a| a.iter().any(|x| x.ip == ip))
                        .unwrap_or(false);
                    samples.push((Instant::now(), held));
                    samples
                })
            })
            .collect();
        VipObserver {
            stop,
            handles,
            latest,
            origin: (Instant::now(), std::time::SystemTime::now()),
        }
    }

    /// Waits (bounded) until node `i`'s latest sample shows the VIP held (or not).
    pub fn wait_state(&self, i: usize, held: bool, limit: Duration) -> bool {
        let want = if held { 1 } else { 2 };
        super::wait_for(limit, || self.latest[i].load(Ordering::SeqCst) == want)
    }

    /// Stops sampling; returns the samples per node and the longest gap between samples.
    pub fn finish(self) -> ObservedVip {
        self.stop.store(true, Ordering::SeqCst);
        let per_node: Vec<Vec<(Instant, bool)>> = self
            .handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        ObservedVip {
            per_node,
            origin: self.origin,
        }
    }
}

pub struct ObservedVip {
    pub per_node: Vec<Vec<(Instant, bool)>>,
    pub origin: (Instant, std::time::SystemTime),
}

impl ObservedVip {
    /// Longest interval between two samples of one node.
    pub fn max_gap(&self) -> Duration {
        self.per_node
            .iter()
            .flat_map(|s| s.windows(2).map(|w| w[1].0 - w[0].0))
            .max()
            .unwrap_or_default()
    }

    /// Asserts the sampling cadence: every interval ≤ 20 ms but for at most 0.1 % of them,
    /// and none over 150 ms. On a shared 2-core machine running etcd (and Pacemaker) beside
    /// the test, a sampler thread, even at real-time priority, is now and then held up (once
    /// 51 ms in CI while a node was being killed); a rare short hole does not hide an overlap
    /// of the lengths that matter, a long one could.
    pub fn assert_cadence(&self) {
        let (over, total) = self.gaps_over(Duration::from_millis(20));
        assert!(
            over * 1000 <= total && self.max_gap() <= Duration::from_millis(150),
            "observer: {over} of {total} intervals over 20 ms, worst {:?}",
            self.max_gap()
        );
    }

    /// How many sampling intervals were longer than `limit`, out of how many.
    pub fn gaps_over(&self, limit: Duration) -> (usize, usize) {
        let gaps: Vec<Duration> = self
            .per_node
            .iter()
            .flat_map(|s| s.windows(2).map(|w| w[1].0 - w[0].0))
            .collect();
        (gaps.iter().filter(|g| **g > limit).count(), gaps.len())
    }

    /// Total time during which two or more nodes were seen holding the VIP: each node's
    /// sample counts for the span up to its next sample.
    pub fn overlap(&self) -> Duration {
        self.overlap_between(
            self.origin.0 - Duration::from_secs(3600),
            Instant::now() + Duration::from_secs(3600),
        )
    }

    /// The same, counted only inside [from, to).
    pub fn overlap_between(&self, from: Instant, to: Instant) -> Duration {
        let mut edges: Vec<(Instant, i32)> = Vec::new();
        for samples in &self.per_node {
            for w in samples.windows(2) {
                let (a, b) = (w[0].0.max(from), w[1].0.min(to));
                if w[0].1 && a < b {
                    edges.push((a, 1));
                    edges.push((b, -1));
                }
            }
        }
        edges.sort();
        let (mut depth, mut total, mut since) = (0, Duration::ZERO, None);
        for (t, d) in edges {
            let before = depth;
            depth += d;
            if before < 2 && depth >= 2 {
                since = Some(t);
            } else if before >= 2 && depth < 2 {
                total += t - since.take().unwrap_or(t);
            }
        }
        total
    }

    /// When node `i` was last seen holding the VIP.
    pub fn last_held(&self, i: usize) -> Option<Instant> {
        self.per_node[i].iter().rev().find(|s| s.1).map(|s| s.0)
    }

    /// An observation time as Unix milliseconds.
    pub fn unix_ms(&self, t: Instant) -> u64 {
        let wall = if t >= self.origin.0 {
            self.origin.1 + (t - self.origin.0)
        } else {
            self.origin.1 - (self.origin.0 - t)
        };
        wall.duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    }

    /// First time node `i` was seen without the VIP after having held it.
    pub fn first_loss(&self, i: usize) -> Option<Instant> {
        let s = &self.per_node[i];
        let first_held = s.iter().position(|x| x.1)?;
        s[first_held..].iter().find(|x| !x.1).map(|x| x.0)
    }

    pub fn ever_held(&self, i: usize) -> bool {
        self.per_node[i].iter().any(|s| s.1)
    }
}

impl Node {
    /// The guard's status, read from its socket like the agent does.
    pub fn guard_status(&self, agent: &Agent) -> Option<hamaster::resource::status::GuardStatus> {
        super::guard_status(&agent.run_dir.join(RESOURCE).join("guard.sock"))
    }

    /// Waits (bounded) until the guard reports itself fenced; its status then. The guard
    /// removes the VIP first and records `fenced` once the service is stopped too.
    pub fn wait_fenced(
        &self,
        agent: &Agent,
        limit: Duration,
    ) -> Option<hamaster::resource::status::GuardStatus> {
        let mut st = None;
        super::wait_for(limit, || {
            st = self.guard_status(agent);
            st.as_ref().is_some_and(|s| s.fenced_at_unix_ms.is_some())
        });
        st.filter(|s| s.fenced_at_unix_ms.is_some())
    }

    /// Kills every process of this node and cuts its link: a crashed host.
    pub fn crash(&self) {
        super::kill_all_in(&self.ns.name);
        let _ = super::sh("ip", &["-n", &self.ns.name, "link", "set", "lan0", "down"]);
    }
}

impl Node {
    /// The agent's parameters written as the TOML config file an operator would keep
    /// (`api.toml`: the file name is the resource name).
    pub fn config_file(&self, agent: &Agent) -> PathBuf {
        let file = self.state.join(format!("{RESOURCE}.toml"));
        std::fs::write(&file, toml::to_string(&agent.params).unwrap()).unwrap();
        file
    }

    /// `hamaster ARGS...` on this node (its namespace and host name, the agent's run dir).
    pub fn cli(&self, agent: &Agent, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &self.ns.name,
            "unshare",
            "--uts",
            "sh",
            "-c",
            "hostname \"$0\" && exec \"$@\"",
            &self.name,
        ]);
        cmd.arg(super::hamaster_bin()).args(args);
        cmd.env("HAMASTER_RUN_DIR", &agent.run_dir);
        cmd.stdin(std::process::Stdio::null());
        cmd
    }

    /// `hamaster status --config api.toml [--json]` on this node.
    pub fn status_cli(&self, agent: &Agent, json: bool) -> super::Run {
        let file = self.config_file(agent);
        let mut args = vec!["status", "--config", file.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        super::run_command(self.cli(agent, &args))
    }
}

/// A crm_resource stand-in first in PATH that records its arguments, one line a call, each
/// after the Unix time (ms) of the call.
pub struct CrmStandIn {
    /// PATH with the stand-in first.
    pub path: String,
    calls: PathBuf,
}

impl CrmStandIn {
    pub fn new(node: &Node) -> CrmStandIn {
        let bin = node.state.join("pcmk-push");
        std::fs::create_dir_all(&bin).unwrap();
        let calls = bin.join("calls");
        std::fs::write(
            bin.join("crm_resource"),
            format!(
                "#!/bin/sh\necho \"$(date +%s%3N) $*\" >> {}\n",
                calls.display()
            ),
        )
        .unwrap();
        super::must("chmod", &["+x", bin.join("crm_resource").to_str().unwrap()]);
        CrmStandIn {
            path: format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
            calls,
        }
    }

    pub fn calls(&self) -> String {
        std::fs::read_to_string(&self.calls).unwrap_or_default()
    }

    /// When it was first called (Unix ms, as the stand-in's `date` had it).
    pub fn first_call_unix_ms(&self) -> Option<u64> {
        self.calls().lines().next()?.split(' ').next()?.parse().ok()
    }

    pub fn clear(&self) {
        let _ = std::fs::remove_file(&self.calls);
    }
}
