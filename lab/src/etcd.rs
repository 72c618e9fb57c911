//! A real etcd cluster (Debian's etcd-server) of three members, each in its own namespace on a
//! bridge, plus "node" namespaces on the same bridge for agents; a test CA for TLS; the
//! HTTPS health service. All removed on drop.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{must, unique, wait_for, Netns};

pub const NET: &str = "198.51.100";

/// A test certificate authority made with openssl, with server and client certificates.
pub struct TestCa {
    pub dir: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path, name: &str, server_ips: &[&str]) -> TestCa {
        let dir = dir.join(name);
        fs::create_dir_all(&dir).unwrap();
        let d = dir.to_str().unwrap();
        let run = |args: &str| {
            must("sh", &["-c", &format!("cd {d} && {args}")]);
        };
        run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=hamaster-test-ca -keyout ca.key -out ca.crt 2>/dev/null");
        let sans: Vec<String> = server_ips.iter().map(|ip| format!("IP:{ip}")).collect();
        fs::write(
            dir.join("server.ext"),
            format!(
                "subjectAltName={}\nextendedKeyUsage=serverAuth,clientAuth\n",
                sans.join(",")
            ),
        )
        .unwrap();
        fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
        for (who, ext) in [("server", "server.ext"), ("client", "client.ext")] {
            run(&format!(
                "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN={who} -keyout {who}.key -out {who}.csr 2>/dev/null && \
                 openssl x509 -req -in {who}.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile {ext} -out {who}.crt 2>/dev/null"
            ));
        }
        TestCa { dir }
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }
}

struct Member {
    ns: Netns,
    ip: String,
    name: String,
    child: Option<Child>,
    /// Link down: the member's host is gone for everyone else, its process still runs.
    cut: bool,
}

/// Three etcd members and a bridge; nodes attach to the same bridge.
pub struct EtcdCluster {
    members: Vec<Member>,
    nodes: Vec<String>,
    /// (node namespace, its port on the bridge).
    ports: Vec<(String, String)>,
    pub switch: Netns,
    pub dir: PathBuf,
    pub tls: Option<TestCa>,
    initial: String,
    next_host: u8,
}

impl EtcdCluster {
    pub fn new(tag: &str) -> EtcdCluster {
        EtcdCluster::build(tag, false)
    }

    /// Client URLs over https, client certificates required.
    pub fn new_tls(tag: &str) -> EtcdCluster {
        EtcdCluster::build(tag, true)
    }

    fn build(tag: &str, tls: bool) -> EtcdCluster {
        let switch = Netns::new(&format!("{tag}sw"));
        switch.ip(&["link", "add", "br0", "type", "bridge"]);
        switch.ip(&["link", "set", "br0", "up"]);
        let dir = std::env::temp_dir().join(unique(&format!("etcd-{tag}")));
        fs::create_dir_all(&dir).unwrap();
        let ips: Vec<String> = (1..=3).map(|i| format!("{NET}.{}", 10 + i)).collect();
        let ca = tls.then(|| {
            let mut sans: Vec<&str> = ips.iter().map(String::as_str).collect();
            sans.push("127.0.0.1");
            TestCa::new(&dir, "etcd-ca", &sans)
        });
        let mut cluster = EtcdCluster {
            members: Vec::new(),
            nodes: Vec::new(),
            ports: Vec::new(),
            switch,
            dir,
            tls: ca,
            initial: String::new(),
            next_host: 20,
        };
        let names: Vec<String> = (1..=3).map(|i| format!("e{i}")).collect();
        cluster.initial = names
            .iter()
            .zip(&ips)
            .map(|(n, ip)| format!("{n}=http://{ip}:2380"))
            .collect::<Vec<_>>()
            .join(",");
        for (name, ip) in names.iter().zip(&ips) {
            let ns = cluster.attach(&format!("{tag}{name}"), ip);
            cluster.members.push(Member {
                ns,
                ip: ip.clone(),
                name: name.clone(),
                child: None,
                cut: false,
            });
        }
        for i in 0..3 {
            cluster.start_member(i);
        }
        assert!(
            cluster.wait_healthy(Duration::from_secs(30)),
            "etcd cluster did not become healthy"
        );
        cluster
    }

    /// A namespace on the bridge with address `ip`/24 on interface `lan0`.
    fn attach(&self, tag: &str, ip: &str) -> Netns {
        let ns = Netns::new(tag);
        let port = format!("p{}", ip.rsplit('.').next().unwrap());
        super::veth_to_bridge(
            &ns,
            "lan0",
            &self.switch,
            &port,
            "br0",
            Some(&format!("{ip}/24")),
        );
        ns
    }

    /// A node namespace for agents, on the same bridge.
    pub fn node(&mut self, tag: &str) -> Netns {
        self.next_host += 1;
        let ip = format!("{NET}.{}", self.next_host);
        let ns = self.attach(tag, &ip);
        self.nodes.push(ns.name.clone());
        self.ports
            .push((ns.name.clone(), format!("p{}", self.next_host)));
        ns
    }

