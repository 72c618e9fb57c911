//! `ocf:hamaster:master`: a promotable master service with its VIP, guarded by an etcd leader
//! lease. Start/stop only mark the instance (unpromoted instances run nothing); promote
//! spawns the guard and waits until it leads with VIP and healthy service; monitor asks the
//! guard; demote has the guard step down, or does its steps itself when the guard is gone.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::guard::resident::{Answer, Unanswered};
use crate::lease::{leader_key, Etcd, MemberAnswers};
use crate::ocf::failure::Failed;
use crate::ocf::metadata::{advertised_timeout, ActionSpec, AgentInfo};
use crate::ocf::{Action, OcfEnv, OcfExit, Outcome};
use crate::params::master::MASTER_AGENT;
use crate::params::ConfigError;
use crate::params::Values;
use crate::resource::config::InstallError;
use crate::resource::config::MasterConfig;
use crate::resource::dir::{LockError, ResourceDir};
use crate::resource::status::{self, GuardStatus};
use crate::vip::VipConfig;

const ACTION_SPECS: [ActionSpec; 10] = [
    ActionSpec::new("start", "20s"),
    ActionSpec::new("stop", "40s"),
    ActionSpec {
        interval: Some("11s"),
        role: Some("Unpromoted"),
        ..ActionSpec::new("monitor", "20s")
    },
    ActionSpec {
        interval: Some("10s"),
        role: Some("Promoted"),
        ..ActionSpec::new("monitor", "20s")
    },
    // Must outwait a crashed holder's lease (lease_ttl, at most 10 s by default) plus service start.
    ActionSpec::new("promote", "60s"),
    ActionSpec::new("demote", "40s"),
    ActionSpec::new("notify", "5s"),
    ActionSpec::ocf_1_1("reload-agent", "10s"),
    ActionSpec::new("validate-all", "20s"),
    ActionSpec::new("meta-data", "5s"),
    // No `usage` here: meta-data lists what Pacemaker calls (pcs writes an op into the CIB
    // for every advertised action), like IPaddr2 and Stateful; usage is still answered.
];

pub static ACTIONS: [ActionSpec; 10] = ACTION_SPECS;

pub static INFO: AgentInfo = AgentInfo {
    name: "master",
    shortdesc: "Active-passive master service with VIP and etcd leader lease",
    longdesc: "Runs a master service on the promoted instance only, with an optional floating IP \
        (the parameters of ocf:hamaster:vip), and holds an etcd leader key under a lease while \
        it does. A node that cannot renew the lease removes the VIP and stops the service by \
        itself before the lease can expire, so two nodes do not serve as master at once, even \
        when Pacemaker itself is split, as long as the guard can act: a frozen guard's service \
        is stopped in time only by a hardware watchdog (docs/safety.md, residual risks). \
        Configure as a promotable clone with promoted-max=1. \
        The promote timeout must exceed lease_ttl plus the service's start time. Supported: \
        Pacemaker 2.0 (RHEL 8.0-8.4) and 2.1 or later (RHEL 8.5+, 9, 10), tested with 2.0.5, \
        2.1.5 and 3.0.0; written for 1.1 (RHEL 7), untested there. Promotion scores go through \
        crm_master before 2.1 and crm_attribute --promotion from 2.1 on; from 2.1 on, the \
        reloadable parameters change without a restart (reload-agent).",
    params: &MASTER_AGENT,
    actions: &ACTIONS,
};

pub static AGENT: super::AgentDef = super::AgentDef { info: &INFO, run };

/// Promote's timeout when the caller gave none (ocf-tester, crm_resource --force-promote):
/// the advertised one, as for demote and stop and reload-agent.
pub(crate) const DEFAULT_PROMOTE_TIMEOUT: Duration = advertised_timeout(&ACTION_SPECS, "promote");
const DEFAULT_DEMOTE_TIMEOUT: Duration = advertised_timeout(&ACTION_SPECS, "demote");
const DEFAULT_STOP_TIMEOUT: Duration = advertised_timeout(&ACTION_SPECS, "stop");
const DEFAULT_START_TIMEOUT: Duration = advertised_timeout(&ACTION_SPECS, "start");
const DEFAULT_MONITOR_TIMEOUT: Duration = advertised_timeout(&ACTION_SPECS, "monitor");
/// The longest look at etcd for a promotion score (connect and read the key).
const SCORE_LOOK: Duration = Duration::from_secs(2);
/// The longest look at etcd of a monitor at OCF_CHECK_LEVEL 20.
const KEY_LOOK: Duration = Duration::from_secs(4);
/// The longest crm_attribute (or crm_master) call for a promotion score.
const SCORE_SET: Duration = Duration::from_secs(3);
/// Every action ends this much before its CRM_meta_timeout: the answer must reach execd.
const SAFETY: Duration = Duration::from_secs(1);
const SCORE_HOLDER: i32 = 100;
/// What ending the standby's listener may take (asked, then killed): a promote's share.
const EXPORTER_STOP: Duration = Duration::from_secs(2);
/// How long a start waits for the listener it spawned to hold its socket.
const EXPORTER_START: Duration = Duration::from_millis(500);
const SCORE_CANDIDATE: i32 = 10;
/// How long a guard that is alive may take to answer a status request.
const GUARD_ANSWER: Duration = Duration::from_secs(2);

/// Why a master action failed; crate::failure gives each its exit code.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Install(#[from] InstallError),
    #[error("OCF_RESOURCE_INSTANCE is not set: the resource needs a name")]
    NoInstance,
    /// A resource name that cannot have a run directory.
    #[error("{0}")]
    BadName(String),
    /// This Pacemaker cannot run the resource.
    #[error("{0}")]
    Unsupported(String),
    /// Another operation holds the resource's lock, or it cannot be taken.
    #[error("{0}")]
    Locked(LockError),
    #[error("reload-agent: {0}")]
    Reload(status::ClientError),
    #[error("cannot {what} {}: {source}", path.display())]
    Write {
        what: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the guard: {0}")]
    Spawn(std::io::Error),
    #[error("promoted, but the guard is gone: {0}")]
    GuardGone(status::ClientError),
    /// The guard is not a healthy leader (its own words).
    #[error("{0}")]
    Unhealthy(String),
    #[error("check level 20: {0}")]
    KeyCheck(String),
    /// Promote did not lead in time, or its guard gave up (why).
    #[error("{0}")]
    NotPromoted(String),
    #[error("{why}; and undoing it: {still}")]
    Undo { why: String, still: String },
    #[error("guard {pid} could not step down in time: {why}")]
    StepDown { pid: u32, why: String },
    /// What the agent's own clean-up could not bring down.
    #[error("{}", .0.join("; "))]
    Cleanup(Vec<String>),
    /// standby=warm: the resident standby could not be started, asked or stopped.
    #[error("{0}")]
    Standby(String),
    /// The standby's listener (guard::exporter) would not give metrics_address up.
    #[error("{0}")]
    Exporter(String),
}

