//! The guard's status: what it serves as JSON on its unix socket (`GET /status`), how it is
//! asked to step down (`POST /stepdown`) or to take reloaded settings (`POST /reload`, a
//! MasterConfig as JSON), and the client the agent and `hamaster status` use.
//! HTTP/1 over a 0600 unix socket: only root on this node can ask or command.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, watch};

use super::config::MasterConfig;

/// The largest reload request body taken (a configuration is a few KiB).
const MAX_RELOAD_BODY: usize = 1 << 20;

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

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardStatus {
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
    pub vip: Option<String>,
    pub vip_present: Option<bool>,
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
}

/// Another host claims the VIP (guard::wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipConflict {
    /// The MAC address that claimed it.
    pub mac: String,
    /// The kind of frame: "ARP reply", "ARP request", "neighbor advertisement".
    pub frame: String,
    /// Frames seen claiming it so far.
    pub frames: u64,
    pub last_unix_ms: u64,
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
    /// All is well: the key is ours, the VIP (if any) is up and the service is healthy.
    pub fn is_healthy_leader(&self) -> bool {
        self.role == Role::Leader
            && self.vip_present != Some(false)
            && self.service_running
            && self.service_healthy
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
                    self.vip.as_deref().unwrap_or("?"),
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

/// The guard's view, shared between its main loop and its status server. `live` fills in
/// what must be looked up at request time (VIP presence, TTL left). `config` is the
/// configuration in force: a reload replaces it, and the health watch and the raise read it.
#[derive(Clone)]
pub struct Shared {
    pub status: Arc<Mutex<GuardStatus>>,
    pub live: Arc<dyn Fn(&mut GuardStatus) + Send + Sync>,
    pub config: Arc<watch::Sender<MasterConfig>>,
}

impl Shared {
    pub fn update(&self, f: impl FnOnce(&mut GuardStatus)) {
        if let Ok(mut s) = self.status.lock() {
            f(&mut s);
        }
    }

    pub fn snapshot(&self) -> GuardStatus {
        let mut s = self.status.lock().map(|s| s.clone()).unwrap_or_default();
        (self.live)(&mut s);
        s
    }
}

/// A step-down request: `budget` is how long the asker waits (the rest of its action's
/// timeout); the reply says whether everything is down, with the guard's status.
pub struct StepDown {
    pub budget: Option<Duration>,
    pub reply: oneshot::Sender<(bool, GuardStatus)>,
}

/// The budget a step-down request names in its query (`?budget_ms=N`).
fn budget_of(query: Option<&str>) -> Option<Duration> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("budget_ms="))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
}

fn json(status: StatusCode, body: &GuardStatus) -> Response<Full<Bytes>> {
    text(
        status,
        "application/json",
        serde_json::to_string(body).unwrap_or_default(),
    )
}

async fn handle(
    req: Request<Incoming>,
    shared: Shared,
    stepdown: mpsc::Sender<StepDown>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match (req.method(), req.uri().path()) {
        (&Method::GET, "/status") => json(StatusCode::OK, &shared.snapshot()),
        (&Method::POST, "/stepdown") => {
            let (tx, rx) = oneshot::channel();
            let request = StepDown {
                budget: budget_of(req.uri().query()),
                reply: tx,
            };
            if stepdown.send(request).await.is_err() {
                return Ok(json(StatusCode::SERVICE_UNAVAILABLE, &shared.snapshot()));
            }
            match rx.await {
                Ok((true, done)) => json(StatusCode::OK, &done),
                // Not complete within the budget: what is still up is in `problem`.
                Ok((false, st)) => json(StatusCode::CONFLICT, &st),
                Err(_) => json(StatusCode::INTERNAL_SERVER_ERROR, &shared.snapshot()),
            }
        }
        (&Method::POST, "/reload") => {
            let (code, st) = reload_from(req, &shared).await;
            json(code, &st)
        }
        _ => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::new()))
            .expect("valid"),
    })
}

/// Takes a reloaded configuration: 200 when in force, 409 (the reason in `problem`) when a
/// setting that needs a restart differs, 400 when the body is not a configuration.
async fn reload_from(req: Request<Incoming>, shared: &Shared) -> (StatusCode, GuardStatus) {
    let refused = |code: StatusCode, why: String| {
        let mut st = shared.snapshot();
        st.problem = Some(why);
        (code, st)
    };
    let body = match http_body_util::Limited::new(req.into_body(), MAX_RELOAD_BODY)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("reload body: {e}")),
    };
    let new = match MasterConfig::from_json(&String::from_utf8_lossy(&body)) {
        Ok(c) => c,
        Err(why) => return refused(StatusCode::BAD_REQUEST, why),
    };
    if let Some(why) = shared.config.borrow().reload_refusal(&new) {
        return refused(StatusCode::CONFLICT, why);
    }
    // The health watch must be able to use it (the agent checked the files already).
    if let Err(e) = crate::service::HealthProbe::new(&new.health) {
        return refused(StatusCode::CONFLICT, format!("health check unusable: {e}"));
    }
    let resource = shared.snapshot().resource;
    log::info!("guard {resource}: reloaded: new health, push and announcement settings in force");
    let interval = new.health.interval.as_millis() as u64;
    shared.config.send_replace(new);
    shared.update(|s| s.health_interval_ms = Some(interval));
    (StatusCode::OK, shared.snapshot())
}

