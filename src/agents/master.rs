//! `ocf:hamaster:master`: a promotable master service with its VIP, guarded by an etcd leader
//! lease. Start/stop only mark the instance (unpromoted instances run nothing); promote
//! spawns the guard and waits until it leads with VIP and healthy service; monitor asks the
//! guard; demote has the guard step down, or does its steps itself when the guard is gone.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::guard::machine::STOP_GRACE;
use crate::lease::{leader_key, Etcd, LeaseId};
use crate::ocf::metadata::{ActionSpec, AgentInfo};
use crate::ocf::{Action, OcfEnv, OcfExit, Outcome};
use crate::params::master::MASTER_AGENT;
use crate::params::Values;
use crate::resource::config::MasterConfig;
use crate::resource::dir::ResourceDir;
use crate::resource::status::{self, GuardStatus};
use crate::service::process::stop_orphan;
use crate::service::ServiceSpec;
use crate::vip::{up, VipConfig};

pub static ACTIONS: [ActionSpec; 10] = [
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

pub static INFO: AgentInfo = AgentInfo {
    name: "master",
    shortdesc: "Active-passive master service with VIP and etcd leader lease",
    longdesc: "Runs a master service on the promoted instance only, with an optional floating IP \
        (the parameters of ocf:hamaster:vip), and holds an etcd leader key under a lease while \
        it does. A node that cannot renew the lease removes the VIP and stops the service by \
        itself before the lease can expire, so two nodes never serve as master at once, even \
        when Pacemaker itself is split. Configure as a promotable clone with promoted-max=1. \
        The promote timeout must exceed lease_ttl plus the service's start time. Supported: \
        Pacemaker 2.0 (RHEL 8.0-8.4) and 2.1 or later (RHEL 8.5+, 9, 10), tested with 2.0.5, \
        2.1.5 and 3.0.0; written for 1.1 (RHEL 7), untested there. Promotion scores go through \
        crm_master before 2.1 and crm_attribute --promotion from 2.1 on; from 2.1 on, the \
        reloadable parameters change without a restart (reload-agent).",
    params: &MASTER_AGENT,
    actions: &ACTIONS,
};

pub static AGENT: super::AgentDef = super::AgentDef { info: &INFO, run };

/// Promote's timeout when the caller gave none (ocf-tester, crm_resource --force-promote).
const DEFAULT_PROMOTE_TIMEOUT: Duration = Duration::from_secs(60);
/// Demote's and stop's when the caller gave none (the advertised default).
const DEFAULT_DEMOTE_TIMEOUT: Duration = Duration::from_secs(40);
/// Every action ends this much before its CRM_meta_timeout: the answer must reach execd.
const SAFETY: Duration = Duration::from_secs(1);
const SCORE_HOLDER: i32 = 100;
const SCORE_CANDIDATE: i32 = 10;
/// How long a guard that is alive may take to answer a status request.
const GUARD_ANSWER: Duration = Duration::from_secs(2);

struct Ctx<'a> {
    env: &'a OcfEnv,
    /// When the action began: its budget counts from here, the wait for the lock included.
    started: Instant,
    values: Values,
    resource: String,
    node: String,
    dir: ResourceDir,
}

fn run(action: Action, env: &OcfEnv) -> Outcome {
    let started = Instant::now();
    let values = Values::from_ocf(&MASTER_AGENT, env);
    let Some(resource) = env.resource().map(String::from) else {
        if action == Action::Monitor && env.is_probe() {
            return Outcome::new(OcfExit::NotRunning);
        }
        return Outcome::with_reason(
            OcfExit::ErrConfigured,
            "OCF_RESOURCE_INSTANCE is not set: the resource needs a name",
        );
    };
    let dir = match ResourceDir::check(&crate::runfiles::root(), &resource) {
        Ok(d) => d,
        // Nothing can run under a name that cannot have a directory: a probe finds nothing,
        // stop and demote have nothing to do; anything else is a configuration error.
        Err(_) if action == Action::Monitor && env.is_probe() => {
            return Outcome::new(OcfExit::NotRunning)
        }
        Err(_) if matches!(action, Action::Stop | Action::Demote) => return Outcome::ok(),
        Err(why) => return Outcome::with_reason(OcfExit::ErrConfigured, why),
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
            Err(why)
                if matches!(action, Action::Stop | Action::Demote)
                    && !why.starts_with("another operation") =>
            {
                log::warn!("{why}; going on without the resource lock");
                None
            }
            Err(why) => return Outcome::with_reason(OcfExit::ErrGeneric, why),
        }
    } else {
        None
    };
    let ctx = Ctx {
        env,
        started,
        values,
        dir,
        node: node_name(env),
        resource,
    };
    match action {
        Action::Start => start(&ctx),
        Action::Stop => stop(&ctx),
        Action::Monitor => monitor(&ctx),
        Action::Promote => promote(&ctx),
        Action::Demote => demote(&ctx),
        Action::Notify => Outcome::ok(),
        Action::ReloadAgent => reload(&ctx),
        Action::ValidateAll => validate(&ctx),
        _ => Outcome::new(OcfExit::ErrUnimplemented),
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
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "localhost".into())
}

