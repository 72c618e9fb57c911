//! `hamaster guard`: the long-lived process on the promoted node. It takes the leader key in
//! etcd under its own lease, raises the VIP, starts the service, keeps the lease alive and
//! self-fences (VIP down, service stopped) before the lease could expire at etcd. It serves
//! its status on a unix socket and steps down cleanly when asked.

pub mod config;
pub mod core;
pub mod paths;
#[cfg(test)]
mod sim;
pub mod status;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};
use tokio::time::sleep_until;

use crate::lease::clock::{boottime, BootTimer};
use crate::lease::etcd::{KeyEvent, KeyWatch};
use crate::lease::{leader_key, Acquire, Etcd, Grant, LeaseClock, LeaseId};
use crate::service::{HealthProbe, Running, ServiceSpec};
use crate::vip::{burst, up, Vip};
use config::MasterConfig;
use paths::{Persisted, ResourceDir};
use status::{GuardStatus, Role, Shared, StepDown};

/// How long an orderly step-down gives the service between TERM and KILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often the guard looks at the boot clock even when no timer is due.
const RECHECK: Duration = Duration::from_millis(250);
/// How long a guard that gave up keeps answering, so promote can read why.
const FAILED_LINGER: Duration = Duration::from_secs(3);

pub struct GuardArgs {
    pub resource: String,
    pub node: String,
    pub config: MasterConfig,
    /// How long to wait for the key (promote's timeout, minus what it needs itself).
    pub acquire_for: Duration,
    pub run_dir: PathBuf,
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The wall-clock time (ms since the epoch) of an earlier moment on the boot clock.
pub fn unix_ms_at(boot: Duration) -> u64 {
    unix_ms().saturating_sub(boottime().saturating_sub(boot).as_millis() as u64)
}

/// Runs a guard to its end; returns the process exit code.
pub fn run(args: GuardArgs) -> i32 {
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
            log::error!("guard: cannot start its runtime: {e}");
            return 1;
        }
    };
    rt.block_on(Guard::new(args).run())
}

struct Acquired {
    etcd: Etcd,
    token: i64,
    grant: Grant,
}

enum Interrupt {
    StepDown(StepDown),
    Signal,
    Failed(String),
}

enum Event {
    Recheck,
    Lost(String),
    Key(Result<KeyEvent, crate::lease::LeaseError>),
    ServiceExited(String),
    StepDown(StepDown),
    Signal,
    RetryRelease,
}

struct Guard {
    args: GuardArgs,
    dir: ResourceDir,
    key: String,
    clock: LeaseClock,
    shared: Shared,
    /// The self-fencing deadline on the boot clock (see lease::clock).
    deadline: Arc<Mutex<Option<Duration>>>,
    persisted: Persisted,
    service: Option<Running>,
}

impl Guard {
    fn new(args: GuardArgs) -> Guard {
        let dir = ResourceDir::new(&args.run_dir, &args.resource);
        let key = leader_key(&args.config.etcd.prefix, &args.resource);
        let clock = args.config.etcd.clock();
        let deadline: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let initial = GuardStatus {
            resource: args.resource.clone(),
            node: args.node.clone(),
            pid: std::process::id(),
            vip: args.config.vip.as_ref().map(|v| v.ip.to_string()),
            service_detail: "not started".into(),
            ..GuardStatus::default()
        };
        let vip_config = args.config.vip.clone();
        let live_deadline = deadline.clone();
        let live = move |s: &mut GuardStatus| {
            if let Some(cfg) = &vip_config {
                s.vip_present = Vip::new(cfg.clone())
                    .and_then(|mut v| v.find())
                    .ok()
                    .map(|a| a.is_some());
            }
            if let Some(d) = live_deadline.lock().ok().and_then(|d| *d) {
                if s.role == Role::Leader {
                    s.lease_ttl_left_ms = Some(clock.ttl_left(d, boottime()).as_millis() as u64);
                }
            }
        };
        let shared = Shared {
            status: Arc::new(Mutex::new(initial)),
            live: Arc::new(live),
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
            key,
            clock,
            shared,
            deadline,
            persisted,
            service: None,
        }
    }

    fn persist(&self) {
        if let Err(e) = self.dir.save(&self.persisted) {
            log::warn!("guard {}: cannot record state: {e}", self.args.resource);
        }
    }

