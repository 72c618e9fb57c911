//! `hamaster guard`: the long-lived process on the promoted node. It takes the leader key in
//! etcd under its own lease (acquire); from then on the guard machine (machine) holds the
//! whole protocol — raise, renewals, ownership, fencing, step-down, release — as a value
//! without I/O, clocked and locked by the fencing thread (fence), and a tokio shell (lead,
//! keepalive, health) performs what it orders and feeds the answers back. It serves its
//! status on a unix socket and steps down when asked.

mod acquire;
mod answers;
mod certs;
pub mod exporter;
pub mod fence;
mod health;
mod keepalive;
mod lead;
pub mod machine;
pub mod metrics;
mod placement;
mod push;
pub mod resident;
mod sched;
pub mod sessions;
#[cfg(test)]
mod sim;
mod space;
pub mod status;
pub mod watchdog;
mod wire;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::lease::clock::boottime;
use crate::lease::{leader_key, Etcd, Grant, LeaseClock};
use crate::presence::Presence;
use crate::resource::config::MasterConfig;
use crate::resource::dir::{Persisted, ResourceDir};
use crate::resource::status::{
    all_present, FailsafeStatus, GuardStatus, Role, VipConflict, VipSeen, WatchdogStatus,
};
use crate::resource::watchdog::{choose, Choice};
use crate::service::Running;
use fence::Fence;
use status::{Shared, StepDown};

/// How long a guard that gave up keeps answering, so promote can read why.
const FAILED_LINGER: Duration = Duration::from_secs(3);

#[derive(Clone)]
pub struct GuardArgs {
    pub resource: String,
    pub node: String,
    pub config: MasterConfig,
    /// How long to wait for the key (promote's timeout, minus what it needs itself).
    pub acquire_for: Duration,
    pub run_dir: PathBuf,
    /// Pacemaker's name of the resource (OCF_RESOURCE_INSTANCE) when Pacemaker runs it: where
    /// push_failures reports a failed service. None outside Pacemaker (takeover).
    pub pacemaker_resource: Option<String>,
    /// The node the operator confirmed down (`hamaster takeover --holder-down`): its failsafe
    /// record no longer holds this guard back.
    pub holder_down: Option<String>,
    /// A campaign's guard (`hamaster campaign`), and how long it may take to serve after it
    /// took the key (promote's default timeout): with no Pacemaker to recover it, it steps
    /// down by itself once fenced, no longer serving, or with a failure to tell, and its
    /// round ends.
    pub campaign: Option<Duration>,
}

use crate::lease::clock::{unix_ms, unix_ms_at};

/// Why a guard ended without leading, or gave up: its reason is the promote's, and
/// crate::failure gives the process its exit code.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The configuration on standard input is not the agent's JSON.
    #[error("takes its configuration as JSON on standard input from the master agent: {0}")]
    Config(String),
    #[error("cannot start its runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot create {}: {source}", path.display())]
    RunDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The resource's abstract socket is held: another guard runs.
    #[error("another guard{who} runs for this resource ({source})")]
    Taken { who: String, source: std::io::Error },
    #[error("cannot bind {}: {source}", path.display())]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot install its signal handlers")]
    Signals,
    #[error("metrics_address={addr}: cannot listen there: {source}")]
    Metrics {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    /// watchdog=required and none can be armed (resource::watchdog::choose's words).
    #[error("{0}")]
    Watchdog(String),
    #[error(transparent)]
    Etcd(#[from] crate::lease::LeaseError),
    /// The key stayed another's, or etcd did not answer, for the whole wait.
    #[error("not leader after {secs} s: {last}")]
    NotLeader { secs: u64, last: String },
    #[error("VIP: {0}")]
    Vip(#[from] crate::vip::VipError),
    #[error("cannot start fencing: {0}")]
    Fencing(String),
    /// The raise failed (the machine's words).
    #[error("{0}")]
    Raise(String),
    /// A resident standby's service could not be started, exited, or could not be stopped.
    #[error("{0}")]
    Standby(String),
}

/// How a guard's round ended, when it ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It was asked to (a step-down request or a signal), leading or not.
    Asked,
    /// Its leadership ended by itself: fenced (the key lost), or stepped down because a
    /// campaign's guard had a failure to tell and no Pacemaker to tell it to.
    Lost,
}

/// The runtime and the key's scope of a guard, or why there can be none (logged).
fn prepare(args: &GuardArgs) -> Result<(tokio::runtime::Runtime, String), GuardError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let resource = args.resource.clone();
    std::panic::set_hook(Box::new(move |info| {
        log::error!("guard {resource}: internal error (please report): {info}");
        eprintln!("guard {resource}: internal error: {info}");
    }));
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let e = GuardError::Runtime(e);
            log::error!("guard: {e}");
            return Err(e);
        }
    };
    // The agent checked that the cluster's name is known before it spawned this guard; a
    // cold standby's TOML names it.
    match args.config.etcd.scope() {
        Ok(scope) => Ok((rt, scope)),
        Err(why) => {
            let e = GuardError::Config(why);
            log::error!("guard {}: {e}", args.resource);
            Err(e)
        }
    }
}

