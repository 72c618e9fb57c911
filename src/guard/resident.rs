//! `hamaster guard --standby` (standby=warm): the resident guard of a started, unpromoted
//! instance. Spawned by the agent's start, it runs the service as a standby (its child, in a
//! process group of its own, dying with it) and waits. Asked to lead (the agent's promote), it
//! runs one guard round — the same `Guard`, machine and rules as a cold master's — handing the
//! round the running service: the round's start of the service is the hand-over of the role
//! (promote_command), and everything that takes the role back asks for it back
//! (demote_command) or stops the service as a cold master's is stopped, before the key is
//! released. After the round it starts the service again as a standby (or keeps it, when the
//! round never handed it the role, or the service gave the role back).
//!
//! It answers on an abstract unix socket (`ResourceDir::standby_name`), one line each way,
//! to processes of its own user only: `status` (the service as a standby, for the unpromoted
//! monitor), `lead MILLISECONDS` followed by the configuration as JSON on a second line
//! (promote: the round waits that long for the key, with the reloadable settings in force
//! now), and `stop MILLISECONDS` (the agent's stop: its service stopped within that budget). A
//! signal stops it, and its round first. It records its service's pid and start time
//! (`ResourceDir::standby_record`), so that the agent can stop what a dead resident left.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use super::{prepare, stop_signals, Guard, GuardArgs, GuardError, StopSignals};
use crate::presence::Presence;
use crate::resource::config::MasterConfig;
use crate::resource::dir::ResourceDir;
use crate::service::{Running, ServiceRef};

/// How long each line of a request may take to arrive.
const REQUEST_LIMIT: Duration = Duration::from_secs(2);
/// The most a stop request may give the resident's stop of its service.
const STOP_LIMIT: Duration = Duration::from_secs(60);
/// Kept back from a stop's budget: the answer must reach the agent.
const STOP_RESERVE: Duration = Duration::from_millis(500);

/// What the agent asks of the resident's main loop.
enum Request {
    Lead(Duration, Box<MasterConfig>, oneshot::Sender<String>),
    Stop(Duration, oneshot::Sender<String>),
}

/// What the socket answers by itself.
#[derive(Clone)]
enum Standing {
    /// The standby service is being started.
    Starting,
    Standby(ServiceRef),
    /// A round runs: the agent asks the round's guard.
    Leading,
    /// Stopping, or stopped: the resident ends.
    Ending,
}

/// Runs the resident to its end: Ok after `stop` or a signal (the service stopped), Err when
/// the standby service could not be started or exited (the instance has failed).
pub fn standby(args: GuardArgs) -> Result<(), GuardError> {
    let (rt, scope) = prepare(&args)?;
    rt.block_on(async move {
        let mut signals = stop_signals(&args.resource)?;
        let dir = ResourceDir::new(&args.run_dir, &args.resource);
        if let Err(source) = dir.create() {
            let e = GuardError::RunDir {
                path: dir.root.clone(),
                source,
            };
            log::error!("standby {}: {e}", args.resource);
            return Err(e);
        }
        let listener = match super::status::bind_abstract(&dir.standby_name()) {
            Ok(l) => l,
            Err(source) => {
                let e = GuardError::Taken {
                    who: " (a resident standby)".into(),
                    source,
                };
                log::error!("standby {}: {e}", args.resource);
                return Err(e);
            }
        };
        let standing = Arc::new(Mutex::new(Standing::Starting));
        let (tx, mut rx) = mpsc::channel(4);
        let open = super::status::Open::default();
        let server = tokio::spawn(serve(listener, standing.clone(), tx, open.clone()));
        let ended = resident(&args, &scope, &dir, &mut signals, &standing, &mut rx).await;
        server.abort();
        // The answers given (a stop's "stopped") reach the agent before the process ends;
        // requests still queued are answered "ending".
        drop(rx);
        open.drain(Duration::from_millis(500)).await;
        ended
    })
}

