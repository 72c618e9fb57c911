//! The guard's status protocol, shared by the guard that serves it (guard::status), the agent
//! and `hamaster status` that ask: the status as JSON (`GET /status`), a step-down
//! (`POST /stepdown?budget_ms=N`) and a reload (`POST /reload`, a MasterConfig as JSON), over
//! HTTP/1 on the resource's 0600 unix socket (or its abstract twin): only root on this node
//! can ask or command.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::UnixStream;

use super::config::MasterConfig;
use super::dir::ResourceDir;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Connecting to etcd and trying the key.
    #[default]
    Acquiring,
    /// Another node holds the key; watching for its deletion.
    Waiting,
    /// Holds the key; VIP and service raised (health may still be pending).
    Leader,
    /// Lost (or could not renew) the lease: VIP removed, service stopped.
    Fenced,
    SteppingDown,
    /// Gave up (acquire timeout, unusable configuration); exits soon.
    Failed,
}

impl Role {
    pub const ALL: [Role; 6] = [
        Role::Acquiring,
        Role::Waiting,
        Role::Leader,
        Role::Fenced,
        Role::SteppingDown,
        Role::Failed,
    ];

    /// The role's name as status and the metrics spell it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Acquiring => "acquiring",
            Role::Waiting => "waiting",
            Role::Leader => "leader",
            Role::Fenced => "fenced",
            Role::SteppingDown => "stepping-down",
            Role::Failed => "failed",
        }
    }
}

/// The agent ↔ guard protocol's version (GET /status's JSON, POST /stepdown, POST /reload),
/// raised by any change that an agent or guard of the version before could misread. Between
/// raises, fields are only added (each with a default: the whole status is `serde(default)`,
/// and unknown fields are ignored) and never removed or given another meaning, and endpoints
/// are never removed: an agent of protocol N reads a guard of N−1 or N+1 (a `dnf update` on a
/// promoted node leaves the running guard, the old binary, to the new agent's monitors).
/// Reload alone needs the same protocol on both sides: a guard that does not know a
/// parameter would ignore it and answer 200 (docs/upgrading.md).
pub const PROTOCOL: u32 = 1;

/// The hamaster release of this binary, as guards report it.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GuardStatus {
    /// PROTOCOL of the guard's binary; 0 for a guard from before it was numbered.
    pub protocol: u32,
    /// RELEASE of the guard's binary ("" before the protocol was numbered).
    pub release: String,
    pub resource: String,
    pub node: String,
    pub pid: u32,
    pub role: Role,
    /// Node named in the leader key, as last seen.
    pub holder: Option<String>,
    pub lease_id: Option<String>,
    /// Lease time left as this guard reckons it (deadline + margin − now).
    pub lease_ttl_left_ms: Option<u64>,
    pub fencing_token: Option<i64>,
    /// The first VIP (ip).
    pub vip: Option<String>,
    /// Every VIP up here (true), one missing (false), or cannot tell (None).
    pub vip_present: Option<bool>,
    /// Each VIP, ip's and then extra_vips' (empty from guards before extra_vips).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vips: Vec<VipSeen>,
    pub service_running: bool,
    pub service_healthy: bool,
    pub service_detail: String,
    pub last_renewal_unix_ms: Option<u64>,
    /// When this guard took the leader key.
    pub leader_since_unix_ms: Option<u64>,
    pub fenced_at_unix_ms: Option<u64>,
    /// Why the guard is not (yet) a healthy leader, in words for the exit reason.
    pub problem: Option<String>,
    /// The health check interval in force (health_interval, as last reloaded).
    #[serde(default)]
    pub health_interval_ms: Option<u64>,
    /// The health watcher found the unit inactive (systemd mode).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unit_inactive: bool,
    /// The hardware watchdog (absent with watchdog=off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<WatchdogStatus>,
    /// Why the guard fenced itself, as the metrics label it (machine::Cause::label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence_cause: Option<String>,
    /// The VIP claimed on the wire by another MAC address, as last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip_conflict: Option<VipConflict>,
    /// The VIP deleted, or its link set down, behind the guard's back (what happened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip_lost: Option<String>,
    /// The VIP's losses counted, by how it went (machine::Loss's labels).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vip_losses: std::collections::BTreeMap<String, u64>,
    /// Holding through an etcd outage (a failsafe record was written with the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failsafe: Option<FailsafeStatus>,
    /// The etcd endpoints the guard's client uses (etcd_endpoints as it took them, at start
    /// or by a reload; etcd's member list may add members it learns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_endpoints: Vec<String>,
    /// etcd's space and alarms as the members last said (every 10 s while leading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_space: Option<EtcdSpace>,
    /// The VIP's clients (guard::sessions): the sessions recorded for the next master, and what
    /// this leadership's takeover told the last master's clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<ClientsStatus>,
}