    async fn run(mut self) -> i32 {
        if let Err(e) = self.dir.create() {
            log::error!(
                "guard {}: cannot create {}: {e}",
                self.args.resource,
                self.dir.root.display()
            );
            return 1;
        }
        if let Some(pid) = self.dir.live_guard() {
            log::error!(
                "guard {}: another guard (pid {pid}) runs for this resource",
                self.args.resource
            );
            return 1;
        }
        let _ = std::fs::write(self.dir.pidfile(), format!("{}\n", std::process::id()));
        self.persist();
        let listener = match status::bind(&self.dir.socket()) {
            Ok(l) => l,
            Err(e) => {
                log::error!(
                    "guard {}: cannot bind {}: {e}",
                    self.args.resource,
                    self.dir.socket().display()
                );
                return 1;
            }
        };
        let (stepdown_tx, mut stepdown_rx) = mpsc::channel::<StepDown>(4);
        let open = status::Open::default();
        let server = tokio::spawn(status::serve(
            listener,
            self.shared.clone(),
            stepdown_tx,
            open.clone(),
        ));
        let Some(mut sigterm) = StopSignals::new() else {
            return 1;
        };

        let code = match self.acquire(&mut stepdown_rx, &mut sigterm).await {
            Ok(acquired) => self.lead(acquired, &mut stepdown_rx, &mut sigterm).await,
            Err(Interrupt::StepDown(reply)) => {
                self.shared.update(|s| s.role = Role::SteppingDown);
                let _ = reply.send(self.shared.snapshot());
                0
            }
            Err(Interrupt::Signal) => 0,
            Err(Interrupt::Failed(why)) => self.give_up(why, &mut stepdown_rx).await,
        };
        self.dir.remove_guard_files();
        server.abort();
        open.drain(Duration::from_millis(500)).await;
        code
    }

    fn op_timeout(&self) -> Duration {
        (self.clock.ttl / 3).clamp(Duration::from_millis(500), Duration::from_secs(2))
    }

    fn problem(&self, role: Role, why: impl Into<String>) {
        let why = why.into();
        log::info!("guard {}: {why}", self.args.resource);
        self.shared.update(|s| {
            s.role = role;
            s.problem = Some(why);
        });
    }

    /// Takes the leader key, or waits for it to be deleted, until `acquire_for` runs out.
    async fn acquire(
        &mut self,
        stepdown: &mut mpsc::Receiver<StepDown>,
        sigterm: &mut StopSignals,
    ) -> Result<Acquired, Interrupt> {
        let until = Instant::now() + self.args.acquire_for;
        let etcd = Etcd::connect(&self.args.config.etcd, self.op_timeout())
            .await
            .map_err(|e| Interrupt::Failed(e.to_string()))?;
        let mut last = String::from("no answer from etcd yet");
        let pause = Duration::from_millis(300);
        loop {
            if Instant::now() >= until {
                return Err(Interrupt::Failed(format!(
                    "not leader after {} s: {last}",
                    self.args.acquire_for.as_secs()
                )));
            }
            let attempt = tokio::select! {
                r = Self::try_once(&etcd, &self.key, &self.args.node, self.clock.ttl) => r,
                Some(reply) = stepdown.recv() => return Err(Interrupt::StepDown(reply)),
                _ = sigterm.recv() => return Err(Interrupt::Signal),
            };
            let watch_from = match attempt {
                Ok(Ok((grant, token))) => return Ok(Acquired { etcd, token, grant }),
                Ok(Err(holder)) => {
                    last = holder.to_string();
                    self.shared.update(|s| s.holder = Some(holder.node.clone()));
                    self.problem(Role::Waiting, last.clone());
                    Some(holder.revision + 1)
                }
                Err(e) => {
                    last = e;
                    self.problem(Role::Acquiring, last.clone());
                    None
                }
            };
            // Wait for the holder's key to go (a watch, never a timer), or retry after a pause.
            let mut watch = match watch_from {
                Some(rev) => etcd.watch(&self.key, rev).await.ok(),
                None => None,
            };
            let wait = async {
                match watch.as_mut() {
                    Some(w) => loop {
                        match w.next().await {
                            Ok(KeyEvent::Deleted) | Err(_) => break,
                            Ok(KeyEvent::Put { .. }) => {}
                        }
                    },
                    None => tokio::time::sleep(pause).await,
                }
            };
            tokio::select! {
                _ = wait => {}
                _ = sleep_until(until.into()) => {}
                Some(reply) = stepdown.recv() => return Err(Interrupt::StepDown(reply)),
                _ = sigterm.recv() => return Err(Interrupt::Signal),
            }
        }
    }

