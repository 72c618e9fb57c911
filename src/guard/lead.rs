//! Leading: the tokio shell around the guard machine (guard::machine). With the key taken it
//! starts the machine's fencing thread, then only performs what the machine orders — a
//! keepalive, a confirm of the key, the VIP's settling and announcements, the fencing token,
//! the service's start and the looks at whether it is gone, the release — and feeds every
//! answer back, with the watch on the key, the service's exit, step-down requests and signals.
//! It decides nothing itself: what a failure means is the machine's to say.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::fence::{Fence, Host};
use super::machine::{
    Fault, Level, Machine, Order, Plan, Regrant, RetakeError, ServiceState, WatchdogPlan,
};
use super::status::StepDown;
use super::watchdog::{DevPath, Dog, Opener};
use super::{
    answers, health, keepalive, Acquired, Ended, Guard, GuardArgs, GuardError, StopSignals,
};
use crate::lease::clock::boottime;
use crate::lease::Etcd;
use crate::resource::config::{WarmHook, WatchdogMode};
use crate::resource::status::GuardStatus;
use crate::resource::watchdog::Choice;
use crate::runfiles::write_private;
use crate::service::process::ServiceRecord;
use crate::service::ServiceRef;
use crate::service::{Running, ServiceSpec};
use crate::vip::{burst, up};

/// The tasks that run beside the shell while the guard leads.
#[derive(Default)]
struct Helpers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Helpers {
    fn add(&mut self, t: tokio::task::JoinHandle<()>) {
        self.tasks.push(t);
    }
    fn stop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

/// What the shell holds while it leads.
struct Shell {
    fence: Fence,
    etcd: Etcd,
    token: i64,
    /// The prepared VIPs, until the machine orders them settled.
    ready: Vec<up::Ready>,
    /// Each VIP's interface and address, for the watch on wire and kernel while leading.
    wire: Vec<(crate::vip::netlink::Link, std::net::IpAddr)>,
    run_dir: PathBuf,
    renew_tx: mpsc::UnboundedSender<Duration>,
    started_tx: mpsc::UnboundedSender<Running>,
    /// A key taken back after a hold: its new lease's grant and the new fencing token.
    retaken_tx: mpsc::UnboundedSender<(crate::lease::Grant, i64)>,
    /// The failsafe record written with the key (its key and mod revision).
    record: Option<(String, i64)>,
    /// The keepalives and the watch on the key, of the lease in force (a retake replaces them).
    lease_helpers: Helpers,
    /// Step-down requests waiting for the machine's answer.
    waiting: Vec<oneshot::Sender<(bool, GuardStatus)>>,
    helpers: Helpers,
    /// Under Pacemaker: where the machine's pushes go (push_failures in force at the time).
    reporter: Option<super::push::Reporter>,
    /// The sessions the last master left (guard::sessions), being read since the key was
    /// taken; taken by Order::Repoint. None: no VIP.
    left: Option<tokio::task::JoinHandle<Result<Vec<crate::vip::tickle::Conn>, String>>>,
}

/// What the shell's helpers tell it: a service started, the key taken back after a hold (its
/// new lease's grant and the new fencing token).
struct Heard {
    started: mpsc::UnboundedReceiver<Running>,
    retaken: mpsc::UnboundedReceiver<(crate::lease::Grant, i64)>,
}

/// How long the clients' telling waits for the master to serve, at most (a raise ends far
/// sooner: its promote's budget).
const SERVE_WAIT: Duration = Duration::from_secs(600);

/// How often a campaign's guard looks whether its leadership must end (fenced, or not serving).
const CAMPAIGN_LOOK: Duration = Duration::from_millis(250);

impl Guard {
    /// Raises VIP and service under the key, then guards them until the machine is done.
    pub(super) async fn lead(
        &mut self,
        a: Acquired,
        stepdown: &mut mpsc::Receiver<StepDown>,
        signals: &mut StopSignals,
    ) -> Result<Ended, GuardError> {
        let lease = a.grant.lease;
        let record = a.record.as_ref().map(|&(rev, _)| {
            (
                crate::failsafe::record_key(&self.scope, &self.args.resource),
                rev,
            )
        });
        let record_ref = record.as_ref().map(|(k, r)| (k.as_str(), *r));
        let ready = match self.prepare_vips().await {
            Ok(ready) => ready,
            Err(e) => {
                let _ = a.etcd.release(&self.key, lease, record_ref).await;
                return self.give_up(e, stepdown).await;
            }
        };
        let (dog, watchdog) = self.watchdog_plan();
        let addrs: Vec<_> = ready.iter().map(|r| r.vip.new_addr(&r.target)).collect();
        // Recorded before any is added (with the leadership, below): clean-up after a dead
        // guard removes exactly these.
        self.persisted.vips = addrs
            .iter()
            .map(|a| crate::resource::dir::RecordedVip {
                index: a.index,
                ip: a.ip,
                prefix: a.prefix,
            })
            .collect();
        let host = Host::new(addrs, dog);
        let plan = Plan {
            clock: self.clock,
            vip: !ready.is_empty(),
            watchdog,
            known: match (&self.warm, &self.args.config.service) {
                (Some(running), _) => Some(reference(running)),
                (None, ServiceSpec::Systemd { unit }) => Some(ServiceRef::Unit(unit.clone())),
                (None, ServiceSpec::Command { .. }) => None,
            },
            hold: a.record.as_ref().map(|(_, plan)| plan.clone()),
            take_back: self.warm.is_some() && self.hook(WarmHook::Demote).is_some(),
            campaign: self.args.campaign.is_some(),
        };
        let (orders_tx, orders) = mpsc::unbounded_channel();
        let started = host.map_err(|e| e.to_string()).and_then(|h| {
            let machine = Machine::new(plan, a.grant.sent, a.grant.ttl, h);
            Fence::start(machine, orders_tx).map_err(|e| e.to_string())
        });
        let fence = match started {
            Ok(f) => f,
            Err(e) => {
                let _ = a.etcd.release(&self.key, lease, record_ref).await;
                return self.give_up(GuardError::Fencing(e), stepdown).await;
            }
        };
        let _ = self.fence.set(fence.clone());
        self.record_leadership(&a);

        let (mut shell, renew_rx, heard) = self.shell(fence.clone(), &a, ready, record);
        if self.tells_clients() {
            shell.left = Some(tokio::spawn(super::sessions::read_left(
                a.etcd.clone(),
                self.sessions_key(),
            )));
        }
        self.start_lease_helpers(&mut shell, lease, renew_rx);
        shell.helpers.add(tokio::spawn(warn_of_old_etcd(
            a.etcd.clone(),
            self.args.resource.clone(),
        )));
        self.serve(shell, &a.etcd, orders, heard, stepdown, signals)
            .await
    }

