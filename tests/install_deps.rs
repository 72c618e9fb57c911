//! scripts/install-deps leaves the services of the packages it installed (corosync, pacemaker,
//! pcsd, etcd, prometheus, haproxy, OpenIPMI's and ipmitool's) disabled for the host's next boot: checked on a stand-in systemd root.

use hamaster_lab as support;

use std::path::Path;

#[test]
fn install_deps_leaves_the_services_it_installed_disabled_for_the_next_boot() {
    let root = std::env::temp_dir().join(support::unique("sdroot"));
    let units = root.join("usr/lib/systemd/system");
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::create_dir_all(&wants).unwrap();
    let names = [
        "corosync.service",
        "pacemaker.service",
        "pcsd.service",
        "etcd.service",
        "prometheus.service",
        "haproxy.service",
        "openipmi.service",
        "ipmievd.service",
        "other.service",
    ];
    for name in names {
        std::fs::write(
            units.join(name),
            "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
        )
        .unwrap();
        // Enabled, as the packages leave them.
        std::os::unix::fs::symlink(format!("/usr/lib/systemd/system/{name}"), wants.join(name))
            .unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install-deps");
    let out = std::process::Command::new(script)
        .args([
            "--disable-units-of",
            "corosync",
            "pacemaker",
            "pcs",
            "etcd-server",
            "prometheus",
            "haproxy",
            "openipmi",
            "ipmitool",
        ])
        .env("SYSTEMD_ROOT", &root)
        .output()
        .unwrap();
    let enabled = |name: &str| Path::new(&wants.join(name)).symlink_metadata().is_ok();
    let result = (
        out.status.success(),
        names.map(|n| (n, enabled(n))),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let _ = std::fs::remove_dir_all(&root);
    assert!(result.0, "{}", result.2);
    for (name, on) in result.1 {
        assert_eq!(on, name == "other.service", "{name}: enabled = {on}");
    }
}