type Done = Result<Outcome, MasterError>;

struct Ctx<'a> {
    env: &'a OcfEnv,
    /// When the action began: its budget counts from here, the wait for the lock included.
    started: Instant,
    values: Values,
    resource: String,
    /// This node's name, found when an action first needs it: a monitor that does not (the
    /// promoted one asks its guard, an unpromoted one outside a cluster looks at its marker)
    /// spawns no `crm_node`.
    node: std::cell::OnceCell<String>,
    dir: ResourceDir,
}

impl Ctx<'_> {
    fn node(&self) -> &str {
        self.node.get_or_init(|| node_name(self.env))
    }
}

fn run(action: Action, env: &OcfEnv) -> Result<Outcome, Failed> {
    act(action, env).map_err(Failed::from)
}

fn act(action: Action, env: &OcfEnv) -> Done {
    let started = born(env);
    let values = Values::from_ocf(&MASTER_AGENT, env);
    let Some(resource) = env.resource().map(String::from) else {
        if action == Action::Monitor && env.is_probe() {
            return Ok(Outcome::new(OcfExit::NotRunning));
        }
        return Err(MasterError::NoInstance);
    };
    let dir = match ResourceDir::check(&crate::runfiles::root(), &resource) {
        Ok(d) => d,
        // Nothing can run under a name that cannot have a directory: a probe finds nothing,
        // stop and demote have nothing to do; anything else is a configuration error.
        Err(_) if action == Action::Monitor && env.is_probe() => {
            return Ok(Outcome::new(OcfExit::NotRunning))
        }
        Err(_) if matches!(action, Action::Stop | Action::Demote) => return Ok(Outcome::ok()),
        Err(why) => return Err(MasterError::BadName(why)),
    };
    // Actions that change state take the resource's lock: Pacemaker serialises its own, but
    // not beside `pcs resource debug-*`, `crm_resource --force-*` or `hamaster takeover`.
    let _lock = if matches!(
        action,
        Action::Start | Action::Stop | Action::Promote | Action::Demote
    ) {
        let limit = env
            .timeout_ms()
            .map_or(Duration::from_secs(10), |t| Duration::from_millis(t / 2));
        match dir.lock(limit, &format!("hamaster master {}", action.name())) {
            Ok(l) => Some(l),
            // A lock file that cannot be made (/run full, read-only) must not fail stop or
            // demote, which Pacemaker would answer by fencing the node: they go on without.
            Err(LockError::Unavailable(why)) if matches!(action, Action::Stop | Action::Demote) => {
                log::warn!("{why}; going on without the resource lock");
                None
            }
            Err(why) => return Err(MasterError::Locked(why)),
        }
    } else {
        None
    };
    let ctx = Ctx {
        env,
        started,
        values,
        dir,
        node: std::cell::OnceCell::new(),
        resource,
    };
    match action {
        Action::Start => start(&ctx),
        Action::Stop => stop(&ctx),
        Action::Monitor => monitor(&ctx),
        Action::Promote => promote(&ctx),
        Action::Demote => demote(&ctx),
        Action::Notify => Ok(Outcome::ok()),
        Action::ReloadAgent => reload(&ctx),
        Action::ValidateAll => validate(&ctx),
        _ => Ok(Outcome::new(OcfExit::ErrUnimplemented)),
    }
}

/// This node's name: the one Pacemaker passes; without it (`pcs resource debug-*`,
/// `crm_resource --force-*`) the cluster's own (`crm_node -n`), so etcd, scores and status
/// agree; without a cluster, the kernel's (per UTS namespace).
pub fn node_name(env: &OcfEnv) -> String {
    env.meta
        .get("on_node")
        .cloned()
        .or_else(cluster_node_name)
        .unwrap_or_else(crate::logging::host_name)
}

fn cluster_node_name() -> Option<String> {
    let name = crate::service::tool_output(Duration::from_secs(5), "crm_node", &["-n"])?
        .trim()
        .to_string();
    (!name.is_empty()).then_some(name)
}

/// The configuration, checked: 6 for what is wrong everywhere, 5 for what this node lacks.
fn config(ctx: &Ctx) -> Result<MasterConfig, MasterError> {
    let cfg = MasterConfig::from_values(&ctx.values)?;
    cfg.check_installed()?;
    Ok(cfg)
}

/// validate-all: the configuration, and under a cluster whether this Pacemaker is supported.
fn validate(ctx: &Ctx) -> Done {
    let cfg = config(ctx)?;
    warn_of_slew(&cfg);
    supported(ctx)?;
    Ok(Outcome::ok())
}

const DEFAULT_RELOAD_TIMEOUT: Duration = advertised_timeout(&ACTION_SPECS, "reload-agent");

/// reload-agent (Pacemaker 2.1 and later, when only reloadable parameters changed): a running
/// guard takes the new health, push and announcement settings at once and keeps its lease, VIP
/// and service; without a guard there is nothing to change, as every action reads its
/// parameters anew. The guard refuses a change that needs a restart (1, with its reason).
fn reload(ctx: &Ctx) -> Done {
    let cfg = config(ctx)?;
    if ctx.dir.live_guard().is_none() {
        log::info!(
            "{}: reloaded: no guard runs here, the new values apply from the next promote",
            ctx.resource
        );
        return Ok(Outcome::ok());
    }
    let until = budget(ctx, DEFAULT_RELOAD_TIMEOUT);
    status::block_on(status::reload(&ctx.dir.socket(), &cfg, left(until)))
        .map_err(MasterError::Reload)?;
    log::info!("{}: reloaded: the guard took the new values", ctx.resource);
    Ok(Outcome::ok())
}

/// An unsupported Pacemaker (announced by its feature set), as OCF_ERR_INSTALLED: this node's
/// cluster software cannot run the resource, for validate-all, start and probes alike.
fn supported(ctx: &Ctx) -> Result<(), MasterError> {
    super::score::check_supported(ctx.env).map_err(MasterError::Unsupported)
}

