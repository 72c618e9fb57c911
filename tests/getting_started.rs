//! docs/getting-started.md, run as a newcomer runs it: every command of every `sh` block, in
//! the page's order, on a lab cluster (a real Pacemaker/Corosync cluster in namespaces with
//! BMCs: lab/src/cluster.rs), and what each step says it proves checked from outside — the
//! firewall's services by firewalld's own firewall-offline-cmd, the cluster booted from the
//! corosync.conf the page's `pcs cluster setup` wrote, etcd run from the page's env file and
//! unit with the page's CA and certificates (and asked with the page's etcdctl), fencing by
//! the page's fence-ipmilan.sh through IPMI, the master created by the page's pcs script with
//! TLS, then the page's checks and drills (a switchover, a fence of the master's node).
//!
//! Every command is classified (`way`); a command the test does not know fails it, so the
//! page cannot gain a step no test runs. What the lab cannot run is said per command, with the
//! test that covers it instead: RHEL's dnf and subscription-manager (the RPM's install is
//! tests/rpm.rs's), pcsd (the lab runs none: `pcs cluster setup --corosync_conf` writes the
//! same file without it, and the lab boots every node from that file with its authkey),
//! systemd (the lab's nodes run none: the page's etcd unit is run as systemd would run it, its
//! ExecStart with its EnvironmentFile). The page's example values are the lab's through the
//! substitutions of `Lab values`, each with its reason. `make check-etcd-fixed` (etcd 3.5.16:
//! the page's floor is 3.5.13); ignored by a plain `cargo test` (a whole cluster).

use hamaster_lab as support;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::cluster::{Lab, NET, VIP};

const PAGE: &str = include_str!("../docs/getting-started.md");

/// One command of the page, with the step (the `## N.` heading; 0 before the first) it is in.
#[derive(Debug, Clone)]
struct Cmd {
    step: u32,
    /// The block's index on the page, from 0.
    block: usize,
    text: String,
}

/// The `sh` blocks' commands, in order: a line continued by `\` joined with the next, a
/// here-document kept whole with its command, a `for … done` loop kept whole.
fn commands(page: &str) -> Vec<Cmd> {
    let mut out = Vec::new();
    let mut step = 0;
    let mut block = 0;
    let mut lines = page.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("## ") {
            step = rest
                .split('.')
                .next()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("a step heading without its number: {line}"));
            continue;
        }
        if line != "```sh" {
            continue;
        }
        let mut body = Vec::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            body.push(l.to_string());
        }
        let mut i = 0;
        while i < body.len() {
            let mut text = body[i].clone();
            i += 1;
            if text.trim().is_empty() {
                continue;
            }
            while text.ends_with('\\') && i < body.len() {
                text.push('\n');
                text.push_str(&body[i]);
                i += 1;
            }
            // A here-document ends at EOF, a loop at done.
            let end = if text.contains("<<'EOF'") {
                Some("EOF")
            } else if text.starts_with("for ") {
                Some("done")
            } else {
                None
            };
            if let Some(end) = end {
                while i < body.len() {
                    text.push('\n');
                    text.push_str(&body[i]);
                    i += 1;
                    if body[i - 1] == end {
                        break;
                    }
                }
            }
            out.push(Cmd { step, block, text });
        }
        block += 1;
    }
    out
}

