//! Where a resource's runtime state lives: `{run_dir}/{resource}/` (default
//! `/run/hamaster/{resource}/`): the guard's socket and pidfile, the fencing token, the
//! agent's markers, and the guard's persisted state for cleanup without it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// sun_path holds 108 bytes, one of them the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDir {
    pub root: PathBuf,
}

/// What the guard records so that demote can clean up after a guard that died.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisted {
    pub guard_pid: u32,
    pub node: String,
    pub key: String,
    pub lease_id: Option<i64>,
    pub fencing_token: Option<i64>,
    pub service_pid: Option<u32>,
    pub vip_added: bool,
    pub fenced: Option<String>,
}

impl ResourceDir {
    pub fn new(run_dir: &Path, resource: &str) -> ResourceDir {
        ResourceDir {
            root: run_dir.join(resource),
        }
    }

    /// Refuses a resource name that cannot have a directory of its own here: empty, with a
    /// '/' or a NUL, or so long that its guard socket's path would not fit in a unix socket
    /// address (107 bytes).
    pub fn check(run_dir: &Path, resource: &str) -> Result<ResourceDir, String> {
        if resource.is_empty() || resource.contains(['/', '\0']) || resource.starts_with('.') {
            return Err(format!(
                "resource name {resource:?} cannot name a directory under {}",
                run_dir.display()
            ));
        }
        let dir = ResourceDir::new(run_dir, resource);
        let socket = dir.socket();
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(format!(
                "resource name {resource:?} is too long: the guard's socket {} would be {len} bytes, \
                 more than the {MAX_SOCKET_PATH} a unix socket path may have",
                socket.display()
            ));
        }
        Ok(dir)
    }

    pub fn create(&self) -> std::io::Result<()> {
        fs::create_dir_all(&self.root)
    }

    pub fn socket(&self) -> PathBuf {
        self.root.join("guard.sock")
    }
    pub fn pidfile(&self) -> PathBuf {
        self.root.join("guard.pid")
    }
    pub fn fencing_token(&self) -> PathBuf {
        self.root.join("fencing-token")
    }
    pub fn service_env(&self) -> PathBuf {
        self.root.join("service.env")
    }
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }
    /// Written by the agent's start, removed by stop: "started, unpromoted".
    pub fn started(&self) -> PathBuf {
        self.root.join("started")
    }
    /// Written by a successful promote, removed by demote.
    pub fn promoted(&self) -> PathBuf {
        self.root.join("promoted")
    }
    /// Last promotion score given to Pacemaker, to call crm_attribute only on changes.
    pub fn score(&self) -> PathBuf {
        self.root.join("score")
    }

    /// Removes what only a running guard needs (socket, pidfile, state, service.env); the
    /// fencing token stays for the record.
    pub fn remove_guard_files(&self) {
        for p in [
            self.socket(),
            self.pidfile(),
            self.state(),
            self.service_env(),
        ] {
            let _ = fs::remove_file(p);
        }
    }

    pub fn load(&self) -> Option<Persisted> {
        fs::read(self.state())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Replaces the state file atomically (write, then rename).
    pub fn save(&self, state: &Persisted) -> std::io::Result<()> {
        let tmp = self.root.join("state.json.tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        fs::rename(tmp, self.state())
    }

    pub fn mark(&self, path: PathBuf) -> std::io::Result<()> {
        self.create()?;
        fs::write(path, b"")
    }

    pub fn unmark(&self, path: PathBuf) {
        let _ = fs::remove_file(path);
    }

    /// The pid of a live guard for this resource, if any (checked against /proc, so a stale
    /// pidfile or a reused pid is never taken for a guard).
    pub fn live_guard(&self) -> Option<u32> {
        let pid: u32 = fs::read_to_string(self.pidfile())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        self.is_guard(pid).then_some(pid)
    }

    /// Whether `pid` is a live guard of this resource: spawned by the agent (`hamaster guard
    /// --resource R`) or run by an operator (`hamaster takeover`, whose pidfile is this one).
    pub fn is_guard(&self, pid: u32) -> bool {
        let resource = self
            .root
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        crate::procfs::live_with_args(pid, &["guard", &resource])
            || crate::procfs::live_with_args(pid, &["takeover"])
    }
}
