//! A node running the master agent against an etcd cluster: its namespace, the test service
//! (lab/healthz.py over HTTPS with its own CA), and the agent's parameters.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::etcd::{EtcdCluster, TestCa};
use super::{Agent, Netns};

pub const VIP: &str = "198.51.100.100";
pub const RESOURCE: &str = crate::RESOURCE;
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
            // No corosync to ask outside a cluster.
            .param("cluster_name", crate::CLUSTER_NAME)
            .param("lease_ttl", &crate::LEASE_TTL_S.to_string())
            .param("lease_margin", &crate::LEASE_MARGIN_S.to_string())
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
    /// A hook (promote_command, demote_command) that tells this node's test service the role
    /// in its environment, and waits for the service's answer (lab/healthz.py --tell).
    pub fn tell_role_hook(&self) -> String {
        format!(
            "/usr/bin/python3 {}/lab/healthz.py --tell {HEALTH_PORT}",
            super::repo()
        )
    }

    /// One client write to this node's test service: its HTTP status and answer.
    pub fn write(&self) -> (u16, String) {
        let script = format!("{}/lab/healthz.py", super::repo());
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.ns.name, "/usr/bin/python3", &script])
            .args(["--write", HEALTH_PORT])
            .output()
            .expect("ip netns exec");
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let (code, answer) = text.split_once(' ').unwrap_or((text.as_str(), ""));
        (code.parse().unwrap_or(0), answer.to_string())
    }

    /// The roles the test services of one etcd cluster's nodes took, in order: (node, role,
    /// token) — lab/healthz.py's shared STATE_DIR/../roles.
    pub fn roles(&self) -> Vec<(String, String, i64)> {
        let path = self.state.parent().unwrap().join("roles");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                Some((
                    w.first()?.to_string(),
                    w.get(1)?.to_string(),
                    w.get(2)?.parse().ok()?,
                ))
            })
            .collect()
    }

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

/// Watches which nodes hold the VIP, from its own threads (one per namespace, each entered
/// with setns). Each thread keeps two records: the kernel's address events (rtnetlink
/// multicast: none is missed while the thread is held up, they wait in its socket), which
/// give every hold within bounds that only widen when the thread is late; and a dump of the
/// addresses every 5 ms, for `wait_state`, for timings and as a cross-check of the events.
/// (An IPv6 VIP deleted while tentative may go unannounced: the cross-check would then fail
/// the record. Every VIP the lab observes is IPv4.)
pub struct VipObserver {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<NodeRecord>>,
    /// Latest dump per node: 0 none yet, 1 held, 2 not held.
    latest: Vec<Arc<AtomicU8>>,
    /// The same moment on both clocks, to relate samples to wall-clock times.
    pub origin: (Instant, std::time::SystemTime),
}

/// One hold of the VIP by one node, within the bounds the observer can prove: it began in the
/// window `began` (after, before) and ended in the window `end` (None: still held when the
/// watch ended). A hold the first dump saw began before the watch; its window starts at the
/// watch's start (nothing before it is observed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    pub began: (Instant, Instant),
    pub end: Option<(Instant, Instant)>,
}

/// What one node's thread recorded.
#[derive(Debug)]
struct NodeRecord {
    samples: Vec<(Instant, bool)>,
    holds: Vec<Hold>,
    /// The watch ended after the first and before the second: an open hold lasted at least
    /// to the first, at most to the second.
    ended: (Instant, Instant),
    trouble: Trouble,
}

/// What makes one node's record incomplete (assert_complete).
#[derive(Debug, Default)]
struct Trouble {
    /// Why the holds may be incomplete: events the kernel dropped (ENOBUFS), an undecodable
    /// event, a failed socket, the watch's bounds.
    lost: Vec<String>,
    /// Dumps that disagreed with the events although nothing was announced in between, and
    /// deletions of a hold the record did not have: (when, the dump's answer).
    disagreements: Vec<(Instant, bool)>,
    dump_errors: Vec<String>,
}

