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
                    "VIP {} is missing from this node",
                    self.vip.as_deref().unwrap_or("?")
                )
            }
            Role::Leader if !self.service_running => {
                format!("service not running: {}", self.service_detail)
            }
            Role::Leader if !self.service_healthy => {
                format!("service unhealthy: {}", self.service_detail)
            }
            role => format!(
                "guard is {}",
                serde_json::to_string(&role)
                    .unwrap_or_default()
                    .trim_matches('"')
            ),
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
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .expect("static response parts are valid")
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
