//! The RPM (`make rpm`, part of `make check` through `make check-rpm`): built with rpmbuild
//! from a vendored tarball, its file list and modes, and the agents from the UNPACKED package:
//! ocf-tester in a namespace, `pcs resource describe` and `crm ra info` in a private mount
//! namespace where the unpacked tree stands in for the installed one.

use hamaster_lab as support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{must, Pair, NODE_IF};

/// A package `make rpm` built (see support::built_rpm).
fn package(dir: &str, name: &str, suffix: &str) -> PathBuf {
    support::built_rpm(dir, name, suffix)
        .unwrap_or_else(|| panic!("no {name}-*{suffix} under target/rpm/{dir}"))
}

/// The newest GLIBC_x.y version named in `text` (objdump -T, rpm -qR).
fn newest_glibc(text: &str) -> Option<(u32, u32)> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut p = v.split('.').map(|x| x.parse::<u32>().ok());
            Some((p.next()??, p.next().flatten().unwrap_or(0)))
        })
        .max()
}

/// The source RPM rebuilt by itself, offline (vendored crates), with no --define: what mock,
/// copr or a RHEL build host does with it. In an empty network namespace (its loopback up, for
/// the unit tests): the SRPM must carry everything it builds from. Its %check runs the unit
/// tests. It runs under `timeout` (20 minutes), in a process group of its own that timeout
/// leads, its output in a file. Dropped unfinished (a failed check beside it), the whole group
/// is killed; a test process that dies without unwinding (an interrupt) sends timeout SIGTERM
/// (PR_SET_PDEATHSIG), which timeout passes on to the group. Its directory is removed unless
/// the rebuild failed.
struct Rebuild {
    child: std::process::Child,
    top: PathBuf,
    log: PathBuf,
    failed: bool,
}