/// Where `ip` is held in this namespace: (interface, prefix) pairs, from a dump of its family.
fn dump_holders(
    rtnl: &mut hamaster::vip::netlink::Rtnl,
    ip: std::net::IpAddr,
) -> Result<BTreeSet<(u32, u8)>, hamaster::vip::netlink::NetlinkError> {
    Ok(rtnl
        .matching(&hamaster::vip::netlink::AddrMatch::anywhere(ip))?
        .iter()
        .map(|x| (x.index, x.prefix))
        .collect())
}

/// One node's watch: subscribed to events before the first dump (so that no change falls
/// between them), then events and a dump every 5 ms until `stop`, bounded by 30 minutes.
fn watch_node(ns: &str, ip: std::net::IpAddr, stop: &AtomicBool, latest: &AtomicU8) -> NodeRecord {
    use hamaster::vip::netlink::{Event, Events, Rtnl};
    super::enter_netns(ns);
    super::realtime_thread();
    // Before the subscription: every event read later was queued after this.
    let start = Instant::now();
    let events = Events::open().expect("subscribe to address events");
    let mut rtnl = Rtnl::open().expect("rtnetlink");
    // Where the VIP is, as the events tell it from the first dump on.
    let mut on = dump_holders(&mut rtnl, ip).expect("the first dump of addresses");
    let first_dump = Instant::now();
    let mut rec = NodeRecord {
        samples: vec![(first_dump, !on.is_empty())],
        holds: Vec::new(),
        ended: (first_dump, first_dump),
        trouble: Trouble::default(),
    };
    if !on.is_empty() {
        rec.holds.push(Hold {
            began: (start, first_dump),
            end: None,
        });
    }
    let tell = |held: bool| latest.store(if held { 1 } else { 2 }, Ordering::SeqCst);
    tell(!on.is_empty());
    let mut buf = Vec::with_capacity(65536);
    // Every event read in one drain was queued after the previous drain began.
    let mut previous_mark = start;
    let mut last_dump = Some(on.clone());
    let mut first_drain = true;
    let limit = start + Duration::from_secs(1800);
    let mut finishing = false;
    loop {
        let mark = Instant::now();
        let (mut read, mut emptied) = (0, false);
        let mut changes = Vec::new();
        // Bounded: what a flood leaves is read next time.
        while read < 4096 {
            match events.read(&mut buf) {
                Ok(batch) => {
                    read += 1;
                    changes.extend(batch);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    emptied = true;
                    break;
                }
                Err(e) => {
                    rec.trouble.lost.push(format!("{e}"));
                    break;
                }
            }
        }
        let seen = Instant::now();
        // Nothing was announced since the last dump began: it must show what the events say
        // (unless events were lost, which fails the record anyway).
        if let Some(dump) = last_dump
            .as_ref()
            .filter(|_| read == 0 && rec.trouble.lost.is_empty())
        {
            if *dump != on {
                rec.trouble.disagreements.push((seen, !dump.is_empty()));
            }
        }
        for change in changes {
            match change {
                Event::AddressAdded(a) if a.ip == ip => {
                    if on.is_empty() {
                        rec.holds.push(Hold {
                            began: (previous_mark, seen),
                            end: None,
                        });
                    }
                    on.insert((a.index, a.prefix));
                }
                Event::AddressDeleted(a) if a.ip == ip => {
                    if on.remove(&(a.index, a.prefix)) {
                        if on.is_empty() {
                            if let Some(h) = rec.holds.last_mut() {
                                h.end = Some((previous_mark, seen));
                            }
                        }
                    } else {
                        // A hold the record lacks. In the first drain: it came and went between
                        // the subscription and the first dump. Later, the record is wrong.
                        if !first_drain {
                            rec.trouble.disagreements.push((seen, false));
                        }
                        // With another hold open, that one already spans this window.
                        if on.is_empty() {
                            rec.holds.push(Hold {
                                began: (previous_mark, seen),
                                end: Some((previous_mark, seen)),
                            });
                        }
                    }
                }
                Event::Undecodable => rec.trouble.lost.push("an undecodable event".into()),
                _ => {}
            }
        }
        rec.ended = (mark, seen);
        // What the next drain reads was queued after this one began only if this one
        // emptied the socket.
        if emptied {
            previous_mark = mark;
        }
        first_drain = false;
        if finishing {
            if !emptied {
                rec.trouble
                    .lost
                    .push("events were left unread at the end".into());
            }
            break;
        }
        match dump_holders(&mut rtnl, ip) {
            Ok(dump) => {
                let held = !dump.is_empty();
                rec.samples.push((Instant::now(), held));
                tell(held);
                last_dump = Some(dump);
            }
            Err(e) => {
                rec.trouble.dump_errors.push(e.to_string());
                last_dump = None;
            }
        }
        // After `stop`, one more drain, so that a change the test saw by other means before
        // finishing is in the record.
        if Instant::now() >= limit {
            rec.trouble
                .lost
                .push("the watch stopped at its bound of 30 minutes".into());
            finishing = true;
        }
        finishing |= stop.load(Ordering::SeqCst);
        if !finishing {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    rec
}

impl VipObserver {
    pub fn start(nodes: &[&Node]) -> VipObserver {
        VipObserver::start_ns(
            &nodes.iter().map(|n| n.ns.name.clone()).collect::<Vec<_>>(),
            VIP,
        )
    }

    /// Observes `vip` in the named namespaces; returns once every node's watch has begun.
    pub fn start_ns(namespaces: &[String], vip: &str) -> VipObserver {
        let stop = Arc::new(AtomicBool::new(false));
        let ip: std::net::IpAddr = vip.parse().unwrap();
        let latest: Vec<Arc<AtomicU8>> = namespaces
            .iter()
            .map(|_| Arc::new(AtomicU8::new(0)))
            .collect();
        let origin = (Instant::now(), std::time::SystemTime::now());
        let handles = namespaces
            .iter()
            .zip(&latest)
            .map(|(ns, latest)| {
                let (ns, stop, latest) = (ns.clone(), stop.clone(), latest.clone());
                std::thread::spawn(move || watch_node(&ns, ip, &stop, &latest))
            })
            .collect();
        assert!(
            super::wait_for(Duration::from_secs(10), || latest
                .iter()
                .all(|l| l.load(Ordering::SeqCst) != 0)),
            "the VIP observer's threads began within 10 s"
        );
        VipObserver {
            stop,
            handles,
            latest,
            origin,
        }
    }

    /// Waits (bounded) until node `i`'s latest dump shows the VIP held (or not).
    pub fn wait_state(&self, i: usize, held: bool, limit: Duration) -> bool {
        let want = if held { 1 } else { 2 };
        super::wait_for(limit, || self.latest[i].load(Ordering::SeqCst) == want)
    }

    /// Stops watching; returns what each node's thread recorded.
    pub fn finish(self) -> ObservedVip {
        self.stop.store(true, Ordering::SeqCst);
        let mut seen = ObservedVip {
            per_node: Vec::new(),
            holds: Vec::new(),
            ended: Vec::new(),
            trouble: Vec::new(),
            origin: self.origin,
        };
        for h in self.handles {
            let r = h.join().unwrap();
            seen.per_node.push(r.samples);
            seen.holds.push(r.holds);
            seen.ended.push(r.ended);
            seen.trouble.push(r.trouble);
        }
        seen
    }
}

pub struct ObservedVip {
    /// The dumps, per node: (when, held).
    pub per_node: Vec<Vec<(Instant, bool)>>,
    /// Every hold per node, from the kernel's events.
    pub holds: Vec<Vec<Hold>>,
    pub origin: (Instant, std::time::SystemTime),
    /// Per node: when its watch ended (NodeRecord::ended), and what made it incomplete.
    ended: Vec<(Instant, Instant)>,
    trouble: Vec<Trouble>,
}

/// A hold's span taken from the outer ends of its windows (it may have lasted so long) or
/// from their inner ends (it surely lasted so long).
#[derive(Clone, Copy)]
enum Bounds {
    Widest,
    Surest,
}

/// How long two or more nodes' spans cover [from, to) together: each node's spans merged
/// first, so that a node never overlaps itself.
fn covered_twice(spans: Vec<Vec<(Instant, Instant)>>, from: Instant, to: Instant) -> Duration {
    let mut edges: Vec<(Instant, i32)> = Vec::new();
    for mut node in spans {
        node.retain_mut(|(a, b)| {
            (*a, *b) = ((*a).max(from), (*b).min(to));
            a < b
        });
        node.sort();
        let mut merged: Vec<(Instant, Instant)> = Vec::new();
        for (a, b) in node {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        for (a, b) in merged {
            edges.extend([(a, 1), (b, -1)]);
        }
    }
    // At one instant, an end before a start: spans that touch do not overlap.
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

impl ObservedVip {
    /// Asserts that the record is complete: no node's watch lost an event or failed a dump,
    /// and every dump agreed with the events when nothing was announced in between. The
    /// overlap is then proven by the events whatever the threads' cadence: a late thread
    /// only widens the holds.
    pub fn assert_complete(&self) {
        for (i, r) in self.trouble.iter().enumerate() {
            assert!(
                r.lost.is_empty(),
                "observer of node {i} lost events: {:?}",
                r.lost
            );
            assert!(
                r.dump_errors.is_empty(),
                "observer of node {i}: dumps failed: {:?}",
                r.dump_errors
            );
            assert!(
                r.disagreements.is_empty(),
                "observer of node {i}: dumps disagree with the events at {:?}",
                r.disagreements
                    .iter()
                    .map(|(t, held)| (t.duration_since(self.origin.0), *held))
                    .collect::<Vec<_>>()
            );
        }
    }

    /// Total time during which two or more nodes may have held the VIP at once (each hold
    /// from the start of its beginning's window to the end of its end's): zero proves there
    /// never were two holders.
    pub fn overlap(&self) -> Duration {
        self.overlap_between(self.origin.0, Instant::now())
    }

    /// The same, counted only inside [from, to).
    pub fn overlap_between(&self, from: Instant, to: Instant) -> Duration {
        covered_twice(self.spans(Bounds::Widest), from, to)
    }

    /// Total time during which two or more nodes surely held the VIP at once (each hold from
    /// the end of its beginning's window to the start of its end's): a lower bound.
    pub fn surely_overlapped(&self) -> Duration {
        covered_twice(self.spans(Bounds::Surest), self.origin.0, Instant::now())
    }

    /// Each node's holds as spans of time, at their widest or their surest.
    fn spans(&self, bounds: Bounds) -> Vec<Vec<(Instant, Instant)>> {
        let pick = |w: (Instant, Instant)| match bounds {
            Bounds::Widest => (w.0, w.1),
            Bounds::Surest => (w.1, w.0),
        };
        self.holds
            .iter()
            .zip(&self.ended)
            .map(|(holds, ended)| {
                holds
                    .iter()
                    .map(|h| (pick(h.began).0, pick(h.end.unwrap_or(*ended)).1))
                    .collect()
            })
            .collect()
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

    /// When node `i`'s first hold had surely ended (the end of the window its loss was
    /// announced in).
    pub fn first_loss(&self, i: usize) -> Option<Instant> {
        self.holds[i].first()?.end.map(|(_, before)| before)
    }

    /// Whether node `i` held the VIP from the observer's start to its end without a break.
    pub fn held_throughout(&self, i: usize) -> bool {
        self.per_node[i][0].1 && matches!(self.holds[i].as_slice(), [h] if h.end.is_none())
    }

    /// The windows (after, before) in which node `i` lost the VIP, in order.
    pub fn losses(&self, i: usize) -> Vec<(Instant, Instant)> {
        self.holds[i].iter().filter_map(|h| h.end).collect()
    }

    /// Whether node `i` held the VIP at any time (from the events: a hold between two dumps
    /// counts too).
    pub fn ever_held(&self, i: usize) -> bool {
        !self.holds[i].is_empty()
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