/// What the TCP listener (metrics_address) answers: metrics, the leader check, the guard's
/// health. Read-only: nothing on it commands the guard.
#[derive(Clone)]
pub struct Public {
    pub shared: Shared,
    pub metrics: Arc<super::metrics::Metrics>,
    pub ttl: Duration,
    /// The last live snapshot and when it was taken: requests in between are answered from it,
    /// so that no rate of requests makes the guard look up its VIP more than SNAPSHOT_FOR allows.
    pub cache: Arc<Mutex<Option<(tokio::time::Instant, GuardStatus)>>>,
}

impl Public {
    pub fn new(shared: Shared, metrics: Arc<super::metrics::Metrics>, ttl: Duration) -> Public {
        Public {
            shared,
            metrics,
            ttl,
            cache: Arc::default(),
        }
    }

    fn snapshot(&self) -> GuardStatus {
        let now = tokio::time::Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match &*cache {
            Some((at, s)) if now.duration_since(*at) < SNAPSHOT_FOR => s.clone(),
            _ => {
                let s = self.shared.snapshot();
                *cache = Some((now, s.clone()));
                s
            }
        }
    }
}

/// How old an answer of the public listener may be (a load balancer checks every second or so).
const SNAPSHOT_FOR: Duration = Duration::from_millis(100);

/// Connections served at once on the public listener; more wait in the kernel's backlog.
const MAX_PUBLIC_CONNECTIONS: usize = 64;

/// A connection's request must arrive, and its answer go, within this: a slow or idle client
/// holds a slot no longer. Every connection carries one request (no keep-alive).
const PUBLIC_CONNECTION_LIMIT: Duration = Duration::from_secs(2);

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("static response parts are valid")
}

/// `/leader`: 200 only for a healthy leader with lease time left, its VIP (when it has one)
/// seen up. `/health`: 200 while the guard works (any role but failed). `/metrics`: the
/// Prometheus exposition. Every method gets the same answer.
fn public_answer(path: &str, public: &Public) -> Response<Full<Bytes>> {
    let s = public.snapshot();
    let one_line = |ok: bool| {
        let body = serde_json::json!({
            "role": s.role.name(),
            "node": s.node,
            "resource": s.resource,
            "problem": if ok { None } else { Some(s.trouble()) },
        });
        let code = if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        text(code, "application/json", format!("{body}\n"))
    };
    match path {
        "/leader" => one_line(
            s.is_healthy_leader()
                && s.lease_ttl_left_ms.is_some_and(|t| t > 0)
                && (s.vip.is_none() || s.vip_present == Some(true)),
        ),
        "/health" => one_line(s.role != Role::Failed),
        "/metrics" => text(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            public.metrics.render(&s, public.ttl),
        ),
        _ => text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// Serves the public listener until the task is dropped.
pub async fn serve_public(listener: tokio::net::TcpListener, public: Public) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_PUBLIC_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors, or a connection reset in the backlog: no busy loop.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let public = public.clone();
        tokio::spawn(async move {
            let _slot = permit;
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let answer = public_answer(req.uri().path(), &public);
                async move { Ok::<_, Infallible>(answer) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(PUBLIC_CONNECTION_LIMIT, conn).await;
        });
    }
}

/// Binds the guard's abstract socket `name`: fails (EADDRINUSE) while another guard of the
/// same resource holds it, which is the one proof that a guard runs.
pub fn bind_abstract(name: &str) -> std::io::Result<UnixListener> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    let std = std::os::unix::net::UnixListener::bind_addr(&addr)?;
    std.set_nonblocking(true)?;
    UnixListener::from_std(std)
}

/// Binds the socket (replacing a stale one), mode 0600.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Connections being served: a guard about to exit waits for them, so the answer to a
/// step-down request reaches the agent that asked.
#[derive(Clone, Default)]
pub struct Open(Arc<std::sync::atomic::AtomicUsize>);

impl Open {
    /// Waits until every open connection is done, at most `limit`.
    pub async fn drain(&self, limit: Duration) {
        let until = tokio::time::Instant::now() + limit;
        while self.0.load(std::sync::atomic::Ordering::SeqCst) > 0
            && tokio::time::Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

struct Decrement(Open);

impl Drop for Decrement {
    fn drop(&mut self) {
        (self.0).0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Serves status and step-down requests until the task is dropped.
pub async fn serve(
    listener: UnixListener,
    shared: Shared,
    stepdown: mpsc::Sender<StepDown>,
    open: Open,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // The abstract socket has no file mode: only root (or the guard's own user) may ask.
        let me = nix::unistd::geteuid().as_raw();
        match stream.peer_cred() {
            Ok(c) if c.uid() == 0 || c.uid() == me => {}
            _ => continue,
        }
        let (shared, stepdown, open) = (shared.clone(), stepdown.clone(), open.clone());
        open.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::spawn(async move {
            let _done = Decrement(open);
            let svc = hyper::service::service_fn(move |req| {
                handle(req, shared.clone(), stepdown.clone())
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
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
            let name = crate::guard::paths::ResourceDir {
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
    let (code, st) = tokio::time::timeout(
        timeout,
        request(path, Method::POST, "/reload", config.to_json()),
    )
    .await
    .map_err(|_| ClientError::Timeout(timeout.as_millis()))??;
    match code {
        StatusCode::OK => Ok(st),
        _ => Err(ClientError::Refused(
            st.problem.unwrap_or_else(|| format!("answered {code}")),
        )),
    }
}

/// A single-threaded runtime for the agent's short calls.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
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
    }
}
