//! The pcs spelling of each cluster generation, checked against that generation's own pcs,
//! Pacemaker and CIB schema: Debian roots made by scripts/make-root — bullseye with RHEL 8.4's
//! Pacemaker 2.0.5 and pcs 0.10.8, trixie with RHEL 10's Pacemaker 3.0.0 and pcs 0.12.0 — and
//! the RPM's own binary (linked against glibc 2.17) installed in them as the agent. No daemon
//! runs: pcs creates the master on an empty CIB (`pcs -f`), crm_verify checks the result, pcs
//! describes the agent. Everything runs in a private mount namespace and an empty network
//! namespace (`make check-generations`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::must;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// The RPM's binary, unpacked (built by `make rpm` when it is not there yet).
fn rpm_binary() -> PathBuf {
    let rpms = Path::new(MANIFEST).join("target/rpm/RPMS/x86_64");
    let find = || {
        std::fs::read_dir(&rpms)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("hamaster-0") && n.ends_with(".x86_64.rpm"))
            })
    };
    let rpm = find().unwrap_or_else(|| {
        must(&format!("{MANIFEST}/scripts/build-rpm"), &[]);
        find().expect("the RPM")
    });
    let dir = std::env::temp_dir().join(format!("hm-gen-rpm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("rpm2cpio {} | cpio -idm --quiet", rpm.display()))
        .current_dir(&dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "unpacking {}", rpm.display());
    dir.join("usr/sbin/hamaster")
}

/// Installs the binary and the agents' links into the root, as the RPM lays them out.
fn install(root: &Path, binary: &Path) {
    std::fs::copy(binary, root.join("usr/sbin/hamaster")).unwrap();
    let agents = root.join("usr/lib/ocf/resource.d/hamaster");
    std::fs::create_dir_all(&agents).unwrap();
    for a in ["vip", "master"] {
        let link = agents.join(a);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("../../../../sbin/hamaster", &link).unwrap();
    }
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
}

const GENERATIONS: [Generation; 2] = [
    Generation {
        suite: "bullseye",
        pacemaker: "2.0.5",
        pcs: "0.10.8",
        promoted: "Master",
        unpromoted: "Slave",
    },
    Generation {
        suite: "trixie",
        pacemaker: "3.0.0",
        pcs: "0.12.0",
        promoted: "Promoted",
        unpromoted: "Unpromoted",
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
            "/usr/lib/ocf/resource.d/hamaster/master meta-data | \
             xmllint --noout --relaxng /usr/share/resource-agents/metadata.rng -",
        );
        assert!(
            ok,
            "{}: meta-data against its resource-agents' schema: {valid}",
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
        let (ok, describe) = in_root(&root, "pcs resource describe ocf:hamaster:master");
        assert!(
            ok && describe.contains("etcd_endpoints") && describe.contains("lease_ttl"),
            "{}: {describe}",
            g.suite
        );
        eprintln!(
            "{}: Pacemaker {}, pcs {}: meta-data roles {}/{}, both creates verified, describe ok",
            g.suite, g.pacemaker, g.pcs, g.promoted, g.unpromoted
        );
    }
    let _ = std::fs::remove_dir_all(binary.parent().unwrap().parent().unwrap().parent().unwrap());
}
