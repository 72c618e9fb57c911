//! Where a resource's runtime state lives: `{run_dir}/{resource}/` (default
//! `/run/hamaster/{resource}/`): the guard's socket and pidfile, the fencing token, the
//! agent's markers, and the guard's persisted state for cleanup without it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::runfiles::{create_private, open_private, private_dir, write_private};
use crate::service::process::ServiceRecord;

/// sun_path holds 108 bytes, one of them the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

/// A held resource lock (see `ResourceDir::lock`).
/// Why the resource's lock was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// Another operation holds it (its pid and name, as it wrote them).
    #[error(
        "another operation on this resource holds its lock on this node ({holder}), still after \
         {} ms",
        waited.as_millis()
    )]
    Busy { holder: String, waited: Duration },
    /// The lock file cannot be made or locked (/run full or read-only, …).
    #[error("{0}")]
    Unavailable(String),
}

pub struct ResourceLock {
    _held: nix::fcntl::Flock<std::fs::File>,
}

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
    /// The supervised command's leader (`service_pid`, `service_start`).
    #[serde(flatten)]
    pub service: Option<ServiceRecord>,
    pub vip_added: bool,
    pub fenced: Option<String>,
    /// The service's systemd unit (service= mode), so that demote stops it even when the
    /// parameters no longer parse.
    #[serde(default)]
    pub unit: Option<String>,
    /// The failsafe record's mod revision, when the guard wrote one with the key: it goes with
    /// the key at the release, only while it is as written.
    #[serde(default)]
    pub record_revision: Option<i64>,
    /// Every VIP as the guard adds it (interface index, address, prefix): clean-up removes
    /// exactly these too, whatever the parameters say now (extra_vips edited since).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vips: Vec<RecordedVip>,
}

