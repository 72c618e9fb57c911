//! Each cluster generation for real, with the RPM's own binary (linked against glibc 2.17) as
//! the agent: Debian roots made by scripts/make-root — bullseye with RHEL 8.4's Pacemaker
//! 2.0.5 and pcs 0.10.8, trixie with RHEL 10's Pacemaker 3.0.0 and pcs 0.12.0 — and the host's
//! bookworm (2.1.5 / 0.11.5, RHEL 8.5–9's generation). First, without daemons: pcs creates the
//! master on an empty CIB (`pcs -f`), crm_verify checks it, cib/*.xml load. Then a live 3-node
//! cluster per generation (lab/src/cluster.rs, the root's daemons under chroot in the
//! node namespaces): the documented create, promote, a reloadable `pcs resource update`, pcs
//! describe, ocf-tester, and a crash failover with 0 VIP overlap (`make check-generations`).

use hamaster_lab as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::cluster::{create_topology_with, Etcd, Lab, NET, VIP};
use support::must;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// The RPM's binary, unpacked (built by `make rpm` when it is not there yet, or older than
/// the sources).
fn rpm_binary() -> PathBuf {
    let find = || support::built_rpm("RPMS", "hamaster", ".x86_64.rpm");
    let fresh = |rpm: &PathBuf| {
        let built = std::fs::metadata(rpm).and_then(|m| m.modified()).ok();
        built.is_some_and(|b| newest_source().is_none_or(|n| n <= b))
    };
    let rpm = find().filter(fresh).unwrap_or_else(|| {
        must(&format!("{MANIFEST}/scripts/build-rpm"), &[]);
        find().expect("the RPM")
    });
    let dir = std::env::temp_dir().join(format!("hm-gen-rpm-{}", std::process::id()));
    support::unpack_rpm(&rpm, &dir);
    dir.join("usr/sbin/hamaster")
}

/// The last change to what the RPM's binary is built from.
fn newest_source() -> Option<std::time::SystemTime> {
    ["src", "Cargo.toml", "Cargo.lock", "build.rs", "packaging"]
        .iter()
        .flat_map(|part| support::files_under(&Path::new(MANIFEST).join(part)))
        .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .max()
}

/// The RPM's vip agent (its own program), beside the unpacked binary's tree.
fn rpm_vip_agent(binary: &Path) -> PathBuf {
    let root = binary.parent().unwrap().parent().unwrap().parent().unwrap();
    root.join("usr/lib/ocf/resource.d/hamaster/vip")
}

/// Installs the programs into the root, as the RPM lays them out.
fn install(root: &Path, binary: &Path) {
    std::fs::copy(binary, root.join("usr/sbin/hamaster")).unwrap();
    let agents = root.join("usr/lib/ocf/resource.d/hamaster");
    std::fs::create_dir_all(&agents).unwrap();
    let link = agents.join("master");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("../../../../sbin/hamaster", &link).unwrap();
    // A root cached from an older layout may hold vip as a link to hamaster: copying
    // through it would overwrite hamaster itself.
    let vip = agents.join("vip");
    let _ = std::fs::remove_file(&vip);
    std::fs::copy(rpm_vip_agent(binary), vip).unwrap();
}

/// Runs `script` in the root: a private mount namespace with /proc, an empty network
/// namespace, chroot. Returns (success, stdout + stderr).
fn in_root(root: &Path, script: &str) -> (bool, String) {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "--net",
        "--fork",
        "sh",
        "-c",
    ])
    .arg(format!(
        "mount -t proc proc {root}/proc && exec chroot {root} sh -c \"$0\"",
        root = root.display()
    ))
    .arg(script);
    let run = support::run_command(cmd);
    (run.code == 0, format!("{}{}", run.stdout, run.stderr))
}

/// One generation: its root, what it runs, and how its documentation spells the roles.
struct Generation {
    suite: &'static str,
    pacemaker: &'static str,
    pcs: &'static str,
    promoted: &'static str,
    unpromoted: &'static str,
    /// The schema its meta-data dialect is checked against: resource-agents' for OCF 1.0
    /// (Pacemaker 2.0), pcs's OCF 1.1 schema from Pacemaker 2.1 on (reloadable parameters).
    schema: &'static str,
}