/// What the test does with a command of the page.
#[derive(Debug, PartialEq)]
enum Way {
    /// Run on n1 (with the page's values and the lab's substitutions).
    Run,
    /// Run on every node, with that node's own name and addresses ("here n1").
    EachNode,
    /// firewall-cmd --permanent: run by firewall-offline-cmd on a configuration of its own.
    Firewall,
    /// pcs cluster setup: run with --corosync_conf, and the lab booted from that file.
    Setup,
    /// systemctl … etcd: the unit's ExecStart with its EnvironmentFile, on every node.
    StartEtcd,
    /// Not run here, and why.
    Skip(&'static str),
}

fn way(text: &str) -> Option<Way> {
    let first = text.lines().next().unwrap_or_default();
    let starts = |p: &str| first.starts_with(p);
    Some(if ["NODES=", "IPS=", "VIP="].iter().any(|p| starts(p)) {
        Way::Run
    } else if starts("subscription-manager ") || starts("dnf install -y pcs pacemaker") {
        Way::Skip("RHEL's repositories and packages; the lab's cluster stack is Debian's build of the same projects (docs/pacemaker-generations.md)")
    } else if starts("dnf install -y ./hamaster-") {
        Way::Skip("the RPM: built and installed in RHEL generations' roots by tests/rpm.rs (make check-rpm); the lab runs this build's binary and agents")
    } else if first == "systemctl enable --now pcsd"
        || starts("passwd hacluster")
        || starts("pcs host auth ")
    {
        Way::Skip("pcsd and its authentication: the lab runs no pcsd (pcs cluster setup --corosync_conf writes the same corosync.conf without it)")
    } else if starts("firewall-cmd --permanent ") {
        Way::Firewall
    } else if first == "firewall-cmd --reload" {
        Way::Skip(
            "the running firewall: firewall-offline-cmd checks the permanent configuration only",
        )
    } else if starts("pcs cluster setup ") {
        Way::Setup
    } else if first == "pcs cluster start --all" || first == "pcs cluster enable --all" {
        Way::Skip("the lab starts corosync and pacemakerd on every node itself, from the corosync.conf pcs cluster setup wrote (no systemd)")
    } else if starts("mkdir -p /etc/etcd/pki")
        || starts("openssl ")
        || starts("for i in 1 2 3; do")
        || starts("printf ")
        || starts("ETCDCTL_API=3 etcdctl ")
        || starts("NODES_BMCS=")
        || starts("ETCD_ENDPOINTS=")
        || starts("pcs stonith ")
        || starts("pcs resource ")
        || starts("pcs alert ")
        || starts("mkdir -p /var/lib/hamaster ")
        || starts("hamaster ")
        || starts("crm_mon ")
    {
        Way::Run
    } else if starts("cat > /etc/etcd/etcd.conf <<'EOF'")
        || starts("cat > /etc/systemd/system/etcd.service <<'EOF'")
    {
        Way::EachNode
    } else if first == "systemctl daemon-reload && systemctl enable --now etcd" {
        Way::StartEtcd
    } else {
        return None;
    })
}

/// The page's example values and the lab's, as ordered substitutions with their reasons.
struct LabValues {
    /// (the page's text, the lab's, why), applied in order.
    subs: Vec<(String, String, &'static str)>,
    /// The page's node addresses, in node order.
    page_ips: Vec<String>,
    page_names: Vec<String>,
    dir: PathBuf,
}

impl LabValues {
    fn new(values: &str, dir: &Path, bin: &Path) -> LabValues {
        let var = |name: &str| {
            values
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .map(|v| v.trim_matches('"').to_string())
                .unwrap_or_else(|| panic!("the page's values set {name}"))
        };
        let page_names: Vec<String> = var("NODES").split(' ').map(String::from).collect();
        let page_ips: Vec<String> = var("IPS").split(' ').map(String::from).collect();
        assert_eq!(page_names.len(), 3, "the page's three nodes");
        assert_eq!(page_ips.len(), 3, "the page's three addresses");
        let repo = support::repo();
        let mut subs: Vec<(String, String, &'static str)> = vec![
            (
                "/usr/share/doc/hamaster/cib/".into(),
                format!("{repo}/cib/"),
                "the RPM installs cib/ there (tests/rpm.rs)",
            ),
            (
                "/etc/etcd/pki".into(),
                dir.join("pki").display().to_string(),
                "one directory for every node's copy (the lab's nodes share the host's file system)",
            ),
            (
                "/usr/libexec/hamaster/alert_hamaster".into(),
                format!("{repo}/packaging/pacemaker/alert_hamaster"),
                "the RPM installs the alert agent there (tests/rpm.rs)",
            ),
            (
                "/var/lib/hamaster".into(),
                dir.join("var-lib-hamaster").display().to_string(),
                "one directory for every node's (the lab's nodes share the host's file system)",
            ),
            (
                "/usr/local/bin/etcd".into(),
                support::etcd::etcd_bin(),
                "etcd's binary: 3.5.16 under make check-etcd-fixed",
            ),
            (
                "NIC=eth0".into(),
                "NIC=lan0".into(),
                "the lab's cluster link",
            ),
            (
                "SERVICE_UNIT=api-server.service".into(),
                format!(
                    "SERVICE=/usr/bin/python3 SERVICE_ARGS='{repo}/lab/healthz.py 8443 /run'"
                ),
                "the lab's nodes run no systemd: the lab's service, supervised by the agent (service= is tests/systemd.rs's)",
            ),
            (
                "HEALTH_URL=https://127.0.0.1:8443/healthz".into(),
                "HEALTH_URL=http://127.0.0.1:8443/healthz".into(),
                "the lab's service answers plain HTTP",
            ),
            (
                "BMC_USER=admin BMC_PASSWORD=secret".into(),
                format!(
                    "BMC_USER={} BMC_PASSWORD={}",
                    support::bmc::BMC_USER,
                    support::bmc::BMC_PASSWORD
                ),
                "the simulated BMCs' account",
            ),
        ];
        for (i, ip) in page_ips.iter().enumerate() {
            subs.push((
                ip.clone(),
                format!("{NET}.{}", 11 + i),
                "the node's address",
            ));
        }
        // The BMCs: the page's NODES_BMCS, in node order.
        let bmcs = PAGE
            .lines()
            .find_map(|l| l.strip_prefix("NODES_BMCS=\""))
            .and_then(|l| l.split('"').next())
            .expect("the page's NODES_BMCS");
        for (i, pair) in bmcs.split(' ').enumerate() {
            let addr = pair.split('=').nth(1).expect("NODE=BMC");
            subs.push((
                addr.to_string(),
                support::bmc::bmc_ip(i),
                "the node's simulated BMC",
            ));
        }
        subs.push((var("VIP"), VIP.to_string(), "the lab's VIP"));
        subs.push((
            "hamaster ".into(),
            format!("{} ", bin.display()),
            "this build's binary",
        ));
        LabValues {
            subs,
            page_ips,
            page_names,
            dir: dir.to_path_buf(),
        }
    }

