//! A real etcd cluster (Debian's etcd-server): three members, each in its own namespace on a
//! switch, with "node" namespaces on the same switch for agents; or members hosted by another
//! topology (the Pacemaker lab's nodes). A test CA for TLS; a watch on a key from etcd's
//! side. All removed on drop.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{must, unique, wait_for, Netns, Switch};

pub const NET: &str = "198.51.100";

/// A test certificate authority made with openssl, with server and client certificates.
pub struct TestCa {
    pub dir: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path, name: &str, server_ips: &[&str]) -> TestCa {
        let ca = TestCa {
            dir: dir.join(name),
        };
        let dir = &ca.dir;
        fs::create_dir_all(dir).unwrap();
        ca.run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=hamaster-test-ca -keyout ca.key -out ca.crt 2>/dev/null");
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
        // A revocation list (empty at first) for servers that check client certificates
        // against one: `revoke`.
        fs::write(
            dir.join("ca.cnf"),
            "[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\ncrlnumber=crlnumber\ndefault_md=sha256\ndefault_crl_days=2\n",
        )
        .unwrap();
        fs::write(dir.join("index.txt"), "").unwrap();
        fs::write(dir.join("crlnumber"), "01\n").unwrap();
        ca.gen_crl();
        for (who, ext) in [("server", "server.ext"), ("client", "client.ext")] {
            ca.issue(who, ext);
        }
        ca
    }

    fn run(&self, args: &str) {
        must(
            "sh",
            &["-c", &format!("cd {} && {args}", self.dir.display())],
        );
    }

    /// `{who}.crt` and `{who}.key`, signed by this CA with the extensions of `ext`.
    fn issue(&self, who: &str, ext: &str) {
        self.run(&format!(
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN={who} -keyout {who}.key -out {who}.csr 2>/dev/null && \
             openssl x509 -req -in {who}.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile {ext} -out {who}.crt 2>/dev/null"
        ));
    }

    /// Another client certificate: the paths of `{who}.crt` and `{who}.key`.
    pub fn client(&self, who: &str) -> (String, String) {
        self.issue(who, "client.ext");
        (
            self.path(&format!("{who}.crt")),
            self.path(&format!("{who}.key")),
        )
    }

    /// Revokes `{who}.crt`: crl.pem lists it from now on.
    pub fn revoke(&self, who: &str) {
        self.run(&format!(
            "openssl ca -config ca.cnf -keyfile ca.key -cert ca.crt -revoke {who}.crt 2>/dev/null"
        ));
        self.gen_crl();
    }

    fn gen_crl(&self) {
        self.run("openssl ca -config ca.cnf -keyfile ca.key -cert ca.crt -gencrl -out crl.pem 2>/dev/null");
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }
}

struct Member {
    name: String,
    ip: String,
    /// The network namespace it runs in.
    ns_name: String,
    /// That namespace when the cluster made it, held until the cluster drops (None: another
    /// topology owns it, the lab's nodes).
    _own_ns: Option<Netns>,
    child: Option<Child>,
    /// Link down: the member's host is gone for everyone else, its process still runs.
    cut: bool,
    /// Removed from the cluster (`replace_member`): stopped, in no endpoint list any more.
    removed: bool,
    /// Added to a running cluster: it starts with --initial-cluster-state=existing.
    joined: bool,
}

