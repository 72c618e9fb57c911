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
use crate::service::process::ServiceRecord;
use crate::service::{Running, ServiceRef};

/// How long each line of a request may take to arrive.
const REQUEST_LIMIT: Duration = Duration::from_secs(2);
/// The most a stop request may give the resident's stop of its service.
const STOP_LIMIT: Duration = Duration::from_secs(60);
/// Kept back from a stop's budget: the answer must reach the agent.
const STOP_RESERVE: Duration = Duration::from_millis(500);

/// What the agent asks of the resident's main loop.
enum Request {
    Lead(Duration, Box<MasterConfig>, oneshot::Sender<Answer>),
    Stop(Duration, oneshot::Sender<Answer>),
}

/// The resident's answer to one request. On the wire it is one line, in the words the
/// previous release spoke too — during an upgrade an agent of either release asks a resident
/// of the other (docs/upgrading.md) — written by `Display` and read by `Answer::read`, and
/// nowhere else: the agent decides by the variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Its service is being started as a standby.
    Starting,
    /// It runs its service as a standby: which (a pid, or a unit).
    Standby(String),
    /// Its round's guard leads with the service it ran (a lead request's yes, or a status
    /// during the round).
    Leading,
    /// Its service is stopped: confirmed by its stop (no words), or found not running, or the
    /// resident ending (why).
    Stopped(Option<String>),
    /// A stop that could not confirm the service gone (why).
    NotStopped(String),
    /// A look that cannot tell whether its service runs (why).
    CannotTell(String),
    /// The request was refused (why): no round began, nothing was stopped.
    Refused(String),
    /// The resident is ending (its service stopped or being stopped).
    Ending,
    /// A line of no form this release knows (a later release's), as it came.
    Other(String),
}

impl Answer {
    /// The answer a line on the wire carries.
    pub fn read(line: &str) -> Answer {
        let line = line.trim();
        let rest = |prefix: &str| line.strip_prefix(prefix).map(str::to_string);
        match line {
            "starting" => return Answer::Starting,
            "leading" => return Answer::Leading,
            "stopped" => return Answer::Stopped(None),
            "ending" => return Answer::Ending,
            _ => {}
        }
        type Make = fn(String) -> Answer;
        let forms: [(&str, Make); 5] = [
            ("standby ", Answer::Standby),
            ("stopped: ", |w| Answer::Stopped(Some(w))),
            ("not stopped: ", Answer::NotStopped),
            ("cannot tell: ", Answer::CannotTell),
            ("refused: ", Answer::Refused),
        ];
        forms
            .into_iter()
            .find_map(|(prefix, make)| rest(prefix).map(make))
            .unwrap_or_else(|| Answer::Other(line.to_string()))
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Starting => f.write_str("starting"),
            Answer::Standby(what) => write!(f, "standby {what}"),
            Answer::Leading => f.write_str("leading"),
            Answer::Stopped(None) => f.write_str("stopped"),
            Answer::Stopped(Some(why)) => write!(f, "stopped: {why}"),
            Answer::NotStopped(why) => write!(f, "not stopped: {why}"),
            Answer::CannotTell(why) => write!(f, "cannot tell: {why}"),
            Answer::Refused(why) => write!(f, "refused: {why}"),
            Answer::Ending => f.write_str("ending"),
            Answer::Other(line) => f.write_str(line),
        }
    }
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

