//! The guard's side of the status protocol (resource::status): the status it serves on its
//! unix socket, the step-down and reload requests it takes there, and the read-only public
//! listener (metrics_address: /metrics, /leader, /health).

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::resource::config::MasterConfig;
use crate::resource::status::{GuardStatus, Role, PROTOCOL, RELEASE};

/// The largest reload request body taken (a configuration is a few KiB).
const MAX_RELOAD_BODY: usize = 1 << 20;

/// The guard's view, shared between its main loop and its status server. `live` fills in
/// what must be looked up at request time (VIP presence, TTL left). `config` is the
/// configuration in force: a reload replaces it, and the health watch and the raise read it.
#[derive(Clone)]
pub struct Shared {
    pub status: Arc<Mutex<GuardStatus>>,
    pub live: Arc<dyn Fn(&mut GuardStatus) + Send + Sync>,
    pub config: Arc<watch::Sender<MasterConfig>>,
    /// The guard's etcd client, once made: a reload that changes how etcd is reached
    /// reconnects it (Etcd::reconnect) before the new configuration is in force.
    pub etcd: Arc<Mutex<Option<crate::lease::etcd::Etcd>>>,
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

/// The number a request's query names as `name` (`?budget_ms=N`, `?protocol=N`).
fn query_number(query: Option<&str>, name: &str) -> Option<u64> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse::<u64>().ok())
}

/// The budget a step-down request names in its query (`?budget_ms=N`).
fn budget_of(query: Option<&str>) -> Option<Duration> {
    query_number(query, "budget_ms").map(Duration::from_millis)
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
    // The agent's protocol, in the query: a reload needs the same on both sides.
    let theirs = query_number(req.uri().query(), "protocol").unwrap_or(0);
    let body = match http_body_util::Limited::new(req.into_body(), MAX_RELOAD_BODY)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("reload body: {e}")),
    };
    // Refused only once the body is read: a client still writing it would see a broken pipe.
    if theirs != u64::from(PROTOCOL) {
        return refused(
            StatusCode::CONFLICT,
            format!(
                "this guard speaks protocol {PROTOCOL} (hamaster {RELEASE}), the reload came \
                 with protocol {theirs}: a reload across versions is refused. Move the master \
                 onto the new binary with `hamaster switchover` (docs/upgrading.md)"
            ),
        );
    }
    let new = match MasterConfig::from_json(&String::from_utf8_lossy(&body)) {
        Ok(c) => c,
        Err(why) => return refused(StatusCode::BAD_REQUEST, why),
    };
    let old = shared.config.borrow().clone();
    if let Some(why) = old.reload_refusal(&new) {
        return refused(StatusCode::CONFLICT, why);
    }
    // The health watch must be able to use it (the agent checked the files already).
    if let Err(e) = crate::service::HealthProbe::new(&new.health) {
        return refused(StatusCode::CONFLICT, format!("health check unusable: {e}"));
    }
    let resource = shared.snapshot().resource;
    if old.etcd.connection() != new.etcd.connection() {
        let etcd = shared.etcd.lock().ok().and_then(|e| e.clone());
        let Some(etcd) = etcd else {
            return refused(
                StatusCode::CONFLICT,
                "etcd_endpoints, TLS or authentication changed before the guard reached etcd: \
                 reload again"
                    .into(),
            );
        };
        // The key names no reloadable setting: the new configuration's is this guard's.
        let key = match new.etcd.scope() {
            Ok(scope) => crate::lease::leader_key(&scope, &resource),
            Err(why) => return refused(StatusCode::CONFLICT, why),
        };
        if let Err(why) = etcd.reconnect(&new.etcd, &key).await {
            return refused(
                StatusCode::CONFLICT,
                format!(
                    "the new etcd_endpoints, TLS files or authentication cannot be used: {why}; \
                     the guard goes on with the ones in use"
                ),
            );
        }
        log::info!(
            "guard {resource}: reloaded: etcd reached at {} from now on, the same lease",
            new.etcd.endpoints.join(",")
        );
    }
    log::info!("guard {resource}: reloaded: new health, push and announcement settings in force");
    let interval = new.health.interval.as_millis() as u64;
    let endpoints = new.etcd.endpoints.clone();
    shared.config.send_replace(new);
    shared.update(|s| {
        s.health_interval_ms = Some(interval);
        s.etcd_endpoints = endpoints;
    });
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

pub fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
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

/// Serves the guard's public listener until the task is dropped.
pub async fn serve_public(listener: tokio::net::TcpListener, public: Public) {
    serve_read_only(listener, move |path: &str| public_answer(path, &public)).await
}

/// Serves `answer` (a path's response) on `listener` until the task is dropped: at most
/// MAX_PUBLIC_CONNECTIONS at once, one request each within PUBLIC_CONNECTION_LIMIT. The
/// guard's public listener and the standby's (guard::exporter).
pub async fn serve_read_only<F>(listener: tokio::net::TcpListener, answer: F)
where
    F: Fn(&str) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
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
        let answer = answer.clone();
        tokio::spawn(async move {
            let _slot = permit;
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let answer = answer(req.uri().path());
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

    /// Counts one connection as open until the returned value is dropped.
    pub fn enter(&self) -> impl Drop + Send {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Decrement(self.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_names_its_numbers_exactly() {
        let q = Some("budget_ms=2500&protocol=1");
        assert_eq!(budget_of(q), Some(Duration::from_millis(2500)));
        assert_eq!(query_number(q, "protocol"), Some(1));
        // A longer name that starts with the one asked for is another name.
        assert_eq!(query_number(Some("protocols=2"), "protocol"), None);
        assert_eq!(query_number(Some("protocol=x"), "protocol"), None);
        assert_eq!(query_number(None, "protocol"), None);
    }
}