    /// The leadership's shell at work until the machine is done: its orders performed,
    /// step-down requests and signals told to it, the service's start and exit and a key taken
    /// back heard, and a campaign's leadership judged.
    async fn serve(
        &mut self,
        mut shell: Shell,
        etcd: &Etcd,
        mut orders: mpsc::UnboundedReceiver<Order>,
        mut heard: Heard,
        stepdown: &mut mpsc::Receiver<StepDown>,
        signals: &mut StopSignals,
    ) -> Result<Ended, GuardError> {
        let fence = shell.fence.clone();
        let mut health_started = false;
        let mut service_exited = false;
        // A campaign's guard looks whether its leadership must end (campaign_verdict); other
        // guards never poll it (the branch's condition).
        let mut look = tokio::time::interval(CAMPAIGN_LOOK);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ending = false;
        // Whether it has served (a healthy leader) in this leadership, and since when it leads.
        let (mut served, led_at) = (false, boottime());
        loop {
            if !health_started && fence.view().state.phase().is_leading() {
                health_started = true;
                self.start_leading_helpers(&mut shell, etcd);
            }
            let service = self.service.as_mut();
            tokio::select! {
                Some(order) = orders.recv() => {
                    if let Some(exit) = self.perform(&mut shell, order).await {
                        shell.helpers.stop();
                        shell.lease_helpers.stop();
                        fence.stop();
                        return self.finish(exit, &mut shell, stepdown).await;
                    }
                }
                Some(request) = stepdown.recv() => {
                    self.asked = true;
                    shell.waiting.push(request.reply);
                    fence.handle(answers::step_down(boottime(), request.budget));
                }
                _ = signals.recv() => {
                    self.asked = true;
                    fence.handle(answers::step_down(boottime(), None));
                }
                _ = look.tick(), if self.args.campaign.is_some() && !ending => {
                    // The status's VIP lookups (netlink) off the runtime thread, which the
                    // keepalives share.
                    let shared = self.shared.clone();
                    let Ok(st) = tokio::task::spawn_blocking(move || shared.snapshot()).await else {
                        continue;
                    };
                    if let Some(why) = self.campaign_verdict(&fence, &st, &mut served, led_at) {
                        ending = true;
                        log::warn!("campaign {}: {why}: stepping down", self.args.resource);
                        fence.handle(answers::step_down(boottime(), None));
                    }
                }
                Some(running) = heard.started.recv() => self.service_started(running),
                Some((grant, token)) = heard.retaken.recv() => self.retaken(&mut shell, grant, token),
                detail = async { match service { Some(s) => s.wait_exit().await, None => std::future::pending().await } }, if !service_exited => {
                    service_exited = true;
                    fence.handle(answers::service_exited(detail));
                }
            }
        }
    }

    /// The shell of a leadership whose machine runs behind `fence`, with the receiving ends
    /// of what its helpers send: renewals to make, services started, keys taken back.
    fn shell(
        &self,
        fence: Fence,
        a: &Acquired,
        ready: Vec<up::Ready>,
        record: Option<(String, i64)>,
    ) -> (Shell, mpsc::UnboundedReceiver<Duration>, Heard) {
        let (renew_tx, renew_rx) = mpsc::unbounded_channel();
        let (started_tx, started_rx) = mpsc::unbounded_channel();
        let (retaken_tx, retaken_rx) = mpsc::unbounded_channel();
        let shell = Shell {
            fence,
            etcd: a.etcd.clone(),
            token: a.token,
            wire: ready
                .iter()
                .map(|r| (r.target.link.clone(), r.vip.config.ip))
                .collect(),
            ready,
            run_dir: crate::runfiles::root(),
            renew_tx,
            started_tx,
            retaken_tx,
            record,
            lease_helpers: Helpers::default(),
            waiting: Vec::new(),
            helpers: Helpers::default(),
            reporter: self.args.pacemaker_resource.as_ref().map(|rsc| {
                super::push::Reporter::new(
                    rsc.clone(),
                    self.args.node.clone(),
                    self.args.resource.clone(),
                    self.shared.config.subscribe(),
                )
            }),
            left: None,
        };
        let heard = Heard {
            started: started_rx,
            retaken: retaken_rx,
        };
        (shell, renew_rx, heard)
    }