async fn resident(
    args: &GuardArgs,
    scope: &str,
    dir: &ResourceDir,
    signals: &mut StopSignals,
    standing: &Mutex<Standing>,
    requests: &mut mpsc::Receiver<Request>,
) -> Result<(), GuardError> {
    let rsc = args.resource.as_str();
    let set = |now: Standing| {
        if let Ok(mut s) = standing.lock() {
            *s = now;
        }
    };
    // Stops the service (when there is one), answers, and ends the resident.
    let end = |held: Option<Running>, limit: Duration, reply: Option<oneshot::Sender<String>>| async move {
        let gone = match held {
            Some(r) => stop(rsc, dir, r, limit).await,
            None => Presence::Absent,
        };
        if let Some(reply) = reply {
            let _ = reply.send(match &gone {
                Presence::Absent => "stopped".to_string(),
                Presence::Present => "not stopped: the service still runs".to_string(),
                Presence::CannotTell(why) => format!("not stopped: cannot tell: {why}"),
            });
        }
        match gone {
            Presence::Absent => Ok(()),
            _ => Err(GuardError::Standby(
                "the standby service could not be stopped".into(),
            )),
        }
    };
    let mut held: Option<Running> = None;
    loop {
        let mut running = match held.take() {
            Some(r) => r,
            None => {
                set(Standing::Starting);
                start(args, dir)
                    .await
                    .inspect_err(|_| set(Standing::Ending))?
            }
        };
        set(Standing::Standby(super::lead::reference(&running)));
        enum Event {
            Exited(String),
            Signal,
            Request(Request),
        }
        let event = tokio::select! {
            how = running.wait_exit() => Event::Exited(how),
            _ = signals.recv() => Event::Signal,
            Some(r) = requests.recv() => Event::Request(r),
        };
        match event {
            Event::Exited(how) => {
                set(Standing::Ending);
                let why = format!("the standby service {how}");
                log::error!("standby {rsc}: {why}; the instance has failed");
                // Its group may live on without its leader: stopped too.
                let _ = end(Some(running), STOP_LIMIT, None).await;
                return Err(GuardError::Standby(why));
            }
            Event::Signal => {
                set(Standing::Ending);
                return end(Some(running), STOP_LIMIT, None).await;
            }
            Event::Request(Request::Stop(limit, reply)) => {
                set(Standing::Ending);
                return end(Some(running), limit, Some(reply)).await;
            }
            Event::Request(Request::Lead(_, _, reply)) if reply.is_closed() => {
                // Its asker gave up waiting (a start that held the loop up): no round that
                // the agent's promote does not know of.
                log::warn!("standby {rsc}: a lead request came too late to be answered");
                held = Some(running);
            }
            Event::Request(Request::Lead(acquire_for, config, reply)) => {
                // The settings Pacemaker has now: only reloadable ones may differ from the
                // resident's (any other change restarts the resource).
                if let Some(why) = args.config.reload_refusal(&config) {
                    let _ = reply.send(format!("refused: {why}"));
                    held = Some(running);
                    continue;
                }
                set(Standing::Leading);
                let _ = reply.send("leading".into());
                log::info!("standby {rsc}: asked to lead; the running service is handed over");
                let mut round = args.clone();
                round.acquire_for = acquire_for;
                round.config = *config;
                let mut guard = Guard::new(round, scope.to_string());
                guard.warm = Some(running);
                let ended = guard.run(signals).await;
                // Never handed the role (no key, a raise that failed before the hand-over), or
                // given back (demote_command): it serves on as a standby. Else stopped with the
                // role, and started anew.
                held = guard.warm.take();
                if held.is_none() {
                    let _ = std::fs::remove_file(dir.standby_record());
                }
                log::info!(
                    "standby {rsc}: the round ended ({})",
                    match &ended {
                        Ok(e) => format!("{e:?}"),
                        Err(e) => e.to_string(),
                    },
                );
                if signals.signalled {
                    set(Standing::Ending);
                    return end(held, STOP_LIMIT, None).await;
                }
                // The agent's stop right after its demote: served before the service would
                // be started again for nothing.
                match requests.try_recv() {
                    Ok(Request::Stop(limit, reply)) => {
                        set(Standing::Ending);
                        return end(held, limit, Some(reply)).await;
                    }
                    Ok(Request::Lead(_, _, reply)) => {
                        let _ = reply.send("refused: a round has just ended".into());
                    }
                    Err(_) => {}
                }
                if held.is_none() {
                    log::info!("standby {rsc}: the service is started again as a standby");
                }
            }
        }
    }
}