/// A margin that cannot cover the clocks' largest slew is allowed (an administrator may know
/// their clocks), but said: at the largest slew the guard then fences earlier than the margin
/// says, and the service gets little or no time between SIGTERM and SIGKILL.
fn warn_of_slew(cfg: &MasterConfig) {
    let clock = cfg.etcd.clock();
    if clock.margin >= clock.needed_margin() {
        return;
    }
    let (ttl, margin) = (clock.ttl.as_secs(), clock.margin.as_secs());
    let need = clock.needed_margin().as_secs_f64().ceil();
    let grace = crate::lease::clock::MIN_TERM_GRACE.as_millis();
    match clock.term_grace() {
        None => log::warn!(
            "parameter lease_margin={margin} does not cover the clocks' largest slew at \
             lease_ttl={ttl}: with this node's clock slow and etcd's fast by chrony's \
             maxslewrate (8.4 %), no SIGKILL fits after a SIGTERM at the deadline before the \
             lease could end at etcd, so the guard fences earlier than lease_margin says and \
             kills the service at once; lease_margin={need} leaves it {grace} ms (docs/safety.md)"
        ),
        Some(g) => log::warn!(
            "parameter lease_margin={margin} leaves a fenced service only {} ms between SIGTERM \
             and SIGKILL at lease_ttl={ttl} with this node's clock slow and etcd's fast by \
             chrony's maxslewrate (8.4 %); lease_margin={need} leaves it {grace} ms \
             (docs/safety.md)",
            g.as_millis()
        ),
    }
}

fn start(ctx: &Ctx) -> Done {
    supported(ctx)?;
    let cfg = config(ctx)?;
    ctx.dir
        .mark(ctx.dir.started())
        .map_err(|source| MasterError::Write {
            what: "write",
            path: ctx.dir.started(),
            source,
        })?;
    let until = budget(ctx, DEFAULT_START_TIMEOUT);
    if cfg.standby.is_warm() {
        start_resident(ctx, &cfg, until)?;
    }
    start_exporter(ctx, &cfg);
    let watchdog = crate::resource::watchdog::choose(&cfg.watchdog);
    update_score(ctx, &cfg, &watchdog, until, false);
    Ok(Outcome::ok())
}

/// The standby's listener on metrics_address (guard::exporter), unless none is configured or
/// one runs: spawned and left to itself (a failure to bind is its log's; the next monitor
/// spawns it again). Nothing waits for it: a scrape before it listens finds the node down.
fn start_exporter(ctx: &Ctx, cfg: &MasterConfig) {
    let Some(address) = cfg.metrics else {
        return;
    };
    if ctx.dir.live_exporter().is_some() {
        return;
    }
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("hamaster")
        .args([
            "exporter",
            "--resource",
            &ctx.resource,
            "--node",
            ctx.node(),
        ])
        .arg("--address")
        .arg(address.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match crate::runfiles::create_private(&ctx.dir.root.join("exporter.stderr")) {
        Ok(f) => cmd.stderr(f),
        Err(_) => cmd.stderr(Stdio::null()),
    };
    crate::child::detached(&mut cmd, None);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            log::warn!("the standby listener on {address} not started: {e}");
            return;
        }
    };
    // Until it holds its socket (or has ended): the next action, a stop or a promote, then
    // finds it. Briefly: it binds two sockets and nothing more.
    let until = Instant::now() + EXPORTER_START;
    while ctx.dir.live_exporter().is_none() && Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ends the standby's listener, if one runs, within `limit`: asked (it closes its listener,