    /// Every VIP resolved and checked before the machine exists (route dumps and an ARP probe
    /// are no work for the fencing thread), with the configuration in force now (a reload may
    /// have changed the announcements): all at once, off the runtime thread — no renewal runs
    /// yet, and each may probe for a duplicate (run_arping) for 600 ms.
    async fn prepare_vips(&self) -> Result<Vec<up::Ready>, GuardError> {
        let vips: Vec<_> = self.shared.config.borrow().vips().cloned().collect();
        let preparing: Vec<_> = vips
            .into_iter()
            .map(|v| tokio::task::spawn_blocking(move || up::prepare(v)))
            .collect();
        let mut ready = Vec::new();
        let mut failed = None;
        for p in preparing {
            match p.await {
                Ok(Ok(r)) => ready.push(r),
                Ok(Err(e)) => failed = failed.or(Some(GuardError::Vip(e))),
                Err(e) => failed = failed.or(Some(GuardError::Fencing(e.to_string()))),
            }
        }
        failed.map_or(Ok(ready), Err)
    }

    /// The watchdog chosen before the key was taken, as the fencing thread opens it, and what
    /// the machine makes of it.
    fn watchdog_plan(&self) -> (Option<Dog>, WatchdogPlan) {
        match &self.watchdog {
            Choice::Use(paths) => (
                Some(Dog::new(
                    paths
                        .iter()
                        .map(|p| Box::new(DevPath(p.clone())) as Box<dyn Opener>)
                        .collect(),
                )),
                match self.args.config.watchdog.mode {
                    WatchdogMode::Required => WatchdogPlan::Required,
                    _ => WatchdogPlan::Auto,
                },
            ),
            _ => (None, WatchdogPlan::Off),
        }
    }

    /// A campaign's guard plays Pacemaker's part for itself: why its leadership must end now,
    /// by the promoted monitor's rule (GuardStatus::is_healthy_leader) once it has served, or
    /// promote's (serving within its budget, GuardArgs::campaign) until then; fenced in any
    /// case.
    fn campaign_verdict(
        &self,
        fence: &Fence,
        st: &GuardStatus,
        served: &mut bool,
        led_at: Duration,
    ) -> Option<String> {
        if let Some((_, cause)) = fence.view().state.fenced().cloned() {
            return Some(format!("fenced ({cause})"));
        }
        if st.is_healthy_leader() {
            *served = true;
            return None;
        }
        if *served {
            return Some(format!("no longer serving: {}", st.trouble()));
        }
        let within = self.args.campaign.unwrap_or_default();
        (boottime().saturating_sub(led_at) >= within).then(|| {
            format!(
                "not serving {} s after taking the key: {}",
                within.as_secs(),
                st.trouble()
            )
        })
    }

    /// The keepalives (one per send time the machine orders) and the watch on the key, for
    /// `lease`.
    fn start_lease_helpers(
        &self,
        shell: &mut Shell,
        lease: crate::lease::LeaseId,
        renew_rx: mpsc::UnboundedReceiver<Duration>,
    ) {
        shell.lease_helpers.stop();
        shell.lease_helpers.add(tokio::spawn(keepalive::renew(
            shell.etcd.clone(),
            lease,
            self.clock,
            shell.fence.clone(),
            renew_rx,
            self.metrics.clone(),
        )));
        shell
            .lease_helpers
            .add(tokio::spawn(keepalive::watch_ownership(
                shell.etcd.clone(),
                self.key.clone(),
                lease,
                shell.fence.clone(),
            )));
        if self.tells_clients() && !shell.wire.is_empty() {
            shell
                .lease_helpers
                .add(tokio::spawn(super::sessions::record(
                    shell.etcd.clone(),
                    self.key.clone(),
                    lease,
                    self.sessions_key(),
                    shell.wire.iter().map(|(_, ip)| *ip).collect(),
                    shell.fence.clone(),
                    self.shared.clone(),
                )));
        }
    }

    /// Whether the VIP's clients may be recorded and told: with a VIP (tickle and
    /// repoint_neighbors, reloadable, are read where they act).
    fn tells_clients(&self) -> bool {
        self.args.config.vip.is_some()
    }

    /// Where the sessions are recorded, beside the leader key.
    fn sessions_key(&self) -> String {
        super::sessions::key(&self.scope, &self.args.resource)
    }