/// The signals a guard takes as "step down", installed once for the process: a signal that
/// comes between a campaign's rounds waits for the next one.
fn stop_signals(resource: &str) -> Result<StopSignals, GuardError> {
    StopSignals::new().ok_or_else(|| {
        log::error!("guard {resource}: {}", GuardError::Signals);
        GuardError::Signals
    })
}

/// Runs a guard to its end.
pub fn run(args: GuardArgs) -> Result<(), GuardError> {
    let (rt, scope) = prepare(&args)?;
    rt.block_on(async {
        let mut signals = stop_signals(&args.resource)?;
        Guard::new(args, scope).run(&mut signals).await.map(|_| ())
    })
}

/// After a lost leadership, the pause before a campaign stands again: the other candidates,
/// watching the key, take it first.
const CAMPAIGN_PAUSE: Duration = Duration::from_secs(1);
/// After a round that failed (etcd unreachable, a raise that failed), the pause before the
/// next one.
const CAMPAIGN_RETRY: Duration = Duration::from_secs(5);

/// `hamaster campaign`: guards in rounds until a signal or a step-down request ends one. Each
/// round waits for the key (a watch), leads with the same machine and rules as a promoted
/// guard, and ends when its leadership does; the next round stands again. A failure that
/// another round would meet the same way (the configuration, this node's files, the metrics
/// address, a required watchdog) ends the campaign.
pub fn campaign(args: GuardArgs) -> Result<(), GuardError> {
    let (rt, scope) = prepare(&args)?;
    let rsc = args.resource.clone();
    rt.block_on(async move {
        let mut signals = stop_signals(&rsc)?;
        loop {
            let ended = Guard::new(args.clone(), scope.clone())
                .run(&mut signals)
                .await;
            let pause = match ended {
                Ok(Ended::Asked) => return Ok(()),
                // A signal or a step-down request answered in a round that ended otherwise.
                Ok(Ended::Lost) | Err(_) if signals.asked => return Ok(()),
                Ok(Ended::Lost) => {
                    log::warn!(
                        "campaign {rsc}: leadership over; a candidate again in {} s",
                        CAMPAIGN_PAUSE.as_secs()
                    );
                    CAMPAIGN_PAUSE
                }
                Err(e) if e.ends_a_campaign() => return Err(e),
                Err(e) => {
                    log::warn!(
                        "campaign {rsc}: {e}; a candidate again in {} s",
                        CAMPAIGN_RETRY.as_secs()
                    );
                    CAMPAIGN_RETRY
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = signals.recv() => return Ok(()),
            }
        }
    })
}

struct Acquired {
    etcd: Etcd,
    token: i64,
    grant: Grant,
    /// Our failsafe record's mod revision, when one was written with the key: the guard may
    /// hold through an etcd outage, on proofs of what the plan says.
    record: Option<(i64, machine::HoldPlan)>,
}

enum Interrupt {
    StepDown(StepDown),
    Signal,
    Failed(GuardError),
}

struct Guard {
    args: GuardArgs,
    dir: ResourceDir,
    /// `{etcd_prefix}/{cluster_name}`: where the key, the seen mark and the record sit.
    scope: String,
    key: String,
    clock: LeaseClock,
    shared: Shared,
    /// The fencing side of the current leadership, once there is one.
    fence: Arc<OnceLock<Fence>>,
    persisted: Persisted,
    service: Option<Running>,
    /// A resident standby's running service, handed to this round: its start is the hand-over
    /// of the role. Still here after the round when it was never handed over, or when it gave
    /// the role back.
    warm: Option<Running>,
    /// The watchdog device chosen before the key is taken (or why none).
    watchdog: Choice,
    /// What /metrics reports that is counted as it happens.
    metrics: Arc<metrics::Metrics>,
    /// A signal came or a step-down request was answered: the end was asked for, however it
    /// came.
    asked: bool,
}

impl Guard {
    /// The leader key of hamaster releases before the cluster's name was in it: taken only
    /// while it is absent.
    fn legacy_key(&self) -> String {
        crate::lease::legacy_leader_key(&self.args.config.etcd.prefix, &self.args.resource)
    }

    fn new(args: GuardArgs, scope: String) -> Guard {
        let dir = ResourceDir::new(&args.run_dir, &args.resource);
        let key = leader_key(&scope, &args.resource);
        let clock = args.config.etcd.clock();
        let fence: Arc<OnceLock<Fence>> = Arc::new(OnceLock::new());
        let initial = GuardStatus {
            protocol: crate::resource::status::PROTOCOL,
            release: crate::resource::status::RELEASE.into(),
            resource: args.resource.clone(),
            node: args.node.clone(),
            pid: std::process::id(),
            vip: args.config.vip.as_ref().map(|v| v.ip.to_string()),
            vips: args
                .config
                .vips()
                .map(|v| VipSeen {
                    address: v.ip.to_string(),
                    ..VipSeen::default()
                })
                .collect(),
            service_detail: "not started".into(),
            health_interval_ms: Some(args.config.health.interval.as_millis() as u64),
            etcd_endpoints: args.config.etcd.endpoints.clone(),
            ..GuardStatus::default()
        };
        let vip_configs: Vec<_> = args.config.vips().cloned().collect();
        let live_fence = fence.clone();
        let live = move |s: &mut GuardStatus| {
            if !vip_configs.is_empty() {
                // Present means usable: an IPv4 address stays on a link that was set down.
                let looks = crate::vip::usable_all(&vip_configs);
                for (seen, look) in s.vips.iter_mut().zip(looks) {
                    seen.present = match look {
                        Presence::Present => Some(true),
                        Presence::Absent => Some(false),
                        Presence::CannotTell(_) => None,
                    };
                }
                s.vip_present = all_present(s.vips.iter().map(|v| v.present));
            }
            if let Some(f) = live_fence.get() {
                from_machine(s, &f.view(), f.watchdog_device(), clock);
            }
        };
        let shared = Shared {
            status: Arc::new(Mutex::new(initial)),
            live: Arc::new(live),
            config: Arc::new(tokio::sync::watch::Sender::new(args.config.clone())),
            etcd: Arc::default(),
        };
        let persisted = Persisted {
            guard_pid: std::process::id(),
            node: args.node.clone(),
            key: key.clone(),
            ..Persisted::default()
        };
        Guard {
            args,
            dir,
            scope,
            key,
            clock,
            shared,
            fence,
            persisted,
            service: None,
            warm: None,
            watchdog: Choice::Off,
            metrics: Arc::default(),
            asked: false,
        }
    }

    fn persist(&mut self) {
        if let Err(e) = self.dir.save(&self.persisted) {
            log::warn!("guard {}: cannot record state: {e}", self.args.resource);
        }
    }

    /// A failure before the guard serves its status: logged, and the end.
    fn early(&self, e: GuardError) -> Result<Ended, GuardError> {
        log::error!("guard {}: {e}", self.args.resource);
        Err(e)
    }

    async fn run(&mut self, sigterm: &mut StopSignals) -> Result<Ended, GuardError> {
        let (identity, listener) = match self.bind() {
            Ok(sockets) => sockets,
            Err(e) => return self.early(e),
        };
        let (stepdown_tx, mut stepdown_rx) = mpsc::channel::<StepDown>(4);
        let open = status::Open::default();
        let serve = |listener| {
            tokio::spawn(status::serve(
                listener,
                self.shared.clone(),
                stepdown_tx.clone(),
                open.clone(),
            ))
        };
        let mut servers = Servers {
            status: serve(listener),
            identity: serve(identity),
            public: None,
        };
        // Before the key: a metrics_address that cannot be bound, or watchdog=required with
        // no device, never takes it.
        if let Err(why) = self.before_the_key(&mut servers).await {
            let ended = self.give_up(why, &mut stepdown_rx).await;
            self.dir.remove_guard_files();
            servers.abort();
            return ended;
        }
        let ended = match self.acquire(&mut stepdown_rx, sigterm).await {
            Ok(acquired) => self.lead(acquired, &mut stepdown_rx, sigterm).await,
            Err(Interrupt::StepDown(request)) => {
                self.shared.update(|s| s.role = Role::SteppingDown);
                let _ = request.reply.send((true, self.shared.snapshot()));
                Ok(Ended::Asked)
            }
            Err(Interrupt::Signal) => Ok(Ended::Asked),
            Err(Interrupt::Failed(why)) => self.give_up(why, &mut stepdown_rx).await,
        };
        self.dir.remove_guard_files();
        // Their listeners closed before the next round binds the same names.
        servers.close().await;
        open.drain(Duration::from_millis(500)).await;
        sigterm.asked |= self.asked;
        ended
    }

    /// The guard's sockets: the abstract one first — holding it is what makes this the
    /// resource's guard — then, with the pidfile and the state written, the status socket.
    fn bind(&mut self) -> Result<(tokio::net::UnixListener, tokio::net::UnixListener), GuardError> {
        if let Err(source) = self.dir.create() {
            let path = self.dir.root.clone();
            return Err(GuardError::RunDir { path, source });
        }
        let identity = status::bind_abstract(&self.dir.guard_name()).map_err(|source| {
            let who = self
                .dir
                .live_guard()
                .map_or(String::new(), |p| format!(" (pid {p})"));
            GuardError::Taken { who, source }
        })?;
        let _ = crate::runfiles::write_private(
            &self.dir.pidfile(),
            format!("{}\n", std::process::id()),
        );
        self.persist();
        let listener = status::bind(&self.dir.socket()).map_err(|source| GuardError::Bind {
            path: self.dir.socket(),
            source,
        })?;
        Ok((identity, listener))
    }

    /// What must hold before the key is taken: the public listener bound (serving at once),
    /// the watchdog chosen.
    async fn before_the_key(&mut self, servers: &mut Servers) -> Result<(), GuardError> {
        servers.public = self.listen_public().await?;
        let choice = choose(&self.args.config.watchdog).map_err(GuardError::Watchdog)?;
        self.use_watchdog(choice);
        Ok(())
    }

    /// The public listener (metrics_address), serving at once: /health and /metrics answer
    /// while the key is still being taken; Err names the address that cannot be bound.
    async fn listen_public(&self) -> Result<Option<tokio::task::JoinHandle<()>>, GuardError> {
        let Some(addr) = self.args.config.metrics else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| GuardError::Metrics { addr, source })?;
        log::info!(
            "guard {}: serving /metrics, /leader and /health on {addr}",
            self.args.resource
        );
        let public = status::Public::new(self.shared.clone(), self.metrics.clone(), self.clock.ttl);
        Ok(Some(tokio::spawn(status::serve_public(listener, public))))
    }

    /// Takes the watchdog choice; with a device, the guard's memory is locked and its priority
    /// raised, so that a loaded node does not starve the pings (only a frozen guard resets it).
    fn use_watchdog(&mut self, choice: Choice) {
        let rsc = &self.args.resource;
        let status = match &choice {
            Choice::Off => None,
            Choice::Use(d) => {
                let names: Vec<String> = d.iter().map(|p| p.display().to_string()).collect();
                log::info!("guard {rsc}: watchdog {} chosen", names.join(" or "));
                for problem in hold_in_memory_and_priority() {
                    log::warn!("guard {rsc}: {problem}");
                }
                Some(WatchdogStatus {
                    device: names.first().cloned(),
                    ..Default::default()
                })
            }
            Choice::Without(why) => {
                log::warn!("guard {rsc}: leading without a watchdog: {why}");
                Some(WatchdogStatus {
                    note: Some(why.clone()),
                    ..Default::default()
                })
            }
        };
        self.shared.update(|s| s.watchdog = status);
        self.watchdog = choice;
    }

    fn op_timeout(&self) -> Duration {
        self.clock.etcd_op_timeout()
    }

    fn problem(&self, role: Role, why: impl Into<String>) {
        let why = why.into();
        log::info!("guard {}: {why}", self.args.resource);
        self.shared.update(|s| {
            s.role = role;
            s.problem = Some(why);
        });
    }

    /// Reports the failure for a while (promote reads it), then ends.
    async fn give_up(
        &mut self,
        why: GuardError,
        stepdown: &mut mpsc::Receiver<StepDown>,
    ) -> Result<Ended, GuardError> {
        log::error!("guard {}: {why}", self.args.resource);
        self.problem(Role::Failed, why.to_string());
        if self.asked {
            // A step-down was asked and answered already (a promote undoing itself): nobody
            // waits to read why, and the asker waits for this guard to end.
            return Err(why);
        }
        tokio::select! {
            _ = tokio::time::sleep(FAILED_LINGER) => {}
            Some(request) = stepdown.recv() => {
                self.asked = true;
                let _ = request.reply.send((true, self.shared.snapshot()));
            }
        }
        Err(why)
    }
}

