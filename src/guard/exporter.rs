//! The standby's listener: while this node's instance of a master resource runs unpromoted
//! and metrics_address is set, a small process serves that address as the guard does while
//! promoted — `/metrics` (guard::metrics::render_standby: the standby, whether it can be
//! promoted, whether etcd answered, its last failure), `/leader` 503, `/health` 200 — so that
//! one scrape configuration covers every node and no standby looks down. It reads what the
//! unpromoted monitor last found (ResourceDir::standby_report) at each request; it asks
//! nothing itself. Spawned by the agent's start and after a demote, ended by promote (before
//! the guard binds the address) and stop: a `stop` line on its abstract socket
//! (ResourceDir::exporter_name) closes the listener, then answers `stopped`, then it exits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hyper::StatusCode;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::status::{bind_abstract, serve_read_only, text};
use crate::resource::dir::ResourceDir;
use crate::resource::status::{LastFailure, StandbyReport};

/// The word that ends it, and its answer once the listener is closed.
pub const STOP: &str = "stop";
pub const STOPPED: &str = "stopped";

/// Serves `address` for `resource` on `node` until asked to stop or signalled. Ok(()) also
/// when another listener of the same resource runs already (its socket is taken).
pub fn run(
    resource: &str,
    node: &str,
    address: SocketAddr,
    run_dir: PathBuf,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(serve(
        resource,
        node,
        address,
        ResourceDir::new(&run_dir, resource),
    ))
}

async fn serve(
    resource: &str,
    node: &str,
    address: SocketAddr,
    dir: ResourceDir,
) -> Result<(), String> {
    let Ok(control) = bind_abstract(&dir.exporter_name()) else {
        log::info!("standby listener {resource}: another one serves already");
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| format!("metrics_address={address}: cannot listen there: {e}"))?;
    log::info!("standby listener {resource}: serving /metrics, /leader and /health on {address}");
    let (name, started) = (resource.to_string(), dir.started());
    let (resource, node) = (resource.to_string(), node.to_string());
    let answer = move |path: &str| answer(path, &resource, &node, &dir);
    let server = tokio::spawn(serve_read_only(listener, answer));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("SIGTERM: {e}"))?;
    // Each control connection read on its own task: a silent one holds nothing up.
    let (asked, mut stops) = tokio::sync::mpsc::channel(1);
    let mut look = tokio::time::interval(LOOK_EVERY);
    loop {
        tokio::select! {
            _ = term.recv() => {
                server.abort();
                return Ok(());
            }
            _ = look.tick() => {
                if let Some(why) = not_wanted(&started) {
                    log::info!("standby listener {name}: ends: {why}");
                    server.abort();
                    return Ok(());
                }
            }
            Some(mut write) = stops.recv() => {
                // The listener closed before the answer: the guard may bind the address as
                // soon as the agent reads it.
                server.abort();
                let _ = server.await;
                let _ = AsyncWriteExt::write_all(&mut write, format!("{STOPPED}\n").as_bytes()).await;
                return Ok(());
            }
            conn = control.accept() => {
                let Ok((stream, _)) = conn else { continue };
                let asked = asked.clone();
                tokio::spawn(async move {
                    let (read, write) = stream.into_split();
                    let mut line = String::new();
                    let read = tokio::time::timeout(
                        Duration::from_secs(1),
                        BufReader::new(read).read_line(&mut line),
                    )
                    .await;
                    if matches!(read, Ok(Ok(_))) && line.trim() == STOP {
                        let _ = asked.send(write).await;
                    }
                });
            }
        }
    }
}

/// How often the listener looks whether it is still wanted.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Why the listener should end by itself, if it should: the instance is no longer started
/// (a stop that missed it), or its program was replaced (an upgrade's agent starts its own;
/// a downgrade's guard, which knows nothing of it, needs metrics_address at its promote).
fn not_wanted(started: &std::path::Path) -> Option<&'static str> {
    if !started.exists() {
        return Some("the instance is not started");
    }
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    exe.to_string_lossy()
        .ends_with(" (deleted)")
        .then_some("its program was replaced")
}

/// One request's answer, from what the run directory holds now.
fn answer(
    path: &str,
    resource: &str,
    node: &str,
    dir: &ResourceDir,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    let one_line = |code: StatusCode, problem: Option<&str>| {
        let body = serde_json::json!({
            "role": "standby",
            "node": node,
            "resource": resource,
            "problem": problem,
        });
        text(code, "application/json", format!("{body}\n"))
    };
    match path {
        "/leader" => one_line(
            StatusCode::SERVICE_UNAVAILABLE,
            Some("this node's instance runs unpromoted"),
        ),
        "/health" => one_line(StatusCode::OK, None),
        "/metrics" => {
            let report: Option<StandbyReport> = dir.load_json(&dir.standby_report());
            let last: Option<LastFailure> = dir.load_json(&dir.last_failure());
            text(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                super::metrics::render_standby(
                    resource,
                    node,
                    report.as_ref(),
                    last.as_ref(),
                    crate::lease::clock::unix_ms(),
                ),
            )
        }
        _ => text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// Asks the standby listener of `dir`, if one runs, to stop; Ok once it answered (its
/// listener closed) or when none runs; Err when one runs and did not answer within `limit`.
pub async fn stop(dir: &ResourceDir, limit: Duration) -> Result<(), String> {
    let Some(std) = crate::resource::dir::connect_abstract(&dir.exporter_name()) else {
        // Nothing listens, or a holder that accepts nothing: the caller's kill decides.
        return match dir.live_exporter() {
            None => Ok(()),
            Some(pid) => Err(format!("the standby listener (pid {pid}) does not accept")),
        };
    };
    let ask = async {
        std.set_nonblocking(true)?;
        let stream = tokio::net::UnixStream::from_std(std)?;
        let (read, mut write) = stream.into_split();
        write.write_all(format!("{STOP}\n").as_bytes()).await?;
        let mut line = String::new();
        BufReader::new(read).read_line(&mut line).await?;
        Ok::<_, std::io::Error>(line)
    };
    match tokio::time::timeout(limit, ask).await {
        Ok(Ok(line)) if line.trim() == STOPPED => Ok(()),
        Ok(Ok(line)) => Err(format!("the standby listener answered {:?}", line.trim())),
        Ok(Err(e)) => Err(format!("the standby listener: {e}")),
        Err(_) => Err(format!(
            "the standby listener did not stop within {limit:?}"
        )),
    }
}