/// The service, started as a standby: HAMASTER_ROLE=standby, no fencing token. A command's
/// pid and start time are recorded for the agent (`standby_record`).
async fn start(args: &GuardArgs, dir: &ResourceDir) -> Result<Running, GuardError> {
    let rsc = &args.resource;
    let env = [
        ("HAMASTER_ROLE".to_string(), "standby".to_string()),
        ("HAMASTER_RESOURCE".to_string(), rsc.clone()),
        ("HAMASTER_NODE".to_string(), args.node.clone()),
    ];
    match args.config.service.start(&env, rsc, &|| true).await {
        Ok(r) => {
            if let Some(pid) = r.pid() {
                let start = crate::procfs::start_time(pid).unwrap_or_default();
                let _ = crate::runfiles::write_private(
                    &dir.standby_record(),
                    format!("{pid} {start}\n"),
                );
            }
            log::info!(
                "standby {rsc}: service started as a standby{}",
                r.pid().map_or(String::new(), |p| format!(" (pid {p})"))
            );
            Ok(r)
        }
        Err(e) => {
            let e = GuardError::Standby(format!("the standby service could not start: {e}"));
            log::error!("standby {rsc}: {e}");
            Err(e)
        }
    }
}

/// Stops the standby service within `limit` (TERM, then KILL, the one way), confirmed:
/// Absent when gone (its record removed then).
async fn stop(rsc: &str, dir: &ResourceDir, running: Running, limit: Duration) -> Presence {
    let service = super::lead::reference(&running);
    let limit = limit.min(STOP_LIMIT).saturating_sub(STOP_RESERVE);
    let grace = crate::service::stop::grace(limit);
    let gone = crate::service::stop::stop_and_confirm(&service, grace, limit).await;
    match &gone {
        Presence::Absent => {
            if let ServiceRef::Group(pid) = service {
                crate::service::process::reap(pid);
            }
            let _ = std::fs::remove_file(dir.standby_record());
            log::info!("standby {rsc}: service stopped");
        }
        other => log::error!("standby {rsc}: the standby service is not stopped: {other:?}"),
    }
    gone
}

/// Answers the agent: `status` from `standing`, `lead` and `stop` by the main loop.
async fn serve(
    listener: UnixListener,
    standing: Arc<Mutex<Standing>>,
    tx: mpsc::Sender<Request>,
    open: super::status::Open,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: no busy loop.
                log::warn!("standby: cannot accept a request: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (standing, tx) = (standing.clone(), tx.clone());
        let entered = open.enter();
        // Each line's arrival is bounded; the answer waits for the main loop (a stop takes
        // what its request gives it).
        tokio::spawn(async move {
            let _ = answer(stream, standing, tx).await;
            drop(entered);
        });
    }
}