/// The guard's status as the machine has it: role, problem, service, lease, fencing.
fn from_machine(
    s: &mut GuardStatus,
    m: &machine::View,
    device: Option<&std::path::Path>,
    clock: LeaseClock,
) {
    use machine::State;
    let now = boottime();
    s.role = match &m.state {
        State::Raising(_) | State::Up { .. } => Role::Leader,
        // A raise that failed stays a failure, fenced or not, and once everything is down
        // (promote reads it).
        State::Lowering(l) | State::Done(l) if l.failure.is_some() => Role::Failed,
        State::Lowering(l) if l.fenced.is_some() => Role::Fenced,
        State::Lowering(_) | State::Done(_) => Role::SteppingDown,
    };
    let health = m.observed.health.as_ref();
    s.service_running = m.service_running();
    s.service_healthy = m.service_healthy();
    s.unit_inactive = health.is_some_and(|h| h.unit_inactive);
    if let Some(d) = m.exit_detail.as_ref().or(health.map(|h| &h.detail)) {
        s.service_detail = d.clone();
    } else if matches!(m.service, machine::ServiceState::Running(_)) {
        s.service_detail = "started".into();
    }
    vips_from_machine(s, m);
    s.failsafe = m.hold.enabled.then(|| FailsafeStatus {
        holding_since_unix_ms: m.hold.since.map(unix_ms_at),
        proof: m.hold.proof.as_ref().map(|p| p.1.clone()),
        proven_unix_ms: m.hold.proof.as_ref().map(|p| unix_ms_at(p.0)),
        etcd_last_seen_unix_ms: unix_ms_at(m.hold.etcd_seen),
    });
    s.vip_losses = machine::Loss::ALL
        .iter()
        .zip(m.observed.losses)
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| (l.label().to_string(), n))
        .collect();
    s.last_renewal_unix_ms = Some(unix_ms_at(m.last_renewal_sent));
    s.lease_ttl_left_ms = Some(match m.state.fenced() {
        Some(_) => 0,
        None => clock.ttl_left(m.deadline, now).as_millis() as u64,
    });
    watchdog_from_machine(s, m, device);
    if let Some((at, cause)) = m.state.fenced() {
        s.fenced_at_unix_ms = Some(unix_ms_at(*at));
        s.fence_cause = Some(cause.label().into());
    }
    if let Some(problem) = &m.problem {
        s.problem = Some(problem.clone());
    }
}