    /// One attempt: grant a lease, try the key in one transaction, verify. Ok(Ok) = ours;
    /// Ok(Err(holder)) = someone else's; Err = etcd trouble.
    async fn try_once(
        etcd: &Etcd,
        key: &str,
        node: &str,
        ttl: Duration,
    ) -> Result<Result<(Grant, i64), crate::lease::Holder>, String> {
        let grant = etcd
            .grant(ttl)
            .await
            .map_err(|e| format!("etcd unreachable: {e}"))?;
        let lease = grant.lease;
        let outcome = etcd.try_acquire(key, node, lease).await;
        match outcome {
            Ok(Acquire::Won { token }) => {
                // Re-check key and lease before acting on them.
                let holder = etcd.holder(key).await.map_err(|e| e.to_string());
                let alive = etcd.ttl_left(lease).await.map_err(|e| e.to_string());
                match (holder, alive) {
                    (Ok(Some(h)), Ok(Some(_)))
                        if h.node == node && h.lease == lease && h.token == token =>
                    {
                        Ok(Ok((grant, token)))
                    }
                    (h, a) => {
                        let _ = etcd.release(key, lease).await;
                        Err(format!(
                            "leader key changed right after it was taken ({h:?}, lease {a:?})"
                        ))
                    }
                }
            }
            Ok(Acquire::Held(h)) => {
                let _ = etcd.revoke(lease).await;
                Ok(Err(h))
            }
            Err(e) => {
                let _ = etcd.revoke(lease).await;
                Err(format!("etcd: {e}"))
            }
        }
    }