/// The VIP's clients as the guard recorded and told them (guard::sessions, vip::tickle).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientsStatus {
    /// Sessions in the last record written to etcd, its size, when, and the writes so far.
    pub recorded: usize,
    pub record_bytes: usize,
    pub recorded_at_unix_ms: Option<u64>,
    pub writes: u64,
    /// More sessions than guard::sessions::MAX_SESSIONS were established: the newest were
    /// left out.
    pub capped: bool,
    /// The takeover: sessions the last master left, those this node owns itself (not told).
    pub left: Option<usize>,
    pub owned: usize,
    /// What the rounds did (vip::tickle), summed over the VIPs.
    pub told: Option<crate::vip::tickle::Report>,
    /// Why the last sample could not be taken or written (None once one was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_error: Option<String>,
    /// Why the takeover told no client, or what went wrong telling them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover_error: Option<String>,
}

/// What etcd's members say of its space: the largest database, its quota where etcd says it
/// (3.6 and later), every alarm a member reports (NOSPACE, CORRUPT).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdSpace {
    pub db_size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<String>,
}

/// What the unpromoted instance's last monitor found (agents::report::Readiness), kept in
/// the run directory (ResourceDir::standby_report) for the standby's listener
/// (guard::exporter), which serves it as metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyReport {
    pub at_unix_ms: u64,
    /// (answering, asked) etcd members; None: etcd was not asked.
    pub etcd_members: Option<(usize, usize)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_alarms: Vec<String>,
    /// Why this node cannot be promoted; None: it can.
    pub unpromotable: Option<String>,
}

/// This node's instance's last failure as Pacemaker was told it (a failed promote, a failed
/// promoted monitor), kept in the run directory (ResourceDir::last_failure).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFailure {
    pub at_unix_ms: u64,
    pub reason: String,
}

/// The share of its quota a database may fill before it is worth saying.
const SPACE_WARN: f64 = 0.9;

impl EtcdSpace {
    /// From the members' answers; None when none answered.
    pub fn of(answers: &crate::lease::MemberAnswers) -> Option<EtcdSpace> {
        let answered: Vec<&crate::lease::MemberStatus> = answers
            .iter()
            .filter_map(|(_, a)| a.as_ref().ok())
            .collect();
        let largest = answered.iter().max_by_key(|m| m.db_size)?;
        let mut alarms: Vec<String> = answered.iter().flat_map(|m| m.alarms.clone()).collect();
        alarms.sort();
        alarms.dedup();
        Some(EtcdSpace {
            db_size_bytes: largest.db_size,
            quota_bytes: answered.iter().filter_map(|m| m.quota).min(),
            alarms,
        })
    }

    /// An alarm that stops every write of the key: no node could take it.
    pub fn blocks_writes(&self) -> bool {
        self.alarms.iter().any(|a| a == "NOSPACE" || a == "CORRUPT")
    }

    /// `db 25.3 MB of 2.0 GB` (the quota where etcd says it), then `; ALARM NOSPACE`.
    pub fn text(&self) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        let mut t = format!("db {:.1} MB", mb(self.db_size_bytes));
        if let Some(q) = self.quota_bytes {
            t.push_str(&format!(" of {:.1} MB", mb(q)));
        }
        for a in &self.alarms {
            t.push_str(&format!("; ALARM {a}"));
        }
        t
    }

    /// What it means, for a reason line: an alarm raised, or a database near its quota.
    pub fn trouble(&self) -> Option<String> {
        if let Some(a) = self.alarms.first() {
            let what = match a.as_str() {
                "NOSPACE" => {
                    "the master renews, but no node can take the leader key until it \
                              is cleared: compact, defragment, disarm"
                }
                "CORRUPT" => {
                    "a member's data disagrees with the others': replace that member; \
                              no node can take the leader key meanwhile"
                }
                _ => "see etcdctl alarm list",
            };
            return Some(format!(
                "etcd raised the {a} alarm ({}): {what} (docs/etcd-operations.md)",
                self.text()
            ));
        }
        let quota = self.quota_bytes?;
        let share = self.db_size_bytes as f64 / quota as f64;
        (share >= SPACE_WARN).then(|| {
            format!(
                "etcd's database is at {:.0} % of its quota ({}): compact and defragment before \
                 etcd raises NOSPACE (docs/etcd-operations.md)",
                share * 100.0,
                self.text()
            )
        })
    }
}