/// What the machine observed of the VIPs: lost, claimed by others (by address).
fn vips_from_machine(s: &mut GuardStatus, m: &machine::View) {
    s.vip_lost = m.observed.lost.clone();
    for v in &mut s.vips {
        v.conflict_frames = m
            .observed
            .conflicts_by_address
            .get(&v.address)
            .copied()
            .unwrap_or(0);
    }
    s.vip_conflict = m.observed.conflict.as_ref().map(|c| VipConflict {
        address: Some(c.address.clone()),
        mac: c.mac.clone(),
        frame: c.frame.clone(),
        frames: m.observed.conflict_frames(),
        last_unix_ms: unix_ms_at(c.last),
    });
}

/// The watchdog as the machine has it, on the device chosen.
fn watchdog_from_machine(s: &mut GuardStatus, m: &machine::View, device: Option<&std::path::Path>) {
    if let Some(w) = &mut s.watchdog {
        use machine::WatchdogState as W;
        w.armed = matches!(m.watchdog, W::Armed { .. } | W::DisarmFailed { .. });
        if let Some(d) = device {
            w.device = Some(d.display().to_string());
        }
        if let W::Armed { timeout_s, pinged } = &m.watchdog {
            w.timeout_s = Some(*timeout_s);
            w.last_ping_unix_ms = Some(unix_ms_at(*pinged));
        }
        match &m.watchdog {
            W::Unavailable(why) => w.note = Some(why.clone()),
            W::DisarmFailed { why, .. } => w.note = Some(format!("could not be stopped: {why}")),
            W::Disarmed => w.note = Some("disarmed".into()),
            _ => {}
        }
    }
}