    /// A fresh address on the bridge, for a virtual machine's NIC (a tap on the bridge).
    pub fn guest_address(&mut self) -> String {
        self.next_host += 1;
        format!("{NET}.{}", self.next_host)
    }

    fn port_of(&self, node: &Netns) -> &str {
        &self
            .ports
            .iter()
            .find(|(n, _)| *n == node.name)
            .expect("a node of this cluster")
            .1
    }

    /// The node's switch port leaves the bridge: everything it sends is dropped on the floor,
    /// nothing is refused, its own link stays up — a dead switch port or a firewall change.
    pub fn silence(&self, node: &Netns) {
        self.switch
            .ip(&["link", "set", self.port_of(node), "nomaster"]);
    }

    pub fn unsilence(&self, node: &Netns) {
        self.switch
            .ip(&["link", "set", self.port_of(node), "master", "br0"]);
    }

    pub fn endpoints(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members
            .iter()
            .map(|m| format!("{scheme}://{}:2379", m.ip))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn start_member(&mut self, i: usize) {
        let m = &self.members[i];
        let data = self.dir.join(&m.name);
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &m.ns.name, &etcd_bin()])
            .arg(format!("--name={}", m.name))
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!(
                "--listen-client-urls={scheme}://{}:2379,{scheme}://127.0.0.1:2379",
                m.ip
            ))
            .arg(format!("--advertise-client-urls={scheme}://{}:2379", m.ip))
            .arg(format!("--listen-peer-urls=http://{}:2380", m.ip))
            .arg(format!(
                "--initial-advertise-peer-urls=http://{}:2380",
                m.ip
            ))
            .arg(format!("--initial-cluster={}", self.initial))
            .arg("--initial-cluster-state=new")
            .arg("--initial-cluster-token=hamaster-test")
            .arg("--pre-vote")
            .arg("--heartbeat-interval=100")
            .arg("--election-timeout=1000")
            .arg("--log-level=error")
            .arg("--logger=zap");
        if let Some(ca) = &self.tls {
            cmd.arg(format!("--cert-file={}", ca.path("server.crt")))
                .arg(format!("--key-file={}", ca.path("server.key")))
                .arg(format!("--trusted-ca-file={}", ca.path("ca.crt")))
                .arg("--client-cert-auth");
        }
        let log = fs::File::create(self.dir.join(format!("{}.log", m.name))).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd.spawn().expect("etcd");
        self.members[i].child = Some(child);
    }

    /// Stops member `i` hard (SIGKILL), as a crash or a cut-off host would.
    pub fn stop_member(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            // `ip netns exec` execs etcd, so the child is etcd itself.
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Takes member `i`'s link down: to clients it is a host that went away, whose address
    /// answers nothing (no reset, no refusal: connections hang until they time out).
    pub fn cut_member(&mut self, i: usize) {
        self.members[i].ns.ip(&["link", "set", "lan0", "down"]);
        self.members[i].cut = true;
    }

    pub fn heal_member(&mut self, i: usize) {
        self.members[i].ns.ip(&["link", "set", "lan0", "up"]);
        self.members[i].cut = false;
    }

    pub fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        self.etcdctl_command(args).output().unwrap()
    }

    /// etcdctl with this cluster's endpoints and credentials, run in a member's namespace.
    pub fn etcdctl_command(&self, args: &[&str]) -> Command {
        let from = self
            .members
            .iter()
            .find(|m| !m.cut)
            .unwrap_or(&self.members[0]);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &from.ns.name, "etcdctl"]);
        cmd.env("ETCDCTL_API", "3");
        cmd.arg(format!("--endpoints={}", self.endpoints()))
            .arg("--command-timeout=3s");
        if let Some(ca) = &self.tls {
            cmd.arg(format!("--cacert={}", ca.path("ca.crt")))
                .arg(format!("--cert={}", ca.path("client.crt")))
                .arg(format!("--key={}", ca.path("client.key")));
        }
        cmd.args(args);
        cmd
    }

    /// Index of the member that is the raft leader now.
    pub fn leader(&self) -> Option<usize> {
        let out = self.etcdctl(&["endpoint", "status", "-w", "fields"]);
        let endpoint = leader_endpoint(&String::from_utf8_lossy(&out.stdout))?;
        self.members.iter().position(|m| endpoint.contains(&m.ip))
    }

    /// Member indexes in the order etcd's member list gives them (by member id, not name).
    pub fn member_list_order(&self) -> Vec<usize> {
        let out = self.etcdctl(&["member", "list"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let name = l.split(", ").nth(2)?;
                self.members.iter().position(|m| m.name == name)
            })
            .collect()
    }

    /// Makes member `i` the raft leader (`etcdctl move-leader`, sent to the current leader),
    /// and waits (bounded) until it is.
    pub fn move_leader_to(&self, i: usize) {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let url = |m: usize| format!("{scheme}://{}:2379", self.members[m].ip);
        let status = self.etcdctl(&[
            &format!("--endpoints={}", url(i)),
            "endpoint",
            "status",
            "-w",
            "fields",
        ]);
        let text = String::from_utf8_lossy(&status.stdout).into_owned();
        let id = member_id(&text).unwrap_or_else(|| panic!("member {i}'s id: {text}"));
        let moved = wait_for(Duration::from_secs(15), || {
            match self.leader() {
                Some(l) if l == i => return true,
                Some(l) => {
                    let _ = self.etcdctl(&[
                        &format!("--endpoints={}", url(l)),
                        "move-leader",
                        &format!("{id:x}"),
                    ]);
                }
                None => {}
            }
            self.leader() == Some(i)
        });
        assert!(moved, "member {i} did not become etcd's leader");
    }

    /// Waits (bounded) until a write succeeds: the members that are left have a quorum.
    pub fn wait_writable(&self, limit: Duration) -> bool {
        wait_for(limit, || {
            self.etcdctl(&["put", "/hamaster-test/probe", "x"])
                .status
                .success()
        })
    }

    pub fn wait_healthy(&self, limit: Duration) -> bool {
        wait_for(limit, || {
            self.etcdctl(&["endpoint", "health"]).status.success()
        })
    }

    /// Value, lease (hex, as etcdctl prints it) and create revision of a key, from etcdctl.
    pub fn get(&self, key: &str) -> Option<(String, String, i64)> {
        let out = self.etcdctl(&["get", key, "-w", "fields"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let field = |name: &str| field(&text, name);
        let value = field("Value")?;
        let lease: i64 = field("Lease")?.parse().ok()?;
        Some((
            value,
            format!("0x{lease:x}"),
            field("CreateRevision")?.parse().ok()?,
        ))
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.stop_member(i);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The leader's endpoint in `etcdctl endpoint status -w fields` output: the block of the
/// member whose MemberID is the Leader it reports.
pub fn leader_endpoint(status_fields: &str) -> Option<String> {
    status_fields
        .split("\"ClusterID\"")
        .skip(1)
        .find_map(|block| {
            let (id, leader, endpoint) = (
                field(block, "MemberID")?,
                field(block, "Leader")?,
                field(block, "Endpoint")?,
            );
            (id == leader).then_some(endpoint)
        })
}

/// The first MemberID in `etcdctl endpoint status -w fields` output (of one endpoint).
pub fn member_id(status_fields: &str) -> Option<u64> {
    field(status_fields, "MemberID")?.parse().ok()
}

/// The first value of `name` in etcdctl's `-w fields` output (`"Name" : value` lines), its
/// quotes removed.
pub fn field(fields: &str, name: &str) -> Option<String> {
    fields
        .lines()
        .find_map(|l| l.strip_prefix(&format!("\"{name}\" : ")))
        .map(|v| v.trim().trim_matches('"').to_string())
}

/// The etcd the test clusters run: Debian's by default, or another build named by
/// HAMASTER_TEST_ETCD (make check-etcd-fixed: trixie's 3.5.16, with the fix for etcd issue
/// 15247).
/// `etcdctl watch KEY` in a member's namespace: each DELETE as it arrives, seen from etcd's
/// side — when (the monotonic and the wall clock) and what `at_delete` found at that moment.
pub struct KeyWatch<T> {
    child: std::process::Child,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, f64, T)>>>,
}

impl<T: Clone + Send + 'static> KeyWatch<T> {
    pub fn start(
        etcd: &EtcdCluster,
        key: &str,
        at_delete: impl Fn() -> T + Send + 'static,
    ) -> KeyWatch<T> {
        use std::io::{BufRead, BufReader};
        let mut child = etcd
            .etcdctl_command(&["watch", key])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("etcdctl watch");
        let out = child.stdout.take().expect("piped");
        let seen: std::sync::Arc<std::sync::Mutex<Vec<_>>> = Default::default();
        let sink = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.trim() == "DELETE" {
                    let at = std::time::Instant::now();
                    let wall = super::vm::wall();
                    let found = at_delete();
                    sink.lock().unwrap().push((at, wall, found));
                }
            }
        });
        // Let the watch reach etcd before anything can happen to the key.
        std::thread::sleep(Duration::from_millis(300));
        KeyWatch { child, seen }
    }

    /// The first DELETE for which `pick` holds, waiting up to `limit`.
    pub fn first(
        &self,
        limit: Duration,
        pick: impl Fn(&(std::time::Instant, f64, T)) -> bool,
    ) -> Option<(std::time::Instant, f64, T)> {
        let mut got = None;
        super::wait_for(limit, || {
            got = self.seen.lock().unwrap().iter().find(|d| pick(d)).cloned();
            got.is_some()
        });
        got
    }
}

impl<T> Drop for KeyWatch<T> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The VIP the watchdog test's virtual machine raises (on its own NIC, on the bridge).
pub fn vm_vip() -> String {
    format!("{NET}.200")
}

pub fn etcd_bin() -> String {
    std::env::var("HAMASTER_TEST_ETCD").unwrap_or_else(|_| "etcd".into())
}

/// The version of the etcd the test clusters run (`etcd --version`).
pub fn etcd_version() -> String {
    let out = std::process::Command::new(etcd_bin())
        .arg("--version")
        .output()
        .expect("etcd --version");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .unwrap_or("unknown")
        .trim()
        .to_string()
}