/// The guard's failsafe: whether it may hold through an etcd outage, and whether it does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailsafeStatus {
    /// Holding since (Unix ms): etcd has not renewed the lease past its deadline, and
    /// corosync proves the cluster whole.
    pub holding_since_unix_ms: Option<u64>,
    /// The latest proof: what corosync said, and when it was asked (Unix ms).
    pub proof: Option<String>,
    pub proven_unix_ms: Option<u64>,
    /// When etcd last answered (Unix ms).
    pub etcd_last_seen_unix_ms: u64,
}

impl FailsafeStatus {
    /// While holding: "holding through an etcd outage for 12.3 s on corosync's word (...)".
    pub fn holding(&self, now_unix_ms: u64) -> Option<String> {
        let since = self.holding_since_unix_ms?;
        Some(format!(
            "holding the master through an etcd outage for {:.1} s on corosync's word ({}); \
             etcd last answered {:.1} s ago",
            now_unix_ms.saturating_sub(since) as f64 / 1000.0,
            self.proof.as_deref().unwrap_or("no proof"),
            now_unix_ms.saturating_sub(self.etcd_last_seen_unix_ms) as f64 / 1000.0
        ))
    }
}

/// How long a claim of the VIP by another host counts against a healthy leader.
pub const CONFLICT_RECENT: std::time::Duration = std::time::Duration::from_secs(30);

/// Another host claims the VIP (guard::wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipConflict {
    /// The address claimed (absent from guards before extra_vips: their one VIP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The MAC address that claimed it.
    pub mac: String,
    /// The kind of frame: "ARP reply", "ARP request", "neighbor advertisement".
    pub frame: String,
    /// Frames seen claiming it so far.
    pub frames: u64,
    pub last_unix_ms: u64,
}

/// Several VIPs' presence as one: all present, one missing (false), or cannot tell.
pub fn all_present(each: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut all = Some(true);
    for p in each {
        match p {
            Some(false) => return Some(false),
            None => all = None,
            Some(true) => {}
        }
    }
    all
}

/// One of the master's VIPs as the guard sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VipSeen {
    pub address: String,
    /// On its interface and usable here; None: cannot tell.
    pub present: Option<bool>,
    /// Frames that claimed it for another MAC address in this leadership.
    #[serde(default)]
    pub conflict_frames: u64,
}

/// The watchdog as the guard has it, for `hamaster status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogStatus {
    /// The device chosen; None: running without one (`note` says why).
    pub device: Option<String>,
    pub armed: bool,
    /// The timeout in force (s), as the driver applied it.
    pub timeout_s: Option<u32>,
    pub last_ping_unix_ms: Option<u64>,
    /// Why there is none, or what went wrong with it.
    pub note: Option<String>,
}

impl GuardStatus {
    /// The binary this guard runs, as it says: `hamaster 0.2.0 (protocol 1)`, or `an older
    /// hamaster (protocol 0)` for a guard from before the protocol was numbered.
    pub fn binary(&self) -> String {
        match self.release.as_str() {
            "" => format!("an older hamaster (protocol {})", self.protocol),
            r => format!("hamaster {r} (protocol {})", self.protocol),
        }
    }

    /// All is well: the key is ours, the VIP (if any) is up and the service is healthy.
    pub fn is_healthy_leader(&self) -> bool {
        self.role == Role::Leader
            && self.vip_present != Some(false)
            && self.service_running
            && self.service_healthy
    }