    /// Order::Repoint: the clients the last master left told, VIP by VIP (each in a thread of
    /// its own) once the master serves (a cold standby's service started: a client reset
    /// before would reconnect into a closed port), every send only while the machine says the
    /// VIP is ours; the outcome logged and kept for the status and the metrics. Nothing waits
    /// for it.
    fn repoint(&self, shell: &mut Shell) {
        let Some(left) = shell.left.take() else {
            return;
        };
        let (fence, wire, shared) = (shell.fence.clone(), shell.wire.clone(), self.shared.clone());
        let clients = self.shared.config.borrow().clients;
        if !clients.tickle && !clients.repoint_neighbors {
            return;
        }
        let resource = self.args.resource.clone();
        let said = move |shared: &super::status::Shared, e: String| {
            shared.update(|s| {
                s.clients
                    .get_or_insert_with(Default::default)
                    .takeover_error = Some(e)
            });
        };
        tokio::spawn(async move {
            let left = match left.await {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => {
                    log::warn!("guard {resource}: the last master's clients are not told: {e}");
                    return said(&shared, e);
                }
                Err(e) => {
                    log::warn!("guard {resource}: reading the sessions: {e}");
                    return said(&shared, format!("reading the sessions: {e}"));
                }
            };
            let serving = fence.until(|f| f.view().state.phase().is_leading() || !f.may_repoint());
            let _ = tokio::time::timeout(SERVE_WAIT, serving).await;
            if !fence.may_repoint() {
                return said(&shared, "the raise did not finish: no client told".into());
            }
            let n = left.len();
            let told = tokio::task::spawn_blocking(move || {
                let keep = || fence.may_repoint();
                tell(&wire, &left, clients, &keep)
            })
            .await;
            let (owned, reports, errors) = match told {
                Ok(t) => t,
                Err(e) => {
                    log::error!("guard {resource}: telling the clients: {e}");
                    return said(&shared, format!("telling the clients: {e}"));
                }
            };
            let status = super::sessions::told(Some(n), owned, &reports);
            let mut problems = errors;
            if let Some(r) = &status.told {
                problems.extend(r.errors.iter().cloned());
                log::info!(
                    "guard {resource}: the last master left {n} sessions ({owned} owned here): \
                     {} of {} tickled answered (reset here), {} of {} neighbours answered{}{}{}",
                    r.answered,
                    r.tickled,
                    r.neighbours_answered,
                    r.neighbours,
                    r.last_neighbour_ms
                        .map(|ms| format!(", the last after {ms} ms"))
                        .unwrap_or_default(),
                    if r.failed_sends > 0 {
                        format!(", {} sends failed", r.failed_sends)
                    } else {
                        String::new()
                    },
                    if problems.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", problems.join("; "))
                    }
                );
            }
            shared.update(|s| {
                let c = s.clients.get_or_insert_with(Default::default);
                c.left = status.left;
                c.owned = status.owned;
                c.told = status.told;
                c.takeover_error = (!problems.is_empty()).then(|| problems.join("; "));
            });
        });
    }

    /// The key taken back after a hold, under a new lease: the keepalives and the watch move
    /// to it, the fencing token and state.json are written anew, then the machine is told.
    fn retaken(&mut self, shell: &mut Shell, grant: crate::lease::Grant, token: i64) {
        let (renew_tx, renew_rx) = mpsc::unbounded_channel();
        shell.renew_tx = renew_tx;
        self.start_lease_helpers(shell, grant.lease, renew_rx);
        shell.token = token;
        self.persisted.lease_id = Some(grant.lease.0);
        self.persisted.fencing_token = Some(token);
        self.persist();
        if let Err(e) = self.write_token(token) {
            log::warn!("guard {}: {e}", self.args.resource);
        }
        log::info!(
            "guard {}: leader key {} taken back after the hold, lease {}, fencing token {}",
            self.args.resource,
            self.key,
            grant.lease,
            token
        );
        self.shared.update(|s| {
            s.lease_id = Some(grant.lease.to_string());
            s.fencing_token = Some(token);
        });
        shell.fence.handle(answers::retaken(Ok(Regrant {
            sent: grant.sent,
            ttl: grant.ttl,
        })));
    }

    fn start_leading_helpers(&mut self, shell: &mut Shell, etcd: &Etcd) {
        for (link, ip) in shell.wire.clone() {
            shell
                .helpers
                .add(tokio::spawn(super::wire::watch(super::wire::WireWatch {
                    resource: self.args.resource.clone(),
                    link,
                    ip,
                    fence: shell.fence.clone(),
                    config: self.shared.config.subscribe(),
                })));
        }
        shell.helpers.add(tokio::spawn(health::watch(
            self.shared.config.subscribe(),
            shell.fence.clone(),
            self.metrics.clone(),
        )));
        // Also without https now: a reload may take the guard onto TLS (Etcd::reconnect), and
        // without it each look finds nothing to read.
        shell
            .helpers
            .add(tokio::spawn(super::certs::keep_etcd_tls_current(
                etcd.clone(),
                self.args.resource.clone(),
            )));
        shell.helpers.add(tokio::spawn(super::space::watch(
            etcd.clone(),
            self.shared.clone(),
            self.args.resource.clone(),
        )));
        if self.args.config.etcd.move_leader {
            shell
                .helpers
                .add(tokio::spawn(super::placement::keep_leader_elsewhere(
                    etcd.clone(),
                    self.args.resource.clone(),
                    self.args.node.clone(),
                    self.args.config.etcd.prefix.clone(),
                )));
        }
    }

    /// The started service, told to the machine already: kept to wait for its exit.
    fn service_started(&mut self, running: Running) {
        self.persisted.service = running.pid().map(ServiceRecord::of);
        self.service = Some(running);
        self.persist();
    }