/// One VIP as a guard added it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedVip {
    pub index: u32,
    pub ip: std::net::IpAddr,
    pub prefix: u8,
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

    /// The resource's directory, 0700, under a run directory that is 0700 too.
    pub fn create(&self) -> std::io::Result<()> {
        if let Some(run_dir) = self.root.parent() {
            private_dir(run_dir)?;
        }
        private_dir(&self.root)
    }

    /// Takes the resource's lock on this node, which serialises agent actions (Pacemaker's,
    /// `pcs resource debug-*`, `crm_resource --force-*`) and `hamaster takeover`. Waits up to
    /// `limit`; on failure the reason names who holds it. Released when dropped.
    pub fn lock(&self, limit: Duration, who: &str) -> Result<ResourceLock, LockError> {
        use nix::errno::Errno;
        use nix::fcntl::{Flock, FlockArg};
        let cannot = |what: String| LockError::Unavailable(what);
        self.create()
            .map_err(|e| cannot(format!("cannot create {}: {e}", self.root.display())))?;
        let path = self.root.join("lock");
        let until = Instant::now() + limit;
        let mut file = open_private(&path)
            .map_err(|e| cannot(format!("cannot open {}: {e}", path.display())))?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut held) => {
                    let _ = held.set_len(0);
                    let _ = held.write_all(format!("{} {who}\n", std::process::id()).as_bytes());
                    return Ok(ResourceLock { _held: held });
                }
                Err((f, Errno::EWOULDBLOCK)) if Instant::now() < until => {
                    file = f;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err((_, Errno::EWOULDBLOCK)) => {
                    let holder = std::fs::read_to_string(&path).unwrap_or_default();
                    let holder = holder.trim();
                    return Err(LockError::Busy {
                        holder: if holder.is_empty() { "unknown" } else { holder }.to_string(),
                        waited: limit,
                    });
                }
                Err((_, e)) => return Err(cannot(format!("cannot lock {}: {e}", path.display()))),
            }
        }
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

    /// Last value of a node attribute (agents::report), to call crm_attribute only on changes.
    pub fn attribute(&self, suffix: &str) -> PathBuf {
        self.root.join(format!("attribute-{suffix}"))
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
        self.load_json(&self.state())
    }

    /// Replaces the state file atomically (write, then rename).
    pub fn save(&self, state: &Persisted) -> std::io::Result<()> {
        self.save_json(&self.state(), state)
    }

    /// Replaces the JSON file `path` of this directory atomically (write, then rename).
    pub fn save_json(&self, path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut f = create_private(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        fs::rename(tmp, path)
    }

    /// A JSON file of this directory, None when absent or unreadable.
    pub fn load_json<T: serde::de::DeserializeOwned>(&self, path: &Path) -> Option<T> {
        fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// What the unpromoted instance's last monitor found (resource::status::StandbyReport),
    /// which the standby's listener serves (guard::exporter).
    pub fn standby_report(&self) -> PathBuf {
        self.root.join("standby.json")
    }

    /// This node's instance's last failure (resource::status::LastFailure).
    pub fn last_failure(&self) -> PathBuf {
        self.root.join("last-failure.json")
    }

    /// The name of the standby listener's abstract socket (guard::exporter): held while it
    /// serves metrics_address; a `stop` line there ends it, its listener closed first.
    pub fn exporter_name(&self) -> String {
        format!("hamaster-exporter:{}", self.root.display())
    }

    pub fn mark(&self, path: PathBuf) -> std::io::Result<()> {
        self.create()?;
        write_private(&path, b"")
    }

    pub fn unmark(&self, path: PathBuf) {
        let _ = fs::remove_file(path);
    }

    /// The name of the guard's abstract unix socket (per network namespace, not a file): the
    /// guard holds it for as long as it lives, so it is found — and a second guard refused —
    /// even when the run directory was wiped.
    pub fn guard_name(&self) -> String {
        format!("hamaster-guard:{}", self.root.display())
    }

    /// The name of a resident standby's abstract socket (standby=warm: guard::resident).
    pub fn standby_name(&self) -> String {
        format!("hamaster-standby:{}", self.root.display())
    }

    /// A resident standby's service (standby=warm), a `ServiceRecord`, for a stop after the
    /// resident died.
    pub fn standby_record(&self) -> PathBuf {
        self.root.join("standby-service")
    }

    /// The pid of the live guard for this resource, if any: the process that holds its
    /// abstract socket (SO_PEERCRED of a connection to it), whether or not it can answer.
    pub fn live_guard(&self) -> Option<u32> {
        holder_of(&self.guard_name())
    }

    /// The pid of the standby's listener (guard::exporter), if one runs, as live_guard finds
    /// the guard's.
    pub fn live_exporter(&self) -> Option<u32> {
        holder_of(&self.exporter_name())
    }

    /// Whether `pid` is the live guard of this resource.
    pub fn is_guard(&self, pid: u32) -> bool {
        self.live_guard() == Some(pid)
    }
}

/// The process that holds the abstract unix socket `name` (SO_PEERCRED of a connection to
/// it), whether or not it can answer.
fn holder_of(name: &str) -> Option<u32> {
    let stream = connect_abstract(name)?;
    let cred =
        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    u32::try_from(cred.pid()).ok().filter(|p| *p > 0)
}

/// A connection to the abstract unix socket `name`, made without waiting (non-blocking, then
/// handed back blocking): None when nothing listens there, or when its backlog is full — a
/// holder that accepts nothing is never waited for.
pub fn connect_abstract(name: &str) -> Option<std::os::unix::net::UnixStream> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .ok()?;
    let addr = UnixAddr::new_abstract(name.as_bytes()).ok()?;
    connect(fd.as_raw_fd(), &addr).ok()?;
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(false).ok()?;
    Some(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_record_is_one_format_in_state_json_and_in_a_residents_record() {
        // state.json keeps its keys: the previous release's agent reads them.
        let p = Persisted {
            service: Some(ServiceRecord {
                pid: 42,
                start: Some(7),
            }),
            ..Persisted::default()
        };
        let json: serde_json::Value = serde_json::to_value(&p).unwrap();
        assert_eq!(
            (json["service_pid"].as_u64(), json["service_start"].as_u64()),
            (Some(42), Some(7))
        );
        // What that release wrote: nulls, or no start time at all.
        let read = |text: &str| serde_json::from_str::<Persisted>(text).unwrap().service;
        let old = r#"{"guard_pid":1,"node":"n1","key":"k","lease_id":null,"fencing_token":null,
            "service_pid":null,"service_start":null,"vip_added":false,"fenced":null}"#;
        assert_eq!(read(old), None);
        let no_start = r#"{"guard_pid":1,"node":"n1","key":"k","lease_id":null,"fencing_token":null,
            "service_pid":9,"vip_added":false,"fenced":null}"#;
        assert_eq!(
            read(no_start),
            Some(ServiceRecord {
                pid: 9,
                start: None
            })
        );
        let none = serde_json::to_value(Persisted::default()).unwrap();
        assert!(
            none.get("service_pid").is_none_or(|v| v.is_null()),
            "{none}"
        );
        // A resident's record: the same format, and the previous release's line.
        let dir = std::env::temp_dir().join(format!("hm-record-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("standby-service");
        let r = ServiceRecord {
            pid: 42,
            start: Some(7),
        };
        r.save(&path).unwrap();
        assert_eq!(ServiceRecord::load(&path), Some(r));
        fs::write(&path, "42 7\n").unwrap();
        assert_eq!(ServiceRecord::load(&path), Some(r));
        fs::write(&path, "42 0\n").unwrap();
        assert_eq!(
            ServiceRecord::load(&path),
            Some(ServiceRecord {
                pid: 42,
                start: None
            })
        );
        fs::write(&path, "garbage").unwrap();
        assert_eq!(ServiceRecord::load(&path), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