/// The guard's servers: its status socket, its abstract identity socket, the public listener.
struct Servers {
    status: tokio::task::JoinHandle<()>,
    identity: tokio::task::JoinHandle<()>,
    public: Option<tokio::task::JoinHandle<()>>,
}

impl Servers {
    fn abort(&self) {
        self.status.abort();
        self.identity.abort();
        if let Some(p) = &self.public {
            p.abort();
        }
    }

    /// Aborted, and awaited: their listeners are closed.
    async fn close(self) {
        self.abort();
        let _ = self.status.await;
        let _ = self.identity.await;
        if let Some(p) = self.public {
            let _ = p.await;
        }
    }
}

/// mlockall and a raised priority (nice -10, SCHED_RESET_ON_FORK so the service and every
/// child start at the normal priority); what could not be done, in words.
fn hold_in_memory_and_priority() -> Vec<String> {
    [sched::lock_memory(), sched::raise_thread()]
        .into_iter()
        .filter_map(Result::err)
        .collect()
}

/// Every signal that would otherwise end the guard without a word means "step down in
/// order": SIGTERM (systemd, Pacemaker), SIGINT (Ctrl-C in `hamaster takeover`), SIGHUP (the
/// operator's SSH session dropped), SIGQUIT, and SIGUSR1/SIGUSR2/SIGALRM sent by mistake. A
/// guard that died of any of them would leave its service running and its VIP up until the
/// kernel's lifetime ran out.
struct StopSignals {
    /// Whether a stop was asked: a signal came, or the guard answered a step-down request (a
    /// campaign then stands no more, whatever its round's end).
    asked: bool,
    /// Whether a signal came (a resident standby then ends after its round).
    signalled: bool,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
    alrm: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> Option<StopSignals> {
        Some(StopSignals {
            asked: false,
            signalled: false,
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
            quit: signal(SignalKind::quit()).ok()?,
            usr1: signal(SignalKind::user_defined1()).ok()?,
            usr2: signal(SignalKind::user_defined2()).ok()?,
            alrm: signal(SignalKind::alarm()).ok()?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.quit.recv() => {}
            _ = self.usr1.recv() => {}
            _ = self.usr2.recv() => {}
            _ = self.alrm.recv() => {}
        }
        self.asked = true;
        self.signalled = true;
    }
}

impl GuardError {
    /// Whether the next round of a campaign would meet this failure the same way: the
    /// configuration, this node's run directory or sockets, another guard, the signals, the
    /// metrics address, a required watchdog. The others (etcd, the key not taken, a raise
    /// that failed) may pass.
    fn ends_a_campaign(&self) -> bool {
        match self {
            GuardError::Config(_)
            | GuardError::Runtime(_)
            | GuardError::RunDir { .. }
            | GuardError::Taken { .. }
            | GuardError::Bind { .. }
            | GuardError::Signals
            | GuardError::Metrics { .. }
            | GuardError::Watchdog(_) => true,
            GuardError::Etcd(_)
            | GuardError::NotLeader { .. }
            | GuardError::Vip(_)
            | GuardError::Fencing(_)
            | GuardError::Raise(_)
            | GuardError::Standby(_) => false,
        }
    }
}

impl crate::ocf::failure::Failure for GuardError {
    /// A configuration the guard cannot read is the agent's mistake (6); every other end of a
    /// guard is this node's (1).
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            GuardError::Config(_) => crate::ocf::OcfExit::ErrConfigured,
            _ => crate::ocf::OcfExit::ErrGeneric,
        }
    }
}