/// What wakes the resident while its service runs as a standby.
enum Event {
    Exited(String),
    Signal,
    Request(Request),
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
    let mut held: Option<Running> = None;
    loop {
        let mut running = match held.take() {
            Some(r) => r,
            None => {
                set(standing, Standing::Starting);
                start(args, dir)
                    .await
                    .inspect_err(|_| set(standing, Standing::Ending))?
            }
        };
        set(
            standing,
            Standing::Standby(super::lead::reference(&running)),
        );
        let event = tokio::select! {
            how = running.wait_exit() => Event::Exited(how),
            _ = signals.recv() => Event::Signal,
            Some(r) = requests.recv() => Event::Request(r),
        };
        match event {
            Event::Exited(how) => {
                set(standing, Standing::Ending);
                let why = format!("the standby service {how}");
                log::error!("standby {rsc}: {why}; the instance has failed");
                // Its group may live on without its leader: stopped too.
                let _ = end(rsc, dir, Some(running), STOP_LIMIT, None).await;
                return Err(GuardError::Standby(why));
            }
            Event::Signal => {
                set(standing, Standing::Ending);
                return end(rsc, dir, Some(running), STOP_LIMIT, None).await;
            }
            Event::Request(Request::Stop(limit, reply)) => {
                set(standing, Standing::Ending);
                return end(rsc, dir, Some(running), limit, Some(reply)).await;
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
                    let _ = reply.send(Answer::Refused(why));
                    held = Some(running);
                    continue;
                }
                set(standing, Standing::Leading);
                let _ = reply.send(Answer::Leading);
                log::info!("standby {rsc}: asked to lead; the running service is handed over");
                let mut round = args.clone();
                round.acquire_for = acquire_for;
                round.config = *config;
                held = match after_round(round, scope, dir, signals, standing, requests, running)
                    .await
                {
                    Ok(held) => held,
                    Err(ended) => return ended,
                };
            }
        }
    }
}

/// What the socket answers by itself, as it now is.
fn set(standing: &Mutex<Standing>, now: Standing) {
    if let Ok(mut s) = standing.lock() {
        *s = now;
    }
}

/// Stops the service (when there is one), answers, and ends the resident.
async fn end(
    rsc: &str,
    dir: &ResourceDir,
    held: Option<Running>,
    limit: Duration,
    reply: Option<oneshot::Sender<Answer>>,
) -> Result<(), GuardError> {
    let gone = match held {
        Some(r) => stop(rsc, dir, r, limit).await,
        None => Presence::Absent,
    };
    if let Some(reply) = reply {
        let _ = reply.send(match &gone {
            Presence::Absent => Answer::Stopped(None),
            Presence::Present => Answer::NotStopped("the service still runs".into()),
            Presence::CannotTell(why) => Answer::NotStopped(format!("cannot tell: {why}")),
        });
    }
    match gone {
        Presence::Absent => Ok(()),
        _ => Err(GuardError::Standby(
            "the standby service could not be stopped".into(),
        )),
    }
}

/// One round: a guard leads with the running service handed to it. Ok(the service to serve
/// on as a standby: never handed the role — no key, a raise that failed before the hand-over
/// — or given back by demote_command; None: stopped with the role, to be started anew), or
/// Err(the resident's end: a signal, or the agent's stop right after its demote).
async fn after_round(
    round: GuardArgs,
    scope: &str,
    dir: &ResourceDir,
    signals: &mut StopSignals,
    standing: &Mutex<Standing>,
    requests: &mut mpsc::Receiver<Request>,
    running: Running,
) -> Result<Option<Running>, Result<(), GuardError>> {
    let rsc = round.resource.clone();
    let mut guard = Guard::new(round, scope.to_string());
    guard.warm = Some(running);
    let ended = guard.run(signals).await;
    let held = guard.warm.take();
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
        set(standing, Standing::Ending);
        return Err(end(&rsc, dir, held, STOP_LIMIT, None).await);
    }
    // The agent's stop right after its demote: served before the service would be started
    // again for nothing.
    match requests.try_recv() {
        Ok(Request::Stop(limit, reply)) => {
            set(standing, Standing::Ending);
            return Err(end(&rsc, dir, held, limit, Some(reply)).await);
        }
        Ok(Request::Lead(_, _, reply)) => {
            let _ = reply.send(Answer::Refused("a round has just ended".into()));
        }
        Err(_) => {}
    }
    if held.is_none() {
        log::info!("standby {rsc}: the service is started again as a standby");
    }
    Ok(held)
}