    /// What a healthy leader serves with but needs attention for (the monitor's
    /// OCF_DEGRADED_PROMOTED on Pacemaker 2.1+): the VIP claimed on the wire by another host
    /// within the last CONFLICT_RECENT (conflict_action=report keeps serving), a watchdog it
    /// chose but could not arm (watchdog=auto leads without).
    pub fn attention(&self, now_unix_ms: u64) -> Vec<String> {
        let mut out: Vec<String> = self
            .etcd_space
            .iter()
            .filter_map(EtcdSpace::trouble)
            .collect();
        if let Some(c) = &self.vip_conflict {
            let ago = now_unix_ms.saturating_sub(c.last_unix_ms);
            if ago < CONFLICT_RECENT.as_millis() as u64 {
                out.push(format!(
                    "VIP {} claimed by {} ({} frames, the last {:.1} s ago)",
                    c.address.as_deref().or(self.vip.as_deref()).unwrap_or("?"),
                    c.mac,
                    c.frames,
                    ago as f64 / 1000.0
                ));
            }
        }
        if let Some(w) = &self.watchdog {
            if let (Some(device), false, Some(note)) = (&w.device, w.armed, &w.note) {
                if note != "disarmed" {
                    out.push(format!("leading without watchdog {device}: {note}"));
                }
            }
        }
        out
    }

    /// The VIPs seen missing, for a reason line ("?" where nothing says which).
    fn missing_vips(&self) -> String {
        let missing: Vec<&str> = self
            .vips
            .iter()
            .filter(|v| v.present == Some(false))
            .map(|v| v.address.as_str())
            .collect();
        match missing.is_empty() {
            true => self.vip.clone().unwrap_or_else(|| "?".into()),
            false => missing.join(", "),
        }
    }

    /// Why this is not a healthy leader, for an `ocf-exit-reason:` line.
    pub fn trouble(&self) -> String {
        if let Some(p) = &self.problem {
            return p.clone();
        }
        match self.role {
            Role::Leader if self.vip_present == Some(false) => {
                format!(
                    "VIP {} is missing from this node{}",
                    self.missing_vips(),
                    self.vip_lost
                        .as_deref()
                        .map_or(String::new(), |w| format!(" ({w})"))
                )
            }
            Role::Leader if !self.service_running => {
                format!("service not running: {}", self.service_detail)
            }
            Role::Leader if !self.service_healthy => {
                format!("service unhealthy: {}", self.service_detail)
            }
            role => format!("guard is {}", role.name()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("guard socket {path}: {detail}")]
    Unreachable { path: PathBuf, detail: String },
    #[error("guard did not answer within {0} ms")]
    Timeout(u128),
    #[error("guard could not step down completely: {0}")]
    Incomplete(String),
    #[error("guard refused the reload: {0}")]
    Refused(String),
}

/// The guard's socket file, or, when the run directory was wiped, its abstract socket.
async fn connect(path: &Path) -> std::io::Result<UnixStream> {
    use std::os::linux::net::SocketAddrExt;
    match UnixStream::connect(path).await {
        Ok(s) => Ok(s),
        Err(file_error) => {
            let Some(root) = path.parent() else {
                return Err(file_error);
            };
            let name = ResourceDir {
                root: root.to_path_buf(),
            }
            .guard_name();
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            let std =
                std::os::unix::net::UnixStream::connect_addr(&addr).map_err(|_| file_error)?;
            std.set_nonblocking(true)?;
            UnixStream::from_std(std)
        }
    }
}

async fn request(
    path: &Path,
    method: Method,
    uri: &str,
    body: String,
) -> Result<(StatusCode, GuardStatus), ClientError> {
    let unreachable = |detail: String| ClientError::Unreachable {
        path: path.to_path_buf(),
        detail,
    };
    let stream = connect(path)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "guard")
        .body(Full::new(Bytes::from(body)))
        .expect("valid request");
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let code = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| unreachable(e.to_string()))?
        .to_bytes();
    let status =
        serde_json::from_slice(&body).map_err(|e| unreachable(format!("bad status JSON: {e}")))?;
    Ok((code, status))
}

/// Asks the guard for its status, within `timeout`.
pub async fn get_status(path: &Path, timeout: Duration) -> Result<GuardStatus, ClientError> {
    tokio::time::timeout(
        timeout,
        request(path, Method::GET, "/status", String::new()),
    )
    .await
    .map_err(|_| ClientError::Timeout(timeout.as_millis()))?
    .map(|(_, s)| s)
}