fn cluster_node_name() -> Option<String> {
    let name = crate::service::tool_output(5, "crm_node", &["-n"])?
        .trim()
        .to_string();
    (!name.is_empty()).then_some(name)
}

/// The configuration, checked: 6 for what is wrong everywhere, 5 for what this node lacks.
fn config(ctx: &Ctx) -> Result<MasterConfig, Outcome> {
    let cfg = MasterConfig::from_values(&ctx.values).map_err(Outcome::from)?;
    cfg.check_installed().map_err(Outcome::from)?;
    Ok(cfg)
}

/// validate-all: the configuration, and under a cluster whether this Pacemaker is supported.
fn validate(ctx: &Ctx) -> Outcome {
    let cfg = match config(ctx) {
        Ok(c) => c,
        Err(o) => return o,
    };
    warn_of_slew(&cfg);
    unsupported(ctx).unwrap_or_else(Outcome::ok)
}

/// reload-agent's timeout when the caller gave none (the advertised default).
const DEFAULT_RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// reload-agent (Pacemaker 2.1 and later, when only reloadable parameters changed): a running
/// guard takes the new health, push and announcement settings at once and keeps its lease, VIP
/// and service; without a guard there is nothing to change, as every action reads its
/// parameters anew. The guard refuses a change that needs a restart (1, with its reason).
fn reload(ctx: &Ctx) -> Outcome {
    let cfg = match config(ctx) {
        Ok(c) => c,
        Err(o) => return o,
    };
    if ctx.dir.live_guard().is_none() {
        log::info!(
            "{}: reloaded: no guard runs here, the new values apply from the next promote",
            ctx.resource
        );
        return Outcome::ok();
    }
    let until = budget(ctx, DEFAULT_RELOAD_TIMEOUT);
    match status::block_on(status::reload(&ctx.dir.socket(), &cfg, left(until))) {
        Ok(_) => {
            log::info!("{}: reloaded: the guard took the new values", ctx.resource);
            Outcome::ok()
        }
        Err(e) => Outcome::with_reason(OcfExit::ErrGeneric, format!("reload-agent: {e}")),
    }
}

/// An unsupported Pacemaker (announced by its feature set), as OCF_ERR_INSTALLED: this node's
/// cluster software cannot run the resource, for validate-all, start and probes alike.
fn unsupported(ctx: &Ctx) -> Option<Outcome> {
    super::score::check_supported(ctx.env)
        .err()
        .map(|why| Outcome::with_reason(OcfExit::ErrInstalled, why))
}

/// A margin that cannot cover the clocks' largest slew is allowed (an administrator may know
/// their clocks), but said: the guard could then fence after the lease ended at etcd.
fn warn_of_slew(cfg: &MasterConfig) {
    let clock = cfg.etcd.clock();
    let need = clock.slew_margin();
    if clock.margin < need {
        log::warn!(
            "parameter lease_margin={} does not cover the clocks' largest slew at lease_ttl={}: \
             with this node's clock slow and etcd's fast by chrony's maxslewrate (8.4 %), the \
             lease could end at etcd before the guard fences; a margin of at least {} s does \
             (docs/safety.md)",
            clock.margin.as_secs(),
            clock.ttl.as_secs(),
            need.as_secs_f64().ceil()
        );
    }
}

fn start(ctx: &Ctx) -> Outcome {
    if let Some(o) = unsupported(ctx) {
        return o;
    }
    let cfg = match config(ctx) {
        Ok(c) => c,
        Err(o) => return o,
    };
    if let Err(e) = ctx.dir.mark(ctx.dir.started()) {
        return Outcome::with_reason(
            OcfExit::ErrGeneric,
            format!("cannot write {}: {e}", ctx.dir.started().display()),
        );
    }
    update_score(ctx, &cfg);
    Outcome::ok()
}