/// The service, started as a standby: HAMASTER_ROLE=standby, no fencing token. A command's
/// pid and start time are recorded for the agent (`standby_record`).
async fn start(args: &GuardArgs, dir: &ResourceDir) -> Result<Running, GuardError> {
    let rsc = &args.resource;
    let env = super::lead::service_env(args, super::lead::ServiceRole::Standby);
    match args.config.service.start(&env, rsc, &|| true).await {
        Ok(r) => {
            if let Some(pid) = r.pid() {
                let _ = ServiceRecord::of(pid).save(&dir.standby_record());
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
    let refused = |why: String| Answer::Refused(why);
    let reply = match (words.as_slice(), now) {
        (["status"], Standing::Starting) => Answer::Starting,
        (["status"], Standing::Leading) => Answer::Leading,
        (["status"], Standing::Ending) => Answer::Stopped(Some("the resident is ending".into())),
        (["status"], Standing::Standby(s)) => {
            match crate::service::process::presence(&s, crate::service::process::UNIT_LOOK).await {
                Presence::Present => Answer::Standby(shown(&s)),
                Presence::Absent => Answer::Stopped(Some(format!("{} is not running", shown(&s)))),
                Presence::CannotTell(why) => Answer::CannotTell(why),
            }
        }
        (["lead", _], _) if leading => refused("leading already".into()),
        (["lead", t], _) => {
            let mut json = String::new();
            let config = tokio::time::timeout(REQUEST_LIMIT, read.read_line(&mut json))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| e.to_string())
                .and_then(|_| MasterConfig::from_json(json.trim()));
            match (ms(t), config) {
                (Ok(d), Ok(c)) => ask(&tx, |r| Request::Lead(d, Box::new(c), r)).await,
                (Err(_), _) => refused(format!("{t:?} is not a number of milliseconds")),
                (_, Err(why)) => refused(why),
            }
        }
        // Already ending: the agent waits for it to be gone.
        (["stop", _], Standing::Ending) => Answer::Ending,
        // A stop while a round ends (the agent's stop after its demote) waits for it.
        (["stop", t], _) => match ms(t) {
            Ok(d) => ask(&tx, |r| Request::Stop(d, r)).await,
            Err(_) => refused(format!("{t:?} is not a number of milliseconds")),
        },
        _ => refused(format!("unknown request {:?}", line.trim())),
    };
    write.write_all(format!("{reply}\n").as_bytes()).await?;
    write.shutdown().await
}

async fn ask(
    tx: &mpsc::Sender<Request>,
    make: impl FnOnce(oneshot::Sender<Answer>) -> Request,
) -> Answer {
    let (reply, answer) = oneshot::channel();
    if tx.send(make(reply)).await.is_err() {
        return Answer::Ending;
    }
    // Dropped unanswered: the resident ended (its loop returned).
    answer.await.unwrap_or(Answer::Ending)
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

/// The agent's side: one request (its lines) to the resident of `dir`, its answer within
/// `limit`.
pub async fn request(
    dir: &ResourceDir,
    lines: &str,
    limit: Duration,
) -> Result<Answer, Unanswered> {
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
        Ok(Ok(reply)) if !reply.is_empty() => Ok(Answer::read(&reply)),
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

#[cfg(test)]
mod tests {
    use super::Answer;

    #[test]
    fn every_answer_reads_back_as_written_and_the_previous_releases_lines_read_as_meant() {
        let all = [
            Answer::Starting,
            Answer::Standby("pid 4242".into()),
            Answer::Standby("api.service".into()),
            Answer::Leading,
            Answer::Stopped(None),
            Answer::Stopped(Some("pid 4242 is not running".into())),
            Answer::NotStopped("cannot tell: /proc unreadable".into()),
            Answer::CannotTell("systemctl timed out".into()),
            Answer::Refused("leading already".into()),
            Answer::Ending,
            Answer::Other("a later release's word".into()),
        ];
        for a in all {
            assert_eq!(Answer::read(&format!("{a}\n")), a, "{a}");
        }
        // Lines as the previous release's resident wrote them (its answers were strings).
        for (line, meant) in [
            ("standby pid 17", Answer::Standby("pid 17".into())),
            (
                "stopped: the resident is ending",
                Answer::Stopped(Some("the resident is ending".into())),
            ),
            (
                "not stopped: the service still runs",
                Answer::NotStopped("the service still runs".into()),
            ),
            (
                "refused: a round has just ended",
                Answer::Refused("a round has just ended".into()),
            ),
            ("stopped", Answer::Stopped(None)),
            ("leading", Answer::Leading),
        ] {
            assert_eq!(Answer::read(line), meant, "{line}");
        }
        // A word that only begins like a known one is none of them.
        assert_eq!(Answer::read("leadingly"), Answer::Other("leadingly".into()));
        assert_eq!(Answer::read("standby"), Answer::Other("standby".into()));
    }
}
