//! `hamaster guard --standby` (standby=warm): the resident guard of a started, unpromoted
//! instance. Spawned by the agent's start, it runs the service as a standby (its child, in a
//! process group of its own, dying with it) and waits. Asked to lead (the agent's promote), it
//! runs one guard round — the same `Guard`, machine and rules as a cold master's — handing the
//! round the running service: the round's start of the service is the hand-over of the role
//! (promote_command), and everything that takes the role back stops the service as a cold
//! master's is stopped, before the key is released. After the round it starts the service
//! again as a standby (or keeps it, when the round never handed it the role).
//!
//! It answers on an abstract unix socket (`ResourceDir::standby_name`), one line each way,
//! to processes of its own user only: `status` (the service as a standby, for the unpromoted
//! monitor), `lead MILLISECONDS` (promote: the round waits that long for the key) and `stop`
//! (the agent's stop). A signal stops it, and its round first.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use super::{prepare, stop_signals, Guard, GuardArgs, GuardError, StopSignals};
use crate::presence::Presence;
use crate::resource::dir::ResourceDir;
use crate::service::{Running, ServiceRef};

/// How long a request may take to arrive whole.
const REQUEST_LIMIT: Duration = Duration::from_secs(2);
/// How long the resident's own stop of its standby service may take.
const STOP_LIMIT: Duration = Duration::from_secs(20);

/// What the agent asks of the resident's main loop.
enum Request {
    Lead(Duration, oneshot::Sender<String>),
    Stop(oneshot::Sender<String>),
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
        let server = tokio::spawn(serve(listener, standing.clone(), tx));
        let ended = resident(&args, &scope, &mut signals, &standing, &mut rx).await;
        server.abort();
        ended
    })
}

async fn resident(
    args: &GuardArgs,
    scope: &str,
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
    let mut held: Option<Running> = None;
    loop {
        let mut running = match held.take() {
            Some(r) => r,
            None => {
                set(Standing::Starting);
                start(args).await.inspect_err(|_| set(Standing::Ending))?
            }
        };
        set(Standing::Standby(super::lead::reference(&running)));
        enum Event {
            Exited(String),
            Stop(Option<oneshot::Sender<String>>),
            Lead(Duration, oneshot::Sender<String>),
        }
        let event = tokio::select! {
            how = running.wait_exit() => Event::Exited(how),
            _ = signals.recv() => Event::Stop(None),
            Some(r) = requests.recv() => match r {
                Request::Lead(d, reply) => Event::Lead(d, reply),
                Request::Stop(reply) => Event::Stop(Some(reply)),
            },
        };
        match event {
            Event::Exited(how) => {
                set(Standing::Ending);
                let why = format!("the standby service {how}");
                log::error!("standby {rsc}: {why}; the instance has failed");
                // Its group may live on without its leader: stopped too.
                stop(rsc, running).await;
                return Err(GuardError::Standby(why));
            }
            Event::Stop(reply) => {
                set(Standing::Ending);
                let gone = stop(rsc, running).await;
                if let Some(reply) = reply {
                    let _ = reply.send(match &gone {
                        Presence::Absent => "stopped".to_string(),
                        other => format!("not stopped: {other:?}"),
                    });
                }
                return match gone {
                    Presence::Absent => Ok(()),
                    _ => Err(GuardError::Standby(
                        "the standby service could not be stopped".into(),
                    )),
                };
            }
            Event::Lead(_, reply) if reply.is_closed() => {
                // Its asker gave up waiting (a start that held the loop up): no round that
                // the agent's promote does not know of.
                log::warn!("standby {rsc}: a lead request came too late to be answered");
                held = Some(running);
            }
            Event::Lead(acquire_for, reply) => {
                set(Standing::Leading);
                let _ = reply.send("leading".into());
                log::info!("standby {rsc}: asked to lead; the running service is handed over");
                let mut round = args.clone();
                round.acquire_for = acquire_for;
                let mut guard = Guard::new(round, scope.to_string());
                guard.warm = Some(running);
                let ended = guard.run(signals).await;
                // Never handed the role (no key, a raise that failed before the hand-over):
                // it serves on as a standby. Handed over: stopped with the role, started anew.
                held = guard.warm.take();
                log::info!(
                    "standby {rsc}: the round ended ({}); {}",
                    match &ended {
                        Ok(e) => format!("{e:?}"),
                        Err(e) => e.to_string(),
                    },
                    match held {
                        Some(_) => "the service was never handed the role",
                        None => "the service is started again as a standby",
                    }
                );
                if signals.signalled {
                    set(Standing::Ending);
                    if let Some(r) = held.take() {
                        stop(rsc, r).await;
                    }
                    return Ok(());
                }
            }
        }
    }
}