/// A real etcd cluster: its members, their processes, and etcdctl against them. The one etcd
/// type of the lab: `new`/`new_tls` make three members in namespaces of their own on a
/// switch of their own, with "node" namespaces for agents on the same switch; `hosted` takes
/// members in namespaces another topology owns (the Pacemaker lab's nodes and witness), which
/// that topology starts with `member_args` and hands over with `started`.
pub struct EtcdCluster {
    members: Vec<Member>,
    nodes: Vec<String>,
    /// (node namespace, its port on the switch).
    ports: Vec<(String, String)>,
    /// The switch of `new`; None when hosted.
    own_switch: Option<Switch>,
    /// The namespace etcdctl runs in when hosted (None: a member's that is not cut).
    ctl_ns: Option<String>,
    pub dir: PathBuf,
    pub tls: Option<TestCa>,
    /// root's password once `enable_auth` has turned etcd authentication on: the lab's own
    /// etcdctl then runs as root.
    root_password: Option<String>,
    token: &'static str,
    next_host: u8,
    /// More flags for every member (`set_quota`).
    extra: Vec<String>,
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
        let switch = Switch::new(&format!("{tag}sw"));
        let dir = std::env::temp_dir().join(unique(&format!("etcd-{tag}")));
        fs::create_dir_all(&dir).unwrap();
        let ips: Vec<String> = (1..=3).map(|i| format!("{NET}.{}", 10 + i)).collect();
        let ca = tls.then(|| {
            let mut sans: Vec<&str> = ips.iter().map(String::as_str).collect();
            sans.push("127.0.0.1");
            TestCa::new(&dir, "etcd-ca", &sans)
        });
        // Made before its members: a failure while they are attached still removes `dir`.
        let mut cluster = EtcdCluster::empty(dir, "hamaster-test");
        cluster.tls = ca;
        for (i, ip) in (1..=3).zip(&ips) {
            let name = format!("e{i}");
            let ns = switch.attach(&format!("{tag}{name}"), &port_for(ip), &format!("{ip}/24"));
            cluster.members.push(Member {
                name,
                ip: ip.clone(),
                ns_name: ns.name.clone(),
                _own_ns: Some(ns),
                child: None,
                cut: false,
                removed: false,
                joined: false,
            });
        }
        cluster.own_switch = Some(switch);
        for i in 0..3 {
            cluster.start_member(i);
        }
        assert!(
            cluster.wait_healthy(Duration::from_secs(30)),
            "etcd cluster did not become healthy"
        );
        cluster
    }

    /// A cluster whose members live in namespaces another topology owns (`host`); etcdctl
    /// runs in `ctl_ns`. Nothing runs yet: see `member_args` and `started`.
    pub fn hosted(dir: PathBuf, ctl_ns: &str) -> EtcdCluster {
        let mut cluster = EtcdCluster::empty(dir, "hamaster-lab");
        cluster.ctl_ns = Some(ctl_ns.to_string());
        cluster
    }

    /// Adds a member `name` at `ip` in namespace `ns` (which its host owns), before any runs.
    pub fn host(&mut self, name: &str, ip: &str, ns: &str) {
        self.members.push(Member {
            name: name.into(),
            ip: ip.into(),
            ns_name: ns.into(),
            _own_ns: None,
            child: None,
            cut: false,
            removed: false,
            joined: false,
        });
    }

    fn empty(dir: PathBuf, token: &'static str) -> EtcdCluster {
        EtcdCluster {
            members: Vec::new(),
            nodes: Vec::new(),
            ports: Vec::new(),
            own_switch: None,
            ctl_ns: None,
            dir,
            tls: None,
            root_password: None,
            token,
            next_host: 20,
            extra: Vec::new(),
        }
    }

    /// The switch the members and nodes of `new` are on.
    pub fn switch(&self) -> &Switch {
        self.own_switch
            .as_ref()
            .expect("an etcd cluster on its own switch")
    }

    /// A node namespace for agents, on the same switch.
    pub fn node(&mut self, tag: &str) -> Netns {
        self.next_host += 1;
        let ip = format!("{NET}.{}", self.next_host);
        let port = port_for(&ip);
        let ns = self.switch().attach(tag, &port, &format!("{ip}/24"));
        self.nodes.push(ns.name.clone());
        self.ports.push((ns.name.clone(), port));
        ns
    }

    /// A fresh address on the switch, for a virtual machine's NIC (a tap on the bridge).
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
        self.switch().unplug(self.port_of(node));
    }

    pub fn unsilence(&self, node: &Netns) {
        self.switch().replug(self.port_of(node), "br0");
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Member `i`'s client URL.
    pub fn endpoint(&self, i: usize) -> String {
        format!("{}://{}:2379", self.scheme(), self.members[i].ip)
    }

    pub fn endpoints(&self) -> String {
        (0..self.members.len())
            .filter(|i| !self.members[*i].removed)
            .map(|i| self.endpoint(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .filter(|m| !m.removed)
            .map(|m| format!("{}=http://{}:2380", m.name, m.ip))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The command line that runs member `i` (in its namespace).
    pub fn member_args(&self, i: usize) -> Vec<String> {
        let m = &self.members[i];
        let scheme = self.scheme();
        let mut args = vec![
            etcd_bin(),
            format!("--name={}", m.name),
            format!("--data-dir={}", self.dir.join(&m.name).display()),
            format!(
                "--listen-client-urls={scheme}://{}:2379,{scheme}://127.0.0.1:2379",
                m.ip
            ),
            format!("--advertise-client-urls={scheme}://{}:2379", m.ip),
            format!("--listen-peer-urls=http://{}:2380", m.ip),
            format!("--initial-advertise-peer-urls=http://{}:2380", m.ip),
            format!("--initial-cluster={}", self.initial_cluster()),
            format!(
                "--initial-cluster-state={}",
                if m.joined { "existing" } else { "new" }
            ),
            format!("--initial-cluster-token={}", self.token),
            // A member that comes back must not depose a working leader (etcd 3.4's default
            // is off): without pre-vote its election costs the master its lease.
            "--pre-vote".into(),
            "--heartbeat-interval=100".into(),
            "--election-timeout=1000".into(),
            "--log-level=error".into(),
            "--logger=zap".into(),
        ];
        args.extend(self.extra.iter().cloned());
        // LAB_ETCD_V2=1: etcd's v2 API too, for vip-manager 1.0, which reads its key over it
        // (the peers' comparison, lab/src/peers.rs); the v3 API is unchanged.
        if std::env::var("LAB_ETCD_V2").as_deref() == Ok("1") {
            args.push("--enable-v2=true".into());
        }
        if let Some(ca) = &self.tls {
            args.extend([
                format!("--cert-file={}", ca.path("server.crt")),
                format!("--key-file={}", ca.path("server.key")),
                format!("--trusted-ca-file={}", ca.path("ca.crt")),
                "--client-cert-auth".into(),
                // Read by etcd at every handshake: a certificate revoked is refused on the
                // next connection.
                format!("--client-crl-file={}", ca.path("crl.pem")),
            ]);
        }
        args
    }

    /// Replaces member `i` as an operator replaces a failed one (docs/etcd-operations.md):
    /// stopped, removed from the cluster (`etcdctl member remove`), and a new member added
    /// (`member add`) on a new host of the cluster's own switch, started with the remaining
    /// members' list and --initial-cluster-state=existing; waits (bounded) until the cluster
    /// is healthy with it. Returns the new member's index. Only for `new` clusters.
    pub fn replace_member(&mut self, i: usize) -> usize {
        self.stop_member(i);
        let name = self.members[i].name.clone();
        // Both retried (bounded): the stopped member may have been the leader, and the
        // remaining ones elect another first.
        let (mut last, mut tried) = (String::new(), false);
        let removed = wait_for(Duration::from_secs(20), || {
            let list = self.etcdctl(&["member", "list"]);
            let list = String::from_utf8_lossy(&list.stdout).into_owned();
            let id = list
                .lines()
                .find(|l| l.split(", ").nth(2) == Some(name.as_str()))
                .and_then(|l| l.split(", ").next());
            let Some(id) = id else {
                // Gone after a remove whose answer was lost, or never there.
                last = format!("member {name} not in: {list}");
                return tried && !list.is_empty();
            };
            tried = true;
            let out = self.etcdctl(&["member", "remove", id]);
            last = format!("member remove: {out:?}");
            out.status.success()
        });
        assert!(removed, "{last}");
        self.members[i].removed = true;
        let n = self.members.len() + 1;
        let (name, ip) = (format!("e{n}"), format!("{NET}.{}", 10 + n));
        let switch = self.own_switch.as_ref().expect("a cluster of its own");
        let ns = switch.attach(&format!("rep{name}"), &port_for(&ip), &format!("{ip}/24"));
        let peer = format!("--peer-urls=http://{ip}:2380");
        // etcd adds a voting member only once every remaining one has been connected for 5 s
        // ("unhealthy cluster" until then: a leader elected after the stop counts from then).
        let mut added = None;
        let ok = wait_for(Duration::from_secs(20), || {
            let out = self.etcdctl(&["member", "add", &name, &peer]);
            let ok = out.status.success()
                // Added by an earlier try whose answer was lost.
                || String::from_utf8_lossy(&self.etcdctl(&["member", "list"]).stdout)
                    .lines()
                    .any(|l| l.split(", ").nth(3) == Some(peer.trim_start_matches("--peer-urls=")));
            added = Some(out);
            ok
        });
        assert!(ok, "member add: {added:?}");
        self.members.push(Member {
            name,
            ip,
            ns_name: ns.name.clone(),
            _own_ns: Some(ns),
            child: None,
            cut: false,
            removed: false,
            joined: true,
        });
        let new = self.members.len() - 1;
        self.start_member(new);
        assert!(
            self.wait_healthy(Duration::from_secs(30)),
            "the cluster with its new member"
        );
        new
    }

    /// Every member restarted with a database quota of `bytes` (--quota-backend-bytes):
    /// writes past it raise NOSPACE. All at once (quorum is lost meanwhile): before anything
    /// uses the cluster. Waits (bounded) until it is healthy again.
    pub fn set_quota(&mut self, bytes: u64) {
        self.extra = vec![format!("--quota-backend-bytes={bytes}")];
        for i in 0..self.members.len() {
            if !self.members[i].removed {
                self.stop_member(i);
                self.start_member(i);
            }
        }
        assert!(
            self.wait_healthy(Duration::from_secs(30)),
            "the cluster with its quota"
        );
    }

    /// Member `i` runs as `child` (started by the topology that hosts it, in its namespaces).
    pub fn started(&mut self, i: usize, child: Child) {
        self.members[i].child = Some(child);
    }

    /// Starts member `i` in its network namespace (`ip netns exec`): the members of `new`,
    /// and a hosted member that needs no more of its host than its network.
    pub fn start_member(&mut self, i: usize) {
        let m = &self.members[i];
        let log = fs::File::create(self.dir.join(format!("{}.log", m.name))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &m.ns_name])
            .args(self.member_args(i))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("etcd");
        self.started(i, child);
    }

    /// Stops member `i` hard (SIGKILL), as a crash or a cut-off host would: the process it
    /// was started as, and any other etcd in its namespace (never pkill: pids are shared with
    /// the host and every other namespace).
    pub fn stop_member(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            // `ip netns exec` execs etcd, so the child is etcd itself.
            let _ = c.kill();
            let _ = c.wait();
        }
        super::kill_in(&self.members[i].ns_name, |comm| comm == "etcd");
    }

    /// Stops member `i`'s process (SIGSTOP): it keeps its sockets, so the kernel still takes
    /// connections, but nothing answers — silent, not refused.
    pub fn freeze_member(&self, i: usize) {
        self.signal_member(i, "-STOP");
    }

    /// SIGCONT to a frozen member.
    pub fn thaw_member(&self, i: usize) {
        self.signal_member(i, "-CONT");
    }

    /// `sig` to every etcd in member `i`'s namespace (never pkill: pids are shared with the
    /// host and every other namespace).
    fn signal_member(&self, i: usize, sig: &str) {
        for pid in super::pids_in(&self.members[i].ns_name) {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "etcd" {
                let _ = super::sh("kill", &[sig, &pid]);
            }
        }
    }

    /// Replaces every member's data with `snapshot` as an administrator restores etcd: every
    /// member stopped, its data directory removed, `etcdutl snapshot restore` (the one beside
    /// the etcd the lab runs: etcd 3.5 or later) with the member's own name and peer URL and
    /// the `extra` flags, then every member started again on the restored data.
    pub fn restore(&mut self, snapshot: &Path, extra: &[&str]) {
        self.stop_all();
        let bin = etcd_bin();
        let etcdutl = Path::new(&bin).with_file_name("etcdutl");
        let etcdutl = if bin.contains('/') {
            etcdutl.display().to_string()
        } else {
            "etcdutl".to_string()
        };
        for i in 0..self.members.len() {
            let m = &self.members[i];
            let data = self.dir.join(&m.name);
            let _ = fs::remove_dir_all(&data);
            let mut args: Vec<String> = vec![
                "snapshot".into(),
                "restore".into(),
                snapshot.display().to_string(),
                format!("--name={}", m.name),
                format!("--initial-cluster={}", self.initial_cluster()),
                format!("--initial-cluster-token={}", self.token),
                format!("--initial-advertise-peer-urls=http://{}:2380", m.ip),
                format!("--data-dir={}", data.display()),
            ];
            args.extend(extra.iter().map(|a| a.to_string()));
            let out = Command::new(&etcdutl)
                .args(&args)
                .output()
                .expect("etcdutl");
            assert!(
                out.status.success(),
                "{etcdutl} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for i in 0..self.members.len() {
            self.start_member(i);
        }
        assert!(
            self.wait_healthy(Duration::from_secs(30)),
            "the restored etcd cluster did not become healthy"
        );
    }

    /// Stops every member (the host's teardown: before the files they write are removed).
    pub fn stop_all(&mut self) {
        for i in 0..self.members.len() {
            self.stop_member(i);
        }
    }

    /// Takes member `i`'s link down: to clients it is a host that went away, whose address
    /// answers nothing (no reset, no refusal: connections hang until they time out).
    pub fn cut_member(&mut self, i: usize) {
        let ns = &self.members[i].ns_name;
        must("ip", &["-n", ns, "link", "set", "lan0", "down"]);
        self.members[i].cut = true;
    }

    pub fn heal_member(&mut self, i: usize) {
        let ns = &self.members[i].ns_name;
        must("ip", &["-n", ns, "link", "set", "lan0", "up"]);
        self.members[i].cut = false;
    }

    pub fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        self.etcdctl_command(args).output().unwrap()
    }

    /// etcdctl through the members `only` (all when None).
    pub fn etcdctl_through(&self, only: Option<&[usize]>, args: &[&str]) -> Command {
        let endpoints = match only {
            Some(members) => members
                .iter()
                .map(|&i| self.endpoint(i))
                .collect::<Vec<_>>()
                .join(","),
            None => self.endpoints(),
        };
        self.etcdctl_at(&endpoints, args)
    }

    /// etcdctl with this cluster's endpoints and credentials, run in the control namespace
    /// or a member's that is not cut.
    pub fn etcdctl_command(&self, args: &[&str]) -> Command {
        self.etcdctl_at(&self.endpoints(), args)
    }

    /// etcdctl with `endpoints` (etcdctl adds up repeated --endpoints flags: one only).
    fn etcdctl_at(&self, endpoints: &str, args: &[&str]) -> Command {
        let from = self.ctl_ns.as_deref().unwrap_or_else(|| {
            &self
                .members
                .iter()
                .find(|m| !m.cut)
                .unwrap_or(&self.members[0])
                .ns_name
        });
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", from, "etcdctl"]);
        cmd.env("ETCDCTL_API", "3");
        cmd.arg(format!("--endpoints={endpoints}"))
            .arg("--command-timeout=3s");
        if let Some(ca) = &self.tls {
            cmd.arg(format!("--cacert={}", ca.path("ca.crt")))
                .arg(format!("--cert={}", ca.path("client.crt")))
                .arg(format!("--key={}", ca.path("client.key")));
        }
        if let Some(pw) = &self.root_password {
            cmd.arg(format!("--user=root:{pw}"));
        }
        cmd.args(args);
        cmd
    }

    /// Turns etcd authentication on (`auth enable`, after adding root with `password`); the
    /// lab's etcdctl runs as root from then on.
    pub fn enable_auth(&mut self, password: &str) {
        for args in [
            &["user", "add", "root", "--new-user-password", password][..],
            &["auth", "enable"],
        ] {
            let out = self.etcdctl(args);
            assert!(
                out.status.success(),
                "etcdctl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        self.root_password = Some(password.to_string());
    }

    /// Index of the member that is the raft leader now.
    pub fn leader(&self) -> Option<usize> {
        let out = self.etcdctl(&["endpoint", "status", "-w", "fields"]);
        let endpoint = leader_endpoint(&String::from_utf8_lossy(&out.stdout))?;
        self.members
            .iter()
            .position(|m| endpoint.contains(&format!("//{}:", m.ip)))
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

    /// Makes member `i` the raft leader (`etcdctl move-leader`, sent to the current leader);
    /// whether it is, waiting (bounded).
    #[must_use]
    pub fn move_leader_to(&self, i: usize) -> bool {
        let at = |m: usize, args: &[&str]| self.etcdctl_through(Some(&[m]), args).output();
        let Ok(status) = at(i, &["endpoint", "status", "-w", "fields"]) else {
            return false;
        };
        let Some(id) = member_id(&String::from_utf8_lossy(&status.stdout)) else {
            return false;
        };
        wait_for(Duration::from_secs(15), || {
            match self.leader() {
                Some(l) if l == i => return true,
                Some(l) => {
                    let _ = at(l, &["move-leader", &format!("{id:x}")]);
                }
                None => {}
            }
            self.leader() == Some(i)
        })
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

    /// Puts `key` = `value` under a new lease of `ttl_s` seconds (another holder, as etcd
    /// sees it); the lease's id in hex, as etcdctl prints it.
    pub fn put_leased(&self, key: &str, value: &str, ttl_s: u64) -> String {
        let granted = self.etcdctl(&["lease", "grant", &ttl_s.to_string()]);
        let text = String::from_utf8_lossy(&granted.stdout).into_owned();
        let lease = text
            .split_whitespace()
            .nth(1)
            .unwrap_or_else(|| panic!("lease id from etcdctl: {text:?}"))
            .to_string();
        let put = self.etcdctl(&["put", key, value, &format!("--lease={lease}")]);
        assert!(
            put.status.success(),
            "etcdctl put {key}: {}",
            String::from_utf8_lossy(&put.stderr)
        );
        lease
    }

    /// How often a key was written since it was created (etcd's version), and its value's size
    /// in bytes, from etcdctl.
    pub fn version(&self, key: &str) -> Option<(i64, usize)> {
        let out = self.etcdctl(&["get", key, "-w", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let kv = v.get("kvs")?.get(0)?;
        let value = kv.get("value")?.as_str()?;
        // etcdctl's JSON gives the value in base64: 4 characters for 3 bytes, padded.
        let pad = value.chars().rev().take_while(|c| *c == '=').count();
        Some((kv.get("version")?.as_i64()?, value.len() / 4 * 3 - pad))
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
        self.stop_all();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A switch port's name for the address it serves: `p` and the last octet.
fn port_for(ip: &str) -> String {
    format!("p{}", ip.rsplit('.').next().unwrap_or("0"))
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

/// `etcdctl watch KEY`: each PUT and DELETE as it arrives, seen from etcd's side — when (the
/// monotonic clock, and the wall clock in seconds) and what `at_event` found at that moment.
pub struct KeyWatch<T> {
    child: std::process::Child,
    seen: std::sync::Arc<std::sync::Mutex<Vec<KeyEvent<T>>>>,
}

/// One event a KeyWatch saw.
#[derive(Debug, Clone)]
pub struct KeyEvent<T> {
    /// "PUT" or "DELETE".
    pub kind: String,
    pub at: std::time::Instant,
    /// Wall clock, seconds since the epoch.
    pub wall: f64,
    pub found: T,
}

impl<T: Clone + Send + 'static> KeyWatch<T> {
    /// Watches `key` through all members.
    pub fn start(
        etcd: &EtcdCluster,
        key: &str,
        at_event: impl Fn() -> T + Send + 'static,
    ) -> KeyWatch<T> {
        KeyWatch::through(etcd, key, None, at_event)
    }

    /// Watches `key` through the members `only` when given (a dead member's endpoint would
    /// stall the watch).
    pub fn through(
        etcd: &EtcdCluster,
        key: &str,
        only: Option<&[usize]>,
        at_event: impl Fn() -> T + Send + 'static,
    ) -> KeyWatch<T> {
        use std::io::{BufRead, BufReader};
        let mut child = etcd
            .etcdctl_through(only, &["watch", key])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("etcdctl watch");
        let out = child.stdout.take().expect("piped");
        let seen: std::sync::Arc<std::sync::Mutex<Vec<_>>> = Default::default();
        let sink = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let kind = line.trim();
                if kind == "PUT" || kind == "DELETE" {
                    let at = std::time::Instant::now();
                    let wall = super::vm::wall();
                    let found = at_event();
                    sink.lock().unwrap().push(KeyEvent {
                        kind: kind.to_string(),
                        at,
                        wall,
                        found,
                    });
                }
            }
        });
        // Let the watch reach etcd before anything can happen to the key.
        std::thread::sleep(Duration::from_millis(500));
        KeyWatch { child, seen }
    }

    /// The first event for which `pick` holds, waiting up to `limit`.
    pub fn first(
        &self,
        limit: Duration,
        pick: impl Fn(&KeyEvent<T>) -> bool,
    ) -> Option<KeyEvent<T>> {
        let mut got = None;
        super::wait_for(limit, || {
            got = self.seen.lock().unwrap().iter().find(|e| pick(e)).cloned();
            got.is_some()
        });
        got
    }

    /// When (Unix ms) the first `kind` event at or after `from_unix_ms` arrived, as seen so
    /// far (no wait).
    pub fn first_since(&self, kind: &str, from_unix_ms: u64) -> Option<u64> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e, (e.wall * 1000.0) as u64))
            .find(|(e, ms)| *ms >= from_unix_ms && e.kind == kind)
            .map(|(_, ms)| ms)
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

/// The etcd the test clusters run: Debian's by default, or another build named by
/// HAMASTER_TEST_ETCD (make check-etcd-fixed: trixie's 3.5.16, with the fix for etcd issue
/// 15247).
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