    /// A warm standby's hook; None when cold or unset.
    fn hook(&self, which: WarmHook) -> Option<String> {
        self.args.config.standby.hook(which).map(String::from)
    }

    /// A warm standby's start: the running service is handed the role — promote_command with
    /// the fencing token, within PROMOTE_COMMAND_LIMIT, asked right before it runs (a raise
    /// abandoned meanwhile hands nothing over). Either way the machine then knows it as its
    /// service: a failed hand-over stops it, as a failed start does.
    fn hand_over(&mut self, shell: &mut Shell) {
        let Some(running) = self.warm.take() else {
            return;
        };
        let hook = self.hook(WarmHook::Promote);
        let run_as = self.args.config.health.run_as.clone();
        let env = service_env(&self.args, ServiceRole::Promoted(shell.token));
        let (fence, tx) = (shell.fence.clone(), shell.started_tx.clone());
        tokio::spawn(async move {
            let limit = crate::params::master::PROMOTE_COMMAND_LIMIT;
            let handed = match hook {
                _ if !fence.wants_service() => {
                    Err("not handed over: the raise was abandoned".to_string())
                }
                None => Ok(()),
                // Abandoned with the raise (a fence, a step-down): killed with its group at
                // once, never handing the role on past the deadline.
                Some(text) => tokio::select! {
                    r = run_hook(WarmHook::Promote, &text, &run_as, &env, limit) => r,
                    _ = fence.until(|f| !f.wants_service()) => {
                        Err("abandoned with the raise (killed)".to_string())
                    }
                },
            };
            let service = reference(&running);
            fence.handle(answers::started(match handed {
                Ok(()) => Ok(service),
                Err(why) => Err(format!("hand-over to the running service: {why}")),
            }));
            let _ = tx.send(running);
        });
    }

    /// The role taken back from a warm master's service by demote_command, within `within`
    /// (the machine stops the service when it fails or does not confirm).
    fn take_back(&self, shell: &Shell, within: Duration) {
        let hook = self.hook(WarmHook::Demote);
        let run_as = self.args.config.health.run_as.clone();
        let env = service_env(&self.args, ServiceRole::Standby);
        let fence = shell.fence.clone();
        tokio::spawn(async move {
            let r = match hook {
                // Killed with its group once the machine stops waiting for it (its budget
                // shortened by a fence, the service exited, the round over).
                Some(text) => tokio::select! {
                    r = run_hook(WarmHook::Demote, &text, &run_as, &env, within) => r,
                    // Given up once the machine no longer waits for the role back (a running
                    // service counts: the machine may still be between the two).
                    _ = fence.until(|f| !matches!(
                        f.view().service,
                        ServiceState::Running(_) | ServiceState::GivingBack(_)
                    )) => Err("no longer waited for (killed)".to_string()),
                },
                None => Err("not set".to_string()),
            };
            fence.handle(answers::taken_back(r));
        });
    }

    /// Performs one order; Some(how it ended) when the machine is done.
    async fn perform(&mut self, shell: &mut Shell, order: Order) -> Option<Exit> {
        let fence = shell.fence.clone();
        match order {
            Order::Keepalive { sent } => {
                let _ = shell.renew_tx.send(sent);
            }
            Order::Confirm => {
                tokio::spawn(keepalive::confirm(
                    shell.etcd.clone(),
                    self.key.clone(),
                    self.persisted_lease(),
                    self.clock.keepalive_interval(),
                    fence,
                ));
            }
            Order::Settle { dad_wait } => self.settle(shell, dad_wait),
            Order::Repoint => self.repoint(shell),
            Order::CancelAnnouncements => {
                for vip in self.args.config.vips() {
                    burst::cancel(&shell.run_dir, vip.ip);
                }
            }
            Order::WriteToken => {
                let r = self.write_token(shell.token);
                fence.handle(answers::token_written(r));
            }
            Order::StartService if self.warm.is_some() => self.hand_over(shell),
            Order::TakeBack { within } => self.take_back(shell, within),
            Order::StartService => self.start_service(shell),
            Order::CheckService(reference) => {
                tokio::spawn(async move {
                    let look = crate::service::process::presence(
                        &reference,
                        crate::service::process::UNIT_LOOK,
                    )
                    .await;
                    fence.handle(answers::service_checked(look));
                });
            }
            Order::Release => self.release(shell),
            Order::AskMembership {
                asked,
                fencing,
                online,
            } => ask_membership(fence, self.args.node.clone(), asked, fencing, online),
            Order::Retake => self.take_key_back(shell),
            Order::Persist => self.persist_machine(&fence),
            Order::Log(level, text) => {
                let r = &self.args.resource;
                match level {
                    Level::Error => log::error!("guard {r}: {text}"),
                    Level::Warn => log::warn!("guard {r}: {text}"),
                    Level::Info => log::info!("guard {r}: {text}"),
                }
            }
            Order::StepDownAnswer(r) => self.answer_step_down(shell, r),
            Order::Push { why, regardless } => {
                if let Some(r) = &shell.reporter {
                    match regardless {
                        true => r.report_regardless(&why),
                        false => r.report(&why),
                    }
                }
            }
            Order::Defend { address } => self.defend(shell, &address),
            // Told with the order: the view published after it may lag.
            Order::Exit {
                raise_failed,
                given_back,
            } => {
                return Some(Exit {
                    raise_failed,
                    given_back,
                })
            }
        }
        None
    }