const GENERATIONS: [Generation; 2] = [
    Generation {
        suite: "bullseye",
        pacemaker: "2.0.5",
        pcs: "0.10.8",
        promoted: "Master",
        unpromoted: "Slave",
        schema: "/usr/share/resource-agents/metadata.rng",
    },
    Generation {
        suite: "trixie",
        pacemaker: "3.0.0",
        pcs: "0.12.0",
        promoted: "Promoted",
        unpromoted: "Unpromoted",
        schema: "/usr/share/pcs/data/ocf-1.1.rng",
    },
];

const CREATE: &str = "pcs -f /tmp/c.xml resource create api ocf:hamaster:master \
     etcd_endpoints=http://192.0.2.21:2379,http://192.0.2.22:2379,http://192.0.2.23:2379 \
     command=/bin/sleep args=1000 ip=192.0.2.10 cidr_netmask=24";

#[test]
#[ignore = "builds Debian roots and the RPM (minutes): run by make check-generations"]
fn each_generations_pcs_creates_the_master_and_its_schema_accepts_it() {
    let binary = rpm_binary();
    for g in &GENERATIONS {
        let root = PathBuf::from(must(&format!("{MANIFEST}/scripts/make-root"), &[g.suite]).trim());
        install(&root, &binary);
        let (ok, versions) = in_root(&root, "pacemakerd --version; pcs --version");
        assert!(ok, "{}: {versions}", g.suite);
        assert!(
            versions.contains(&format!("Pacemaker {}", g.pacemaker)) && versions.contains(g.pcs),
            "{}: {versions}",
            g.suite
        );

        // The agent runs there (glibc of that release) and spells the roles its schema knows.
        let (ok, md) = in_root(&root, "/usr/lib/ocf/resource.d/hamaster/master meta-data");
        assert!(ok, "{}: {md}", g.suite);
        assert!(
            md.contains(&format!("interval=\"10s\" role=\"{}\"", g.promoted))
                && md.contains(&format!("interval=\"11s\" role=\"{}\"", g.unpromoted)),
            "{}: {md}",
            g.suite
        );
        let (ok, valid) = in_root(
            &root,
            &format!(
                "for a in master vip; do /usr/lib/ocf/resource.d/hamaster/$a meta-data | \
                 xmllint --noout --relaxng {} - || exit 1; done",
                g.schema
            ),
        );
        assert!(ok, "{}: meta-data against {}: {valid}", g.suite, g.schema);
        assert_eq!(
            md.contains("<action name=\"reload-agent\""),
            g.suite != "bullseye",
            "{}: reload-agent where Pacemaker calls it (2.1+): {md}",
            g.suite
        );

        // The create without ops (pcs copies the meta-data's), and the one the documentation
        // gives for this generation, each on an empty CIB, verified by its crm_verify.
        let documented = format!(
            "{CREATE} op monitor interval=10s role={} op monitor interval=11s role={} \
             op promote timeout=60s promotable promoted-max=1",
            g.promoted, g.unpromoted
        );
        for create in [format!("{CREATE} promotable promoted-max=1"), documented] {
            let script = format!(
                "cibadmin --empty >/tmp/c.xml && {create} && \
                 pcs -f /tmp/c.xml property set stonith-enabled=false && \
                 CIB_file=/tmp/c.xml crm_verify -L -V && grep -c 'role=\"{}\"' /tmp/c.xml",
                g.promoted
            );
            let (ok, out) = in_root(&root, &script);
            assert!(
                ok,
                "{} ({} / pcs {}): {create}\n{out}",
                g.suite, g.pacemaker, g.pcs
            );
        }
        // The other topology: the VIP its own resource, colocated with the promoted instance
        // and started after promote, in this generation's spelling.
        let script = format!(
            "cibadmin --empty >/tmp/c.xml && \
             pcs -f /tmp/c.xml resource create api ocf:hamaster:master \
               etcd_endpoints=http://192.0.2.21:2379 command=/bin/sleep args=1000 \
               promotable promoted-max=1 && \
             pcs -f /tmp/c.xml resource create api-vip ocf:hamaster:vip ip=192.0.2.10 \
               cidr_netmask=24 && \
             pcs -f /tmp/c.xml constraint colocation add api-vip with {} api-clone INFINITY && \
             pcs -f /tmp/c.xml constraint order promote api-clone then start api-vip && \
             pcs -f /tmp/c.xml property set stonith-enabled=false && \
             CIB_file=/tmp/c.xml crm_verify -L -V && \
             grep -q 'with-rsc-role=\"{}\"' /tmp/c.xml",
            g.promoted, g.promoted
        );
        let (ok, out) = in_root(&root, &script);
        assert!(ok, "{}: colocation with {}: {out}", g.suite, g.promoted);
        // The topologies' CIB snippets: each generation loads the ones written for it, with
        // its own cibadmin, as cib/README.md says.
        let cib = root.join("tmp/hm-cib");
        let _ = std::fs::remove_dir_all(&cib);
        must(
            "cp",
            &["-r", &format!("{MANIFEST}/cib"), cib.to_str().unwrap()],
        );
        let (ok, out) = in_root(
            &root,
            &support::cib::snippet_check("/tmp/hm-cib", g.suite == "bullseye"),
        );
        assert!(ok, "{}: cib snippets: {out}", g.suite);
        // The scripts, run by this generation's pcs with the example values, create exactly
        // the snippets written for it (pcs 0.10.8: pacemaker-2.0/).
        for topology in support::cib::SCRIPTED {
            let vars = support::cib::example(topology);
            let (ok, made) = in_root(
                &root,
                &support::cib::run_script("/tmp/hm-cib", topology, &vars),
            );
            assert!(ok, "{}: {topology}.sh: {made}", g.suite);
            let dir = match g.suite {
                "bullseye" => "/tmp/hm-cib/pacemaker-2.0",
                _ => "/tmp/hm-cib",
            };
            let (ok, snippet) = in_root(&root, &support::cib::load_snippet(dir, topology));
            assert!(ok, "{}: {topology} snippet: {snippet}", g.suite);
            assert_eq!(
                support::cib::canonical(&made),
                support::cib::canonical(&snippet),
                "{}: {topology}.sh (left) and {dir}/{topology}'s snippet (right)",
                g.suite
            );
        }
        let _ = std::fs::remove_dir_all(&cib);
        let (ok, describe) = in_root(&root, "pcs resource describe ocf:hamaster:master");
        assert!(
            ok && describe.contains("etcd_endpoints") && describe.contains("lease_ttl"),
            "{}: {describe}",
            g.suite
        );
        eprintln!(
            "{}: Pacemaker {}, pcs {}: meta-data roles {}/{}, both creates, the colocation, the cib snippets loaded and the scripts creating them, describe ok",
            g.suite, g.pacemaker, g.pcs, g.promoted, g.unpromoted
        );
    }
    let _ = std::fs::remove_dir_all(binary.parent().unwrap().parent().unwrap().parent().unwrap());
}

