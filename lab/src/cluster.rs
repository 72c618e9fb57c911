//! A real Pacemaker/Corosync cluster inside network namespaces (see the shared notes
//! cluster-in-namespaces.md): a switch namespace with a bridge, and per node a network +
//! mount + UTS namespace held by a holder process, with its own corosync, pacemakerd and etcd
//! member, and hamaster's OCF directory bind-mounted at /usr/lib/ocf/resource.d/hamaster.
//! `Lab::in_root` runs another generation's cluster stack instead: every node's daemons and
//! commands under chroot in a Debian root (scripts/make-root) with hamaster installed in it;
//! etcd still comes from the host. Nothing is installed on the host. Everything is torn down
//! on drop, also after a failure.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::etcd::{EtcdCluster, KeyWatch};
use super::{kill_all_in, must, sh, unique, wait_for, Netns, OcfDir, Switch};

pub use super::etcd::NET;
pub use super::master::VIP;
pub const SWITCH_IP: &str = "198.51.100.1";
/// The second network (Lab::add_service_network): the VIP's own, apart from the cluster's.
pub const NET2: &str = "203.0.113";
pub const VIP2: &str = "203.0.113.100";
const OCF_MOUNT: &str = "/usr/lib/ocf/resource.d/hamaster";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Etcd {
    /// One member on every node.
    OnNodes,
    /// Members on every node plus a witness in its own namespace (for two-node clusters).
    WithWitness,
    /// None of the lab's: the test runs its own members (Lab::set_etcd_command), as an
    /// administrator's page says, and the lab's etcd helpers are not to be used.
    Own,
}

pub struct LabNode {
    pub name: String,
    pub ip: String,
    pub ns: Netns,
    /// The switch-side end of this node's veth.
    pub port: String,
    /// Holder process: its mount and UTS namespaces are the node's.
    holder: Option<Child>,
    /// This node's directory; `gen` is the current boot's subdirectory.
    pub dir: PathBuf,
    gen: u32,
    daemons: Vec<Child>,
}

pub struct Lab {
    pub dir: PathBuf,
    /// One member on each node (index i), then the witness's: hosted by the lab.
    pub etcd: EtcdCluster,
    pub switch: Switch,
    pub nodes: Vec<LabNode>,
    witness: Option<Netns>,
    two_node: bool,
    created_mount_point: bool,
    /// The root the cluster stack runs in (None: the host's).
    root: Option<PathBuf>,
    /// The fence desk, once fencing is enabled (enable_fencing).
    pub fence: Option<super::fence::FenceDesk>,
    /// The nodes' BMCs, once fencing goes through them (enable_ipmi_fencing).
    pub bmcs: Option<super::bmc::Bmcs>,
    /// Nodes of corosync's nodelist that the lab does not run (a VM: Lab::with_guest), as
    /// (name, address); after the lab's own in node id order.
    guests: Vec<(String, String)>,
    /// An administrator's corosync.conf and authkey (Lab::from_setup) instead of the lab's.
    setup: Option<(String, Vec<u8>)>,
    /// Each node's etcd member as the test runs it (Etcd::Own), once set.
    etcd_commands: Vec<Option<Vec<String>>>,
    /// Etcd::Own: no member is the lab's.
    own_etcd: bool,
}

/// The CIB a lab cluster's nodes start with: the empty CIB of the node's own Pacemaker
/// (`cibadmin --empty`: its newest schema) with dc-deadtime set. Its default, 20 s, is how long
/// a starting controller waits for a DC before it calls an election, and it was 20 of the 23 s
/// every lab took to come up, once per cluster scenario. On the lab's switch every node's
/// controller starts once corosync has every node in its membership (build_with), so the
/// first election has them all. It matters only while no DC is known: a DC lost later is
/// replaced by an election at once, whatever dc-deadtime says. Not for Lab::from_setup (an
/// administrator's cluster, defaults untouched). A VM that joins later (Lab::with_guest) starts
/// from its own empty CIB, the default, and is offered the join by the DC in the meantime.
fn first_cib(root: Option<&Path>) -> String {
    let empty = match root {
        Some(r) => must("chroot", &[r.to_str().unwrap(), "cibadmin", "--empty"]),
        None => must("cibadmin", &["--empty"]),
    };
    let props = "<crm_config><cluster_property_set id=\"cib-bootstrap-options\">\
         <nvpair id=\"cib-bootstrap-options-dc-deadtime\" name=\"dc-deadtime\" value=\"3s\"/>\
         </cluster_property_set></crm_config>";
    assert!(empty.contains("<crm_config/>"), "cibadmin --empty: {empty}");
    empty.replacen("<crm_config/>", props, 1)
}

fn corosync_conf(names: &[(String, String)], two_node: bool) -> String {
    let mut nodes = String::new();
    for (i, (name, ip)) in names.iter().enumerate() {
        nodes.push_str(&format!(
            "  node {{\n    name: {name}\n    nodeid: {}\n    ring0_addr: {ip}\n  }}\n",
            i + 1
        ));
    }
    // LAB_TOTEM: more totem settings for a profile under test (docs/tuning.md), e.g.
    // "token: 3000" (corosync 3's default) or "token: 500\n  token_coefficient: 0".
    let totem = std::env::var("LAB_TOTEM").unwrap_or_else(|_| "token: 1000".into());
    format!(
        "totem {{\n  version: 2\n  cluster_name: {}\n  crypto_cipher: none\n  crypto_hash: none\n  {totem}\n}}\n\
         nodelist {{\n{nodes}}}\n\
         quorum {{\n  provider: corosync_votequorum\n{}}}\n\
         logging {{\n  to_logfile: yes\n  logfile: /var/log/pacemaker/corosync.log\n  to_syslog: no\n  to_stderr: no\n}}\n",
        crate::CLUSTER_NAME,
        if two_node { "  two_node: 1\n" } else { "" }
    )
}

impl LabNode {
    /// A node attached to the switch, not booted yet.
    fn new(name: String, ip: String, ns: Netns, port: String, dir: PathBuf) -> LabNode {
        LabNode {
            name,
            ip,
            ns,
            port,
            holder: None,
            dir,
            gen: 0,
            daemons: Vec::new(),
        }
    }
}

impl Lab {
    /// Brings up `n` nodes (2 or 3) and waits until all are online and etcd is healthy.
    pub fn new(tag: &str, n: usize, etcd: Etcd) -> Lab {
        Lab::build(tag, n, etcd, None, Vec::new())
    }

    /// As `new`, with corosync, Pacemaker, pcs and the agents of the root at `root` (hamaster
    /// installed there already), one etcd member per node.
    pub fn in_root(tag: &str, n: usize, root: &Path) -> Lab {
        Lab::build(tag, n, Etcd::OnNodes, Some(root.to_path_buf()), Vec::new())
    }

    /// As `new`, with one more node in corosync's nodelist that the lab does not run: `name`
    /// at NET.(11 + n) — a virtual machine on the lab's switch (support::vm::Vm::boot_node)
    /// that runs corosync with `corosync_conf()`. The lab comes up without it (quorum is the
    /// lab's n nodes out of n + 1).
    pub fn with_guest(tag: &str, n: usize, name: &str) -> Lab {
        let guest = (name.to_string(), format!("{NET}.{}", 11 + n));
        Lab::build(tag, n, Etcd::OnNodes, None, vec![guest])
    }