    /// Order::StepDownAnswer: every step-down request waiting is answered, with the status
    /// (and what is still up, when it is not complete).
    fn answer_step_down(&self, shell: &mut Shell, r: Result<(), String>) {
        let mut st = self.shared.snapshot();
        if let Err(why) = &r {
            st.problem = Some(why.clone());
        }
        for w in shell.waiting.drain(..) {
            let _ = w.send((r.is_ok(), st.clone()));
        }
    }

    /// Order::Settle: each VIP settled (link, DAD, announcements), one after the other, in the
    /// order configured: the first failure is the raise's (the machine removes them all).
    fn settle(&mut self, shell: &mut Shell, dad_wait: Duration) {
        let fence = shell.fence.clone();
        let mut ready = std::mem::take(&mut shell.ready);
        let run_dir = shell.run_dir.clone();
        let resource = self.args.resource.clone();
        tokio::task::spawn_blocking(move || {
            let keep = || fence.may_announce();
            let r = ready.iter_mut().try_for_each(|ready| {
                up::settle(ready, dad_wait, &run_dir, &keep)?;
                log::info!(
                    "guard {resource}: VIP {} up on {}",
                    ready.vip.config.ip,
                    ready.target.link.name
                );
                Ok::<(), crate::vip::VipError>(())
            });
            fence.handle(answers::settled(&r));
        });
    }

    /// Order::StartService (cold): the service started with the role.
    fn start_service(&self, shell: &Shell) {
        let fence = shell.fence.clone();
        let spec = self.args.config.service.clone();
        let env = service_env(&self.args, ServiceRole::Promoted(shell.token));
        let resource = self.args.resource.clone();
        let tx = shell.started_tx.clone();
        tokio::spawn(async move {
            // An order that waited in the queue may be stale: the start asks right before the
            // fork, and the machine hears the pid right after it.
            let wanted = {
                let fence = fence.clone();
                move || fence.wants_service()
            };
            match spec.start(&env, &resource, &wanted).await {
                Ok(running) => {
                    fence.handle(answers::started(Ok(reference(&running))));
                    let _ = tx.send(running);
                }
                Err(e) => fence.handle(answers::started(Err(e.to_string()))),
            }
        });
    }

    /// Order::Release: the key deleted while it carries our lease, the lease revoked.
    fn release(&self, shell: &Shell) {
        let fence = shell.fence.clone();
        let (etcd, key, lease) = (shell.etcd.clone(), self.key.clone(), self.persisted_lease());
        let record = shell.record.clone();
        let limit = self.clock.release_timeout();
        tokio::spawn(async move {
            let record = record.as_ref().map(|(k, r)| (k.as_str(), *r));
            let r = tokio::time::timeout(limit, etcd.release(&key, lease, record)).await;
            fence.handle(answers::released(r.ok(), limit));
        });
    }

    /// Order::Retake: the key taken back under a new lease after a hold.
    fn take_key_back(&self, shell: &Shell) {
        let fence = shell.fence.clone();
        let Some((record_key, revision)) = shell.record.clone() else {
            return fence.handle(answers::retaken(Err(RetakeError::RecordChanged)));
        };
        let (etcd, key, node) = (shell.etcd.clone(), self.key.clone(), self.args.node.clone());
        let legacy = self.legacy_key();
        let (ttl, tx) = (self.clock.ttl, shell.retaken_tx.clone());
        tokio::spawn(async move {
            let keys = (key.as_str(), legacy.as_str());
            let r = retake(&etcd, keys, &node, ttl, &record_key, revision).await;
            match r {
                Ok(won) => {
                    let _ = tx.send(won);
                }
                Err(e) => fence.handle(answers::retaken(Err(e))),
            }
        });
    }

    /// Order::Defend: one announcement for each address of ours claimed on the wire.
    fn defend(&self, shell: &Shell, address: &str) {
        let claimed = shell
            .wire
            .iter()
            .filter(|(_, ip)| ip.to_string() == address);
        for (link, ip) in claimed.cloned().collect::<Vec<_>>() {
            // The arp_mode in force (a reload may have changed it).
            let mode = self
                .shared
                .config
                .borrow()
                .vips()
                .find(|v| v.ip == ip)
                .map(|v| v.arp_mode);
            let rsc = self.args.resource.clone();
            super::wire::defend(link, ip, mode, shell.fence.clone(), rsc);
        }
    }

    /// The machine is done: answer whoever still waits, and end (a failed raise lingers a
    /// little so that promote can read why).
    async fn finish(
        &mut self,
        Exit {
            raise_failed,
            given_back,
        }: Exit,
        shell: &mut Shell,
        stepdown: &mut mpsc::Receiver<StepDown>,
    ) -> Result<Ended, GuardError> {
        self.persist_machine(&shell.fence);
        let st = self.shared.snapshot();
        for w in shell.waiting.drain(..) {
            let _ = w.send((true, st.clone()));
        }
        // Requests that came in while the machine finished: it is done, they are answered.
        while let Ok(request) = stepdown.try_recv() {
            self.asked = true;
            let _ = request.reply.send((!raise_failed, st.clone()));
        }
        // Its role given back (demote_command), the service serves on as a standby.
        match self.service.take() {
            Some(running) if given_back => self.warm = Some(running),
            _ => {}
        }
        if raise_failed {
            let why = shell
                .fence
                .view()
                .state
                .failure()
                .map_or_else(|| "the raise failed".into(), |f| f.to_string());
            return self.give_up(GuardError::Raise(why), stepdown).await;
        }
        Ok(if self.asked {
            Ended::Asked
        } else {
            Ended::Lost
        })
    }

