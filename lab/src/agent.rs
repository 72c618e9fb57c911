//! The built agent: the binary, laid out as an OCF directory, run inside a namespace with
//! OCF's environment (`Agent`, `Run`), and the guard's status read from its socket.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::*;

/// A guard's status from its socket (None: no guard answers within 2 s).
pub fn guard_status(socket: &Path) -> Option<hamaster::resource::status::GuardStatus> {
    hamaster::resource::status::block_on(hamaster::resource::status::get_status(
        socket,
        Duration::from_secs(2),
    ))
    .ok()
}

/// The hamaster binary under test: `HAMASTER_BIN` when set (the demo), else the one cargo
/// built beside the running test, bench or example (target/PROFILE/hamaster: they run from
/// target/PROFILE/deps or target/PROFILE/examples, and cargo builds the package's binary for
/// its tests and benches).
pub fn hamaster_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("HAMASTER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the running executable's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("hamaster"))
        .filter(|b| b.is_file());
    bin.unwrap_or_else(|| {
        panic!(
            "no hamaster binary beside {}: set HAMASTER_BIN",
            exe.display()
        )
    })
}

/// The vip agent's own program under test (bin/hamaster-vip.rs): `HAMASTER_VIP_BIN` when set
/// (the RPM's), else `hamaster-vip` beside hamaster_bin() (cargo builds both).
pub fn vip_agent_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("HAMASTER_VIP_BIN") {
        return PathBuf::from(p);
    }
    let main = hamaster_bin();
    let bin = main.with_file_name("hamaster-vip");
    assert!(
        bin.is_file(),
        "no hamaster-vip beside {}: set HAMASTER_VIP_BIN",
        main.display()
    );
    bin
}

/// The built programs laid out as an OCF provider directory, as the RPM lays them out (vip
/// the agent's own program, master a link to hamaster), in a world-readable place so
/// that ocf-tester's "meta-data as nobody" check can execute it.
pub struct OcfDir {
    pub root: PathBuf,
}

impl OcfDir {
    pub fn get() -> &'static OcfDir {
        static DIR: OnceLock<OcfDir> = OnceLock::new();
        DIR.get_or_init(|| {
            clean_stale_ocf_dirs();
            let root = std::env::temp_dir().join(format!("hamaster-tests-{}", std::process::id()));
            let provider = root.join("resource.d/hamaster");
            fs::create_dir_all(&provider).unwrap();
            let bin = root.join("hamaster");
            fs::copy(hamaster_bin(), &bin).unwrap();
            let link = provider.join("master");
            let _ = fs::remove_file(&link);
            // Absolute: the directory is bind-mounted elsewhere, where a relative target
            // would point nowhere.
            std::os::unix::fs::symlink(&bin, &link).unwrap();
            fs::copy(vip_agent_bin(), provider.join("vip")).unwrap();
            must("chmod", &["-R", "a+rX", root.to_str().unwrap()]);
            OcfDir { root }
        })
    }

    /// The directory of the copy: the provider directory and the binary its links point at.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn provider(&self) -> PathBuf {
        self.root.join("resource.d/hamaster")
    }

    pub fn agent(&self, name: &str) -> PathBuf {
        self.provider().join(name)
    }

    /// Puts `bin` in place of the binary the master agent's link points at, as a package
    /// update does: written beside it, then renamed over it, so that a running guard keeps the
    /// file it was started from and the next action on any node (they all mount this
    /// directory) runs `bin`.
    pub fn install(&self, bin: &Path) {
        let target = self.root.join("hamaster");
        let new = self.root.join(".hamaster.new");
        fs::copy(bin, &new).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        must("chmod", &["0755", new.to_str().unwrap()]);
        fs::rename(&new, &target).unwrap();
    }
}

/// The previous release's hamaster (scripts/build-previous-release: built from its commit in
/// RELEASES and cached under /var/tmp), and its tag.
pub fn previous_release() -> (String, PathBuf) {
    let script = Path::new(repo()).join("scripts/build-previous-release");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(out.status.success(), "{} failed", script.display());
    let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let tag = bin
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("hamaster-"))
        .and_then(|n| n.rsplit_once('-'))
        .map(|(tag, _)| tag.to_string())
        .unwrap_or_else(|| panic!("{}: not a previous release", bin.display()));
    (tag, bin)
}

/// A test process cannot clean up after its last test, so each one removes the copies left
/// by test processes that are gone.
pub fn clean_stale_ocf_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name
            .strip_prefix("hamaster-tests-")
            .and_then(|p| p.parse::<u32>().ok())
        {
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The `ocf-exit-reason:` lines on stderr.
    pub fn reasons(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("ocf-exit-reason:"))
            .collect()
    }

    /// Asserts the exit code and exactly one reason line containing `needle`.
    pub fn expect(&self, code: i32, needle: &str) {
        assert_eq!(self.code, code, "exit code; stderr:\n{}", self.stderr);
        let reasons = self.reasons();
        assert_eq!(
            reasons.len(),
            1,
            "want exactly one reason line; stderr:\n{}",
            self.stderr
        );
        assert!(
            reasons[0].contains(needle),
            "reason {:?} should contain {needle:?}",
            reasons[0]
        );
    }
}