/// The leader key of the lab's master resource `api`.
const KEY: &str = support::API_KEY;

/// What one live generation showed, for the summary line.
struct Live {
    suite: &'static str,
    versions: String,
    ttl: String,
    update: &'static str,
    partition_ms: u128,
    failover_ms: u128,
    reports_ms: u128,
    switch_ms: u128,
    move_ms: u128,
}

/// The lease's id and granted TTL, from etcd's side.
fn lease_of_key(lab: &Lab) -> (String, String) {
    let text = String::from_utf8_lossy(&lab.etcd.etcdctl(&["get", KEY, "-w", "fields"]).stdout)
        .into_owned();
    let lease: i64 = support::etcd::field(&text, "Lease")
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("no lease on {KEY}: {text}"));
    let id = format!("{lease:x}");
    let ttl = String::from_utf8_lossy(&lab.etcd.etcdctl(&["lease", "timetolive", &id]).stdout)
        .into_owned();
    let granted = ttl
        .split("granted with TTL(")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or_else(|| panic!("lease {id}: {ttl}"))
        .to_string();
    (id, granted)
}

/// `hamaster switchover api --to` a standby, run on a third node: returns the time it took.
fn switchover(lab: &Lab, suite: &str, in_root: bool) -> u128 {
    let bin = if in_root {
        PathBuf::from("/usr/sbin/hamaster")
    } else {
        support::OcfDir::get().root.join("hamaster")
    };
    let h = lab
        .vip_holder(Duration::from_secs(30), None)
        .unwrap_or_else(|| panic!("{suite}: nobody holds the VIP:\n{}", lab.crm_mon_text()));
    let (to, from) = ((h + 1) % 3, (h + 2) % 3);
    let to_name = lab.nodes[to].name.clone();
    let t = Instant::now();
    let (code, text) = lab.switchover(&bin, from, &["--to", &to_name]);
    let took = t.elapsed().as_millis();
    let flag = if suite == "bullseye" {
        "--master"
    } else {
        "--promoted"
    };
    assert!(
        code == Some(0)
            && text.contains(&format!("--node {to_name} {flag}"))
            && text.contains(&format!("{to_name} is the master")),
        "{suite}: switchover --to {to_name}: {text}\n{}",
        lab.crm_mon_text()
    );
    if let Err(why) = lab.switched_over(to, h) {
        panic!("{suite}: switchover to {to_name}: {why}");
    }
    eprintln!("{suite}: switchover --to {to_name} returned after {took} ms: {text}");
    took
}