/// then answers), else killed. Err only when one still runs after that.
fn stop_exporter(ctx: &Ctx, limit: Duration) -> Result<(), MasterError> {
    let asked = status::block_on(crate::guard::exporter::stop(&ctx.dir, limit / 2));
    let Err(why) = asked else {
        return Ok(());
    };
    log::warn!("{why}: killing it");
    if let Some(p) = ctx
        .dir
        .live_exporter()
        .and_then(crate::procfs::Process::open)
    {
        let _ = p.signal(nix::sys::signal::Signal::SIGKILL);
    }
    let until = Instant::now() + limit / 2;
    while ctx.dir.live_exporter().is_some() {
        if Instant::now() >= until {
            return Err(MasterError::Exporter(format!(
                "the standby listener on metrics_address still runs: {why}"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// When this action began as Pacemaker counts it: at the fork, before the exec and the loading
/// (which take seconds on a slow node, and which the budget must cover). Now, where that cannot
/// be read or reads longer than the whole timeout (no action outlives its timeout).
fn born(env: &OcfEnv) -> Instant {
    let now = Instant::now();
    let most = env
        .timeout_ms()
        .map_or(DEFAULT_MONITOR_TIMEOUT, Duration::from_millis);
    crate::procfs::own_age()
        .filter(|age| *age < most)
        .and_then(|age| now.checked_sub(age))
        .unwrap_or(now)
}

/// The moment an action must be done by: its CRM_meta_timeout (or `default`) from when it
/// began (born), less the safety second.
fn budget(ctx: &Ctx, default: Duration) -> Instant {
    let timeout = ctx.env.timeout_ms().map_or(default, Duration::from_millis);
    ctx.started + timeout.saturating_sub(SAFETY)
}

fn left(until: Instant) -> Duration {
    until.saturating_duration_since(Instant::now())
}

fn stop(ctx: &Ctx) -> Done {
    let until = budget(ctx, DEFAULT_STOP_TIMEOUT);
    if is_promoted_here(ctx) {
        step_down(ctx, until)?;
    }
    // The listener first, and never a reason for the stop to fail: one that outlives this
    // ends by itself once the instance is no longer marked started (guard::exporter).
    if let Err(e) = stop_exporter(ctx, EXPORTER_STOP.min(left(until))) {
        log::warn!("{e}");
    }
    stop_resident(ctx, until)?;
    ctx.dir.unmark(ctx.dir.started());
    set_score(ctx, None, until);
    super::report::withdraw(ctx.env, &ctx.dir, &ctx.resource, until, SCORE_SET);
    Ok(Outcome::ok())
}

fn is_promoted_here(ctx: &Ctx) -> bool {
    ctx.dir.promoted().exists() || ctx.dir.live_guard().is_some() || ctx.dir.state().exists()
}

fn status_timeout(env: &OcfEnv) -> Duration {
    env.timeout_ms().map_or(Duration::from_secs(2), |t| {
        Duration::from_millis(t / 2).min(Duration::from_secs(2))
    })
}

fn monitor(ctx: &Ctx) -> Done {
    let done = look(ctx);
    // A promoted instance's failure, as Pacemaker is told it: kept for the standby's metrics.
    if let Err(e) = &done {
        if is_promoted_here(ctx) {
            note_failure(ctx, &e.to_string());
        }
    }
    done
}

/// The monitor's look: the instance's state as OCF says it.
fn look(ctx: &Ctx) -> Done {
    if ctx.env.is_probe() {
        supported(ctx)?;
    }
    let until = budget(ctx, DEFAULT_MONITOR_TIMEOUT);
    let started = ctx.dir.started().exists();
    if !started && !is_promoted_here(ctx) {
        return Ok(Outcome::new(OcfExit::NotRunning));
    }
    if !is_promoted_here(ctx) {
        return look_unpromoted(ctx, until);
    }
    let st = status::block_on(status::get_status(
        &ctx.dir.socket(),
        status_timeout(ctx.env),
    ))
    .map_err(MasterError::GuardGone)?;
    // The guard's own verdict decides: it holds the lease (fenced, lost, or its VIP or service
    // gone is a failure; etcd out of reach while the lease has time left is not).
    if !st.is_healthy_leader() {
        return Err(MasterError::Unhealthy(st.trouble()));
    }
    let cfg = MasterConfig::from_values(&ctx.values).ok();
    let now = crate::lease::clock::unix_ms();
    let holding = st.failsafe.as_ref().and_then(|f| f.holding(now));
    let mut doubts: Vec<String> = match &holding {
        Some(h) => vec![h.clone()],
        None => cfg
            .as_ref()
            .and_then(|c| renewals_overdue(&st, c))
            .into_iter()
            .collect(),
    };
    doubts.extend(st.attention(now));
    if ctx.env.check_level >= 20 {
        match key_in_etcd(ctx, cfg.as_ref(), &st, until) {
            KeyCheck::Agrees => {}
            // Holding: etcd let the lease go with the key, which the guard takes back when it
            // reaches etcd again; another lease on the key is a failure all the same.
            KeyCheck::Absent(why) if holding.is_some() => {
                doubts.push(format!("check level 20: {why}"))
            }
            KeyCheck::Absent(why) | KeyCheck::Disagrees(why) => {
                return Err(MasterError::KeyCheck(why))
            }
            KeyCheck::CannotTell(why) => doubts.push(format!("check level 20: {why}")),
        }
    }
    if doubts.is_empty() {
        return Ok(Outcome::new(OcfExit::RunningPromoted));
    }
    let why = match holding {
        Some(_) => doubts.join("; "),
        None => format!(
            "{}; the guard holds its lease ({} ms left)",
            doubts.join("; "),
            st.lease_ttl_left_ms.unwrap_or(0)
        ),
    };
    // Serving, but in need of attention: OCF_DEGRADED_PROMOTED where Pacemaker knows it (2.1
    // and later), promoted with the reason logged before.
    if super::score::understands_degraded(ctx.env) {
        return Ok(Outcome::with_reason(OcfExit::DegradedPromoted, why));
    }
    log::warn!("{why}");
    Ok(Outcome::new(OcfExit::RunningPromoted))
}

/// An unpromoted instance's look: its warm standby's service (standby=warm), then what a
/// promotion here would need, published (score, node attributes, the standby's listener).
fn look_unpromoted(ctx: &Ctx, until: Instant) -> Done {
    let Ok(cfg) = MasterConfig::from_values(&ctx.values) else {
        return Ok(Outcome::ok());
    };
    if cfg.standby.is_warm() {
        // The standby's service runs under its resident, or the instance has failed.
        match ask_resident(ctx, "status", status_timeout(ctx.env)) {
            // A round just ended (demote answered, its guard gone, the resident not yet
            // back to its standby), or the service started again after it: not failed.
            Ok(Answer::Standby(_) | Answer::Starting | Answer::Leading) => {}
            Ok(s @ Answer::CannotTell(_)) => {
                return Err(MasterError::Standby(format!("standby service: {s}")))
            }
            Ok(s) => {
                return Ok(Outcome::with_reason(
                    OcfExit::NotRunning,
                    format!("standby service {s}"),
                ))
            }
            Err(Unanswered::Absent) => {
                return Ok(Outcome::with_reason(
                    OcfExit::NotRunning,
                    "standby=warm: no resident standby runs here".to_string(),
                ))
            }
            // A look that cannot tell is never "stopped".
            Err(Unanswered::Silent(why)) => return Err(MasterError::Standby(why)),
        }
    }
    // Chosen once: the score and the node's report both say what it found.
    let watchdog = crate::resource::watchdog::choose(&cfg.watchdog);
    let members = update_score(ctx, &cfg, &watchdog, until, true);
    let readiness = super::report::Readiness::of(&cfg, members, watchdog);
    if cfg.metrics.is_some() {
        let report = readiness.report();
        if let Err(e) = ctx.dir.save_json(&ctx.dir.standby_report(), &report) {
            log::warn!("{}: not written: {e}", ctx.dir.standby_report().display());
        }
        start_exporter(ctx, &cfg);
    }
    super::report::publish(
        ctx.env,
        &ctx.dir,
        &ctx.resource,
        &readiness,
        until,
        SCORE_SET,
    );
    Ok(match readiness.unpromotable() {
        // Serving as a standby, but not one that can take over: OCF_DEGRADED where
        // Pacemaker knows it, the reason logged before.
        Some(why) if super::score::understands_degraded(ctx.env) => {
            Outcome::with_reason(OcfExit::Degraded, why)
        }
        Some(why) => {
            log::warn!("{why}");
            Outcome::ok()
        }
        None => Outcome::ok(),
    })
}

/// Renewals that should have been answered by now and were not (etcd silent, no quorum):
/// nothing against the guard while its lease has time left, but worth saying.
fn renewals_overdue(st: &GuardStatus, cfg: &MasterConfig) -> Option<String> {
    let clock = cfg.etcd.clock();
    let last = st.last_renewal_unix_ms?;
    let since = crate::lease::clock::unix_ms().saturating_sub(last);
    let expected = clock.keepalive_interval() + clock.renewal_attempt_timeout();
    (since > expected.as_millis() as u64).then(|| {
        format!(
            "etcd has not renewed the lease for {:.1} s",
            since as f64 / 1000.0
        )
    })
}

/// What monitor looks at, by OCF_CHECK_LEVEL (docs/reference.md shows this table).
pub const CHECK_LEVELS: [(&str, &str); 2] = [
    (
        "0, 10",
        "Unpromoted: the instance's marker, and the promotion score refreshed from etcd's holder \
         (within the timeout); every etcd member's answer and release, the watchdog the guard \
         would arm and the VIP's interface, set as node attributes hamaster-RESOURCE-etcd, \
         -watchdog and -vip (docs/metrics.md); a node that cannot be promoted (no member \
         answers, watchdog=required without a device, no interface) answers OCF_DEGRADED (190) \
         on Pacemaker 2.1 and later, 0 with a log line before. Promoted: the guard's own \
         verdict, asked over its socket — it holds the leader key with lease time left, the \
         VIP is on its interface and up, the service runs and is healthy (8); fenced, the key \
         lost, the VIP or the service gone (9, with the guard's reason). etcd out of reach \
         while the lease has time left is no failure: after a renewal overdue, \
         OCF_DEGRADED_PROMOTED (191) with the reason on Pacemaker 2.1 and later, 8 and a log \
         line before; the same for the VIP claimed by another host in the last 30 s \
         (conflict_action=report keeps serving) and for a watchdog chosen but not armed \
         (watchdog=auto leads without).",
    ),
    (
        "20",
        "As 10, and the leader key read from etcd by the agent itself, within what is left of \
         the monitor's timeout less a second (at most 4 s): etcd answering that another lease \
         holds the key, or that there is none, is a failure (9, naming the holder); etcd not \
         answering says nothing against a guard that holds its lease (191 with the reason, or \
         8 before Pacemaker 2.1).",
    ),
];

/// What OCF_CHECK_LEVEL=20's own read of the leader key found.
enum KeyCheck {
    /// etcd says this node holds it under the guard's lease.
    Agrees,
    /// etcd answered: the key is another's.
    Disagrees(String),
    /// etcd answered: there is no key (a holding guard's lease ran out: it takes the key back).
    Absent(String),
    /// etcd did not answer in time: nothing against the guard.
    CannotTell(String),
}

/// This resource's leader key: the one the guard took (its recorded state), else the one the
/// parameters name on this node now (Err: why there is none: the cluster's name not known).
fn the_key(ctx: &Ctx, cfg: &MasterConfig) -> Result<String, String> {
    if let Some(taken) = ctx.dir.load().map(|s| s.key).filter(|k| !k.is_empty()) {
        return Ok(taken);
    }
    cfg.etcd
        .scope()
        .map(|scope| leader_key(&scope, &ctx.resource))
}

/// OCF_CHECK_LEVEL=20: read the leader key from etcd ourselves, not through the guard, within
/// what is left of the monitor's budget. Only etcd's own answer can disagree.
fn key_in_etcd(
    ctx: &Ctx,
    cfg: Option<&MasterConfig>,
    st: &GuardStatus,
    until: Instant,
) -> KeyCheck {
    let Some(cfg) = cfg else {
        return KeyCheck::CannotTell("the parameters do not parse".into());
    };
    let key = match the_key(ctx, cfg) {
        Ok(key) => key,
        Err(why) => return KeyCheck::CannotTell(why),
    };
    // What is left of the monitor, at most a few seconds: a deep check that waits out every
    // etcd hiccup would only make the monitor slow.
    let limit = left(until).min(KEY_LOOK);
    let holder = status::block_on(async {
        tokio::time::timeout(limit, async {
            let etcd = Etcd::connect(&cfg.etcd, limit).await?;
            etcd.holder(&key).await
        })
        .await
    });
    match holder {
        Ok(read) => judge_key(&key, read, ctx.node(), st.lease_id.as_deref()),
        Err(_) => KeyCheck::CannotTell(format!(
            "etcd did not answer within the monitor's {} ms",
            limit.as_millis()
        )),
    }
}

/// What etcd's answer about the key says of this node's guard (holding `lease`).
fn judge_key(
    key: &str,
    read: Result<Option<crate::lease::Holder>, crate::lease::LeaseError>,
    node: &str,
    lease: Option<&str>,
) -> KeyCheck {
    match read {
        Ok(Some(h)) if h.node == node && Some(h.lease.to_string().as_str()) == lease => {
            KeyCheck::Agrees
        }
        Ok(Some(h)) => KeyCheck::Disagrees(format!(
            "{h}, not by this guard (lease {})",
            lease.unwrap_or("?")
        )),
        Ok(None) => KeyCheck::Absent(format!("leader key {key} does not exist in etcd")),
        Err(e) => KeyCheck::CannotTell(format!("etcd did not answer: {e}")),
    }
}

fn promote(ctx: &Ctx) -> Done {
    let done = take_the_lead(ctx);
    // A failed promote, as Pacemaker is told it: kept for the standby's metrics.
    if let Err(e) = &done {
        note_failure(ctx, &e.to_string());
    }
    done
}

/// Promote's steps: the guard (or the warm resident's round) leads, within the budget.
fn take_the_lead(ctx: &Ctx) -> Done {
    let cfg = config(ctx)?;
    warn_of_slew(&cfg);
    let timeout = ctx
        .env
        .timeout_ms()
        .map_or(DEFAULT_PROMOTE_TIMEOUT, Duration::from_millis);
    let until = budget(ctx, DEFAULT_PROMOTE_TIMEOUT);
    // What an undo needs at the end: the guard's step-down (service grace and release).
    let undo = (timeout / 3).min(Duration::from_secs(15));
    let poll_until = until.checked_sub(undo).unwrap_or(until);
    if ctx.dir.live_guard().is_some() {
        match status::block_on(status::get_status(&ctx.dir.socket(), GUARD_ANSWER)) {
            Ok(s) if s.is_healthy_leader() => {
                let _ = ctx.dir.mark(ctx.dir.promoted());
                set_score(ctx, Some(SCORE_HOLDER), until);
                return Ok(Outcome::ok());
            }
            // A fenced or failed guard from before: clean it away, then start afresh.
            _ => demote_steps(ctx, Some(&cfg), poll_until)?,
        }
    }
    // The key names the cluster: without its name (no corosync answers here) there is no key
    // to take.
    cfg.etcd.scope().map_err(MasterError::NotPromoted)?;
    ctx.dir.create().map_err(|source| MasterError::Write {
        what: "create",
        path: ctx.dir.root.clone(),
        source,
    })?;
    // The standby's listener gives metrics_address up before a guard binds it; its report
    // is not served again after the demote until a monitor looks anew.
    stop_exporter(ctx, EXPORTER_STOP.min(left(poll_until)))?;
    let _ = std::fs::remove_file(ctx.dir.standby_report());
    let acquire_for = left(poll_until)
        .saturating_sub(Duration::from_secs(1))
        .max(Duration::from_secs(1));
    let warm = cfg.standby.is_warm();
    let mut guard = match warm {
        // The resident standby leads with the service it runs, and with the settings in
        // force now (a reload since its start).
        true => {
            let asked = format!("lead {}\n{}", acquire_for.as_millis(), cfg.to_json());
            match ask_resident(ctx, &asked, Duration::from_secs(5).min(left(poll_until))) {
                Ok(Answer::Leading) => None,
                // Refused: no round began.
                Ok(s) => return Err(MasterError::NotPromoted(format!("standby=warm: {s}"))),
                Err(Unanswered::Absent) => {
                    return Err(MasterError::NotPromoted(
                        "standby=warm: no resident standby runs here (the instance is not \
                         started)"
                            .into(),
                    ))
                }
                // A round may have begun unanswered: undone below.
                Err(Unanswered::Silent(why)) => {
                    return undo_promote(ctx, &cfg, until, format!("standby=warm: {why}"));
                }
            }
        }
        false => Some(spawn_guard(ctx, &cfg, acquire_for, &[]).map_err(MasterError::Spawn)?),
    };
    let mut last: Option<GuardStatus> = None;
    let mut looked = Instant::now();
    let why = loop {
        if Instant::now() >= poll_until {
            break format!(
                "not promoted within {} s: {}",
                timeout.as_secs(),
                last.as_ref()
                    .map_or("guard did not answer".into(), GuardStatus::trouble)
            );
        }
        // Our own child until we exit: try_wait, not /proc (which shows our argv until it execs).
        // A warm round that ended before it answered (a socket it could not bind): the
        // resident is back to its standby.
        if warm && last.is_none() && looked.elapsed() > Duration::from_millis(500) {
            looked = Instant::now();
            if matches!(ask_resident(ctx, "status", Duration::from_millis(500)), Ok(s) if s != Answer::Leading)
            {
                break "the resident standby's round ended before its guard answered".into();
            }
        }
        if let Some(Ok(Some(exit))) = guard.as_mut().map(|g| g.try_wait()) {
            break format!(
                "guard exited ({exit}): {}",
                last.as_ref()
                    .map_or("before it answered".into(), GuardStatus::trouble)
            );
        }
        if let Ok(s) = status::block_on(status::get_status(
            &ctx.dir.socket(),
            Duration::from_millis(500).min(left(poll_until)),
        )) {
            if s.is_healthy_leader() {
                let _ = ctx.dir.mark(ctx.dir.promoted());
                set_score(ctx, Some(SCORE_HOLDER), until);
                log::info!(
                    "promoted {} on {}: fencing token {}",
                    ctx.resource,
                    ctx.node(),
                    s.fencing_token.unwrap_or_default()
                );
                return Ok(Outcome::ok());
            }
            if s.role == status::Role::Failed {
                break s.trouble();
            }
            last = Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    undo_promote(ctx, &cfg, until, why)
}

/// A promote that failed (`why`) undone within what is left: nothing half-promoted stays.
fn undo_promote(ctx: &Ctx, cfg: &MasterConfig, until: Instant, why: String) -> Done {
    match demote_steps(ctx, Some(cfg), until) {
        Ok(()) => Err(MasterError::NotPromoted(why)),
        Err(e) => Err(MasterError::Undo {
            why,
            still: e.to_string(),
        }),
    }
}

/// Spawns the guard (`hamaster guard`, with `extra` arguments) in a session of its own and
/// hands it `cfg` on its standard input.
fn spawn_guard(
    ctx: &Ctx,
    cfg: &MasterConfig,
    acquire_for: Duration,
    extra: &[&str],
) -> std::io::Result<std::process::Child> {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("hamaster")
        .args([
            "guard",
            "--resource",
            &ctx.resource,
            "--node",
            ctx.node(),
            "--acquire-timeout-ms",
        ])
        .arg(acquire_for.as_millis().to_string())
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    // Whatever the guard cannot log (a crash of the runtime itself) is kept here.
    match crate::runfiles::create_private(&ctx.dir.root.join("guard.stderr")) {
        Ok(f) => cmd.stderr(f),
        Err(_) => cmd.stderr(Stdio::null()),
    };
    crate::child::detached(&mut cmd, None);
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        // A few hundred bytes into an empty pipe: never blocks. Closed when dropped: EOF.
        stdin.write_all(cfg.to_json().as_bytes())?;
    }
    Ok(child)
}

/// One request to the resident standby (guard::resident), its one-line answer.
fn ask_resident(ctx: &Ctx, lines: &str, limit: Duration) -> Result<Answer, Unanswered> {
    status::block_on(crate::guard::resident::request(&ctx.dir, lines, limit))
}

/// standby=warm's start: the resident standby runs (spawned unless one answers already), with
/// its service started, within `until`.
fn start_resident(ctx: &Ctx, cfg: &MasterConfig, until: Instant) -> Result<(), MasterError> {
    let short = Duration::from_millis(500);
    if let Ok(Answer::Standby(_)) = ask_resident(ctx, "status", short) {
        return Ok(());
    }
    let mut resident =
        spawn_guard(ctx, cfg, Duration::ZERO, &["--standby"]).map_err(MasterError::Spawn)?;
    let mut last = String::from("no answer yet");
    while Instant::now() < until {
        if let Ok(Some(exit)) = resident.try_wait() {
            return Err(MasterError::Standby(format!(
                "the resident standby exited ({exit}): {}",
                resident_stderr(ctx).unwrap_or(last)
            )));
        }
        match ask_resident(ctx, "status", short.min(left(until))) {
            Ok(Answer::Standby(_)) => return Ok(()),
            Ok(s) => last = s.to_string(),
            Err(Unanswered::Absent) => last = "not answering yet".into(),
            Err(Unanswered::Silent(why)) => last = why,
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(MasterError::Standby(format!(
        "the resident standby did not start its service in time: {last}"
    )))
}

/// The last line the resident (a guard) could not log, if any.
fn resident_stderr(ctx: &Ctx) -> Option<String> {
    let text = std::fs::read_to_string(ctx.dir.root.join("guard.stderr")).ok()?;
    text.lines().last().map(String::from)
}

/// Stops the resident standby, if one runs, and waits for it to end within `until`: its
/// service stopped and confirmed gone first (its own stop, within what is left). When none
/// runs, what a dead resident may have left is stopped: its recorded command's group, or
/// (standby=warm) the unit.
fn stop_resident(ctx: &Ctx, until: Instant) -> Result<(), MasterError> {
    let asked = format!("stop {}", left(until).as_millis());
    match ask_resident(ctx, &asked, left(until)) {
        Err(Unanswered::Absent) => left_by_a_dead_resident(ctx, until),
        Err(Unanswered::Silent(why)) => Err(MasterError::Standby(why)),
        Ok(Answer::Stopped(None) | Answer::Ending) => {
            // It ends right after its answer: its socket goes with it.
            let gone = || {
                matches!(
                    ask_resident(ctx, "status", Duration::from_millis(200)),
                    Err(Unanswered::Absent)
                )
            };
            while !gone() {
                if Instant::now() >= until {
                    return Err(MasterError::Standby(
                        "the resident standby did not end in time".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }
        Ok(a) => Err(MasterError::Standby(format!("the resident standby: {a}"))),
    }
}

/// What a resident that died (killed, crashed) may have left running: the group of the
/// command it recorded (only while its recorded leader proves it ours), a warm unit.
fn left_by_a_dead_resident(ctx: &Ctx, until: Instant) -> Result<(), MasterError> {
    use crate::presence::Presence;
    let record = ctx.dir.standby_record();
    let recorded = crate::service::process::ServiceRecord::load(&record);
    let warm = ctx.values.get(&crate::params::master::STANDBY) == Some("warm");
    let unit = match crate::service::ServiceSpec::from_values(&ctx.values) {
        Ok(crate::service::ServiceSpec::Systemd { unit }) if warm => Some(unit),
        _ => None,
    };
    let limit = left(until).saturating_sub(Duration::from_millis(500));
    let grace = crate::service::stop::grace(limit);
    // A command's record, else a warm unit (the resident records no pid for a unit).
    let (unit, recorded) = match recorded {
        Some(r) => (None, Some(r)),
        None => (unit, None),
    };
    let end = status::block_on(crate::service::stop::stop_left(
        unit, recorded, grace, limit,
    ))
    .map_or(Presence::Absent, |(_, end)| end);
    match end {
        Presence::Absent => {
            let _ = std::fs::remove_file(record);
            Ok(())
        }
        other => Err(MasterError::Standby(format!(
            "what the resident standby left is not stopped: {other:?}"
        ))),
    }
}

fn demote(ctx: &Ctx) -> Done {
    let done = step_down(ctx, budget(ctx, DEFAULT_DEMOTE_TIMEOUT))?;
    if let Ok(cfg) = MasterConfig::from_values(&ctx.values) {
        start_exporter(ctx, &cfg);
    }
    Ok(done)
}

/// This node's instance failed as Pacemaker is told (`why`): kept for the standby's
/// listener (hamaster_last_failure_timestamp_seconds).
fn note_failure(ctx: &Ctx, why: &str) {
    let failure = crate::resource::status::LastFailure {
        at_unix_ms: crate::lease::clock::unix_ms(),
        reason: why.to_string(),
    };
    if let Err(e) = ctx.dir.save_json(&ctx.dir.last_failure(), &failure) {
        log::warn!("{}: not written: {e}", ctx.dir.last_failure().display());
    }
}

/// Demote's work, within `until` (stop's own budget when stop does it): the guard's steps,
/// then the score, with what time is left.
fn step_down(ctx: &Ctx, until: Instant) -> Done {
    let cfg = MasterConfig::from_values(&ctx.values).ok();
    demote_steps(ctx, cfg.as_ref(), until)?;
    ctx.dir.unmark(ctx.dir.promoted());
    if let Some(c) = &cfg {
        update_score(
            ctx,
            c,
            &crate::resource::watchdog::choose(&c.watchdog),
            until,
            false,
        );
    }
    Ok(Outcome::ok())
}

/// The guard steps down within what is left of the budget; if it cannot be asked, it is
/// killed and its steps are done here. A guard that answers "not complete" (a service that
/// will not stop, a VIP that will not go) is left running: it keeps the lease while anything
/// may still serve, and the failure is reported. Without a usable configuration, the steps
/// that need it (etcd, systemd) are left to the lease's expiry.
fn demote_steps(ctx: &Ctx, cfg: Option<&MasterConfig>, until: Instant) -> Result<(), MasterError> {
    if let Some(pid) = ctx.dir.live_guard() {
        // The process that holds the guard's socket, proven now: the kill below, seconds
        // later, reaches it and no other that took its pid meanwhile.
        let guard = crate::procfs::Process::open(pid).filter(|_| ctx.dir.is_guard(pid));
        // A guard that cannot answer a status request (stopped, hung) will not step down
        // either: waiting most of the budget on it would leave too little for the clean-up.
        let socket = ctx.dir.socket();
        let asked = status::block_on(async {
            status::get_status(&socket, GUARD_ANSWER.min(left(until))).await?;
            log::info!("asking guard {pid} of {} to step down", ctx.resource);
            // Kept back: the clean-up below if the answer never comes.
            let budget = left(until).saturating_sub(Duration::from_secs(2));
            status::step_down(&socket, budget).await
        });
        match asked {
            Ok(_) => {
                if wait_gone(pid, &ctx.dir, Duration::from_secs(3).min(left(until))) {
                    ctx.dir.unmark(ctx.dir.promoted());
                    return Ok(());
                }
                log::warn!("guard {pid} stepped down but did not exit; ending it");
            }
            Err(status::ClientError::Incomplete(why)) => {
                return Err(MasterError::StepDown { pid, why });
            }
            Err(e) => log::warn!("guard {pid} did not step down ({e}); cleaning up after it"),
        }
        if let Some(g) = &guard {
            let _ = g.signal(nix::sys::signal::Signal::SIGKILL);
        }
        wait_gone(pid, &ctx.dir, Duration::from_secs(2).min(left(until)));
    }
    cleanup_after_guard(ctx, cfg, until)
}

fn wait_gone(pid: u32, dir: &ResourceDir, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while dir.is_guard(pid) {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The guard's step-down done by the agent, within the budget (resource::cleanup), with the
/// parameters Pacemaker passed when they no longer make a configuration; then the promoted
/// mark goes.
fn cleanup_after_guard(
    ctx: &Ctx,
    cfg: Option<&MasterConfig>,
    until: Instant,
) -> Result<(), MasterError> {
    let mut fallback: Vec<VipConfig> = VipConfig::for_cleanup(&ctx.values).into_iter().collect();
    if let Some(text) = ctx.values.get(&crate::params::master::EXTRA_VIPS) {
        fallback.extend(VipConfig::list_for_cleanup(text));
    }
    crate::resource::cleanup::after_guard(&ctx.dir, &ctx.resource, cfg, fallback, until)
        .map_err(MasterError::Cleanup)?;
    ctx.dir.unmark(ctx.dir.promoted());
    Ok(())
}

/// Holder of the key: 100; any node that reaches etcd: 10; a node that cannot: no score, so
/// it cannot be promoted, nor one without the watchdog that watchdog=required asks for
/// (`watchdog`: resource::watchdog::choose's answer). The look at etcd and the score's tool
/// both fit in what is left of the action's budget (`until`); without time for the look, no
/// score. With `report` (the monitor), every etcd member is asked for its status in the same
/// look: their answers, for the node's report (None when etcd was not asked, or without
/// `report`: start and demote do not wait for a silent member's answer).
fn update_score(
    ctx: &Ctx,
    cfg: &MasterConfig,
    watchdog: &Result<crate::resource::watchdog::Choice, String>,
    until: Instant,
    report: bool,
) -> Option<MemberAnswers> {
    if !super::score::in_cluster(ctx.env) {
        return None;
    }
    if let Err(why) = watchdog {
        // Like Patroni's required mode: a node that cannot arm one is never the master.
        log::warn!("no promotion score: {why}");
        set_score(ctx, None, until);
        return None;
    }
    let key = match cfg.etcd.scope() {
        Ok(scope) => leader_key(&scope, &ctx.resource),
        Err(why) => {
            // Without the cluster's name this node cannot even name the key it would take.
            log::warn!("no promotion score: {why}");
            set_score(ctx, None, until);
            return None;
        }
    };
    // Kept back: the score's own call.
    let look = left(until)
        .saturating_sub(SCORE_SET.min(left(until) / 2))
        .min(SCORE_LOOK);
    let mut members = None;
    let holder = status::block_on(async {
        tokio::time::timeout(look, async {
            let etcd = Etcd::connect(&cfg.etcd, Duration::from_secs(1).min(look)).await?;
            if !report {
                return etcd.holder(&key).await;
            }
            let (holder, answers) = tokio::join!(etcd.holder(&key), etcd.member_answers());
            members = Some(answers);
            holder
        })
        .await
    });
    if !report {
        set_score(ctx, score_of(ctx, holder, look), until);
        return None;
    }
    // The look ran out before the members' answers: none answered in it.
    let members = members.unwrap_or_else(|| {
        let silent = format!("no answer within {} ms", look.as_millis());
        cfg.etcd
            .endpoints
            .iter()
            .map(|e| (e.clone(), Err(silent.clone())))
            .collect()
    });
    set_score(ctx, score_of(ctx, holder, look), until);
    Some(members)
}

/// The promotion score from the look at the key's holder (`look`: how long it had).
fn score_of(
    ctx: &Ctx,
    holder: Result<
        Result<Option<crate::lease::Holder>, crate::lease::LeaseError>,
        tokio::time::error::Elapsed,
    >,
    look: Duration,
) -> Option<i32> {
    match holder {
        Ok(Ok(Some(h))) if h.node == ctx.node() => Some(SCORE_HOLDER),
        Ok(Ok(_)) => Some(SCORE_CANDIDATE),
        Ok(Err(e)) => {
            log::warn!("etcd unreachable, no promotion score: {e}");
            None
        }
        Err(_) => {
            log::warn!(
                "etcd did not answer within {} ms, no promotion score",
                look.as_millis()
            );
            None
        }
    }
}

fn set_score(ctx: &Ctx, score: Option<i32>, until: Instant) {
    super::score::set(ctx.env, &ctx.dir.score(), score, left(until).min(SCORE_SET));
}

impl crate::ocf::failure::Failure for MasterError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            MasterError::Config(e) => e.exit(),
            MasterError::Install(e) => e.exit(),
            MasterError::NoInstance | MasterError::BadName(_) => crate::ocf::OcfExit::ErrConfigured,
            MasterError::Unsupported(_) => crate::ocf::OcfExit::ErrInstalled,
            MasterError::GuardGone(_) | MasterError::Unhealthy(_) | MasterError::KeyCheck(_) => {
                crate::ocf::OcfExit::FailedPromoted
            }
            MasterError::Locked(_)
            | MasterError::Reload(_)
            | MasterError::Write { .. }
            | MasterError::Spawn(_)
            | MasterError::NotPromoted(_)
            | MasterError::Undo { .. }
            | MasterError::StepDown { .. }
            | MasterError::Cleanup(_)
            | MasterError::Standby(_)
            | MasterError::Exporter(_) => crate::ocf::OcfExit::ErrGeneric,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{Holder, LeaseError, LeaseId};

    #[test]
    fn only_etcds_own_answer_can_disagree_with_the_guard() {
        let holder = |node: &str, lease: i64| Holder {
            node: node.into(),
            lease: LeaseId(lease),
            token: 3,
            ttl_left: None,
            revision: 9,
        };
        let ours = LeaseId(0x10).to_string();
        let judge = |read| judge_key("/hamaster/api/leader", read, "n1", Some(ours.as_str()));
        assert!(matches!(
            judge(Ok(Some(holder("n1", 0x10)))),
            KeyCheck::Agrees
        ));
        let KeyCheck::Disagrees(why) = judge(Ok(Some(holder("n2", 0x20)))) else {
            panic!("another holder must disagree")
        };
        assert!(
            why.contains("held by n2 (lease 0x20") && why.contains("not by this guard"),
            "{why}"
        );
        assert!(matches!(
            judge(Ok(Some(holder("n1", 0x20)))),
            KeyCheck::Disagrees(_)
        ));
        // No key: a failure, unless the guard holds through an etcd outage (monitor).
        let KeyCheck::Absent(none) = judge(Ok(None)) else {
            panic!("no key must be told apart")
        };
        assert!(none.contains("does not exist in etcd"), "{none}");
        let silent = Err(LeaseError::Etcd {
            op: "get leader key",
            detail: "no answer within 2000 ms".into(),
        });
        assert!(matches!(judge(silent), KeyCheck::CannotTell(_)));
    }
}