    /// Raises VIP and service under the key, then guards them until told to stop.
    async fn lead(
        &mut self,
        a: Acquired,
        stepdown: &mut mpsc::Receiver<StepDown>,
        sigterm: &mut StopSignals,
    ) -> i32 {
        let lease = a.grant.lease;
        let deadline0 = self.clock.deadline(a.grant.sent, a.grant.ttl);
        self.set_deadline(deadline0);
        let (deadline_tx, mut deadline_rx) = watch::channel(deadline0);
        let (lost_tx, mut lost_rx) = mpsc::channel::<String>(1);
        self.persisted.lease_id = Some(lease.0);
        self.persisted.fencing_token = Some(a.token);
        self.persist();
        log::info!(
            "guard {}: leader key {} taken, lease {}, fencing token {}",
            self.args.resource,
            self.key,
            lease,
            a.token
        );
        self.shared.update(|s| {
            s.role = Role::Leader;
            s.holder = Some(self.args.node.clone());
            s.lease_id = Some(lease.to_string());
            s.fencing_token = Some(a.token);
            // The grant counts as the first renewal, from when it was sent.
            s.last_renewal_unix_ms = Some(unix_ms_at(a.grant.sent));
            s.leader_since_unix_ms = Some(unix_ms());
            s.problem = Some("raising VIP and service".into());
        });
        let keepalive = tokio::spawn(keep_alive(
            a.etcd.clone(),
            a.grant,
            self.clock,
            deadline_tx,
            lost_tx,
            self.shared.clone(),
            self.deadline.clone(),
        ));
        let mut key_watch = a.etcd.watch(&self.key, a.token + 1).await.ok();

        if let Err(why) = self.raise(a.token).await {
            keepalive.abort();
            self.step_down_steps(&a.etcd, lease).await;
            return self.give_up(why, stepdown).await;
        }
        let health = tokio::spawn(watch_health(self.args.config.clone(), self.shared.clone()));
        self.shared.update(|s| s.problem = None);

        let mut fenced = false;
        let mut released = false;
        let mut next_release = Instant::now();
        let boot_timer = BootTimer::new()
            .map_err(|e| {
                log::warn!("no CLOCK_BOOTTIME timer ({e}): checking the clock every 250 ms")
            })
            .ok();
        loop {
            let deadline = *deadline_rx.borrow();
            // A guard that wakes up late (paused, stalled, suspended) compares the clock first.
            let now = boottime();
            if !fenced && now >= deadline {
                self.fence(&format!(
                    "lease not renewed in time (deadline passed {} ms ago)",
                    (now - deadline).as_millis()
                ))
                .await;
                fenced = true;
            }
            // tokio's timers run on the monotonic clock, which stops during suspend: the boot
            // timer wakes us at the deadline whatever happened meanwhile. Without it (no
            // timerfd), wake every RECHECK to look at the boot clock.
            let on_boot_timer =
                !fenced && boot_timer.as_ref().is_some_and(|t| t.set(deadline).is_ok());
            let wake = deadline.saturating_sub(now).min(RECHECK);
            let service = self.service.as_mut();
            let event = tokio::select! {
                biased;
                _ = tokio::time::sleep(wake), if !fenced && !on_boot_timer => Event::Recheck,
                _ = async { match &boot_timer { Some(t) => t.fired().await, None => std::future::pending().await } }, if on_boot_timer => Event::Recheck,
                // Only while the keepalive task lives: a closed channel is always "ready".
                r = deadline_rx.changed(), if !fenced => { if r.is_err() { Event::Lost("lease keepalive stopped".into()) } else { Event::Recheck } },
                Some(why) = lost_rx.recv(), if !fenced => Event::Lost(why),
                ev = next_key_event(key_watch.as_mut()), if !fenced => Event::Key(ev),
                detail = async { match service { Some(s) => s.wait_exit().await, None => std::future::pending().await } }, if !fenced => Event::ServiceExited(detail),
                Some(reply) = stepdown.recv() => Event::StepDown(reply),
                _ = sigterm.recv() => Event::Signal,
                _ = sleep_until(next_release.into()), if fenced && !released => Event::RetryRelease,
            };
            match event {
                Event::Recheck => {}
                Event::Lost(why) => {
                    self.fence(&why).await;
                    fenced = true;
                }
                Event::Key(Ok(KeyEvent::Deleted)) => {
                    self.fence("leader key was deleted in etcd").await;
                    fenced = true;
                }
                Event::Key(Ok(KeyEvent::Put { lease: other })) if other != lease => {
                    self.fence(&format!("leader key now carries another lease ({other})"))
                        .await;
                    fenced = true;
                }
                Event::Key(Ok(KeyEvent::Put { .. })) => {}
                Event::Key(Err(e)) => {
                    log::warn!(
                        "guard {}: key watch: {e}; watching again",
                        self.args.resource
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    key_watch = a.etcd.watch(&self.key, a.token + 1).await.ok();
                }
                Event::ServiceExited(detail) => {
                    log::error!("guard {}: service {detail}", self.args.resource);
                    self.shared.update(|s| {
                        s.service_running = false;
                        s.service_healthy = false;
                        s.service_detail = detail;
                    });
                }
                Event::RetryRelease => {
                    // After fencing, give the key back as soon as etcd answers again.
                    released = a.etcd.release(&self.key, lease).await.is_ok();
                    next_release = Instant::now() + Duration::from_secs(1);
                }
                Event::StepDown(reply) => {
                    keepalive.abort();
                    health.abort();
                    self.step_down_steps(&a.etcd, lease).await;
                    let _ = reply.send(self.shared.snapshot());
                    return 0;
                }
                Event::Signal => {
                    keepalive.abort();
                    health.abort();
                    self.step_down_steps(&a.etcd, lease).await;
                    return 0;
                }
            }
            if fenced {
                keepalive.abort();
                health.abort();
            }
        }
    }

    fn set_deadline(&self, d: Duration) {
        if let Ok(mut slot) = self.deadline.lock() {
            *slot = Some(d);
        }
    }

    /// VIP (with announcements), fencing token, service: in this order.
    async fn raise(&mut self, token: i64) -> Result<(), String> {
        let left = self
            .deadline
            .lock()
            .ok()
            .and_then(|d| *d)
            .map_or(Duration::ZERO, |d| d.saturating_sub(boottime()));
        // Nothing goes up on a lease that may already be gone (etcd answered too slowly
        // between the grant and now).
        if left.is_zero() {
            return Err("the lease's deadline passed before the VIP and service went up".into());
        }
        if let Some(vip) = self.args.config.vip.clone() {
            let dad_wait = left.min(Duration::from_secs(10));
            let run_dir = burst::run_dir();
            let result =
                tokio::task::spawn_blocking(move || up::bring_up(vip, dad_wait, &run_dir)).await;
            match result {
                Ok(Ok(target)) => {
                    self.persisted.vip_added = true;
                    self.persist();
                    log::info!(
                        "guard {}: VIP {} up on {}",
                        self.args.resource,
                        self.args
                            .config
                            .vip
                            .as_ref()
                            .map(|v| v.ip.to_string())
                            .unwrap_or_default(),
                        target.link.name
                    );
                }
                Ok(Err(e)) => return Err(format!("VIP: {e}")),
                Err(e) => return Err(format!("VIP: {e}")),
            }
        }
        let token_text = format!("{token}\n");
        let env_text = format!(
            "HAMASTER_FENCING_TOKEN={token}\nHAMASTER_RESOURCE={}\n",
            self.args.resource
        );
        if let Err(e) = std::fs::write(self.dir.fencing_token(), token_text)
            .and_then(|_| std::fs::write(self.dir.service_env(), env_text))
        {
            return Err(format!("cannot write the fencing token: {e}"));
        }
        let env = vec![
            ("HAMASTER_FENCING_TOKEN".to_string(), token.to_string()),
            ("HAMASTER_RESOURCE".to_string(), self.args.resource.clone()),
        ];
        match self.args.config.service.start(&env).await {
            Ok(running) => {
                self.persisted.service_pid = running.pid();
                self.persist();
                self.service = Some(running);
                self.shared.update(|s| {
                    s.service_running = true;
                    s.service_detail = "started".into();
                });
                Ok(())
            }
            Err(e) => Err(format!("service: {e}")),
        }
    }

    /// Self-fencing: VIP first (stops traffic at once), then the service (TERM, KILL after
    /// half the margin), all within the margin before etcd could expire the lease.
    async fn fence(&mut self, why: &str) {
        log::error!("guard {}: self-fencing: {why}", self.args.resource);
        self.remove_vip().await;
        if let Some(s) = self.service.as_mut() {
            let _ = s.stop(self.clock.margin / 2).await;
        }
        let detail = self
            .service
            .as_ref()
            .and_then(|s| s.exit_detail().map(String::from))
            .unwrap_or_else(|| "stopped".into());
        self.persisted.fenced = Some(why.to_string());
        self.persist();
        self.set_deadline(boottime());
        self.shared.update(|s| {
            s.role = Role::Fenced;
            s.problem = Some(format!("fenced: {why}"));
            s.fenced_at_unix_ms = Some(unix_ms());
            s.service_running = false;
            s.service_healthy = false;
            s.service_detail = detail;
            s.lease_ttl_left_ms = Some(0);
        });
    }

    async fn remove_vip(&mut self) {
        if let Some(vip) = self.args.config.vip.clone() {
            let run_dir = burst::run_dir();
            match tokio::task::spawn_blocking(move || up::take_down(vip, &run_dir)).await {
                Ok(Ok(_)) => {
                    self.persisted.vip_added = false;
                    self.persist();
                }
                Ok(Err(e)) => log::error!("guard {}: removing VIP: {e}", self.args.resource),
                Err(e) => log::error!("guard {}: removing VIP: {e}", self.args.resource),
            }
        }
    }

    /// Orderly step-down: service stopped, VIP removed, key deleted if it still carries our
    /// lease, lease revoked. Each step runs even when an earlier one failed.
    async fn step_down_steps(&mut self, etcd: &Etcd, lease: LeaseId) {
        self.shared.update(|s| s.role = Role::SteppingDown);
        if let Some(s) = self.service.as_mut() {
            if let Err(e) = s.stop(STOP_GRACE).await {
                log::error!("guard {}: stopping service: {e}", self.args.resource);
            }
        }
        self.service = None;
        self.remove_vip().await;
        match etcd.release(&self.key, lease).await {
            Ok(true) => log::info!("guard {}: leader key released", self.args.resource),
            Ok(false) => log::info!(
                "guard {}: leader key was no longer ours",
                self.args.resource
            ),
            Err(e) => log::warn!(
                "guard {}: releasing leader key: {e} (it expires with the lease)",
                self.args.resource
            ),
        }
        self.shared.update(|s| {
            s.service_running = false;
            s.service_healthy = false;
            s.service_detail = "stopped".into();
            s.problem = None;
        });
    }

    /// Reports the failure for a while (promote reads it), then ends.
    async fn give_up(&mut self, why: String, stepdown: &mut mpsc::Receiver<StepDown>) -> i32 {
        log::error!("guard {}: {why}", self.args.resource);
        self.problem(Role::Failed, why);
        tokio::select! {
            _ = tokio::time::sleep(FAILED_LINGER) => {}
            Some(reply) = stepdown.recv() => { let _ = reply.send(self.shared.snapshot()); }
        }
        1
    }
}

/// SIGTERM (systemd, Pacemaker) or SIGINT (an operator's Ctrl-C in `hamaster takeover`):
/// either means "step down cleanly".
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> Option<StopSignals> {
        Some(StopSignals {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

async fn next_key_event(w: Option<&mut KeyWatch>) -> Result<KeyEvent, crate::lease::LeaseError> {
    match w {
        Some(w) => w.next().await,
        None => std::future::pending().await,
    }
}

/// Renews the lease every TTL/3, counted from when the grant was sent (the time it took to
/// get the key and raise the VIP is no reason to renew late), and moves the deadline;
/// reports a lease etcd says is gone.
async fn keep_alive(
    etcd: Etcd,
    grant: Grant,
    clock: LeaseClock,
    deadline_tx: watch::Sender<Duration>,
    lost_tx: mpsc::Sender<String>,
    shared: Shared,
    deadline_slot: Arc<Mutex<Option<Duration>>>,
) {
    let lease = grant.lease;
    let mut ka = etcd.keepalive(lease);
    let interval = clock.keepalive_interval();
    let attempt = clock.renewal_attempt_timeout();
    let mut next = Instant::now() + (grant.sent + interval).saturating_sub(boottime());
    loop {
        sleep_until(next.into()).await;
        let sent = boottime();
        let sent_mono = Instant::now();
        match ka.renew(attempt).await {
            Ok(ttl) if ttl.is_zero() => {
                let _ = lost_tx
                    .send(format!("etcd says lease {lease} has expired"))
                    .await;
                return;
            }
            Ok(ttl) => {
                let d = clock.deadline(sent, ttl);
                deadline_tx.send_modify(|cur| *cur = (*cur).max(d));
                if let Ok(mut slot) = deadline_slot.lock() {
                    *slot = Some(*deadline_tx.borrow());
                }
                shared.update(|s| s.last_renewal_unix_ms = Some(unix_ms_at(sent)));
                next = sent_mono + interval;
            }
            Err(e) => {
                log::warn!("keepalive of lease {lease}: {e}");
                // The next member, at once: the slack before the deadline is for retries.
                next = Instant::now() + Duration::from_millis(20);
            }
        }
    }
}

/// Checks health every second (every 25 ms until the first success, so promote is quick).
async fn watch_health(cfg: MasterConfig, shared: Shared) {
    let probe = match HealthProbe::new(&cfg.health) {
        Ok(p) => p,
        Err(e) => {
            shared.update(|s| s.service_detail = format!("health probe unusable: {e}"));
            return;
        }
    };
    let mut healthy_once = false;
    loop {
        let mut running = shared
            .status
            .lock()
            .map(|s| s.service_running)
            .unwrap_or(false);
        if let (true, ServiceSpec::Systemd { unit }) = (running, &cfg.service) {
            // A unit has no child to wait for: ask systemd whether it is still active.
            running = crate::service::process::unit_active(unit).await;
            if !running {
                shared.update(|s| {
                    s.service_running = false;
                    s.service_detail = format!("{unit} is not active");
                });
            }
        }
        let (healthy, detail) = match (&probe, running) {
            (_, false) => (false, None),
            (None, true) => (true, Some("running (no health_url)".to_string())),
            (Some(p), true) => match p.check().await {
                Ok(code) => (
                    (200..300).contains(&code),
                    Some(format!("{} answered {code}", p.url())),
                ),
                Err(e) => (false, Some(format!("{}: {e}", p.url()))),
            },
        };
        shared.update(|s| {
            if s.service_running {
                s.service_healthy = healthy;
                if let Some(d) = detail {
                    s.service_detail = d;
                }
            }
        });
        healthy_once |= healthy;
        tokio::time::sleep(if healthy_once {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(25)
        })
        .await;
    }
}