/// `pcs resource move` of the promoted role off the master, with this generation's pcs:
/// `--master` on pcs 0.10 (RHEL 8.4), which leaves its ban behind (`pcs resource clear`, as
/// its documentation says), `--promoted` from 0.11 on, which waits for the move and removes
/// its constraint itself. Another node holds the key and the VIP, no `cli-` constraint is
/// left, and the master stays there. Returns how long the move took (pcs's return on 0.11+,
/// the new master seen on 0.10).
fn pcs_move(lab: &Lab, suite: &str) -> u128 {
    let h = lab
        .vip_holder(Duration::from_secs(30), None)
        .unwrap_or_else(|| panic!("{suite}: nobody holds the VIP:\n{}", lab.crm_mon_text()));
    let old = lab.nodes[h].name.clone();
    let (flag, leaves_its_ban) = match suite {
        "bullseye" => ("--master", true),
        _ => ("--promoted", false),
    };
    let t = Instant::now();
    let out = lab.pcs(0, &["resource", "move", "api-clone", flag]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{suite}: pcs resource move api-clone {flag}: {said}\n{}",
        lab.crm_mon_text()
    );
    let mut new = None;
    assert!(
        support::wait_for(Duration::from_secs(60), || {
            new = lab
                .vip_holder(Duration::from_millis(10), Some(h))
                .filter(|&n| {
                    lab.leader_key(KEY)
                        .is_some_and(|(k, _)| k == lab.nodes[n].name)
                });
            new.is_some()
        }),
        "{suite}: the master moved off {old}: {said}\n{}",
        lab.crm_mon_text()
    );
    let took = t.elapsed().as_millis();
    let new = new.unwrap();
    if leaves_its_ban {
        assert!(
            lab.constraints().contains("cli-ban-api-clone"),
            "{suite}: pcs 0.10's move bans {old}: {}",
            lab.constraints()
        );
        let clear = lab.pcs(0, &["resource", "clear", "api-clone"]);
        assert!(
            clear.status.success(),
            "{suite}: pcs resource clear: {clear:?}"
        );
    }
    // The constraint gone, the master stays where it went (its promotion score is the higher).
    std::thread::sleep(Duration::from_secs(5));
    if let Err(why) = lab.switched_over(new, h) {
        panic!("{suite}: pcs resource move {flag}: {why}");
    }
    eprintln!(
        "{suite}: pcs resource move api-clone {flag}: {} is the master after {took} ms",
        lab.nodes[new].name
    );
    took
}