/// The service, started as a standby: HAMASTER_ROLE=standby, no fencing token.
async fn start(args: &GuardArgs) -> Result<Running, GuardError> {
    let rsc = &args.resource;
    let env = [
        ("HAMASTER_ROLE".to_string(), "standby".to_string()),
        ("HAMASTER_RESOURCE".to_string(), rsc.clone()),
    ];
    match args.config.service.start(&env, rsc, &|| true).await {
        Ok(r) => {
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

/// Stops the standby service (TERM, then KILL, the one way), confirmed: Absent when gone.
async fn stop(rsc: &str, running: Running) -> Presence {
    let service = super::lead::reference(&running);
    let grace = crate::service::stop::grace(STOP_LIMIT);
    let gone = crate::service::stop::stop_and_confirm(&service, grace, STOP_LIMIT).await;
    match &gone {
        Presence::Absent => {
            if let ServiceRef::Group(pid) = service {
                crate::service::process::reap(pid);
            }
            log::info!("standby {rsc}: service stopped");
        }
        other => log::error!("standby {rsc}: the standby service is not stopped: {other:?}"),
    }
    gone
}

/// Answers the agent: `status` from `standing`, `lead` and `stop` by the main loop.
async fn serve(listener: UnixListener, standing: Arc<Mutex<Standing>>, tx: mpsc::Sender<Request>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (standing, tx) = (standing.clone(), tx.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_LIMIT * 2, answer(stream, standing, tx)).await;
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
    let mut line = String::new();
    tokio::time::timeout(REQUEST_LIMIT, BufReader::new(read).read_line(&mut line))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let now = match standing.lock() {
        Ok(s) => s.clone(),
        Err(_) => Standing::Ending,
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let leading = matches!(now, Standing::Leading);
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
        (["lead" | "stop"], _) if leading => "refused: leading (demote first)".to_string(),
        (["lead", ms], _) => match ms.parse::<u64>() {
            Ok(ms) => ask(&tx, |r| Request::Lead(Duration::from_millis(ms), r)).await,
            Err(_) => format!("refused: {ms:?} is not a number of milliseconds"),
        },
        (["stop"], _) => ask(&tx, Request::Stop).await,
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
        return "refused: the resident is ending".into();
    }
    answer
        .await
        .unwrap_or_else(|_| "refused: the resident is busy".into())
}

fn shown(s: &ServiceRef) -> String {
    match s {
        ServiceRef::Group(pid) => format!("pid {pid}"),
        ServiceRef::Unit(unit) => unit.clone(),
    }
}

/// The agent's side: one request to the resident of `dir`, its one-line answer; Err when no
/// resident answers (none runs, or it did not answer within `limit`).
pub async fn request(dir: &ResourceDir, line: &str, limit: Duration) -> Result<String, String> {
    use std::os::linux::net::SocketAddrExt;
    let exchange = async {
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(dir.standby_name())?;
        let std = std::os::unix::net::UnixStream::connect_addr(&addr)?;
        std.set_nonblocking(true)?;
        let mut stream = UnixStream::from_std(std)?;
        stream.write_all(format!("{line}\n").as_bytes()).await?;
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).await?;
        Ok::<_, std::io::Error>(reply.trim().to_string())
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(Ok(reply)) if !reply.is_empty() => Ok(reply),
        Ok(Ok(_)) => Err("the resident standby closed the connection".into()),
        Ok(Err(e)) => Err(format!("no resident standby answers: {e}")),
        Err(_) => Err(format!(
            "the resident standby did not answer within {} ms",
            limit.as_millis()
        )),
    }
}