/// The moment an action must be done by: its CRM_meta_timeout (or `default`) from when it
/// began, less the safety second.
fn budget(ctx: &Ctx, default: Duration) -> Instant {
    let timeout = ctx.env.timeout_ms().map_or(default, Duration::from_millis);
    ctx.started + timeout.saturating_sub(SAFETY)
}

fn left(until: Instant) -> Duration {
    until.saturating_duration_since(Instant::now())
}

fn stop(ctx: &Ctx) -> Outcome {
    if is_promoted_here(ctx) {
        let out = demote(ctx);
        if out.exit != OcfExit::Success {
            return out;
        }
    }
    ctx.dir.unmark(ctx.dir.started());
    set_score(ctx, None);
    Outcome::ok()
}

fn is_promoted_here(ctx: &Ctx) -> bool {
    ctx.dir.promoted().exists() || ctx.dir.live_guard().is_some() || ctx.dir.state().exists()
}

fn status_timeout(env: &OcfEnv) -> Duration {
    env.timeout_ms().map_or(Duration::from_secs(2), |t| {
        Duration::from_millis(t / 2).min(Duration::from_secs(2))
    })
}

fn monitor(ctx: &Ctx) -> Outcome {
    if ctx.env.is_probe() {
        if let Some(o) = unsupported(ctx) {
            return o;
        }
    }
    let started = ctx.dir.started().exists();
    if !started && !is_promoted_here(ctx) {
        return Outcome::new(OcfExit::NotRunning);
    }
    if !is_promoted_here(ctx) {
        if let Ok(cfg) = MasterConfig::from_values(&ctx.values) {
            update_score(ctx, &cfg);
        }
        return Outcome::ok();
    }
    let st = match status::block_on(status::get_status(
        &ctx.dir.socket(),
        status_timeout(ctx.env),
    )) {
        Ok(s) => s,
        Err(e) => {
            return Outcome::with_reason(
                OcfExit::FailedPromoted,
                format!("promoted, but the guard is gone: {e}"),
            )
        }
    };
    if !st.is_healthy_leader() {
        return Outcome::with_reason(OcfExit::FailedPromoted, st.trouble());
    }
    if ctx.env.check_level >= 20 {
        if let Err(why) = verify_key_in_etcd(ctx, &st) {
            return Outcome::with_reason(OcfExit::FailedPromoted, why);
        }
    }
    Outcome::new(OcfExit::RunningPromoted)
}

/// OCF_CHECK_LEVEL=20: read the leader key from etcd ourselves, not through the guard.
fn verify_key_in_etcd(ctx: &Ctx, st: &GuardStatus) -> Result<(), String> {
    let cfg = MasterConfig::from_values(&ctx.values).map_err(|e| e.to_string())?;
    let key = leader_key(&cfg.etcd.prefix, &ctx.resource);
    let holder = status::block_on(async {
        let etcd = Etcd::connect(&cfg.etcd, status_timeout(ctx.env)).await?;
        etcd.holder(&key).await
    })
    .map_err(|e| format!("check level 20: {e}"))?;
    match holder {
        Some(h) if h.node == ctx.node && Some(h.lease.to_string()) == st.lease_id => Ok(()),
        Some(h) => Err(format!(
            "check level 20: {h}, not by this guard (lease {})",
            st.lease_id.as_deref().unwrap_or("?")
        )),
        None => Err(format!(
            "check level 20: leader key {key} does not exist in etcd"
        )),
    }
}