/// One generation live: what runs there/// One generation live: what runs there, and the corosync token its lab is given.
struct LiveGeneration {
    suite: &'static str,
    /// `pacemakerd --version`, `pcs --version` and `corosync -v` must name these.
    versions: [&'static str; 3],
    /// LAB_TOTEM for its corosync.conf, and the lease that must follow from it on 3 nodes.
    totem: &'static str,
    ttl: &'static str,
}

const LIVE: [LiveGeneration; 3] = [
    LiveGeneration {
        suite: "bullseye",
        versions: ["Pacemaker 2.0.5", "0.10.8", "version '3.1.2'"],
        // 1650 + 1980 ms: below the floor of a lease that follows corosync.
        totem: "token: 1000",
        ttl: "6s",
    },
    LiveGeneration {
        suite: "bookworm",
        versions: ["Pacemaker 2.1.5", "0.11.5", "version '3.1.7'"],
        // RHEL's defaults: 3650 + 4380 ms.
        totem: "token: 3000",
        ttl: "8s",
    },
    LiveGeneration {
        suite: "trixie",
        versions: ["Pacemaker 3.0.0", "0.12.0", "version '3.1.9'"],
        totem: "token: 1000",
        ttl: "6s",
    },
];

/// Cuts (partition) or crashes the VIP's holder; waits until another node holds the VIP and
/// the key. Returns the new holder and how long it took.
fn fail_over(lab: &mut Lab, suite: &str, crash: bool) -> (usize, u128) {
    let h = lab
        .vip_holder(Duration::from_secs(30), None)
        .expect("a holder");
    let at = Instant::now();
    if crash {
        lab.crash(h);
    } else {
        lab.cut(h);
    }
    let new = lab.vip_holder(Duration::from_secs(60), Some(h));
    let took = at.elapsed().as_millis();
    assert!(
        new.is_some(),
        "{suite}: the VIP moved (crash: {crash}):\n{}",
        lab.crm_mon_text()
    );
    let n = new.unwrap();
    assert!(
        support::wait_for(Duration::from_secs(10), || lab.leader_key(KEY).map(|k| k.0)
            == Some(lab.nodes[n].name.clone())),
        "{suite}: the key moved with the VIP"
    );
    if !crash {
        lab.heal(h);
        assert!(
            lab.wait_online(&lab.node_names(), Duration::from_secs(180)),
            "{suite}: whole again after the partition:\n{}",
            lab.crm_mon_text()
        );
    }
    (n, took)
}

/// One generation's live cluster: documented create without lease settings (the lease follows
/// corosync), promote, describe, ocf-tester on both agents, an update of a reloadable
/// parameter, a partition and a crash of the holder; VIP overlap 0 throughout.
/// Node `name`'s value of `attribute` in `crm_mon -A1` (every generation prints a node's
/// attributes under a line naming the node, one `name : value` line each).
fn attribute_in_crm_mon(lab: &Lab, name: &str, attribute: &str) -> Option<String> {
    let text = String::from_utf8_lossy(&lab.on(0, &["crm_mon", "-A1"]).stdout).into_owned();
    let mut node = None;
    for line in text.lines() {
        let t = line.trim().trim_start_matches('*').trim();
        if let Some(rest) = t.strip_prefix("Node") {
            node = Some(
                rest.trim_start_matches(':')
                    .trim()
                    .trim_end_matches(':')
                    .to_string(),
            );
            continue;
        }
        if node.as_deref() == Some(name) {
            if let Some((n, v)) = t.split_once(':') {
                if n.trim() == attribute {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// A standby reports what a promotion would need, in `crm_mon -A1`: every etcd member
/// answering, the VIP's interface; one member made silent from it shows there within a
/// monitor interval (the time it took, returned); all of etcd silent makes it unpromotable:
/// OCF_DEGRADED where Pacemaker knows it (2.1+), no score anywhere.
fn standby_reports(lab: &Lab, suite: &str, i: usize) -> Duration {
    let name = lab.nodes[i].name.clone();
    let etcd = "hamaster-api-etcd";
    let wait_value = |limit: u64, want: &dyn Fn(&str) -> bool| {
        let mut last = None;
        let ok = support::wait_for(Duration::from_secs(limit), || {
            last = attribute_in_crm_mon(lab, &name, etcd);
            last.as_deref().is_some_and(want)
        });
        (ok, last)
    };
    let (ok, last) = wait_value(30, &|v| v.starts_with("3/3 members, etcd "));
    assert!(
        ok,
        "{suite}: {name} reports every etcd member ({last:?}):\n{}",
        String::from_utf8_lossy(&lab.on(0, &["crm_mon", "-A1"]).stdout)
    );
    let vip = attribute_in_crm_mon(lab, &name, "hamaster-api-vip");
    assert!(
        vip.as_deref().is_some_and(|v| !v.starts_with("none")),
        "{suite}: {name}'s VIP interface: {vip:?}"
    );
    let watchdog = attribute_in_crm_mon(lab, &name, "hamaster-api-watchdog");
    assert!(watchdog.is_some(), "{suite}: {name}'s watchdog attribute");
    // One member silent from this standby (another node's: its own is local).
    let endpoints = lab.etcd.endpoints();
    let member = endpoints
        .split(',')
        .map(|e| {
            e.trim_start_matches("http://")
                .trim_end_matches(":2379")
                .to_string()
        })
        .find(|ip| !lab.nodes[i].ns.holds(ip))
        .expect("a member on another node");
    let cut = Instant::now();
    lab.cut_from_etcd_at(i, Some(&member));
    let (ok, last) = wait_value(20, &|v| v.starts_with("2/3 members") && v.contains(&member));
    let shown = cut.elapsed();
    lab.reconnect_to_etcd(i);
    assert!(ok, "{suite}: {name} reports {member} silent: {last:?}");
    let (ok, last) = wait_value(30, &|v| v.starts_with("3/3 members"));
    assert!(ok, "{suite}: {name} reports {member} back: {last:?}");
    // docs/metrics.md's count of promotable standbys (where the root has xmllint; the host's
    // generation must): both standbys, then one.
    let doc = std::fs::read_to_string(format!("{MANIFEST}/docs/metrics.md")).unwrap();
    let snippet = doc
        .split("<!-- promotable-standbys: run by tests/generations.rs -->\n```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the snippet in docs/metrics.md")
        .to_string();
    let has_xmllint = lab.sh(0, "command -v xmllint").status.success();
    assert!(has_xmllint || suite != "bookworm", "xmllint on the host");
    let standbys = |want: &str| {
        let mut last = String::new();
        let ok = support::wait_for(Duration::from_secs(30), || {
            last = String::from_utf8_lossy(&lab.sh(0, &snippet).stdout).into_owned();
            last.trim() == format!("hamaster_promotable_standbys{{resource=\"api\"}} {want}")
        });
        assert!(
            ok,
            "{suite}: docs/metrics.md's count, {want} wanted: {last}"
        );
    };
    if has_xmllint {
        standbys("2");
    }
    // All of etcd silent: no score, and the monitor says why (degraded on 2.1+).
    lab.cut_from_etcd(i);
    let (ok, last) = wait_value(20, &|v| v.starts_with("0/3 members"));
    if ok && has_xmllint {
        standbys("1");
    }
    // Pacemaker 2.1+ records the monitor's OCF_DEGRADED (190) in the node's history.
    let recorded = suite == "bullseye"
        || support::wait_for(Duration::from_secs(15), || {
            String::from_utf8_lossy(
                &lab.on(0, &["cibadmin", "--query", "--scope", "status"])
                    .stdout,
            )
            .contains("rc-code=\"190\"")
        });
    let mon = String::from_utf8_lossy(&lab.on(0, &["crm_mon", "-A1"]).stdout).into_owned();
    let log = lab.log_text(i, "pacemaker.log");
    lab.reconnect_to_etcd(i);
    assert!(ok, "{suite}: {name} reports etcd silent: {last:?}");
    assert!(
        log.contains("this node cannot be promoted: no etcd member answers"),
        "{suite}: {name}'s monitor says it cannot be promoted"
    );
    assert!(
        recorded,
        "{suite}: the standby's OCF_DEGRADED in the CIB's status:\n{mon}"
    );
    eprintln!("{suite}: crm_mon -A1 while {name} cannot reach etcd:\n{mon}");
    let (ok, last) = wait_value(30, &|v| v.starts_with("3/3 members"));
    assert!(ok, "{suite}: {name} reports etcd back: {last:?}");
    let _ = lab.on(0, &["crm_resource", "--cleanup", "--resource", "api"]);
    shown
}

fn live(g: &LiveGeneration, root: Option<&Path>) -> Live {
    let suite = g.suite;
    std::env::set_var("LAB_TOTEM", g.totem);
    let mut lab = match root {
        Some(r) => Lab::in_root(&suite[..2], 3, r),
        None => Lab::new(&suite[..2], 3, Etcd::OnNodes),
    };
    std::env::remove_var("LAB_TOTEM");
    let versions = String::from_utf8_lossy(
        &lab.sh(
            0,
            "pacemakerd --version | head -1; pcs --version; corosync -v | head -1",
        )
        .stdout,
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    for v in g.versions {
        assert!(versions.contains(v), "{suite}: {v} in {versions}");
    }
    let obs = lab.observe_vip();
    create_topology_with(&lab, "master-with-vip", false, "LEASE_TTL= LEASE_MARGIN=");
    let h = lab
        .vip_holder(Duration::from_secs(90), None)
        .unwrap_or_else(|| panic!("{suite}: nobody promoted:\n{}", lab.crm_mon_text()));
    let name = lab.nodes[h].name.clone();
    assert!(
        support::wait_for(Duration::from_secs(20), || lab.promoted_seen_from(h, "api")
            == vec![name.clone()]),
        "{suite}: crm_mon shows {name} promoted:\n{}",
        lab.crm_mon_text()
    );
    let (holder, revision) = lab.leader_key(KEY).expect("leader key");
    assert_eq!(holder, name, "{suite}: etcd names the VIP's holder");
    let (lease, ttl) = lease_of_key(&lab);
    assert_eq!(
        ttl, g.ttl,
        "{suite}: the default lease follows corosync ({}, 3 nodes)",
        g.totem
    );

    // pcs describes both agents; ocf-tester passes both on a node, under other names.
    for agent in ["master", "vip"] {
        let d = lab.pcs(
            0,
            &["resource", "describe", &format!("ocf:hamaster:{agent}")],
        );
        let text = String::from_utf8_lossy(&d.stdout);
        assert!(
            d.status.success() && text.contains("arp_count"),
            "{suite}: pcs resource describe {agent}: {text}{}",
            String::from_utf8_lossy(&d.stderr)
        );
    }
    let other = (h + 1) % 3;
    let eps = lab.etcd.endpoints();
    for (agent, opts) in [
        ("vip", format!("-o ip={NET}.200 -o cidr_netmask=24")),
        (
            "master",
            format!(
                "-o etcd_endpoints={eps} -o command=/bin/sleep -o args=1000 \
                 -o ip={NET}.201 -o cidr_netmask=24 -o lease_ttl=3"
            ),
        ),
    ] {
        let out = lab.sh(
            other,
            &format!("ocf-tester -n t-{agent} {opts} /usr/lib/ocf/resource.d/hamaster/{agent}"),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("passed all tests"),
            "{suite}: ocf-tester {agent}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let reports_ms = standby_reports(&lab, suite, other).as_millis();
    eprintln!("{suite}: a silent etcd member shown by the standby after {reports_ms} ms");

    // A reloadable parameter: Pacemaker 2.1 and later reload it in place (same key, lease and
    // holder, the VIP never down); Pacemaker 2.0 knows no reload-agent and restarts.
    let reloads = suite != "bullseye";
    let guard_before = lab.guard_status(h).expect("the holder's guard answers");
    assert_eq!(
        guard_before.health_interval_ms,
        Some(2000),
        "{suite}: the default"
    );
    // etcd_endpoints too (the same members in another order: a list an operator rewrites
    // after replacing a member), which the guard takes by reconnecting to the same cluster.
    let mut endpoints: Vec<String> = lab.etcd.endpoints().split(',').map(String::from).collect();
    endpoints.reverse();
    let endpoints = endpoints.join(",");
    let changed = Instant::now();
    let up = lab.pcs(
        0,
        &[
            "resource",
            "update",
            "api",
            "health_interval=3",
            &format!("etcd_endpoints={endpoints}"),
        ],
    );
    assert!(
        up.status.success(),
        "{suite}: pcs resource update: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    let update = if reloads {
        let reloaded = support::wait_for(Duration::from_secs(30), || {
            lab.log_text(h, "pacemaker.log").lines().any(|l| {
                l.contains("Result of reload-agent operation for api")
                    && l.to_lowercase().contains(": ok")
            })
        });
        assert!(
            reloaded,
            "{suite}: reload-agent on {name}:\n{}",
            lab.log_text(h, "pacemaker.log")
        );
        std::thread::sleep(Duration::from_secs(3));
        let guard_after = lab.guard_status(h).expect("the holder's guard answers");
        assert_eq!(
            (
                guard_after.pid,
                guard_after.health_interval_ms,
                guard_after.etcd_endpoints.join(",")
            ),
            (guard_before.pid, Some(3000), endpoints.clone()),
            "{suite}: the same guard took the new health_interval and etcd_endpoints"
        );
        assert_eq!(
            lab.leader_key(KEY),
            Some((name.clone(), revision)),
            "{suite}: same key after the reload"
        );
        assert_eq!(lease_of_key(&lab).0, lease, "{suite}: same lease");
        assert!(
            lab.nodes[h].ns.holds(VIP),
            "{suite}: VIP stays on {name} after the reload"
        );
        "reloaded in place"
    } else {
        // The promoted instance restarts: some node is promoted again, with a new key.
        assert!(
            support::wait_for(Duration::from_secs(60), || {
                lab.leader_key(KEY).is_some_and(|(_, r)| r != revision)
                    && lab.vip_holder(Duration::from_millis(10), None).is_some()
            }),
            "{suite}: promoted again after the update:\n{}",
            lab.crm_mon_text()
        );
        "restart (no reload-agent before Pacemaker 2.1)"
    };
    eprintln!("{suite}: update: {update} after {:?}", changed.elapsed());

    let reloaded_at = Instant::now();

    // A planned switchover with this generation's crm_resource (--master on 2.0, --promoted
    // from 2.1 on): the new master holds the key and the VIP when it returns, and no
    // constraint is left.
    let switch_ms = switchover(&lab, suite, root.is_some());
    let move_ms = pcs_move(&lab, suite);

    // A partition of the holder, then a crash of the next: another node serves each time,
    // with the key, and never two at once (the cut-off node keeps running: it must fence
    // itself before its lease ends).
    let (_, partition_ms) = fail_over(&mut lab, suite, false);
    let (_, failover_ms) = fail_over(&mut lab, suite, true);
    let seen = obs.finish();
    seen.assert_complete();
    assert_eq!(
        seen.overlap(),
        Duration::ZERO,
        "{suite}: two nodes held the VIP at once"
    );
    if reloads {
        assert!(
            seen.losses(h)
                .iter()
                .all(|(after, _)| *after >= reloaded_at),
            "{suite}: the VIP left {name} during the reload"
        );
    }
    let conflicts = lab.vip_conflicts();
    assert!(
        conflicts.is_empty(),
        "{suite}: VIP conflicts reported: {conflicts:#?}"
    );
    Live {
        suite,
        versions,
        ttl,
        update,
        partition_ms,
        failover_ms,
        reports_ms,
        switch_ms,
        move_ms,
    }
}

#[test]
#[ignore = "three live clusters, one per generation (minutes): run by make check-generations"]
fn each_generation_runs_the_master_live_with_the_rpms_binary() {
    let binary = rpm_binary();
    // The host's lab runs the RPM's programs too (support::OcfDir copies them).
    std::env::set_var("HAMASTER_BIN", &binary);
    std::env::set_var("HAMASTER_VIP_BIN", rpm_vip_agent(&binary));
    let mut seen = Vec::new();
    for g in &LIVE {
        let root = (g.suite != "bookworm").then(|| {
            let r =
                PathBuf::from(must(&format!("{MANIFEST}/scripts/make-root"), &[g.suite]).trim());
            install(&r, &binary);
            r
        });
        seen.push(live(g, root.as_deref()));
    }
    for l in &seen {
        eprintln!(
            "{}: {} — lease {} (from corosync), pcs resource update health_interval and etcd_endpoints: {}, \
             hamaster switchover returned after {} ms, pcs resource move after {} ms, partition → \
             VIP on another node after {} ms, crash → after {} ms, overlap 0; a silent etcd \
             member in the standby's node attributes after {} ms",
            l.suite,
            l.versions,
            l.ttl,
            l.update,
            l.switch_ms,
            l.move_ms,
            l.partition_ms,
            l.failover_ms,
            l.reports_ms
        );
    }
    let _ = std::fs::remove_dir_all(binary.parent().unwrap().parent().unwrap().parent().unwrap());
}