    /// The guest's node name (with_guest).
    pub fn guest_name(&self) -> &str {
        &self.guests.first().expect("a lab with a guest").0
    }

    /// The guest's address (with_guest).
    pub fn guest_ip(&self) -> &str {
        &self.guests.first().expect("a lab with a guest").1
    }

    /// A cluster as an administrator sets it up: every node booted from `conf` (the file
    /// `pcs cluster setup … --corosync_conf` wrote, naming the lab's nodes n1…nN at NET.11…)
    /// with `authkey` in /etc/corosync, as pcs would have distributed them; Pacemaker's
    /// defaults left as they are (stonith-enabled too); no etcd but the test's (Etcd::Own).
    pub fn from_setup(tag: &str, n: usize, conf: &str, authkey: &[u8]) -> Lab {
        Lab::build_with(
            tag,
            n,
            Etcd::Own,
            None,
            Vec::new(),
            Some((conf.to_string(), authkey.to_vec())),
        )
    }

    /// corosync.conf as every node of the lab has it.
    pub fn corosync_conf(&self) -> String {
        match &self.setup {
            Some((conf, _)) => conf.clone(),
            None => corosync_conf(&self.corosync_nodes(), self.two_node),
        }
    }

    fn corosync_nodes(&self) -> Vec<(String, String)> {
        self.nodes
            .iter()
            .map(|n| (n.name.clone(), n.ip.clone()))
            .chain(self.guests.iter().cloned())
            .collect()
    }

    fn build(
        tag: &str,
        n: usize,
        etcd: Etcd,
        root: Option<PathBuf>,
        guests: Vec<(String, String)>,
    ) -> Lab {
        Lab::build_with(tag, n, etcd, root, guests, None)
    }