impl Rebuild {
    fn start(srpm: &Path) -> Rebuild {
        use std::os::unix::process::CommandExt;
        let top = std::env::temp_dir().join(format!("hamaster-rebuild-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let log = top.with_extension("log");
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new("timeout");
        cmd.args([
            "1200",
            "unshare",
            "--net",
            "sh",
            "-c",
            "ip link set lo up && exec rpmbuild --rebuild --nodeps --define \"_topdir $0\" \"$1\"",
        ])
        .arg(&top)
        .arg(srpm)
        .env("CARGO_NET_OFFLINE", "true")
        // What this proves (offline, no --define, %check passes) does not depend on how the
        // release profile optimises; without LTO and optimisation its build takes 1.6 min of
        // the 4 it takes as shipped (the shipped binary is built by scripts/build-rpm).
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
        // %check's test build without debug information, and the simulation's one replayed
        // schedule for its 10,000 (they ran in make test, on the same sources).
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("HAMASTER_SIM_SEED", "1")
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0);
        // SAFETY: one prctl between fork and exec; nothing allocated.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        };
        let child = cmd
            .spawn()
            .expect("timeout, unshare and rpmbuild (scripts/install-deps installs them)");
        Rebuild {
            child,
            top,
            log,
            failed: false,
        }
    }

    /// Waits for the rebuild (timeout ends it within 20 minutes) and asserts it succeeded; its
    /// output. A failed one's directory and output are kept (the message names them).
    fn finish(&mut self) -> String {
        let status = self.child.wait().unwrap();
        let said = std::fs::read_to_string(&self.log).unwrap_or_default();
        self.failed = !status.success();
        assert!(
            status.success(),
            "rpmbuild --rebuild ({status}; {} and {} kept): {said}",
            self.top.display(),
            self.log.display()
        );
        said
    }
}

impl Drop for Rebuild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: killpg with the group this Rebuild started (timeout leads it); signals
            // only its processes.
            unsafe { libc::killpg(self.child.id() as i32, libc::SIGKILL) };
            let _ = self.child.wait();
        }
        if !self.failed {
            let _ = std::fs::remove_dir_all(&self.top);
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

#[test]
#[ignore = "builds the RPM (minutes): run by make check-rpm"]
fn rpm_builds_installs_the_right_files_and_its_unpacked_agents_pass_ocf_tester_and_pcs() {
    // scripts/build-rpm writes the source RPM first (rpmbuild -bs prints "Wrote: …src.rpm"),
    // then compiles the binary packages for minutes, much of it on one core (the link-time
    // optimisation). The source RPM's rebuild (Rebuild) starts as soon as it is written and
    // runs beside that build and the checks below.
    let build_log =
        std::env::temp_dir().join(format!("hamaster-build-rpm-{}.log", std::process::id()));
    let mut build = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/build-rpm"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&build_log).unwrap())
        .spawn()
        .expect("scripts/build-rpm");
    let mut said = String::new();
    let mut rebuild = None;
    for line in BufReader::new(build.stdout.take().unwrap()).lines() {
        let line = line.unwrap_or_default();
        let srpm = line
            .strip_prefix("Wrote: ")
            .filter(|p| p.ends_with(".src.rpm"));
        if let (Some(srpm), None) = (srpm, &rebuild) {
            rebuild = Some(Rebuild::start(Path::new(srpm)));
        }
        said.push_str(&line);
        said.push('\n');
    }
    let status = build.wait().unwrap();
    let errors = std::fs::read_to_string(&build_log).unwrap_or_default();
    let _ = std::fs::remove_file(&build_log);
    assert!(
        status.success(),
        "scripts/build-rpm ({status}):\n{said}{errors}"
    );
    let mut rebuild =
        rebuild.unwrap_or_else(|| panic!("scripts/build-rpm named no source RPM:\n{said}"));
    let rpm = package("RPMS", "hamaster", ".x86_64.rpm");
    let debuginfo = package("RPMS", "hamaster-debuginfo", ".x86_64.rpm");
    let selinux = package("RPMS", "hamaster-selinux", ".noarch.rpm");
    let srpm = package("SRPMS", "hamaster", ".src.rpm");
    assert!(srpm.exists() && debuginfo.exists());
    // The SELinux module (docs/selinux.md), with the scriptlets that load and remove it.
    let module = must("rpm", &["-qlpv", selinux.to_str().unwrap()]);
    assert!(
        module.lines().any(|l| l.starts_with("-rw-r--r--")
            && l.ends_with("/usr/share/selinux/packages/hamaster.cil")),
        "{module}"
    );
    let scripts = must("rpm", &["-qp", "--scripts", selinux.to_str().unwrap()]);
    assert!(
        scripts.contains("semodule -n -s \"$store\" -X 200 -i")
            && scripts.contains("-X 200 -r hamaster"),
        "{scripts}"
    );

    // rpmlint on the spec and the packages: no errors and no warnings (packaging/rpmlint.toml
    // says why each filter is there).
    let manifest = env!("CARGO_MANIFEST_DIR");
    let lint = Command::new("rpmlint")
        .args(["-c", &format!("{manifest}/packaging/rpmlint.toml")])
        .arg(format!("{manifest}/packaging/hamaster.spec"))
        .args([&rpm, &debuginfo, &selinux, &srpm])
        .output()
        .expect("rpmlint (scripts/install-deps installs it)");
    let report = String::from_utf8_lossy(&lint.stdout).into_owned();
    assert!(
        report.contains(" 0 errors, 0 warnings,") && !report.contains(": E: "),
        "rpmlint:\n{report}"
    );

    let list = must("rpm", &["-qlpv", rpm.to_str().unwrap()]);
    let line = |path: &str| {
        list.lines()
            // The file's own path is the first absolute one on the line (a link target follows).
            .find(|l| {
                l.split_whitespace()
                    .find(|t| t.starts_with('/'))
                    .is_some_and(|p| p.ends_with(path))
            })
            .unwrap_or_else(|| panic!("{path} not in:\n{list}"))
            .to_string()
    };
    assert!(
        line("/usr/sbin/hamaster").starts_with("-rwxr-xr-x"),
        "{}",
        line("/usr/sbin/hamaster")
    );
    // master is hamaster; vip is the agent's own program (src/bin/hamaster-vip.rs).
    let master = line("/usr/lib/ocf/resource.d/hamaster/master");
    assert!(
        master.starts_with("lrwxrwxrwx") && master.ends_with("-> ../../../../sbin/hamaster"),
        "{master}"
    );
    let vip = line("/usr/lib/ocf/resource.d/hamaster/vip");
    assert!(vip.starts_with("-rwxr-xr-x"), "{vip}");
    // The Pacemaker alert agent, where docs/getting-started.md's `pcs alert create` finds it.
    let alert = line("/usr/libexec/hamaster/alert_hamaster");
    assert!(alert.starts_with("-rwxr-xr-x"), "{alert}");
    for path in [
        "/usr/lib/tmpfiles.d/hamaster.conf",
        "/usr/lib/systemd/system/hamaster-takeover@.service",
        "/usr/lib/systemd/system/hamaster-campaign@.service",
        "/LICENSE",
        "/runbook.md",
        "/reference.md",
    ] {
        assert!(line(path).starts_with("-rw-r--r--"), "{}", line(path));
    }
    for path in [
        "/tuning.md",
        "/metrics.md",
        "/haproxy.md",
        "/pacemaker-generations.md",
        "/campaign.md",
        "/etcd-operations.md",
        "/usr/lib/firewalld/services/hamaster.xml",
    ] {
        assert!(line(path).starts_with("-rw-r--r--"), "{}", line(path));
    }
    assert!(
        list.contains("/cib/master-with-vip.sh"),
        "cib/ shipped:\n{list}"
    );
    // The crates' own license texts, each distinct one once, with the index of who ships it.
    assert!(
        list.lines().any(|l| l.contains("/crate-licenses/CRATES")),
        "crate licenses shipped:\n{list}"
    );
    let texts = list
        .lines()
        .filter(|l| l.contains("/crate-licenses/") && l.trim_end().ends_with(".txt"))
        .count();
    assert!(texts > 10, "{texts} distinct crate license texts:\n{list}");
    let etc = line("/etc/hamaster");
    assert!(etc.starts_with("drwxr-x---"), "{etc}");
    for dir in ["/usr/lib/ocf", "/usr/lib/ocf/resource.d"] {
        assert!(
            list.lines()
                .any(|l| l.starts_with('d') && l.trim_end().ends_with(dir)),
            "{dir} owned:\n{list}"
        );
    }
    for man in [
        "man8/hamaster.8",
        "man8/hamaster-status.8",
        "man8/hamaster-takeover.8",
        "man8/hamaster-release.8",
        "man7/ocf_hamaster_vip.7",
        "man7/ocf_hamaster_master.7",
    ] {
        assert!(
            list.contains(&format!("/usr/share/man/{man}")),
            "{man} in:\n{list}"
        );
    }
    let requires = must("rpm", &["-qpR", rpm.to_str().unwrap()]);
    assert!(
        requires.lines().any(|l| l.trim() == "pacemaker-cli >= 1.1"),
        "{requires}"
    );

    // Unpack into a world-readable place (ocf-tester runs meta-data as nobody).
    let root = std::env::temp_dir().join(format!("hamaster-rpm-{}", std::process::id()));
    support::unpack_rpm(&rpm, &root);
    must("chmod", &["-R", "a+rX", root.to_str().unwrap()]);
    // Shipped stripped; the debug information is in hamaster-debuginfo.
    // One build for RHEL 8 (glibc 2.28), 9 (2.34) and 10 (2.39): nothing newer than 2.17, in
    // hamaster and in the vip agent's program alike.
    for program in ["usr/sbin/hamaster", "usr/lib/ocf/resource.d/hamaster/vip"] {
        let path = root.join(program);
        let file = must("file", &[path.to_str().unwrap()]);
        assert!(file.contains(", stripped"), "{file}");
        let symbols = must("objdump", &["-T", path.to_str().unwrap()]);
        let newest = newest_glibc(&symbols).expect("glibc symbols");
        eprintln!("{program} needs GLIBC_{}.{}", newest.0, newest.1);
        assert!(
            newest <= (2, 17),
            "{program} needs GLIBC_{}.{}",
            newest.0,
            newest.1
        );
    }
    assert!(
        newest_glibc(&requires).is_some_and(|v| v <= (2, 17)),
        "Requires: {requires}"
    );
    let agents = root.join("usr/lib/ocf/resource.d/hamaster");

    let pair = Pair::new("rpm");
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        &pair.node.name,
        "ocf-tester",
        "-n",
        "api-vip",
        "-o",
        "ip=192.0.2.10",
        "-o",
        "cidr_netmask=24",
    ]);
    cmd.arg(agents.join("vip"));
    cmd.env("HAMASTER_RUN_DIR", pair.node.run_dir());
    let tester = support::run_command(cmd);
    assert_eq!(
        tester.code, 0,
        "ocf-tester on the unpacked vip:\n{}{}",
        tester.stdout, tester.stderr
    );
    let md = support::run_command({
        let mut c = Command::new(agents.join("master"));
        c.arg("meta-data");
        c
    });
    assert_eq!(md.code, 0);
    assert!(md.stdout.contains("<resource-agent name=\"master\""));

    // pcs and crmsh read the agents as if the package were installed: the unpacked binary is
    // overlaid on /usr/sbin and the agent directory bind-mounted, in a private mount namespace.
    let mp = "/usr/lib/ocf/resource.d/hamaster";
    let script = format!(
        "set -e; created=0; if [ ! -d {mp} ]; then mkdir {mp}; created=1; fi; rc=0; \
         unshare -m --propagation private sh -c 'mount -t overlay overlay -o lowerdir={sbin}:/usr/sbin /usr/sbin && \
         mount --bind {agents} {mp} && echo ==PCS && pcs resource describe ocf:hamaster:master && \
         echo ==PCSVIP && pcs resource describe ocf:hamaster:vip && echo ==CRM && crm ra info ocf:hamaster:master' || rc=$?; \
         if [ $created = 1 ]; then rmdir {mp}; fi; exit $rc",
        sbin = root.join("usr/sbin").display(),
        agents = agents.display(),
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.node.name, "sh", "-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pcs = &text[text.find("==PCS\n").unwrap()..text.find("==PCSVIP").unwrap()];
    assert!(
        pcs.contains(
            "ocf:hamaster:master - Active-passive master service with VIP and etcd leader lease"
        ),
        "{pcs}"
    );
    assert!(
        pcs.contains("etcd_endpoints (required)")
            && pcs.contains("lease_ttl")
            && pcs.contains("Default operations:"),
        "{pcs}"
    );
    assert!(
        pcs.contains("promote:") && pcs.contains("timeout=60s"),
        "advised promote timeout: {pcs}"
    );
    let vip = &text[text.find("==PCSVIP").unwrap()..text.find("==CRM").unwrap()];
    assert!(
        vip.contains("ip (required) (unique)") || vip.contains("ip (required)"),
        "{vip}"
    );
    let crm = &text[text.find("==CRM").unwrap()..];
    assert!(
        crm.contains("etcd_endpoints") && crm.contains("lease_ttl") && crm.contains("promote"),
        "{crm}"
    );
    let _ = std::fs::remove_dir_all(&root);

    // The source RPM's spec has the version written in: its rebuild needs no --define.
    let spec = must(
        "sh",
        &[
            "-c",
            &format!(
                "rpm2cpio {} | cpio -i --to-stdout --quiet hamaster.spec",
                srpm.display()
            ),
        ],
    );
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        spec.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Version:", version]),
        "the source RPM's spec names version {version}"
    );
    // The rebuild's end: it ran beside everything above.
    let said = rebuild.finish();
    assert!(
        said.contains("%check") && said.contains("test result: ok."),
        "the rebuild's %check ran the unit tests: {said}"
    );
    let top = rebuild.top.clone();
    let rebuilt = support::files_under(&top.join("RPMS"));
    assert!(
        rebuilt.iter().any(|p| p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&format!("hamaster-{version}-")))),
        "{rebuilt:?}"
    );
    let _ = NODE_IF;
}
