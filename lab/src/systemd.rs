//! A real systemd as PID 1 of its own PID, mount, UTS, IPC and cgroup namespaces, booted in a
//! lab node's network namespace over an overlay of Debian trixie's root with systemd 257
//! (scripts/make-systemd-root, cached under /var/tmp): the master agent and its guard run
//! inside it, so that service= mode talks to the systemd an administrator's node runs, with
//! the test's own units. scripts/systemd-ns boots and tears it down (and says why it keeps the
//! host untouched); this is its handle. Dropping it ends everything inside.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{must, repo, Agent, Netns, OcfDir};

pub struct Systemd {
    pub name: String,
    /// systemd's pid as the host sees it.
    pub pid: u32,
    state: PathBuf,
}

/// The cached root with systemd (built once, a few minutes the first time): the tests of one
/// process run side by side (make check-systemd), and only the first builds it — the others
/// wait for it here rather than build the same cache at once.
pub fn root() -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let out = must(&format!("{}/scripts/make-systemd-root", repo()), &[]);
        PathBuf::from(out.trim())
    })
    .clone()
}

impl Systemd {
    /// Boots systemd in `ns` with the unit files of `units` in /etc/systemd/system; `shared`
    /// directories of the host are bound at the same paths inside (the agent's files, the
    /// test's state), and so is the lab's OCF directory with the built agent.
    pub fn boot(ns: &Netns, units: &Path, shared: &[&Path]) -> Systemd {
        let root = root();
        let name = ns.name.clone();
        let state = std::env::temp_dir().join("hamaster-systemd-ns");
        let mut binds = vec![OcfDir::get().root.clone()];
        binds.extend(shared.iter().map(|p| p.to_path_buf()));
        let binds: Vec<String> = binds
            .iter()
            .map(|p| {
                std::fs::create_dir_all(p).unwrap();
                format!("{}:{}", p.display(), p.display())
            })
            .collect();
        let out = Command::new(format!("{}/scripts/systemd-ns", repo()))
            .args(["boot", &name])
            .env("HMSD_ROOT", &root)
            .env("HMSD_STATE", &state)
            .env("HMSD_NETNS", &ns.name)
            .env("HMSD_UNITS", units)
            .env("HMSD_BIND", binds.join(" "))
            .output()
            .expect("scripts/systemd-ns");
        assert!(
            out.status.success(),
            "systemd did not boot: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pid = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("systemd's pid");
        Systemd { name, pid, state }
    }

    /// What runs a command inside, in every namespace of systemd's, its root and working
    /// directory (the environment passes through).
    pub fn prefix(&self) -> Vec<String> {
        [
            "nsenter",
            "-t",
            &self.pid.to_string(),
            "-m",
            "-p",
            "-u",
            "-i",
            "-n",
            "-C",
            "-r",
            "-w",
        ]
        .map(String::from)
        .to_vec()
    }

    /// A command run inside.
    pub fn command(&self, program: &str) -> Command {
        let prefix = self.prefix();
        let mut cmd = Command::new(&prefix[0]);
        cmd.args(&prefix[1..]).arg(program);
        cmd
    }

    pub fn systemctl(&self, args: &[&str]) -> Output {
        self.command("systemctl")
            .args(args)
            .output()
            .expect("systemctl")
    }

    /// A unit's property, as `systemctl show -p NAME --value` prints it.
    pub fn property(&self, unit: &str, name: &str) -> String {
        let out = self.systemctl(&["show", "-p", name, "--value", "--", unit]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The processes of a unit (host pids), from its cgroup, which the host can read: none
    /// once the unit's cgroup is gone or empty.
    pub fn unit_processes(&self, unit: &str) -> Vec<u32> {
        unit_processes(&self.cgroup(), unit)
    }

    /// This instance's cgroup2 directory on the host.
    pub fn cgroup(&self) -> PathBuf {
        let file = self.state.join(&self.name).join("cgroup");
        PathBuf::from(std::fs::read_to_string(file).unwrap().trim())
    }

    /// The agent run inside this systemd (its guard, and every systemctl it runs, too).
    pub fn agent<'a>(&self, agent: Agent<'a>) -> Agent<'a> {
        agent.inside(self.prefix())
    }
}

/// The processes of `unit` in the instance whose cgroup2 directory is `cgroup`.
pub fn unit_processes(cgroup: &Path, unit: &str) -> Vec<u32> {
    let procs = cgroup.join("system.slice").join(unit).join("cgroup.procs");
    std::fs::read_to_string(procs)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

impl Drop for Systemd {
    fn drop(&mut self) {
        let out = Command::new(format!("{}/scripts/systemd-ns", repo()))
            .args(["teardown", &self.name])
            .env("HMSD_STATE", &self.state)
            .output();
        if let Ok(o) = out {
            if !o.status.success() {
                eprintln!(
                    "systemd-ns teardown {}: {}",
                    self.name,
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
}