/// Tells the guard to step down within `budget` and waits for its answer (the guard answers
/// by then: done, or what is still up; a little more is allowed for the answer to arrive).
pub async fn step_down(path: &Path, budget: Duration) -> Result<GuardStatus, ClientError> {
    let uri = format!("/stepdown?budget_ms={}", budget.as_millis());
    let wait = budget + Duration::from_millis(500);
    let (code, st) = tokio::time::timeout(wait, request(path, Method::POST, &uri, String::new()))
        .await
        .map_err(|_| ClientError::Timeout(wait.as_millis()))??;
    match code {
        StatusCode::OK => Ok(st),
        StatusCode::CONFLICT => Err(ClientError::Incomplete(st.trouble())),
        // The guard could not take the request (it was exiting): as if unreachable, so the
        // caller cleans up itself.
        other => Err(ClientError::Unreachable {
            path: path.to_path_buf(),
            detail: format!("step-down answered {other}"),
        }),
    }
}

/// Hands the guard a reloaded configuration, within `timeout`.
pub async fn reload(
    path: &Path,
    config: &MasterConfig,
    timeout: Duration,
) -> Result<GuardStatus, ClientError> {
    let asked = async {
        // A guard of another protocol is not asked at all: one from before the protocol was
        // numbered would not refuse by itself.
        let (_, running) = request(path, Method::GET, "/status", String::new()).await?;
        if let Some(why) = reload_refusal(&running) {
            return Err(ClientError::Refused(why));
        }
        let uri = format!("/reload?protocol={PROTOCOL}");
        request(path, Method::POST, &uri, config.to_json()).await
    };
    let (code, st) = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| ClientError::Timeout(timeout.as_millis()))??;
    match code {
        StatusCode::OK => Ok(st),
        _ => Err(ClientError::Refused(
            st.problem.unwrap_or_else(|| format!("answered {code}")),
        )),
    }
}

/// Why a guard that answered `running` cannot take a reload from this binary: it speaks
/// another protocol (an upgrade or downgrade since it started). None: the same protocol.
pub fn reload_refusal(running: &GuardStatus) -> Option<String> {
    (running.protocol != PROTOCOL).then(|| {
        format!(
            "the running guard is {}, this binary hamaster {RELEASE} (protocol {PROTOCOL}): a \
             reload across versions is refused, as a guard may ignore parameters it does not \
             know. Move the master onto the new binary with `hamaster switchover` \
             (docs/upgrading.md); the parameters apply from the next promote",
            running.binary()
        )
    })
}

/// A single-threaded runtime for the agent's short calls.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