fn promote(ctx: &Ctx) -> Outcome {
    let cfg = match config(ctx) {
        Ok(c) => c,
        Err(o) => return o,
    };
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
                set_score(ctx, Some(SCORE_HOLDER));
                return Outcome::ok();
            }
            // A fenced or failed guard from before: clean it away, then start afresh.
            _ => {
                let out = demote_steps(ctx, Some(&cfg), poll_until);
                if out.exit != OcfExit::Success {
                    return out;
                }
            }
        }
    }
    if let Err(e) = ctx.dir.create() {
        return Outcome::with_reason(
            OcfExit::ErrGeneric,
            format!("cannot create {}: {e}", ctx.dir.root.display()),
        );
    }
    let acquire_for = left(poll_until)
        .saturating_sub(Duration::from_secs(1))
        .max(Duration::from_secs(1));
    let mut guard = match spawn_guard(ctx, &cfg, acquire_for) {
        Ok(child) => child,
        Err(e) => {
            return Outcome::with_reason(
                OcfExit::ErrGeneric,
                format!("cannot start the guard: {e}"),
            )
        }
    };
    let mut last: Option<GuardStatus> = None;
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
        if let Ok(Some(exit)) = guard.try_wait() {
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
                set_score(ctx, Some(SCORE_HOLDER));
                log::info!(
                    "promoted {} on {}: fencing token {}",
                    ctx.resource,
                    ctx.node,
                    s.fencing_token.unwrap_or_default()
                );
                return Outcome::ok();
            }
            if s.role == status::Role::Failed {
                break s.trouble();
            }
            last = Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Undo within what is left: nothing half-promoted stays behind.
    let undo = demote_steps(ctx, Some(&cfg), until);
    if undo.exit != OcfExit::Success {
        let still = undo.reason.unwrap_or_default();
        return Outcome::with_reason(
            OcfExit::ErrGeneric,
            format!("{why}; and undoing it: {still}"),
        );
    }
    Outcome::with_reason(OcfExit::ErrGeneric, why)
}

/// Spawns the guard in a session of its own and hands it `cfg` on its standard input.
fn spawn_guard(
    ctx: &Ctx,
    cfg: &MasterConfig,
    acquire_for: Duration,
) -> std::io::Result<std::process::Child> {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("hamaster")
        .args([
            "guard",
            "--resource",
            &ctx.resource,
            "--node",
            &ctx.node,
            "--acquire-timeout-ms",
        ])
        .arg(acquire_for.as_millis().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    // Whatever the guard cannot log (a crash of the runtime itself) is kept here.
    match crate::runfiles::create_private(&ctx.dir.root.join("guard.stderr")) {
        Ok(f) => cmd.stderr(f),
        Err(_) => cmd.stderr(Stdio::null()),
    };
    let limit = crate::child::fd_limit();
    // SAFETY: between fork and exec only setsid(2) and close(2)/close_range(2), on a value
    // computed before the fork.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid()?;
            crate::child::close_from(3, limit);
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        // A few hundred bytes into an empty pipe: never blocks. Closed when dropped: EOF.
        stdin.write_all(cfg.to_json().as_bytes())?;
    }
    Ok(child)
}

fn demote(ctx: &Ctx) -> Outcome {
    let cfg = MasterConfig::from_values(&ctx.values).ok();
    let until = budget(ctx, DEFAULT_DEMOTE_TIMEOUT);
    let out = demote_steps(ctx, cfg.as_ref(), until);
    if out.exit == OcfExit::Success {
        ctx.dir.unmark(ctx.dir.promoted());
        if let Some(c) = &cfg {
            update_score(ctx, c);
        }
    }
    out
}

/// The guard steps down within what is left of the budget; if it cannot be asked, it is
/// killed and its steps are done here. A guard that answers "not complete" (a service that
/// will not stop, a VIP that will not go) is left running: it keeps the lease while anything
/// may still serve, and the failure is reported. Without a usable configuration, the steps
/// that need it (etcd, systemd) are left to the lease's expiry.
fn demote_steps(ctx: &Ctx, cfg: Option<&MasterConfig>, until: Instant) -> Outcome {
    if let Some(pid) = ctx.dir.live_guard() {
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
                    return Outcome::ok();
                }
                log::warn!("guard {pid} stepped down but did not exit; ending it");
            }
            Err(status::ClientError::Incomplete(why)) => {
                return Outcome::with_reason(
                    OcfExit::ErrGeneric,
                    format!("guard {pid} could not step down in time: {why}"),
                );
            }
            Err(e) => log::warn!("guard {pid} did not step down ({e}); cleaning up after it"),
        }
        // The pid that holds this resource's guard socket.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
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