async fn answer(
    stream: UnixStream,
    standing: Arc<Mutex<Standing>>,
    tx: mpsc::Sender<Request>,
) -> std::io::Result<()> {
    // Only this user (root, as Pacemaker runs agents) may ask: a lead request makes a master.
    let own = nix::unistd::geteuid().as_raw();
    if stream.peer_cred()?.uid() != own {
        return Ok(());
    }
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut line = String::new();
    let timed_out = || std::io::Error::from(std::io::ErrorKind::TimedOut);
    tokio::time::timeout(REQUEST_LIMIT, read.read_line(&mut line))
        .await
        .map_err(|_| timed_out())??;
    let now = match standing.lock() {
        Ok(s) => s.clone(),
        Err(_) => Standing::Ending,
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let leading = matches!(now, Standing::Leading);
    let ms = |text: &str| text.parse::<u64>().map(Duration::from_millis);
    let reply = match (words.as_slice(), now) {
        (["status"], Standing::Starting) => "starting".to_string(),
        (["status"], Standing::Leading) => "leading".to_string(),
        (["status"], Standing::Ending) => "stopped: the resident is ending".to_string(),
        (["status"], Standing::Standby(s)) => {
            match crate::service::process::presence(&s, crate::service::process::UNIT_LOOK).await {
                Presence::Present => format!("standby {}", shown(&s)),
                Presence::Absent => format!("stopped: {} is not running", shown(&s)),
                Presence::CannotTell(why) => format!("cannot tell: {why}"),
            }
        }
        (["lead", _], _) if leading => "refused: leading already".to_string(),
        (["lead", t], _) => {
            let mut json = String::new();
            let config = tokio::time::timeout(REQUEST_LIMIT, read.read_line(&mut json))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| e.to_string())
                .and_then(|_| MasterConfig::from_json(json.trim()));
            match (ms(t), config) {
                (Ok(d), Ok(c)) => ask(&tx, |r| Request::Lead(d, Box::new(c), r)).await,
                (Err(_), _) => format!("refused: {t:?} is not a number of milliseconds"),
                (_, Err(why)) => format!("refused: {why}"),
            }
        }
        // Already ending: the agent waits for it to be gone.
        (["stop", _], Standing::Ending) => "ending".to_string(),
        // A stop while a round ends (the agent's stop after its demote) waits for it.
        (["stop", t], _) => match ms(t) {
            Ok(d) => ask(&tx, |r| Request::Stop(d, r)).await,
            Err(_) => format!("refused: {t:?} is not a number of milliseconds"),
        },
        _ => format!("refused: unknown request {:?}", line.trim()),
    };
    write.write_all(format!("{reply}\n").as_bytes()).await?;
    write.shutdown().await
}

async fn ask(
    tx: &mpsc::Sender<Request>,
    make: impl FnOnce(oneshot::Sender<String>) -> Request,
) -> String {
    let (reply, answer) = oneshot::channel();
    if tx.send(make(reply)).await.is_err() {
        return "ending".into();
    }
    // Dropped unanswered: the resident ended (its loop returned).
    answer.await.unwrap_or_else(|_| "ending".into())
}

fn shown(s: &ServiceRef) -> String {
    match s {
        ServiceRef::Group(pid) => format!("pid {pid}"),
        ServiceRef::Unit(unit) => unit.clone(),
    }
}

/// Why a request to the resident got no answer.
#[derive(Debug)]
pub enum Unanswered {
    /// No resident runs (nobody holds its socket).
    Absent,
    /// One may run, but it did not answer (in time, or at all): cannot tell.
    Silent(String),
}

/// The agent's side: one request (its lines) to the resident of `dir`, its one-line answer
/// within `limit`.
pub async fn request(
    dir: &ResourceDir,
    lines: &str,
    limit: Duration,
) -> Result<String, Unanswered> {
    use std::os::linux::net::SocketAddrExt;
    let connect = || {
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(dir.standby_name())?;
        let std = std::os::unix::net::UnixStream::connect_addr(&addr)?;
        std.set_nonblocking(true)?;
        UnixStream::from_std(std)
    };
    let mut stream = match connect() {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(Unanswered::Absent)
        }
        Err(e) => {
            return Err(Unanswered::Silent(format!(
                "cannot ask the resident standby: {e}"
            )))
        }
    };
    let exchange = async {
        stream.write_all(format!("{lines}\n").as_bytes()).await?;
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).await?;
        Ok::<_, std::io::Error>(reply.trim().to_string())
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(Ok(reply)) if !reply.is_empty() => Ok(reply),
        Ok(Ok(_)) => Err(Unanswered::Silent(
            "the resident standby closed the connection unanswered".into(),
        )),
        Ok(Err(e)) => Err(Unanswered::Silent(format!("the resident standby: {e}"))),
        Err(_) => Err(Unanswered::Silent(format!(
            "the resident standby did not answer within {} ms",
            limit.as_millis()
        ))),
    }
}