impl crate::ocf::failure::Failure for ClientError {
    fn exit(&self) -> crate::ocf::OcfExit {
        crate::ocf::OcfExit::ErrGeneric
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roles_name_is_its_json_spelling() {
        for role in Role::ALL {
            assert_eq!(
                serde_json::to_string(&role).unwrap(),
                format!("\"{}\"", role.name())
            );
        }
    }

    /// The protocol's window: a guard from before the protocol was numbered (its status as
    /// it answered it, field for field), one of a later release with fields this binary does
    /// not know, and one that leaves fields out, are all read; a reload is refused to every
    /// guard of another protocol, with the way onto the new binary named.
    #[test]
    fn guards_of_the_protocol_before_and_after_are_read_and_refused_a_reload() {
        let unnumbered = r#"{"resource":"api","node":"n1","pid":4242,"role":"leader",
            "holder":"n1","lease_id":"0x1f","lease_ttl_left_ms":7000,"fencing_token":57,
            "vip":"192.0.2.10","vip_present":true,"service_running":true,
            "service_healthy":true,"service_detail":"pid 4250","last_renewal_unix_ms":1,
            "leader_since_unix_ms":1,"fenced_at_unix_ms":null,"problem":null,
            "health_interval_ms":2000}"#;
        let old: GuardStatus = serde_json::from_str(unnumbered).unwrap();
        assert!(old.is_healthy_leader(), "{old:?}");
        assert_eq!((old.protocol, old.release.as_str()), (0, ""));
        let why = reload_refusal(&old).expect("refused");
        assert!(
            why.contains("an older hamaster (protocol 0)") && why.contains("hamaster switchover"),
            "{why}"
        );
        let newer = r#"{"protocol":2,"release":"9.0.0","role":"leader","pid":7,
            "vip_present":true,"service_running":true,"service_healthy":true,
            "a_field_of_protocol_2":{"x":1}}"#;
        let new: GuardStatus = serde_json::from_str(newer).unwrap();
        assert_eq!((new.protocol, new.role), (2, Role::Leader));
        assert!(reload_refusal(&new)
            .unwrap()
            .contains("hamaster 9.0.0 (protocol 2)"));
        let ours = GuardStatus {
            protocol: PROTOCOL,
            ..GuardStatus::default()
        };
        assert_eq!(reload_refusal(&ours), None);
        let back: GuardStatus =
            serde_json::from_str(&serde_json::to_string(&ours).unwrap()).unwrap();
        assert_eq!(back, ours);
    }

    #[test]
    fn a_recent_claim_of_the_vip_or_a_watchdog_that_did_not_arm_needs_attention() {
        let mut s = GuardStatus {
            role: Role::Leader,
            vip: Some("192.0.2.10".into()),
            vip_conflict: Some(VipConflict {
                address: None,
                mac: "02:00:00:00:00:01".into(),
                frame: "ARP reply".into(),
                frames: 3,
                last_unix_ms: 100_000,
            }),
            ..GuardStatus::default()
        };
        assert_eq!(
            s.attention(102_500),
            vec!["VIP 192.0.2.10 claimed by 02:00:00:00:00:01 (3 frames, the last 2.5 s ago)"]
        );
        // With several VIPs, the one claimed is named.
        if let Some(c) = s.vip_conflict.as_mut() {
            c.address = Some("2001:db8:2::10".into());
        }
        assert!(s.attention(102_500)[0].starts_with("VIP 2001:db8:2::10 claimed"));
        assert!(s.attention(100_000 + 30_000).is_empty(), "an old claim");
        s.vip_conflict = None;
        let mut w = WatchdogStatus {
            device: Some("/dev/watchdog1".into()),
            armed: true,
            ..WatchdogStatus::default()
        };
        s.watchdog = Some(w.clone());
        assert!(s.attention(0).is_empty(), "armed");
        w.armed = false;
        w.note = Some("disarmed".into());
        s.watchdog = Some(w.clone());
        assert!(s.attention(0).is_empty(), "disarmed after leading");
        w.note = Some("cannot set a timeout: Invalid argument".into());
        s.watchdog = Some(w.clone());
        assert_eq!(
            s.attention(0),
            vec!["leading without watchdog /dev/watchdog1: cannot set a timeout: Invalid argument"]
        );
        // auto without any device: nothing it could have had.
        w.device = None;
        w.note = Some("no watchdog device on this node".into());
        s.watchdog = Some(w);
        assert!(s.attention(0).is_empty());
    }

    #[test]
    fn a_vip_lost_behind_the_guards_back_is_named_in_the_monitors_reason() {
        let mut s = GuardStatus {
            role: Role::Leader,
            vip: Some("192.0.2.10".into()),
            vip_present: Some(false),
            service_running: true,
            service_healthy: true,
            ..GuardStatus::default()
        };
        assert_eq!(s.trouble(), "VIP 192.0.2.10 is missing from this node");
        s.vip_lost = Some("link lan0 was set down".into());
        assert_eq!(
            s.trouble(),
            "VIP 192.0.2.10 is missing from this node (link lan0 was set down)"
        );
        assert!(!s.is_healthy_leader());
        // Several VIPs: the missing ones are named.
        let seen = |a: &str, present| VipSeen {
            address: a.into(),
            present,
            conflict_frames: 0,
        };
        s.vips = vec![
            seen("192.0.2.10", Some(true)),
            seen("2001:db8:2::10", Some(false)),
        ];
        assert!(s.trouble().starts_with("VIP 2001:db8:2::10 is missing"));
        assert_eq!(all_present(s.vips.iter().map(|v| v.present)), Some(false));
        assert_eq!(all_present([Some(true), None].into_iter()), None);
        assert_eq!(
            all_present([Some(true), Some(true)].into_iter()),
            Some(true)
        );
    }
}