    fn build_with(
        tag: &str,
        n: usize,
        etcd: Etcd,
        root: Option<PathBuf>,
        guests: Vec<(String, String)>,
        setup: Option<(String, Vec<u8>)>,
    ) -> Lab {
        let started = Instant::now();
        let dir = std::env::temp_dir().join(unique(&format!("lab-{tag}")));
        fs::create_dir_all(&dir).unwrap();
        let switch = Switch::new(&format!("{tag}sw"));
        switch.ip(&["addr", "add", &format!("{SWITCH_IP}/24"), "dev", "br0"]);
        let created_mount_point = root.is_none() && !Path::new(OCF_MOUNT).exists();
        if created_mount_point {
            fs::create_dir_all(OCF_MOUNT).unwrap();
        }
        let etcd_dir = dir.join("etcd");
        fs::create_dir_all(&etcd_dir).unwrap();
        // Made first and filled in: a failure while the nodes are attached still tears down
        // what there is (Lab's drop).
        let mut lab = Lab {
            etcd: EtcdCluster::hosted(etcd_dir, &switch.name),
            dir,
            switch,
            nodes: Vec::new(),
            witness: None,
            two_node: n + guests.len() == 2,
            created_mount_point,
            root,
            fence: None,
            bmcs: None,
            guests,
            setup,
            etcd_commands: vec![None; n],
            own_etcd: etcd == Etcd::Own,
        };
        // The lab's fence agent, laid over /usr/sbin in each node's mount namespace.
        let sbin = lab.dir.join("sbin");
        fs::create_dir_all(&sbin).unwrap();
        fs::copy(
            Path::new(&super::repo()).join("lab/fence_lab"),
            sbin.join("fence_lab"),
        )
        .unwrap();
        must("chmod", &["0755", sbin.join("fence_lab").to_str().unwrap()]);
        for i in 1..=n {
            let name = format!("n{i}");
            let ip = format!("{NET}.{}", 10 + i);
            let port = format!("p{i}");
            let ns = lab
                .switch
                .attach(&format!("{tag}{name}"), &port, &format!("{ip}/24"));
            let dir = lab.dir.join(&name);
            fs::create_dir_all(&dir).unwrap();
            if let Some((conf, _)) = &lab.setup {
                assert!(
                    conf.contains(&format!("ring0_addr: {ip}")),
                    "the administrator's corosync.conf names {name} at {ip}:\n{conf}"
                );
            }
            if etcd != Etcd::Own {
                lab.etcd.host(&format!("e-{name}"), &ip, &ns.name);
            }
            lab.nodes.push(LabNode::new(name, ip, ns, port, dir));
        }
        if etcd == Etcd::WithWitness {
            let ip = format!("{NET}.19");
            let ns = lab
                .switch
                .attach(&format!("{tag}w"), "pw", &format!("{ip}/24"));
            lab.etcd.host("e-w", &ip, &ns.name);
            lab.witness = Some(ns);
        }
        // corosync on every node first, and Pacemaker once they are all members: the first
        // DC is elected with every node in the membership, never one that would have a node
        // it has not seen yet fenced at startup (stonith-enabled is still on here; the first
        // CIB's dc-deadtime is short).
        let conf = lab.corosync_conf();
        for i in 0..n {
            lab.boot_with(i, &conf, false);
        }
        assert!(
            wait_for(Duration::from_secs(30), || lab.members_seen_from(0) >= n),
            "corosync on {n} nodes did not form one membership:\n{}",
            lab.boot_output()
        );
        for i in 0..n {
            lab.start_pacemaker(i);
        }
        for i in 0..n {
            if etcd != Etcd::Own {
                lab.start_etcd(i);
            }
        }
        if lab.witness.is_some() {
            // In its own namespace, as the etcd cluster starts its members.
            lab.etcd.start_member(n);
        }
        assert!(
            lab.wait_online(&lab.node_names(), Duration::from_secs(120)),
            "cluster did not come online:\n{}\n{}",
            lab.crm_mon_text(),
            lab.boot_output()
        );
        if etcd == Etcd::Own {
            eprintln!("lab {tag}: {n} nodes online after {:?}", started.elapsed());
            return lab;
        }
        assert!(
            lab.etcd.wait_healthy(Duration::from_secs(60)),
            "etcd did not become healthy"
        );
        let out = lab.on(
            0,
            &[
                "crm_attribute",
                "--type",
                "crm_config",
                "--name",
                "stonith-enabled",
                "--update",
                "false",
            ],
        );
        assert!(
            out.status.success(),
            "stonith-enabled=false: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("lab {tag}: {n} nodes online after {:?}", started.elapsed());
        lab
    }

    /// A second network for the VIP, apart from the cluster's: a bridge `br1` in the switch
    /// namespace and `lan1` on every node with NET2.(10+i)/24 (the switch NET2.1). A VIP there
    /// (VIP2) can lose its link without the node leaving corosync or etcd.
    pub fn add_service_network(&self) {
        self.switch.add_bridge("br1", Some(&format!("{NET2}.1/24")));
        for (i, n) in self.nodes.iter().enumerate() {
            let cidr = format!("{NET2}.{}/24", 11 + i);
            self.switch
                .plug(&n.ns, "lan1", &format!("q{}", i + 1), "br1", Some(&cidr));
        }
    }

    /// Every line of every node's pacemaker.log (all boots) that reports a VIP conflict: a
    /// scenario in which no other host claims the VIP must have none.
    pub fn vip_conflicts(&self) -> Vec<String> {
        let mut found = Vec::new();
        for n in &self.nodes {
            for g in 0..=n.gen {
                let log = n.dir.join(format!("boot{g}")).join("log/pacemaker.log");
                let text = fs::read_to_string(log).unwrap_or_default();
                found.extend(
                    text.lines()
                        .filter(|l| l.contains("VIP conflict"))
                        .map(String::from),
                );
            }
        }
        found
    }

    /// The VIP observer for another address than VIP (VIP2 on the service network).
    pub fn observe_vip_at(&self, vip: &str) -> super::master::VipObserver {
        let namespaces: Vec<String> = self.nodes.iter().map(|n| n.ns.name.clone()).collect();
        super::master::VipObserver::start_ns(&namespaces, vip)
    }

    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    pub fn index(&self, name: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Fresh per-boot directories (leftover cib files or IPC buffers break a restart), the
    /// holder with its bind mounts, then corosync and pacemakerd.
    fn boot(&mut self, i: usize) {
        self.boot_with(i, &self.corosync_conf(), true);
    }

    /// A boot with this corosync.conf, and pacemakerd after corosync or not.
    fn boot_with(&mut self, i: usize, conf: &str, pacemaker: bool) {
        let node = &mut self.nodes[i];
        node.gen += 1;
        let g = node.boot_dir();
        for sub in [
            "run",
            "lib-pacemaker/cib",
            "lib-pacemaker/pengine",
            "lib-pacemaker/blackbox",
            "lib-pacemaker/cores",
            "log",
            "shm",
            "etc-corosync",
            "lib-corosync",
        ] {
            fs::create_dir_all(g.join(sub)).unwrap();
        }
        fs::write(g.join("etc-corosync/corosync.conf"), conf).unwrap();
        // A lab cluster's first start: every node with a CIB that sets only dc-deadtime (see
        // first_cib). Reboots start empty, as a node does, and take the cluster's CIB at join.
        if node.gen == 1 && self.setup.is_none() {
            let cib = first_cib(self.root.as_deref());
            fs::write(g.join("lib-pacemaker/cib/cib.xml"), cib).unwrap();
        }
        if let Some((_, key)) = &self.setup {
            let path = g.join("etc-corosync/authkey");
            fs::write(&path, key).unwrap();
            must("chmod", &["0400", path.to_str().unwrap()]);
            // pcs's corosync.conf logs to /var/log/corosync: the node's own.
            fs::create_dir_all(g.join("log-corosync")).unwrap();
        }
        must("chmod", &["1777", g.join("shm").to_str().unwrap()]);
        // In a root, its own hacluster (the holder's script); the host's ids may differ.
        if self.root.is_none() {
            must(
                "chown",
                &[
                    "-R",
                    "hacluster:haclient",
                    g.join("lib-pacemaker").to_str().unwrap(),
                    g.join("log").to_str().unwrap(),
                ],
            );
        }
        let binds = [
            ("run", "/run"),
            ("lib-pacemaker", "/var/lib/pacemaker"),
            ("log", "/var/log/pacemaker"),
            ("shm", "/dev/shm"),
            ("etc-corosync", "/etc/corosync"),
            ("lib-corosync", "/var/lib/corosync"),
        ];
        let mut script = String::from("set -e; ");
        match &self.root {
            None => {
                // Someone may have removed the (empty) mount point meanwhile: a lab owns what
                // it needs.
                if !Path::new(OCF_MOUNT).exists() {
                    fs::create_dir_all(OCF_MOUNT).unwrap();
                    self.created_mount_point = true;
                }
                for (src, dst) in binds {
                    script.push_str(&format!("mount --bind {} {dst}; ", g.join(src).display()));
                }
                if self.setup.is_some() {
                    script.push_str(&format!(
                        "mount --bind {} /var/log/corosync; ",
                        g.join("log-corosync").display()
                    ));
                }
                script.push_str(&format!(
                    "mount --bind {} {OCF_MOUNT}; ",
                    OcfDir::get().provider().display()
                ));
                script.push_str(&format!(
                    "mount -t overlay overlay -o lowerdir={}:/usr/sbin /usr/sbin; ",
                    self.dir.join("sbin").display()
                ));
                script.push_str(&format!(
                    "hostname {}; touch /run/holder-ready; exec sleep 1000000",
                    node.name
                ));
            }
            Some(root) => {
                // The root's own /proc, /sys and /dev, the node's directories over the root's,
                // the repository where the tests expect it (cib/ scripts, the test service);
                // then the holder changes its root, which every command entering the node takes
                // (nsenter --root). The mounts live and die with the node's mount namespace.
                let r = root.display();
                let repo = super::repo();
                fs::create_dir_all(root.join(repo.trim_start_matches('/'))).unwrap();
                script.push_str(&format!(
                    "mount -t proc proc {r}/proc; mount -t sysfs sysfs {r}/sys; \
                     mount --rbind /dev {r}/dev; mount --bind {repo} {r}{repo}; "
                ));
                for (src, dst) in binds {
                    script.push_str(&format!(
                        "mount --bind {} {r}{dst}; ",
                        g.join(src).display()
                    ));
                }
                // Ready only once changed root: what enters before would get the host's.
                script.push_str(&format!(
                    "chroot {r} chown -R hacluster:haclient /var/lib/pacemaker /var/log/pacemaker; \
                     hostname {}; exec chroot {r} sh -c 'touch /run/holder-ready; exec sleep 1000000'",
                    node.name
                ));
            }
        }
        let holder = Command::new("ip")
            .args([
                "netns",
                "exec",
                &node.ns.name,
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(g.join("holder.err")).unwrap())
            .spawn()
            .expect("holder");
        node.holder = Some(holder);
        let ready = g.join("run/holder-ready");
        // Generous: a root's holder mounts more, and the cores may be busy.
        assert!(
            wait_for(Duration::from_secs(30), || ready.exists()),
            "holder of {} not ready: {}",
            node.name,
            fs::read_to_string(g.join("holder.err")).unwrap_or_default()
        );
        let corosync = self.spawn_on(
            i,
            "corosync.out",
            &["corosync", "-f", "-c", "/etc/corosync/corosync.conf"],
        );
        self.nodes[i].daemons.push(corosync);
        // pacemakerd gives up when corosync is not answering yet; corosync needs a moment.
        let cfg_ready = wait_for(Duration::from_secs(30), || {
            self.on(i, &["corosync-cfgtool", "-s"]).status.success()
        });
        assert!(
            cfg_ready,
            "corosync on {} did not start:\n{}",
            self.nodes[i].name,
            self.boot_output()
        );
        if pacemaker {
            self.start_pacemaker(i);
        }
    }

    fn start_pacemaker(&mut self, i: usize) {
        let pcmk = self.spawn_on(i, "pacemakerd.out", &["pacemakerd"]);
        self.nodes[i].daemons.push(pcmk);
    }

    /// How many nodes corosync on node `i` has joined in its membership (runtime.members).
    fn members_seen_from(&self, i: usize) -> usize {
        let out = self.on(i, &["corosync-cmapctl", "-b", "runtime.members"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(".status ") && l.trim_end().ends_with("= joined"))
            .count()
    }

    /// A host on the lab's switch outside its cluster — the runbook's DR host — running a
    /// one-node corosync of its own under the lab's cluster name (a leftover cluster, or one
    /// set up for another purpose) in which it is node id 1, as a node of the lab is: the
    /// hardest kind of stranger for the takeover rule. No Pacemaker. Its index.
    pub fn add_outsider(&mut self, tag: &str, name: &str) -> usize {
        let i = self.nodes.len();
        let ip = format!("{NET}.{}", 11 + i + self.guests.len());
        let port = format!("p{}", i + 1);
        let ns = self
            .switch
            .attach(&format!("{tag}{name}"), &port, &format!("{ip}/24"));
        let dir = self.dir.join(name);
        fs::create_dir_all(&dir).unwrap();
        self.nodes
            .push(LabNode::new(name.to_string(), ip.clone(), ns, port, dir));
        let conf = corosync_conf(&[(name.to_string(), ip)], false);
        self.boot_with(i, &conf, false);
        i
    }

    /// What every node's holder and daemons printed in their current boot, for a failure.
    fn boot_output(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let g = n.boot_dir();
            for f in [
                "holder.err",
                "corosync.out",
                "pacemakerd.out",
                "log/pacemaker.log",
            ] {
                let text = fs::read_to_string(g.join(f)).unwrap_or_default();
                // The first errors, then the end.
                let errors: Vec<&str> = text
                    .lines()
                    .filter(|l| l.contains("error") || l.contains("crit"))
                    .take(10)
                    .collect();
                let lines: Vec<&str> = text.lines().collect();
                let tail = format!(
                    "{}\n...\n{}",
                    errors.join("\n"),
                    lines[lines.len().saturating_sub(8)..].join("\n")
                );
                out.push_str(&format!("--- {} {f}:\n{tail}\n", n.name));
            }
        }
        out
    }

    fn holder_pid(&self, i: usize) -> u32 {
        let h = self.nodes[i].holder.as_ref().expect("node is up");
        // `ip netns exec` and `unshare` exec in place: the child's pid is the holder's.
        h.id()
    }

    /// A command in node `i`'s namespaces, under its root when the lab has one.
    fn nsenter(&self, i: usize, args: &[&str]) -> Command {
        self.nsenter_in(i, self.root.is_some(), args)
    }

    /// `rooted`: in the node's root (the holder's); else with the host's programs.
    fn nsenter_in(&self, i: usize, rooted: bool, args: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.holder_pid(i).to_string(), "-m", "-u", "-n"]);
        if rooted {
            cmd.args(["--root", "--wd"]);
        }
        cmd.arg("--");
        cmd.args(args);
        cmd.env("PCMK_node_name", &self.nodes[i].name);
        cmd.env("PCMK_logfile", "/var/log/pacemaker/pacemaker.log");
        cmd.env("PCMK_logfacility", "none");
        cmd.stdin(Stdio::null());
        cmd
    }

    fn spawn_on(&self, i: usize, log: &str, args: &[&str]) -> Child {
        self.spawn_in(i, self.root.is_some(), log, args)
    }

    fn spawn_in(&self, i: usize, rooted: bool, log: &str, args: &[&str]) -> Child {
        let g = self.nodes[i].boot_dir();
        let out = fs::File::create(g.join(log)).unwrap();
        self.nsenter_in(i, rooted, args)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn on node")
    }

    /// A long-running process on node `i` (its output in `log` of the node's boot), killed with
    /// the node: a crash, a fence, the lab's end.
    pub fn daemon(&mut self, i: usize, log: &str, args: &[&str]) {
        let child = self.spawn_on(i, log, args);
        self.nodes[i].daemons.push(child);
    }

    /// SIGKILL to the service (python running lab/healthz.py) on node `i` alone: not its
    /// supervisor, nor a process that only names it among its arguments (the peers' leader
    /// elector); returns how many processes.
    pub fn kill_service(&self, i: usize) -> usize {
        super::netns::kill_argv_in(&self.nodes[i].ns.name, |argv| {
            argv.first().is_some_and(|a| a.contains("python"))
                && argv.get(1).is_some_and(|a| a.ends_with("healthz.py"))
        })
    }

    /// Runs a command on node `i` (its network, mount and UTS namespaces), bounded to 120 s.
    pub fn on(&self, i: usize, args: &[&str]) -> Output {
        let mut full = vec!["timeout", "120"];
        full.extend_from_slice(args);
        self.nsenter(i, &full).output().expect("command on node")
    }

    /// `sh -c SCRIPT` on node `i`.
    pub fn sh(&self, i: usize, script: &str) -> Output {
        self.on(i, &["sh", "-c", script])
    }

    /// Node `i`'s etcd member, in the node's namespaces (the host's etcd, also beside a
    /// root's cluster stack), with the data it had.
    pub fn start_etcd(&mut self, i: usize) {
        if let Some(argv) = self.etcd_commands[i].clone() {
            let args: Vec<&str> = argv.iter().map(String::as_str).collect();
            let child = self.spawn_in(i, false, "etcd.out", &args);
            self.nodes[i].daemons.push(child);
            return;
        }
        let args = self.etcd.member_args(i);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = self.spawn_in(i, false, "etcd.out", &args);
        self.etcd.started(i, child);
    }

    /// Node `i`'s etcd member from now on (Etcd::Own): started now, and again after each
    /// restart of the node, as a unit enabled at boot is.
    pub fn set_etcd_command(&mut self, i: usize, argv: Vec<String>) {
        self.etcd_commands[i] = Some(argv);
        self.start_etcd(i);
    }

    pub fn stop_etcd(&mut self, i: usize) {
        self.etcd.stop_member(i);
    }

    /// A VIP observer over every node of the lab (support::master::VipObserver).
    pub fn observe_vip(&self) -> super::master::VipObserver {
        let namespaces: Vec<String> = self.nodes.iter().map(|n| n.ns.name.clone()).collect();
        super::master::VipObserver::start_ns(&namespaces, VIP)
    }

    /// `etcdctl watch KEY` from the switch namespace through the members of `nodes` only
    /// (a dead member's endpoint would stall it): when each PUT and DELETE arrived.
    pub fn watch_key(&self, key: &str, nodes: &[usize]) -> KeyWatch<()> {
        KeyWatch::through(&self.etcd, key, Some(nodes), || ())
    }

    /// The node whose etcd member is the raft leader now (None: none, or the witness).
    pub fn etcd_leader(&self) -> Option<usize> {
        self.etcd.leader().filter(|&i| i < self.nodes.len())
    }

    /// Holder node and create revision (the fencing token) of a leader key.
    pub fn leader_key(&self, key: &str) -> Option<(String, i64)> {
        self.etcd
            .get(key)
            .map(|(holder, _, revision)| (holder, revision))
    }

    /// The first node that is up (node 0 when none is).
    fn first_up(&self) -> usize {
        self.nodes
            .iter()
            .position(|n| n.holder.is_some())
            .unwrap_or(0)
    }

    /// crm_mon's XML from the first node that is up.
    pub fn crm_mon_xml(&self) -> String {
        let i = self.first_up();
        String::from_utf8_lossy(&self.on(i, &["crm_mon", "-1", "--output-as=xml"]).stdout)
            .into_owned()
    }

    /// The DC's node name, from crm_mon (None while there is none).
    pub fn dc(&self) -> Option<String> {
        let xml = self.crm_mon_xml();
        let line = xml.lines().find(|l| l.contains("<current_dc "))?;
        (attr(line, "present")? == "true").then(|| attr(line, "name"))?
    }

    /// `BIN switchover api ARGS…` run on node `on`: its exit code and its whole output.
    pub fn switchover(&self, bin: &Path, on: usize, args: &[&str]) -> (Option<i32>, String) {
        let mut full = vec!["switchover", crate::RESOURCE];
        full.extend_from_slice(args);
        self.hamaster(bin, on, &full)
    }

    /// `BIN ARGS…` (the hamaster command line) run on node `on`: its exit code and its whole
    /// output.
    pub fn hamaster(&self, bin: &Path, on: usize, args: &[&str]) -> (Option<i32>, String) {
        let mut full = vec![bin.to_str().unwrap()];
        full.extend_from_slice(args);
        let out = self.on(on, &full);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    }

    /// The constraints section of the CIB, as node 0 sees it.
    pub fn constraints(&self) -> String {
        let q = self.on(0, &["cibadmin", "--query", "--scope", "constraints"]);
        String::from_utf8_lossy(&q.stdout).into_owned()
    }

    /// Pacemaker's history of `resource` as the CIB's status section on node 0 records it: for
    /// each node, the operation records (`RESOURCE_last_0`, the last non-recurring action;
    /// `RESOURCE_last_failure_0`; one per recurring monitor) as (node, record id, operation,
    /// call-id, rc-code), in the CIB's order.
    pub fn operations(&self, resource: &str) -> Vec<(String, String, String, String, String)> {
        let q = self.on(0, &["cibadmin", "--query", "--scope", "status"]);
        let xml = String::from_utf8_lossy(&q.stdout);
        let (mut node, mut ops) = (String::new(), Vec::new());
        let mut in_resource = false;
        for line in xml.lines() {
            if line.contains("<node_state ") {
                node = attr(line, "uname").unwrap_or_default();
            } else if line.contains("<lrm_resource ") {
                in_resource = attr(line, "id").as_deref() == Some(resource);
            } else if in_resource && line.contains("<lrm_rsc_op ") {
                let get = |name: &str| attr(line, name).unwrap_or_default();
                ops.push((
                    node.clone(),
                    get("id"),
                    get("operation"),
                    get("call-id"),
                    get("rc-code"),
                ));
            }
        }
        ops
    }

    /// What a switchover from node `old` to node `new` must leave, seen from etcd, the nodes
    /// and the CIB: etcd names `new` the master of the lab's key, the VIP is on `new` (within
    /// 5 s) and not on `old`, and no `cli-` constraint is left. Err: what is not so.
    pub fn switched_over(&self, new: usize, old: usize) -> Result<(), String> {
        let name = &self.nodes[new].name;
        let holder = self.leader_key(crate::API_KEY).map(|k| k.0);
        if holder.as_deref() != Some(name.as_str()) {
            return Err(format!("etcd names {holder:?} the master, not {name}"));
        }
        if !crate::wait_for(Duration::from_secs(5), || self.nodes[new].ns.holds(VIP)) {
            return Err(format!("the VIP is not on {name}"));
        }
        if self.nodes[old].ns.holds(VIP) {
            return Err(format!("the VIP is still on {}", self.nodes[old].name));
        }
        let left = self.constraints();
        if left.contains("cli-") {
            return Err(format!("constraints left: {left}"));
        }
        Ok(())
    }

    pub fn crm_mon_text(&self) -> String {
        let i = self.first_up();
        String::from_utf8_lossy(&self.on(i, &["crm_mon", "-1", "-r"]).stdout).into_owned()
    }

    /// Nodes that crm_mon on node `i` shows online.
    pub fn online_seen_from(&self, i: usize) -> Vec<String> {
        let xml =
            String::from_utf8_lossy(&self.on(i, &["crm_mon", "-1", "--output-as=xml"]).stdout)
                .into_owned();
        xml.lines()
            .filter(|l| l.trim_start().starts_with("<node ") && l.contains("online=\"true\""))
            .filter_map(|l| attr(l, "name"))
            .collect()
    }

    pub fn wait_online(&self, names: &[String], limit: Duration) -> bool {
        let first = self
            .nodes
            .iter()
            .position(|n| names.contains(&n.name))
            .unwrap_or(0);
        wait_for(limit, || {
            let online = self.online_seen_from(first);
            names.iter().all(|n| online.contains(n))
        })
    }

    /// Where crm_mon on node `i` says instances of `resource` run promoted.
    pub fn promoted_seen_from(&self, i: usize, resource: &str) -> Vec<String> {
        let xml =
            String::from_utf8_lossy(&self.on(i, &["crm_mon", "-1", "--output-as=xml"]).stdout)
                .into_owned();
        resources_in_role(&xml, resource, "Promoted")
    }

    pub fn started_seen_from(&self, i: usize, resource: &str) -> Vec<String> {
        let xml =
            String::from_utf8_lossy(&self.on(i, &["crm_mon", "-1", "--output-as=xml"]).stdout)
                .into_owned();
        let mut v = resources_in_role(&xml, resource, "Started");
        v.extend(resources_in_role(&xml, resource, "Unpromoted"));
        v
    }

    /// Kills every process of node `i` and removes its addresses and link: a crashed host. Its
    /// link goes first: a crashed host sends nothing, not even the FIN of a killed process's
    /// connection (which would tell its clients what a crash never tells them).
    pub fn crash(&mut self, i: usize) {
        let ns = self.nodes[i].ns.name.clone();
        let _ = sh("ip", &["-n", &ns, "link", "set", "lan0", "down"]);
        // The test's own member (Etcd::Own) dies with the node's processes below.
        if !self.own_etcd {
            self.etcd.stop_member(i);
        }
        let node = &mut self.nodes[i];
        node.kill();
        let _ = sh("ip", &["-n", &ns, "addr", "flush", "dev", "lan0"]);
    }

    /// Fencing on, the way an administrator turns it on: a STONITH device of the lab's fence
    /// agent for every node (its reboot done as an off: the node stays down until the test
    /// brings it back), and stonith-enabled=true.
    pub fn enable_fencing(&mut self) {
        self.enable_fencing_with("");
    }

    /// Fencing on through a fabric device (the lab's agent with fabric=1 and
    /// `provides=unfencing`, as fence_scsi is configured): a fence is confirmed and ends
    /// nothing the node runs.
    pub fn enable_fabric_fencing(&mut self) {
        self.enable_fencing_with("fabric=1 meta provides=unfencing");
    }

    /// What the fence desk powers off: each node's name, namespace and cluster link.
    fn desk_nodes(&self) -> Vec<(String, String, String)> {
        self.nodes
            .iter()
            .map(|n| (n.name.clone(), n.ns.name.clone(), "lan0".to_string()))
            .collect()
    }

    /// Fencing on, with more words for `pcs stonith create`.
    fn enable_fencing_with(&mut self, more: &str) {
        let nodes = self.desk_nodes();
        let desk = super::fence::FenceDesk::start(&self.dir.join("fence"), nodes);
        let hosts = self.node_names().join(" ");
        let out = self.sh(
            0,
            &format!(
                "pcs stonith create lab-fence fence_lab lab_dir={} pcmk_host_list='{hosts}' \
                 pcmk_reboot_action=off {more} && pcs property set stonith-enabled=true",
                desk.dir.display()
            ),
        );
        if !out.status.success() {
            let seen = self.sh(
                0,
                "ls -la /usr/sbin/fence_lab; /usr/sbin/fence_lab -o metadata | head -3; \
                 stonith_admin --list-installed | grep -c fence_; \
                 stonith_admin --metadata --agent fence_lab | head -3",
            );
            panic!(
                "fencing on: {}{}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&seen.stdout),
                String::from_utf8_lossy(&seen.stderr)
            );
        }
        self.fence = Some(desk);
        let started = super::wait_for(Duration::from_secs(60), || {
            let xml = self.crm_mon_xml();
            xml.lines()
                .any(|l| l.contains("id=\"lab-fence\"") && l.contains("role=\"Started\""))
        });
        assert!(started, "lab-fence started:\n{}", self.crm_mon_text());
    }

    /// Fencing as RHEL clusters are fenced: a BMC for every node (lab/src/bmc.rs) and one
    /// fence_ipmilan device per node, created by cib/fence-ipmilan.sh as an administrator
    /// would (each device kept off the node it fences). `reboot`: Pacemaker's default reboot
    /// (off, then on; the node's boot is then the test's: FenceDesk::powered_on_by_bmc);
    /// otherwise pcmk_reboot_action=off, a fenced node staying down as in the lab's other
    /// fenced scenarios.
    pub fn enable_ipmi_fencing(&mut self, reboot: bool) {
        use super::bmc::{BMC_PASSWORD, BMC_USER};
        let pairs = self.start_bmcs();
        let env = format!(
            "NODES_BMCS='{pairs}' BMC_USER={BMC_USER} BMC_PASSWORD={BMC_PASSWORD} {}",
            if reboot { "" } else { "REBOOT_ACTION=off" }
        );
        let script = format!("{}/cib/fence-ipmilan.sh", super::repo());
        let out = self.sh(0, &format!("{env} sh {script}"));
        assert!(
            out.status.success(),
            "fence-ipmilan.sh: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_ipmi_devices();
    }

    /// Every node's BMC (lab/src/bmc.rs) on the switch, powering through the fence desk, and
    /// nothing configured yet: the `NODE=BMC_ADDRESS …` list for cib/fence-ipmilan.sh
    /// (bmc::BMC_USER and BMC_PASSWORD are their account).
    pub fn start_bmcs(&mut self) -> String {
        use super::bmc::{bmc_ip, Bmcs};
        let nodes = self.desk_nodes();
        let desk = super::fence::FenceDesk::start(&self.dir.join("fence"), nodes);
        let names = self.node_names();
        let bmcs = Bmcs::start(&self.switch.name, &self.dir.join("bmc"), &names, &desk.dir);
        self.fence = Some(desk);
        self.bmcs = Some(bmcs);
        let pairs: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{n}={}", bmc_ip(i)))
            .collect();
        pairs.join(" ")
    }

    /// Every node's fence_ipmilan device (`ipmi-NODE`) started, bounded.
    pub fn wait_ipmi_devices(&self) {
        let names = self.node_names();
        let started = super::wait_for(Duration::from_secs(90), || {
            let xml = self.crm_mon_xml();
            names.iter().all(|n| {
                xml.lines().any(|l| {
                    l.contains(&format!("id=\"ipmi-{n}\"")) && l.contains("role=\"Started\"")
                })
            })
        });
        assert!(
            started,
            "the ipmi devices started:\n{}",
            self.crm_mon_text()
        );
    }

    /// A node that was crashed, or fenced (powered off by the fence desk, perhaps behind a
    /// cut switch port), on again: its port up, what is left of its processes reaped, a fresh
    /// boot.
    pub fn bring_back(&mut self, i: usize) {
        self.heal(i);
        self.crash(i);
        self.restart(i);
    }

    /// Node `name`, back from a crash or a fence, online again and running `api` unpromoted
    /// as node `from` sees it (bounded); `what` names the step in the failure.
    pub fn rejoined(&self, name: &str, from: usize, what: &str) {
        assert!(
            self.wait_online(&self.node_names(), Duration::from_secs(120)),
            "{what}:\n{}",
            self.crm_mon_text()
        );
        assert!(
            wait_for(Duration::from_secs(90), || self
                .started_seen_from(from, "api")
                .iter()
                .any(|n| n == name)),
            "{name} rejoined unpromoted:\n{}",
            self.crm_mon_text()
        );
    }

    /// With fencing on, Pacemaker promotes only once the lost node is fenced: the fence desk
    /// powered `node` off after `since_unix`, before the guard on `new_master` took the key.
    /// Returns when, in ms after `since_unix`.
    pub fn fenced_before_the_key(&self, node: &str, since_unix: u64, new_master: usize) -> u64 {
        let fenced = self
            .fenced()
            .into_iter()
            .find(|f| f.node == node && f.at_unix_ms >= since_unix)
            .unwrap_or_else(|| panic!("{node} was not fenced:\n{}", self.crm_mon_text()));
        let took = self
            .guard_leader_since(new_master)
            .expect("the new master's guard");
        assert!(
            fenced.at_unix_ms <= took,
            "the key was taken {} ms before {node} was fenced",
            fenced.at_unix_ms - took
        );
        eprintln!(
            "{node} fenced {} ms after the fault; the key taken {} ms after it",
            fenced.at_unix_ms - since_unix,
            took.saturating_sub(since_unix)
        );
        fenced.at_unix_ms - since_unix
    }

    /// The fencings the desk did (none without fencing on).
    pub fn fenced(&self) -> Vec<super::fence::Fenced> {
        self.fence.as_ref().map(|d| d.fenced()).unwrap_or_default()
    }

    /// Brings a crashed node back: link, address, fresh boot, etcd member (same data).
    pub fn restart(&mut self, i: usize) {
        if let Some(desk) = &self.fence {
            desk.powered_on(&self.nodes[i].name);
        }
        let (ns, ip) = (self.nodes[i].ns.name.clone(), self.nodes[i].ip.clone());
        must("ip", &["-n", &ns, "link", "set", "lan0", "up"]);
        must(
            "ip",
            &["-n", &ns, "addr", "add", &format!("{ip}/24"), "dev", "lan0"],
        );
        self.boot(i);
        self.start_etcd(i);
    }

    /// The node that holds the VIP, other than `except`, waiting for one up to `limit`.
    pub fn vip_holder(&self, limit: Duration, except: Option<usize>) -> Option<usize> {
        let mut h = None;
        wait_for(limit, || {
            h = (0..self.nodes.len()).find(|&i| Some(i) != except && self.nodes[i].ns.holds(VIP));
            h.is_some()
        });
        h
    }

    /// The one node promoted, as seen from node `from`, once there is exactly one and it is
    /// not `not` (bounded).
    pub fn wait_promoted(
        &self,
        from: usize,
        resource: &str,
        not: Option<&str>,
        limit: Duration,
    ) -> String {
        let mut last = Vec::new();
        let ok = super::wait_for(limit, || {
            last = self.promoted_seen_from(from, resource);
            last.len() == 1 && Some(last[0].as_str()) != not
        });
        assert!(
            ok,
            "expected one promoted {resource} (not {not:?}), got {last:?}\n{}",
            self.crm_mon_text()
        );
        last[0].clone()
    }

    /// The pids of the processes named `comm` on node `i` (its network namespace).
    pub fn pids_of(&self, i: usize, comm: &str) -> Vec<String> {
        super::pids_in(&self.nodes[i].ns.name)
            .into_iter()
            .filter(|pid| {
                fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
            })
            .collect()
    }

    /// A firewall between node `i` and etcd: every TCP connection it opens to an etcd client
    /// port (2379), its own member's included, is routed into a link that answers nothing
    /// (silent, not refused); etcd's peers (2380) and corosync are untouched.
    pub fn cut_from_etcd(&self, i: usize) {
        self.cut_from_etcd_at(i, None);
    }

    /// As cut_from_etcd, for the connections to one address only (`Some(ip)`: one member).
    pub fn cut_from_etcd_at(&self, i: usize, ip: Option<&str>) {
        let ns = &self.nodes[i].ns.name;
        let rule = match ip {
            Some(ip) => {
                format!("rule add pref 50 iif lo to {ip} ipproto tcp dport 2379 lookup 100")
            }
            None => "rule add pref 50 iif lo ipproto tcp dport 2379 lookup 100".to_string(),
        };
        for cmd in [
            "link add hmblk0 type veth peer name hmblk1",
            "link set hmblk0 up",
            "link set hmblk1 up",
            "route add default dev hmblk0 table 100",
            &rule,
            "rule add pref 100 lookup local",
            "rule del pref 0",
        ] {
            let mut args = vec!["-n", ns];
            args.extend(cmd.split(' '));
            must("ip", &args);
        }
    }

    /// The firewall of cut_from_etcd removed.
    pub fn reconnect_to_etcd(&self, i: usize) {
        let ns = &self.nodes[i].ns.name;
        for cmd in [
            "rule add pref 0 lookup local",
            "rule del pref 100",
            "rule del pref 50",
            "link del hmblk0",
        ] {
            let mut args = vec!["-n", ns];
            args.extend(cmd.split(' '));
            must("ip", &args);
        }
    }

    /// Cuts node `i` off the switch (its processes keep running): a partition.
    pub fn cut(&self, i: usize) {
        self.switch.port_down(&self.nodes[i].port);
    }

    pub fn heal(&self, i: usize) {
        self.switch.port_up(&self.nodes[i].port);
    }

    /// Node `i` cut off with its carrier kept: its switch port taken off the bridge, still up
    /// (a failed switch, a VLAN gone), so that nothing on the node sees its link go down.
    pub fn detach(&self, i: usize) {
        self.switch
            .ip(&["link", "set", &self.nodes[i].port, "nomaster"]);
    }

    /// The port detach took off, on the bridge again.
    pub fn reattach(&self, i: usize) {
        self.switch
            .ip(&["link", "set", &self.nodes[i].port, "master", "br0"]);
    }

    pub fn pcs(&self, i: usize, args: &[&str]) -> Output {
        let mut full = vec!["pcs"];
        full.extend_from_slice(args);
        self.on(i, &full)
    }

    /// When the guard of `api` on node `i` took the leader key (Unix ms), from its socket;
    /// None when it does not answer or does not lead.
    pub fn guard_leader_since(&self, i: usize) -> Option<u64> {
        self.guard_status(i)?.leader_since_unix_ms
    }

    /// The status of `api`'s guard on node `i`, from its socket (None: no guard answers).
    pub fn guard_status(&self, i: usize) -> Option<hamaster::resource::status::GuardStatus> {
        super::guard_status(&self.run_path(i, "hamaster/api/guard.sock"))
    }

    /// Node `i`'s log file `name` (corosync.log, pacemaker.log) of its current boot.
    pub fn log_text(&self, i: usize, name: &str) -> String {
        fs::read_to_string(self.nodes[i].boot_dir().join("log").join(name)).unwrap_or_default()
    }

    /// Host path of a file under node `i`'s /run (current boot).
    pub fn run_path(&self, i: usize, rel: &str) -> PathBuf {
        self.nodes[i].boot_dir().join("run").join(rel)
    }
}

fn attr(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = line[start..].find('"')? + start;
    Some(line[start..end].to_string())
}

/// Nodes on which crm_mon's XML shows an instance of `resource` in `role`.
pub fn resources_in_role(xml: &str, resource: &str, role: &str) -> Vec<String> {
    let mut nodes = Vec::new();
    let mut lines = xml.lines().peekable();
    while let Some(l) = lines.next() {
        let l = l.trim_start();
        // Pacemaker 2.0's crm_mon says Master and Slave.
        let seen = attr(l, "role").map(|r| match r.as_str() {
            "Master" => "Promoted".to_string(),
            "Slave" => "Unpromoted".to_string(),
            _ => r,
        });
        if l.starts_with("<resource ")
            && attr(l, "id").as_deref() == Some(resource)
            && seen.as_deref() == Some(role)
            && attr(l, "active").as_deref() == Some("true")
        {
            if let Some(next) = lines.peek() {
                if let Some(name) = attr(next, "name") {
                    nodes.push(name);
                }
            }
        }
    }
    nodes
}

impl LabNode {
    /// This node's directory of its current boot.
    fn boot_dir(&self) -> PathBuf {
        self.dir.join(format!("boot{}", self.gen))
    }

    /// Kills every process of the node and reaps the ones this process started.
    fn kill(&mut self) {
        kill_all_in(&self.ns.name);
        for mut c in self.daemons.drain(..).chain(self.holder.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Before its files go: a dying member may still write them.
        self.bmcs.take();
        self.etcd.stop_all();
        for node in &mut self.nodes {
            node.kill();
        }
        if let Some(ns) = &self.witness {
            kill_all_in(&ns.name);
        }
        if self.created_mount_point {
            let _ = fs::remove_dir(OCF_MOUNT);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Creates one of the cib/ topologies with its pcs script on node 0, started at once
/// (ENABLE=yes), with the lab's etcd, the test service (lab/healthz.py over HTTP on 8443), TTL
/// 3 s and margin 1 s, monitors every 2 s (promoted) and 3 s; then checks the live CIB with
/// crm_verify. `trace` shows the pcs commands (sh -x) for the demo.
pub fn create_topology(lab: &Lab, script: &str, trace: bool) -> Output {
    create_topology_with(lab, script, trace, "")
}

/// The variables of the cib/*.sh scripts (and of the migration recipe) for this lab, as
/// `NAME=value` words for a shell: its etcd, the VIP on lan0, the lab's health service.
pub fn topology_env(lab: &Lab) -> String {
    format!(
        "ETCD_ENDPOINTS={} VIP={VIP} SERVICE=/usr/bin/python3 SERVICE_ARGS='{}/lab/healthz.py 8443 /run' \
         HEALTH_URL=http://127.0.0.1:8443/healthz NIC=lan0",
        lab.etcd.endpoints(),
        super::repo(),
    )
}

/// As create_topology, with more `NAME=value` words for the script (MONITOR_INTERVAL=10s).
pub fn create_topology_with(lab: &Lab, script: &str, trace: bool, extra: &str) -> Output {
    let repo = super::repo();
    let env = format!(
        "{} ENABLE=yes LEASE_TTL={} LEASE_MARGIN={} MONITOR_INTERVAL=2s UNPROMOTED_INTERVAL=3s \
         VIP_MONITOR_INTERVAL=2s {extra}",
        topology_env(lab),
        crate::LEASE_TTL_S,
        crate::LEASE_MARGIN_S,
    );
    let out = lab.sh(
        0,
        &format!(
            "{env} sh {} {repo}/cib/{script}.sh",
            if trace { "-x" } else { "" }
        ),
    );
    assert!(
        out.status.success(),
        "{script}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Errors fail; warnings may come from the history of an earlier scenario on this lab
    // (a baseline split brain leaves failed actions in the status section).
    let live = lab.on(0, &["crm_verify", "--live-check", "-V"]);
    let report = String::from_utf8_lossy(&live.stderr).into_owned();
    assert!(
        live.status.success() || !report.lines().any(|l| l.contains("error:")),
        "crm_verify -L after {script}: {report}"
    );
    out
}

/// A client in the switch namespace that polls `http://VIP:8443/healthz` every 20 ms (plain
/// HTTP over TCP, 150 ms timeouts) and records when it got a 200. One poll after the other
/// (`start`): during an outage each poll waits out its timeout, so a gap ends up to 170 ms
/// after the first answer the VIP could give. Overlapping (`start_with`, true): a poll
/// begins every 20 ms whatever the ones before are waiting for, so a gap ends within 20 ms
/// of it.
pub struct HealthClient {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
    latest_ok: std::sync::Arc<std::sync::atomic::AtomicBool>,
    samples: std::sync::Arc<std::sync::Mutex<Vec<(Instant, bool)>>>,
}

/// One poll of `addr`'s /healthz: whether it answered 200 within the timeouts.
fn poll_health(addr: &std::net::SocketAddr) -> bool {
    use std::io::{Read, Write};
    (|| -> std::io::Result<bool> {
        let mut s = std::net::TcpStream::connect_timeout(addr, Duration::from_millis(150))?;
        s.set_read_timeout(Some(Duration::from_millis(150)))?;
        s.write_all(b"GET /healthz HTTP/1.0\r\nHost: vip\r\n\r\n")?;
        let mut buf = [0u8; 32];
        let n = s.read(&mut buf)?;
        Ok(buf[..n].starts_with(b"HTTP/1.1 200") || buf[..n].starts_with(b"HTTP/1.0 200"))
    })()
    .unwrap_or(false)
}

impl HealthClient {
    pub fn start(lab: &Lab, vip: &str, port: u16) -> HealthClient {
        HealthClient::start_with(lab, vip, port, false)
    }

    pub fn start_with(lab: &Lab, vip: &str, port: u16, overlapping: bool) -> HealthClient {
        HealthClient::start_in(&lab.switch.name, vip, port, overlapping)
    }

    /// The client in namespace `ns` (a host on the switch).
    pub fn start_in(ns: &str, vip: &str, port: u16, overlapping: bool) -> HealthClient {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let latest_ok = std::sync::Arc::new(AtomicBool::new(false));
        let addr: std::net::SocketAddr = format!("{vip}:{port}").parse().unwrap();
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let ns = ns.to_string();
        let (stop2, latest2, kept) = (stop.clone(), latest_ok.clone(), samples.clone());
        let handle = std::thread::spawn(move || {
            // Threads spawned from here are in the namespace too.
            super::enter_netns(&ns);
            let limit = Instant::now() + Duration::from_secs(1800);
            let mut out: std::collections::VecDeque<std::thread::JoinHandle<()>> =
                Default::default();
            while !stop2.load(Ordering::SeqCst) && Instant::now() < limit {
                let t = Instant::now();
                let (latest, kept) = (latest2.clone(), kept.clone());
                let poll = move || {
                    let ok = poll_health(&addr);
                    kept.lock().unwrap().push((t, ok));
                    latest.store(ok, Ordering::SeqCst);
                };
                if overlapping {
                    out.push_back(std::thread::spawn(poll));
                    // Those done are joined; at most about 16 are ever out (300 ms / 20 ms).
                    while out.front().is_some_and(|h| h.is_finished()) {
                        let _ = out.pop_front().map(|h| h.join());
                    }
                } else {
                    poll();
                }
                std::thread::sleep(Duration::from_millis(20).saturating_sub(t.elapsed()));
            }
            for h in out {
                let _ = h.join();
            }
        });
        HealthClient {
            stop,
            handles: vec![handle],
            latest_ok,
            samples,
        }
    }

    /// The samples so far, the client polling on.
    pub fn samples(&self) -> Vec<(Instant, bool)> {
        let mut all = self.samples.lock().unwrap().clone();
        // Overlapping polls end out of order: by the time each began.
        all.sort_by_key(|s| s.0);
        all
    }

    pub fn wait_ok(&self, limit: Duration) -> bool {
        wait_for(limit, || {
            self.latest_ok.load(std::sync::atomic::Ordering::SeqCst)
        })
    }

    /// Waits (bounded) until a poll fails: the fault reached the client.
    pub fn wait_failing(&self, limit: Duration) -> bool {
        wait_for(limit, || {
            !self.latest_ok.load(std::sync::atomic::Ordering::SeqCst)
        })
    }

    pub fn finish(mut self) -> Vec<(Instant, bool)> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        self.samples()
    }
}

/// The outage a fault at `fault` caused: from the last OK answer before the first failed one
/// after the fault, to the first OK answer after that. (Injecting a fault takes a moment; the
/// old master may still answer meanwhile.)
pub fn outage(samples: &[(Instant, bool)], fault: Instant) -> Option<Duration> {
    let first_fail = samples.iter().position(|s| s.0 >= fault && !s.1)?;
    let last_ok = samples[..first_fail].iter().rev().find(|s| s.1)?.0;
    Some(first_ok_after(samples, fault)? - last_ok)
}

/// The longest run of failed samples between `from` and `to`: how long the client went
/// without an answer (from the last success before the run to the first after it).
pub fn longest_outage(samples: &[(Instant, bool)], from: Instant, to: Instant) -> Duration {
    let mut longest = Duration::ZERO;
    let mut last_ok: Option<Instant> = None;
    let mut failing = false;
    for (t, ok) in samples.iter().filter(|s| s.0 <= to) {
        match (ok, failing) {
            (true, true) => {
                if let Some(l) = last_ok {
                    if *t >= from {
                        longest = longest.max(*t - l);
                    }
                }
                failing = false;
                last_ok = Some(*t);
            }
            (true, false) => last_ok = Some(*t),
            (false, _) => failing = true,
        }
    }
    if let (true, Some(l)) = (failing, last_ok) {
        longest = longest.max(to.saturating_duration_since(l));
    }
    longest
}

/// The first answer from a poll that began at `since` or later (a success, whatever failed
/// before it).
pub fn first_ok_since(samples: &[(Instant, bool)], since: Instant) -> Option<Instant> {
    samples.iter().find(|s| s.0 >= since && s.1).map(|s| s.0)
}

/// The first 200 after the first failure at or after `fault`.
pub fn first_ok_after(samples: &[(Instant, bool)], fault: Instant) -> Option<Instant> {
    let first_fail = samples.iter().position(|s| s.0 >= fault && !s.1)?;
    samples[first_fail..].iter().find(|s| s.1).map(|s| s.0)
}

/// One row of the end-of-run table: scenario, topology, overlap, outage, promote time.
pub fn record(
    scenario: &str,
    topology: &str,
    overlap: Duration,
    outage: Option<Duration>,
    promote: Option<Duration>,
) {
    let path = PathBuf::from(format!("{}/target/cluster-timings.md", super::repo()));
    let ms = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{}", d.as_millis()));
    let row = format!(
        "| {scenario} | {topology} | {} | {} | {} |\n",
        overlap.as_millis(),
        ms(outage),
        ms(promote)
    );
    let mut text = fs::read_to_string(&path).unwrap_or_default();
    if text.is_empty() {
        text.push_str("| scenario | topology | VIP overlap (ms) | client outage (ms) | promote (ms) |\n|---|---|---|---|---|\n");
    }
    text.push_str(&row);
    let _ = fs::write(&path, &text);
    eprintln!("\n{text}");
}

impl Drop for HealthClient {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