/// Stand-in files under /etc as the agent alone sees them, for `Agent::private_mounts`: /etc
/// overlaid (the upper layer on a tmpfs of the private mount namespace, so nothing reaches the
/// host's /etc), then each (path, text) written — or, for a text starting with "->", a
/// symbolic link to the rest made.
pub fn etc_stand_in(files: &[(&str, &str)]) -> String {
    let mut sh = String::from(
        "d=$(mktemp -d) && mount -t tmpfs none \"$d\" && mkdir \"$d/u\" \"$d/w\" && \
         mount -t overlay overlay -o lowerdir=/etc,upperdir=\"$d/u\",workdir=\"$d/w\" /etc",
    );
    for (path, text) in files {
        assert!(path.starts_with("/etc/") && !text.contains('\''));
        sh.push_str(&format!(" && mkdir -p \"$(dirname {path})\""));
        match text.strip_prefix("->") {
            Some(target) => sh.push_str(&format!(" && ln -s '{target}' {path}")),
            None => sh.push_str(&format!(" && printf '%s' '{text}' > {path}")),
        }
    }
    sh
}

/// An agent invocation context: namespace, parameters, and a private run directory.
#[derive(Clone)]
pub struct Agent<'a> {
    pub ns: &'a Netns,
    pub name: &'static str,
    pub params: BTreeMap<String, String>,
    pub extra_env: BTreeMap<String, String>,
    pub run_dir: PathBuf,
    pub instance: String,
    /// Run in a UTS namespace with this host name (the node name the agent sees).
    pub hostname: Option<String>,
    /// A shell snippet run first in a private mount namespace of the agent's own (stand-in
    /// files under /etc, seen by the agent and the guard it spawns, never by the host).
    pub private_mounts: Option<String>,
    /// Run through this command instead of `ip netns exec` (inside a real systemd's
    /// namespaces: systemd::Systemd::agent).
    pub inside: Option<Vec<String>>,
}

impl<'a> Agent<'a> {
    pub fn new(ns: &'a Netns, name: &'static str, params: &[(&str, &str)]) -> Agent<'a> {
        let run_dir = ns.run_dir();
        Agent {
            ns,
            name,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_env: BTreeMap::new(),
            run_dir,
            instance: format!("test-{name}"),
            hostname: None,
            private_mounts: None,
            inside: None,
        }
    }

    /// Runs the agent through `prefix` (a command that enters another set of namespaces and
    /// runs the rest of its arguments there) instead of `ip netns exec`.
    pub fn inside(mut self, prefix: Vec<String>) -> Self {
        self.inside = Some(prefix);
        self
    }

    /// Runs the agent (and its guard) in a private mount namespace prepared by `setup`.
    pub fn private_mounts(mut self, setup: &str) -> Self {
        self.private_mounts = Some(setup.into());
        self
    }

    pub fn hostname(mut self, name: &str) -> Self {
        self.hostname = Some(name.into());
        self
    }

    pub fn instance(mut self, name: &str) -> Self {
        self.instance = name.into();
        self
    }

    pub fn param(mut self, key: &str, value: &str) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.extra_env.insert(key.into(), value.into());
        self
    }

    pub fn command(&self, action: &str, interval_ms: u64) -> Command {
        let mut cmd = match &self.inside {
            Some(prefix) => {
                let mut c = Command::new(&prefix[0]);
                c.args(&prefix[1..]);
                c
            }
            None => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &self.ns.name]);
                c
            }
        };
        if let Some(h) = &self.hostname {
            cmd.args([
                "unshare",
                "--uts",
                "sh",
                "-c",
                "hostname \"$0\" && exec \"$@\"",
                h,
            ]);
        }
        if let Some(setup) = &self.private_mounts {
            cmd.args(["unshare", "--mount", "--propagation", "private", "sh", "-c"]);
            cmd.arg(format!("set -e; {setup}; exec \"$@\""));
            cmd.arg("sh");
        }
        cmd.arg(OcfDir::get().agent(self.name)).arg(action);
        cmd.env_clear();
        cmd.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        cmd.env("OCF_ROOT", "/usr/lib/ocf");
        cmd.env("OCF_RESOURCE_INSTANCE", &self.instance);
        cmd.env("HAMASTER_RUN_DIR", &self.run_dir);
        cmd.env("OCF_RESKEY_CRM_meta_interval", interval_ms.to_string());
        cmd.env("OCF_RESKEY_CRM_meta_timeout", "20000");
        for (k, v) in &self.params {
            cmd.env(format!("OCF_RESKEY_{k}"), v);
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs an action as a recurring operation (interval 10 s), which is what most actions are.
    pub fn run(&self, action: &str) -> Run {
        self.run_with_interval(action, 10_000)
    }

    /// A probe: monitor with interval 0.
    pub fn probe(&self) -> Run {
        self.run_with_interval("monitor", 0)
    }

    pub fn run_with_interval(&self, action: &str, interval_ms: u64) -> Run {
        let begun = std::time::Instant::now();
        let run = run_command(self.command(action, interval_ms));
        self.record(action, begun.elapsed());
        run
    }

    /// Appends the action's duration and its timeout to target/action-durations.tsv, for
    /// `scripts/action-durations` (the worst duration of each action against its timeout).
    fn record(&self, action: &str, took: std::time::Duration) {
        use std::io::Write;
        let timeout = self
            .extra_env
            .get("OCF_RESKEY_CRM_meta_timeout")
            .map_or("20000", String::as_str);
        let path = format!("{}/target/action-durations.tsv", repo());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write of the whole line: tests run in parallel and append to the same file,
            // and O_APPEND keeps a single short write whole where writeln!'s pieces interleave.
            let line = format!("{}\t{action}\t{}\t{timeout}\n", self.name, took.as_millis());
            let _ = f.write_all(line.as_bytes());
        }
    }
}