    /// `text` in the lab, as node `node` would run it: for EachNode commands, the page's n1
    /// and its address become the node's (except in ETCD_INITIAL_CLUSTER, which names all),
    /// and the node's own files are the node's directory's.
    fn apply(&self, text: &str, node: Option<usize>) -> String {
        let mut text = text.to_string();
        if let Some(i) = node {
            let own = |l: &str| {
                if l.starts_with("ETCD_INITIAL_CLUSTER=") {
                    l.to_string()
                } else {
                    l.replace(&self.page_names[0], &self.page_names[i])
                        .replace(&self.page_ips[0], &self.page_ips[i])
                }
            };
            text = text.lines().map(own).collect::<Vec<_>>().join("\n");
            let d = self.dir.join(&self.page_names[i]);
            for (page, lab) in [
                ("/etc/etcd/etcd.conf", d.join("etcd.conf")),
                ("/etc/systemd/system/etcd.service", d.join("etcd.service")),
                ("/var/lib/etcd", d.join("etcd-data")),
            ] {
                text = text.replace(page, &lab.display().to_string());
            }
        }
        for (page, lab, _) in &self.subs {
            if page == "hamaster " {
                if text.starts_with(page.as_str()) {
                    text = format!("{lab}{}", &text[page.len()..]);
                }
            } else {
                text = text.replace(page.as_str(), lab);
            }
        }
        text
    }
}

/// `sh -c` of `script` on node `i`: its exit code and output, printed.
fn run(lab: &Lab, i: usize, values: &str, script: &str, cwd: &Option<String>) -> (i32, String) {
    let cd = cwd
        .as_ref()
        .map(|d| format!("cd {d} && "))
        .unwrap_or_default();
    let out = lab.sh(i, &format!("set -e; {values}\n{cd}{script}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("--- on {}: {script}\n{text}", lab.nodes[i].name);
    (out.status.code().unwrap_or(-1), text)
}

/// firewall-offline-cmd of the firewalld package (scripts/fetch-firewalld) on a
/// configuration of its own: firewalld's defaults with the RPM's hamaster.xml where the RPM
/// puts it.
struct OfflineFirewall {
    tool: PathBuf,
    system: PathBuf,
    default: PathBuf,
}

impl OfflineFirewall {
    fn new(dir: &Path) -> OfflineFirewall {
        let out = Command::new(format!("{}/scripts/fetch-firewalld", support::repo()))
            .output()
            .expect("scripts/fetch-firewalld");
        assert!(
            out.status.success(),
            "scripts/fetch-firewalld: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let system = dir.join("etc-firewalld");
        let default = dir.join("usr-lib-firewalld");
        fs::create_dir_all(&system).unwrap();
        fs::copy(
            root.join("etc/firewalld/firewalld.conf"),
            system.join("firewalld.conf"),
        )
        .unwrap();
        let copied = Command::new("cp")
            .args(["-r"])
            .arg(root.join("usr/lib/firewalld"))
            .arg(&default)
            .status()
            .unwrap();
        assert!(copied.success());
        fs::copy(
            format!("{}/packaging/firewalld/hamaster.xml", support::repo()),
            default.join("services/hamaster.xml"),
        )
        .unwrap();
        OfflineFirewall {
            tool: root.join("usr/bin/firewall-offline-cmd"),
            system,
            default,
        }
    }

    fn cmd(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new("/usr/bin/python3")
            .arg(&self.tool)
            .arg("--system-config")
            .arg(&self.system)
            .arg("--default-config")
            .arg(&self.default)
            .args(args)
            .output()
            .expect("firewall-offline-cmd");
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// A page's `firewall-cmd --permanent …` line: its options (its comment dropped, and
    /// --permanent, which the offline tool always is); the services it adds.
    fn run_page_line(&self, line: &str) -> Vec<String> {
        let words: Vec<&str> = line
            .split('#')
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .filter(|w| *w != "--permanent")
            .collect();
        let (code, text) = self.cmd(&words);
        assert_eq!(code, 0, "firewall-offline-cmd {words:?}: {text}");
        words
            .iter()
            .filter_map(|w| w.strip_prefix("--add-service="))
            .map(String::from)
            .collect()
    }
}

/// The page's etcdctl check (step 4), as written there.
fn page_etcdctl() -> String {
    commands(PAGE)
        .into_iter()
        .find(|c| c.text.starts_with("ETCDCTL_API=3 etcdctl"))
        .expect("the page's etcdctl")
        .text
}

/// The leader key as the page's etcdctl (its endpoints and certificates) reads it on n1: the
/// holder's node and the fencing token (the key's create revision); None without a key.
fn leader(lab: &Lab, values: &LabValues) -> Option<(String, i64)> {
    // Its endpoints and TLS options, with `get KEY` for `endpoint health`.
    let call = page_etcdctl()
        .replace("\\\n", " ")
        .replace("endpoint health", "get /hamaster/prod/api/leader -w fields");
    let (_, text) = run(lab, 0, "", &values.apply(&call, None), &None);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("\"{name}\" : ")))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    Some((field("Value")?, field("CreateRevision")?.parse().ok()?))
}

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn every_command_of_the_page_is_one_the_test_knows() {
    let cmds = commands(PAGE);
    assert!(cmds.len() > 20, "the page's commands: {cmds:?}");
    for c in &cmds {
        assert!(
            way(&c.text).is_some(),
            "docs/getting-started.md, step {}: `{}` is a command tests/getting_started.rs does \
             not know: run it there, or say why the lab cannot",
            c.step,
            c.text
        );
    }
    // Every step has a command, and the steps come in order.
    let steps: BTreeSet<u32> = cmds.iter().map(|c| c.step).collect();
    assert_eq!(steps, (0..=8).collect(), "the page's steps");
}

#[test]
fn an_unknown_command_is_refused_and_a_heredoc_is_one_command() {
    let page = "## 1. X\n\n```sh\nrm -rf /\ncat > /etc/etcd/etcd.conf <<'EOF'\nA=1\nEOF\nfor i in 1 2 3; do\n  echo $i\ndone\n```\n";
    let cmds = commands(page);
    assert_eq!(cmds.len(), 3, "{cmds:?}");
    assert_eq!(way(&cmds[0].text), None);
    assert_eq!(way(&cmds[1].text), Some(Way::EachNode));
    assert!(cmds[2].text.ends_with("done"));
}

#[test]
#[ignore = "a whole cluster with fencing: make check-etcd-fixed"]
fn a_newcomer_follows_the_page_to_a_fenced_tls_guarded_master() {
    let started = Instant::now();
    let bin = support::agent::hamaster_bin();
    let cmds = commands(PAGE);
    let dir = std::env::temp_dir().join(support::unique("getting-started"));
    fs::create_dir_all(dir.join("pki")).unwrap();
    let _cleanup = TempDir(dir.clone());
    let values_text: String = cmds
        .iter()
        .filter(|c| c.step == 0)
        .map(|c| c.text.clone())
        .collect::<Vec<_>>()
        .join("\n");
    let values = LabValues::new(&values_text, &dir, &bin);
    for (page, lab, why) in &values.subs {
        eprintln!("substitution: {page} → {lab} ({why})");
    }
    let shell_values = values.apply(&values_text, None);
    let mut lab: Option<Lab> = None;
    let mut firewall: Option<OfflineFirewall> = None;
    let mut services = Vec::new();
    let mut cwd: Option<String> = None;
    let mut last_block = usize::MAX;
    let mut holder_before: Option<(String, i64)> = None;
    let mut ran = 0;
    for c in cmds.iter().filter(|c| c.step > 0) {
        if c.block != last_block {
            cwd = None;
            last_block = c.block;
        }
        let w = way(&c.text).expect("every command known (the test above)");
        eprintln!(
            "=== step {} ({:?}): {}",
            c.step,
            w,
            c.text.lines().next().unwrap()
        );
        match w {
            Way::Skip(why) => eprintln!("    not run here: {why}"),
            Way::Firewall => {
                let fw = firewall.get_or_insert_with(|| OfflineFirewall::new(&dir));
                services.extend(fw.run_page_line(&c.text));
            }
            Way::Setup => {
                let conf = dir.join("corosync.conf");
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "{} --corosync_conf {}",
                        values.apply(&c.text, None),
                        conf.display()
                    ))
                    .output()
                    .expect("pcs cluster setup");
                assert!(
                    out.status.success(),
                    "the page's pcs cluster setup: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let key = dir.join("authkey");
                let made = Command::new("corosync-keygen")
                    .arg("-k")
                    .arg(&key)
                    .output()
                    .expect("corosync-keygen");
                assert!(made.status.success(), "corosync-keygen");
                let conf = fs::read_to_string(&conf).unwrap();
                assert!(conf.contains("crypto_cipher: aes256"), "{conf}");
                lab = Some(Lab::from_setup("gs", 3, &conf, &fs::read(&key).unwrap()));
            }
            Way::EachNode => {
                let l = lab.as_ref().expect("the cluster first");
                for i in 0..3 {
                    fs::create_dir_all(dir.join(&values.page_names[i])).unwrap();
                    let (code, text) =
                        run(l, i, &shell_values, &values.apply(&c.text, Some(i)), &None);
                    assert_eq!(code, 0, "{}: {text}", c.text);
                }
            }
            Way::StartEtcd => {
                let l = lab.as_mut().expect("the cluster first");
                for i in 0..3 {
                    let d = dir.join(&values.page_names[i]);
                    let unit = fs::read_to_string(d.join("etcd.service")).expect("the unit");
                    let field = |k: &str| {
                        unit.lines()
                            .find_map(|line| line.strip_prefix(&format!("{k}=")))
                            .unwrap_or_else(|| panic!("the unit's {k}"))
                            .to_string()
                    };
                    let env_file = fs::read_to_string(field("EnvironmentFile"))
                        .expect("the unit's EnvironmentFile");
                    let mut argv = vec!["env".to_string()];
                    argv.extend(
                        env_file
                            .lines()
                            .filter(|line| line.contains('=') && !line.starts_with('#'))
                            .map(String::from),
                    );
                    argv.extend(field("ExecStart").split_whitespace().map(String::from));
                    l.set_etcd_command(i, argv);
                }
            }
            Way::Run => {
                let l = lab.as_mut().expect("the cluster first");
                let first = c.text.lines().next().unwrap().to_string();
                if first.starts_with("NODES_BMCS=") {
                    l.start_bmcs();
                }
                if let Some(to) = first
                    .strip_prefix("hamaster switchover api --to ")
                    .map(|t| t.trim().to_string())
                {
                    // The page's example moves to n2: where Pacemaker's first promote chose
                    // n2, the test moves the master elsewhere first (not the page's step).
                    if l.wait_promoted(0, "api", None, Duration::from_secs(60)) == to {
                        let bin = support::agent::hamaster_bin();
                        let other = if to == "n1" { "n3" } else { "n1" };
                        let (code, text) = l.switchover(&bin, 0, &["--to", other]);
                        assert_eq!(code, Some(0), "moved off {to} first: {text}");
                        l.wait_promoted(0, "api", Some(&to), Duration::from_secs(60));
                    }
                }
                if first.starts_with("pcs stonith fence ") {
                    holder_before = leader(l, &values);
                }
                let script = values.apply(&c.text, None);
                let (code, text) = run(l, 0, &shell_values, &script, &cwd);
                assert_eq!(code, 0, "step {}: {}\n{text}", c.step, c.text);
                if let Some(d) = script.split("&& cd ").nth(1) {
                    cwd = Some(d.trim().to_string());
                }
                after(l, &values, &first, &text, &holder_before);
            }
        }
        ran += 1;
    }
    // The firewall: every service the page adds is in the permanent configuration.
    let fw = firewall.expect("the page's firewall step");
    let (_, listed) = fw.cmd(&["--list-services"]);
    for s in [
        "high-availability",
        "etcd-client",
        "etcd-server",
        "hamaster",
    ] {
        assert!(
            services.iter().any(|x| x == s) && listed.split_whitespace().any(|x| x == s),
            "the firewall's {s}: {listed}"
        );
    }
    eprintln!("the page: {ran} commands walked in {:?}", started.elapsed());
}

/// What a command of the page says it proves, checked once it ran.
fn after(
    lab: &mut Lab,
    values: &LabValues,
    first: &str,
    text: &str,
    before: &Option<(String, i64)>,
) {
    if first.starts_with("ETCDCTL_API=3 etcdctl") {
        assert_eq!(
            text.matches("is healthy").count(),
            3,
            "the page's etcd: three healthy members over TLS: {text}"
        );
        // And none without a client certificate of the page's CA (client-cert-auth).
        let page = page_etcdctl();
        let without: Vec<&str> = page
            .split_whitespace()
            .filter(|w| *w != "\\" && !w.starts_with("--cert=") && !w.starts_with("--key="))
            .collect();
        let without = without.join(" ");
        let (code, text) = run(lab, 0, "", &values.apply(&without, None), &None);
        assert_ne!(
            code, 0,
            "etcd answered a client without a certificate: {text}"
        );
    } else if first.starts_with("pcs stonith status") {
        lab.wait_ipmi_devices();
    } else if first == "pcs resource enable api-clone" {
        let p = lab.wait_promoted(0, "api", None, Duration::from_secs(120));
        let (holder, _) = leader(lab, values).expect("the leader key");
        assert_eq!(
            holder, p,
            "the key's holder, read with the page's certificates"
        );
        assert!(
            lab.vip_holder(Duration::from_secs(30), None).is_some(),
            "the VIP is up"
        );
    } else if first.starts_with("hamaster status") {
        let p = lab.wait_promoted(0, "api", None, Duration::from_secs(60));
        assert!(
            text.lines()
                .any(|l| l.starts_with("etcd holder") && l.contains(&p)),
            "hamaster status names the master {p}: {text}"
        );
    } else if first.starts_with("crm_mon ") {
        assert!(
            text.contains("Promoted") && text.contains("master-api"),
            "{text}"
        );
    } else if first.starts_with("hamaster switchover") {
        let to = first.split("--to ").nth(1).unwrap().trim().to_string();
        let p = lab.wait_promoted(0, "api", None, Duration::from_secs(60));
        assert_eq!(p, to, "the switchover's target promoted");
        assert_eq!(leader(lab, values).map(|(h, _)| h), Some(to.clone()));
        // The alert agent counted the promote where it ran (Pacemaker runs it as hacluster).
        let counted = format!("task=\"promote\",node=\"{to}\",outcome=\"ok\"}}");
        alert_counted(values, &counted, &format!("the promote on {to}"));
    } else if first.starts_with("pcs stonith fence ") {
        let fenced = first.split_whitespace().nth(3).unwrap().to_string();
        let (was, token) = before.clone().expect("the key before the fence");
        assert_eq!(was, fenced, "the page fences the master's node");
        let from = (0..3).find(|&i| lab.nodes[i].name != fenced).unwrap();
        let p = lab.wait_promoted(from, "api", Some(&fenced), Duration::from_secs(120));
        let (holder, new_token) = leader(lab, values).expect("the new master's key");
        assert_eq!(holder, p);
        assert!(
            new_token > token,
            "a higher fencing token: {new_token} after {token}"
        );
        let counted = format!(
            "{{kind=\"fencing\",resource=\"\",task=\"fence\",node=\"{fenced}\",outcome=\"ok\"}}"
        );
        alert_counted(values, &counted, &format!("the fence of {fenced}"));
        let fi = lab.index(&fenced);
        let by_bmc = support::wait_for(Duration::from_secs(60), || {
            lab.fence
                .as_ref()
                .is_some_and(|d| d.powered_on_by_bmc().iter().any(|(n, _)| *n == fenced))
        });
        assert!(
            by_bmc,
            "{fenced}'s BMC powered it on again (Pacemaker's reboot)"
        );
        lab.bring_back(fi);
        lab.rejoined(&fenced, from, "the fenced node back as a standby");
    }
}

/// alert_hamaster's counters (the page's recipient) show `series` within a bound: `what`.
fn alert_counted(values: &LabValues, series: &str, what: &str) {
    let alerts = values.dir.join("var-lib-hamaster/alerts.prom");
    let mut text = String::new();
    let seen = support::wait_for(Duration::from_secs(20), || {
        text = fs::read_to_string(&alerts).unwrap_or_default();
        text.lines()
            .any(|l| l.starts_with("hamaster_cluster_events_total{") && l.contains(series))
    });
    assert!(seen, "alert_hamaster counted {what}: {text}");
    // As Pacemaker wrote it (as hacluster, with its umask): node_exporter, another user,
    // reads it.
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(&alerts).unwrap().permissions().mode();
    assert_eq!(mode & 0o004, 0o004, "{} is {mode:o}", alerts.display());
}