/// The guard's step-down done by the agent, within the budget: service, VIP, then — only when
/// both are confirmed down — key and lease. Every step is tried; only what is proven still up
/// at the end is a failure. Nothing running (no state, a unit that is not loaded) is success.
fn cleanup_after_guard(ctx: &Ctx, cfg: Option<&MasterConfig>, until: Instant) -> Outcome {
    let state = ctx.dir.load();
    log::info!(
        "cleaning up after the guard of {} (recorded state: {state:?})",
        ctx.resource
    );
    let mut failures = Vec::new();
    // The VIP first, as the guard does it.
    let vip = cfg
        .and_then(|c| c.vip.clone())
        .or_else(|| VipConfig::for_cleanup(&ctx.values));
    if let Some(v) = vip {
        if let Err(e) = up::take_down(v, &crate::runfiles::root()) {
            failures.push(format!("removing the VIP: {e}"));
        }
    }
    match cfg.map(|c| &c.service) {
        Some(ServiceSpec::Systemd { unit }) => {
            if let Err(why) = stop_unit(unit, until) {
                failures.push(why);
            }
        }
        _ => {
            if let Some(pid) = state.as_ref().and_then(|s| s.service_pid) {
                let start = state.as_ref().and_then(|s| s.service_start);
                let limit = left(until).saturating_sub(Duration::from_millis(500));
                if !stop_orphan(pid, start, STOP_GRACE.min(limit / 2), limit) {
                    failures.push(format!("the service (pid {pid}) is still running"));
                }
            }
        }
    }
    if !failures.is_empty() {
        // Something may still serve: the lease is not shortened, it runs out by itself.
        return Outcome::with_reason(OcfExit::ErrGeneric, failures.join("; "));
    }
    if let (Some(c), Some(lease)) = (cfg, state.as_ref().and_then(|s| s.lease_id)) {
        let key = leader_key(&c.etcd.prefix, &ctx.resource);
        let limit = left(until).min(Duration::from_secs(4));
        let released = status::block_on(async {
            tokio::time::timeout(limit, async {
                let etcd = Etcd::connect(&c.etcd, Duration::from_secs(2).min(limit)).await?;
                etcd.release(&key, LeaseId(lease)).await
            })
            .await
        });
        if !matches!(released, Ok(Ok(_))) {
            // VIP and service are down: an unreleased key only delays the next leader until
            // the lease expires.
            log::warn!(
                "could not release {key} ({released:?}); it expires with lease {}",
                LeaseId(lease)
            );
        }
    }
    ctx.dir.remove_guard_files();
    ctx.dir.unmark(ctx.dir.promoted());
    Outcome::ok()
}

/// Stops a unit without blocking on systemd (`stop --no-block`: its exit code says nothing
/// we need — a unit that is not loaded is stopped), then watches it until it is inactive,
/// within the budget.
fn stop_unit(unit: &str, until: Instant) -> Result<(), String> {
    if crate::service::find_in_path("systemctl").is_none() {
        // No systemd tooling here: no unit of ours can be running.
        return Ok(());
    }
    let _ = crate::service::tool_output(5, "systemctl", &["stop", "--no-block", "--", unit]);
    loop {
        let last = match status::block_on(crate::service::process::unit_state(unit)) {
            Ok(state) if !crate::service::process::unit_may_run(&state) => return Ok(()),
            Ok(state) => state,
            Err(e) => e,
        };
        if left(until) < Duration::from_millis(300) {
            return Err(format!("{unit} is still {last} after systemctl stop"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Holder of the key: 100; any node that reaches etcd: 10; a node that cannot: no score, so
/// it cannot be promoted.
fn update_score(ctx: &Ctx, cfg: &MasterConfig) {
    if !super::score::in_cluster(ctx.env) {
        return;
    }
    if cfg.watchdog.mode == crate::resource::config::WatchdogMode::Required {
        if let Err(why) = crate::guard::watchdog::choose(&cfg.watchdog) {
            // Like Patroni's required mode: a node that cannot arm one is never the master.
            log::warn!("no promotion score: {why}");
            return set_score(ctx, None);
        }
    }
    let key = leader_key(&cfg.etcd.prefix, &ctx.resource);
    let holder = status::block_on(async {
        let etcd = Etcd::connect(&cfg.etcd, Duration::from_secs(1)).await?;
        etcd.holder(&key).await
    });
    let score = match holder {
        Ok(Some(h)) if h.node == ctx.node => Some(SCORE_HOLDER),
        Ok(_) => Some(SCORE_CANDIDATE),
        Err(e) => {
            log::warn!("etcd unreachable, no promotion score: {e}");
            None
        }
    };
    set_score(ctx, score);
}

fn set_score(ctx: &Ctx, score: Option<i32>) {
    super::score::set(ctx.env, &ctx.dir.score(), score);
}