    fn persisted_lease(&self) -> crate::lease::LeaseId {
        crate::lease::LeaseId(self.persisted.lease_id.unwrap_or_default())
    }

    /// state.json, from the machine: what is up, and what to clean up after a dead guard.
    fn persist_machine(&mut self, fence: &Fence) {
        let m = fence.view();
        let vip_up = matches!(
            m.vip,
            super::machine::VipState::Up | super::machine::VipState::MaybeUp
        );
        let fenced = m.state.fenced().map(|(_, c)| c.to_string());
        // Confirmed stopped, or its role given back (the resident's standby from then on).
        let service_gone = matches!(m.service, ServiceState::Stopped | ServiceState::GivenBack);
        self.persisted.vip_added = vip_up;
        self.persisted.fenced = fenced;
        if service_gone {
            // Confirmed stopped: nothing of it may ever be signalled again.
            self.persisted.service = None;
            self.persisted.unit = None;
        }
        self.persist();
    }

    fn record_leadership(&mut self, a: &Acquired) {
        let lease = a.grant.lease;
        self.persisted.lease_id = Some(lease.0);
        self.persisted.record_revision = a.record.as_ref().map(|r| r.0);
        self.persisted.fencing_token = Some(a.token);
        // Before its start is asked: a unit may run from then on, whatever the guard's fate;
        // a warm standby's command may have the role from its hand-over's ask on.
        self.persisted.unit = match &self.args.config.service {
            ServiceSpec::Systemd { unit } => Some(unit.clone()),
            ServiceSpec::Command { .. } => None,
        };
        if let Some(pid) = self.warm.as_ref().and_then(Running::pid) {
            self.persisted.service = Some(ServiceRecord::of(pid));
        }
        self.persist();
        log::info!(
            "guard {}: leader key {} taken, lease {}, fencing token {}",
            self.args.resource,
            self.key,
            lease,
            a.token
        );
        self.shared.update(|s| {
            s.holder = Some(self.args.node.clone());
            s.lease_id = Some(lease.to_string());
            s.fencing_token = Some(a.token);
            s.leader_since_unix_ms = Some(super::unix_ms());
            s.problem = None;
        });
    }

    fn write_token(&self, token: i64) -> Result<(), Fault> {
        let env_text = format!(
            "HAMASTER_FENCING_TOKEN={token}\nHAMASTER_RESOURCE={}\n",
            self.args.resource
        );
        write_private(&self.dir.fencing_token(), format!("{token}\n"))
            .and_then(|_| write_private(&self.dir.service_env(), env_text))
            .map_err(|e| Fault::Token(format!("cannot write the fencing token: {e}")))
    }
}

/// Says so when a member runs an etcd with issue 15247 (docs/safety.md names the releases).
async fn warn_of_old_etcd(etcd: Etcd, resource: String) {
    for (endpoint, version) in etcd.versions().await {
        if crate::lease::etcd::has_lease_revoke_fix(&version) == Some(false) {
            log::warn!(
                "guard {resource}: etcd member {endpoint} runs etcd {version}, which has etcd \
                 issue 15247 (a stuck old leader can revoke leases early): run 3.4.30+ or \
                 3.5.13+ (docs/safety.md)"
            );
        }
    }
}

/// Takes the key back after a hold: a new lease, and the key under it only while it is absent
/// and the failsafe record is still ours (one transaction); the new lease goes again when the
/// key could not be had.
async fn retake(
    etcd: &Etcd,
    (key, legacy): (&str, &str),
    node: &str,
    ttl: Duration,
    record_key: &str,
    revision: i64,
) -> Result<(crate::lease::Grant, i64), RetakeError> {
    use crate::lease::Retake;
    let grant = etcd
        .grant(ttl)
        .await
        .map_err(|e| RetakeError::Failed(e.to_string()))?;
    let outcome = etcd
        .retake(key, legacy, node, grant.lease, record_key, revision)
        .await;
    let refused = match outcome {
        Ok(Retake::Won { token }) => return Ok((grant, token)),
        Ok(Retake::Taken(other)) => RetakeError::Taken(Some(other.0)),
        Ok(Retake::RecordChanged) => RetakeError::RecordChanged,
        Err(e) => RetakeError::Failed(e.to_string()),
    };
    let _ = etcd.revoke(grant.lease).await;
    Err(refused)
}

/// Resolves once the machine no longer wants its service started (it began lowering).
/// Runs a warm service's hook as the service's user (`run_as`), killed with its group after
/// `limit`. Ok: exit status 0.
async fn run_hook(
    which: WarmHook,
    text: &str,
    run_as: &crate::service::RunAs,
    env: &[(String, String)],
    limit: Duration,
) -> Result<(), String> {
    let name = which.name();
    let ids = run_as.check_installed(name).map_err(|e| e.to_string())?;
    let hook = crate::service::hook::Hook {
        name,
        text,
        ids: &ids,
        workdir: &run_as.workdir,
    };
    let within = match limit.subsec_millis() {
        0 => format!("within {} s", limit.as_secs()),
        _ => format!("within {:.1} s", limit.as_secs_f64()),
    };
    hook.run(env, limit, &within).await
}

