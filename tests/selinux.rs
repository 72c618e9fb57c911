//! hamaster's SELinux module (packaging/selinux/hamaster.cil) built by secilc — the CIL
//! compiler behind RHEL's semodule — on a stand-in for the base of RHEL's policy in which
//! cluster_t is confined and granted nothing (tests/selinux/stand-in-base.cil): without the
//! module the built policy lets cluster_t do none of what hamaster needs, with it every one of
//! those permissions, as setools' sesearch reads the policy; its file contexts are the ones
//! docs/selinux.md names. What RHEL's own policy grants cluster_t (unconfined under the
//! targeted policy as shipped) is docs/selinux.md's reading of that policy's source: CI cannot
//! reach it to build it, and it is not copied here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What hamaster needs of cluster_t: (target, class, permission); `self` is cluster_t.
const NEEDS: [(&str, &str, &str); 14] = [
    ("self", "capability", "net_admin"),
    ("self", "capability", "net_raw"),
    ("self", "capability", "sys_nice"),
    ("self", "process", "setsched"),
    ("self", "netlink_route_socket", "nlmsg_write"),
    ("self", "netlink_route_socket", "nlmsg_read"),
    ("self", "netlink_route_socket", "setopt"),
    ("self", "packet_socket", "create"),
    ("self", "packet_socket", "setopt"),
    ("unreserved_port_t", "tcp_socket", "name_connect"),
    ("unreserved_port_t", "tcp_socket", "name_bind"),
    ("node_t", "tcp_socket", "node_bind"),
    ("watchdog_device_t", "chr_file", "open"),
    ("watchdog_device_t", "chr_file", "ioctl"),
];

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// secilc's policy (and file contexts) from the stand-in base, with the module or without.
fn build(dir: &Path, with_module: bool) -> (PathBuf, String) {
    let tag = if with_module { "with" } else { "without" };
    let (policy, contexts) = (
        dir.join(format!("policy-{tag}")),
        dir.join(format!("fc-{tag}")),
    );
    let mut c = Command::new("secilc");
    c.arg("-o").arg(&policy).arg("-f").arg(&contexts);
    c.arg(repo("tests/selinux/stand-in-base.cil"));
    if with_module {
        c.arg(repo("packaging/selinux/hamaster.cil"));
    }
    let out = c.output().expect("secilc (Debian's secilc package) runs");
    assert!(
        out.status.success(),
        "secilc {tag} the module: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (policy, std::fs::read_to_string(contexts).unwrap())
}

/// Whether the policy allows cluster_t `perm` on `class` of `target` (sesearch -A).
fn allowed(policy: &Path, target: &str, class: &str, perm: &str) -> bool {
    let target = if target == "self" {
        "cluster_t"
    } else {
        target
    };
    let out = Command::new("sesearch")
        .args([
            "-A",
            "-s",
            "cluster_t",
            "-t",
            target,
            "-c",
            class,
            "-p",
            perm,
        ])
        .arg(policy)
        .output()
        .expect("sesearch (Debian's setools package) runs");
    assert!(
        out.status.success(),
        "sesearch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.starts_with("allow cluster_t"))
}

#[test]
fn the_selinux_module_grants_a_confined_cluster_t_what_hamaster_needs() {
    let dir = std::env::temp_dir().join(format!("hm-selinux-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (without, _) = build(&dir, false);
    let (with, contexts) = build(&dir, true);
    for (target, class, perm) in NEEDS {
        assert!(
            !allowed(&without, target, class, perm),
            "the stand-in's cluster_t is confined: {target}:{class} {perm} allowed without the module"
        );
        assert!(
            allowed(&with, target, class, perm),
            "the module grants cluster_t {target}:{class} {perm}"
        );
    }
    // A permission nobody grants stays denied: sesearch answers "no" where there is none.
    assert!(!allowed(&with, "bin_t", "file", "execute"));
    // secilc's file_contexts: path, file type (`--`: a regular file; none: any), context.
    for want in [
        vec!["/usr/sbin/hamaster", "--", "system_u:object_r:bin_t:s0"],
        vec![
            "/run/hamaster(/.*)?",
            "system_u:object_r:cluster_var_run_t:s0",
        ],
        vec![
            "/var/run/hamaster(/.*)?",
            "system_u:object_r:cluster_var_run_t:s0",
        ],
    ] {
        let found = contexts
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == want);
        assert!(found, "file context {want:?} in:\n{contexts}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