/// The clients of `left` told for each VIP of `wire` (vip::tickle), in parallel, all but the
/// connections this node owns itself and those from its own addresses: how many it owned,
/// each VIP's report, and what could not be looked at (this node's connections, addresses or
/// routes: told without them).
fn tell(
    wire: &[(crate::vip::netlink::Link, std::net::IpAddr)],
    left: &[crate::vip::tickle::Conn],
    clients: crate::resource::config::ClientsConfig,
    keep: &(dyn Fn() -> bool + Sync),
) -> (usize, Vec<crate::vip::tickle::Report>, Vec<String>) {
    let mut errors = Vec::new();
    let mut owned = std::collections::BTreeSet::new();
    for (_, ip) in wire {
        match crate::vip::sessions::established(*ip) {
            Ok(found) => owned.extend(found.into_iter().map(|s| crate::vip::tickle::Conn {
                local: s.local,
                peer: s.peer,
            })),
            Err(e) => errors.push(format!("this node's connections on {ip}: {e}")),
        }
    }
    let owned_left = left.iter().filter(|c| owned.contains(c)).count();
    let local: std::collections::BTreeSet<_> =
        super::placement::local_addresses().into_iter().collect();
    let mut routes = [Vec::new(), Vec::new()];
    match crate::vip::netlink::Rtnl::open() {
        Ok(mut rtnl) => {
            for v6 in [false, true] {
                if !wire.iter().any(|(_, ip)| ip.is_ipv6() == v6) {
                    continue;
                }
                match rtnl.routes(v6) {
                    Ok(r) => routes[usize::from(v6)] = r,
                    Err(e) => errors.push(format!("the routes: {e}")),
                }
            }
        }
        Err(e) => errors.push(format!("netlink: {e}")),
    }
    let plans: Vec<_> = wire
        .iter()
        .map(|(link, ip)| {
            super::sessions::plan(
                *ip,
                (link.index, link.mac),
                left,
                &owned,
                &local,
                &routes[usize::from(ip.is_ipv6())],
                clients.tickle,
                clients.repoint_neighbors,
            )
        })
        .filter(|p| !p.conns.is_empty() || !p.neighbours.is_empty())
        .collect();
    let reports = std::thread::scope(|scope| {
        let runs: Vec<_> = plans
            .iter()
            .map(|p| scope.spawn(move || crate::vip::tickle::run(p, keep)))
            .collect();
        runs.into_iter().filter_map(|r| r.join().ok()).collect()
    });
    (owned_left, reports, errors)
}

/// Order::AskMembership: corosync's membership and Pacemaker's view of this node, side by
/// side, each within the ask's bound (what is not asked, or does not answer, is None), with
/// the RTC read first, as near the ask's time as can be.
fn ask_membership(fence: Fence, node: String, asked: Duration, fencing: bool, online: bool) {
    use crate::failsafe::{pacemaker, ASK_LIMIT};
    tokio::spawn(async move {
        let rtc = crate::failsafe::rtc_seconds();
        let ask_pacemaker = tokio::task::spawn_blocking(move || {
            pacemaker::own_view(&node, fencing, online, ASK_LIMIT)
        });
        let (seen, pacemaker) =
            tokio::join!(crate::failsafe::witness::ask(ASK_LIMIT), ask_pacemaker);
        fence.handle(answers::membership(asked, rtc, seen, pacemaker.ok()));
    });
}

/// The role a service and its hooks are told they have.
#[derive(Debug, Clone, Copy)]
pub(super) enum ServiceRole {
    /// With the leadership's fencing token.
    Promoted(i64),
    Standby,
}

/// What the service and its hooks are told: the role, the fencing token while it has the
/// role, the resource and the node. The one builder: a round's start and hooks, and the
/// resident's standby start.
pub(super) fn service_env(args: &GuardArgs, role: ServiceRole) -> Vec<(String, String)> {
    let (role, token) = match role {
        ServiceRole::Promoted(token) => ("promoted", Some(token)),
        ServiceRole::Standby => ("standby", None),
    };
    let mut env = vec![
        ("HAMASTER_ROLE".to_string(), role.to_string()),
        ("HAMASTER_RESOURCE".to_string(), args.resource.clone()),
        ("HAMASTER_NODE".to_string(), args.node.clone()),
    ];
    if let Some(token) = token {
        env.push(("HAMASTER_FENCING_TOKEN".to_string(), token.to_string()));
    }
    env
}

/// How the machine ended (its last order, Order::Exit).
struct Exit {
    raise_failed: bool,
    /// The service gave the role back (demote_command): it serves on as a standby.
    given_back: bool,
}

/// How the machine addresses a started service.
pub(super) fn reference(running: &Running) -> ServiceRef {
    match running {
        Running::Command { pid, .. } => ServiceRef::Group(*pid),
        Running::Systemd { unit } => ServiceRef::Unit(unit.clone()),
    }
}
