//! The guard's whole protocol from the moment it holds the leader key, as one plain value
//! without I/O, in the style of quinn-proto: the time and every outside event go in
//! (`Machine::handle`), kernel effects are made through the small `Kernel` trait by the
//! fencing thread that owns the machine, every other effect comes out as an `Order` for the
//! tokio shell to perform and answer, and `next_wake` says when the machine must be called
//! again. The fencing thread (guard::fence) is the machine's only clock: it calls
//! `handle(Tick)` at every wake-up, so the deadline never waits for the shell. The simulation
//! (guard::sim) drives this same value, with faults on every input and on every effect.
//!
//! The rules it enforces, in every phase (docs/safety.md):
//! - the deadline is `send time of the last renewal applied in time + granted TTL − margin`
//!   (never later than the lease's earliest end at the stated slew allows), or a fresh
//!   proof's while holding through an etcd outage (hold.rs); the lease's part only moves
//!   forward, a proof's goes with a later "no", and neither once it has passed;
//! - ownership lost (the deadline, a watch or confirm saying the key is gone or carries
//!   another lease, etcd saying the lease is gone) fences at once, raising included (while
//!   holding, a deletion waits for the next renewal to say whether our lease lives, and a
//!   lease etcd let go is taken back: hold.rs): the raise
//!   is abandoned, the VIP goes first, then the service (TERM, KILL half a margin after the
//!   deadline or the loss, but before the lease's earliest end and an armed watchdog's
//!   reset); once everything is down and the release has begun, the key's deletion (the
//!   guard's own) or another holder's key is the release's end, not a fence;
//! - with a hardware watchdog: armed before anything is raised, pinged only for a renewal
//!   applied in time, a fresh proof while holding, or the key taken back (and once more,
//!   derived from the renewal, before the deadline), its reset always
//!   before the lease can end at etcd, fenced before the reset, disarmed only once VIP and
//!   service are confirmed down;
//! - nothing is raised once ownership is lost, the deadline has passed or a step-down began;
//!   every effect is timed by the clock read right before it;
//! - the key is released and the lease revoked only once the VIP is confirmed absent and the
//!   service confirmed stopped (a look that cannot tell is never taken for stopped); until
//!   then the guard renews (an orderly step-down) or lets the lease run out (fenced) — it never
//!   shortens the lease while anything may still serve;
//! - a step-down answers by its budget: done, or what is still up;
//! - a service confirmed stopped is forgotten: no signal ever goes to its pid again.
//!
//! Read it in this order: `types` (what goes in and out), `state` (each phase with its own
//! data, and the phases' transitions), `timers` (the one table of wake-ups), this file (the
//! machine, `handle` and `advance`: the timers' one dispatch, `on_timer`, then what follows
//! from the state, `follow_state`, in one order), `lease` (the deadline arithmetic), `raise`,
//! `vip` (the VIP's kernel lifetime), `lower` (fencing, the step-down, the release),
//! `watchdog`, `hold` (holding through an etcd outage on corosync's proofs, and taking the key
//! back after it), `observe` (what the guard saw of its service and its VIP, and what follows:
//! Pacemaker told, the VIP defended), `view` (what the rest of the guard sees); the mutation
//! tests reach the machine through `mutant` alone (empty in production; the rules it switches
//! off are named in `crate::rules`, which the takeover rule reads too).

mod hold;
mod lease;
mod lower;
mod mutant;
mod observe;
mod raise;
mod state;
mod timers;
mod types;
mod view;
mod vip;
mod watchdog;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::VecDeque;
use std::time::Duration;

pub use crate::rules::{Rule, Rules};
pub use hold::{HoldPlan, HoldView};
pub use lease::Leadership;
pub use mutant::Mutant;
pub use observe::{Claim, Conflict, Gone, HealthReport, Loss, Observed};
pub use state::{
    diagram, Look, Lowering, Phase, RaiseFailure, RaiseStep, Release, ServiceState, State,
    StepDown, VipState,
};
pub use timers::{Timer, Timers};
pub use types::{ArmError, Cause, Fault, Input, Kernel, Level, Order, Regrant, RetakeError};
pub use view::View;
pub use watchdog::{Watchdog, WatchdogPlan, WatchdogState, WATCHDOG_LEAD, WATCHDOG_TOLERANCE};

use crate::lease::LeaseClock;
use crate::service::ServiceRef;

pub use crate::service::stop::{CHECK_EVERY, RELEASE_RESERVE};

/// Passes of the timers' arms and the state's rules at one wake-up, at most (each arm runs
/// once per pass; a pass arms a timer for now only by a chain of effects that ends).
const PASSES: usize = 4;

/// The budget of a step-down nobody timed (a signal, a raise that failed).
pub const DEFAULT_STEP_DOWN: Duration = Duration::from_secs(30);

/// Retry of a VIP removal that failed (by the fencing thread: soon, it is the deadline's work).
pub const VIP_RETRY: Duration = Duration::from_millis(20);
/// Retry of a keepalive that failed (racing for a member that answers).
const RENEW_RETRY: Duration = Duration::from_millis(20);
/// Keepalives that failed in a row before the retry slows to hold::RETRY_HOLDING.
const RACE_ATTEMPTS: u32 = 3;
/// A keepalive's failure is logged at most this often.
const RENEW_LOG_EVERY: Duration = Duration::from_secs(5);
/// Retry of a release that failed.
const RELEASE_RETRY: Duration = Duration::from_secs(1);

/// What the machine is set up with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub clock: LeaseClock,
    pub vip: bool,
    /// The service, when it is known before its start: a systemd unit, or a warm standby's
    /// service (running before the leadership: its start is the hand-over of the role).
    /// Fencing can then stop it while its start is out.
    pub known: Option<ServiceRef>,
    pub watchdog: WatchdogPlan,
    /// A failsafe record was written with the key (etcd_outage=hold or auto, corosync
    /// answering): the guard may hold through an etcd outage, on proofs of what (hold.rs).
    pub hold: Option<HoldPlan>,
    /// The role can be taken back from the running service by its hook (a warm standby's
    /// demote_command): tried first, the service stopped only when it does not confirm.
    pub take_back: bool,
    /// A campaign's guard: no Pacemaker to tell, so what would be pushed to it (a failed
    /// service, a lost or claimed VIP) ends the leadership instead.
    pub campaign: bool,
}

pub struct Machine<K> {
    plan: Plan,
    leadership: Leadership,
    pub kernel: K,
    /// The phase, with what only it has.
    state: State,
    vip: Vip,
    service: Service,
    renewal: Renewal,
    dog: Watchdog,
    timers: Timers,
    orders: VecDeque<Order>,
    /// What the guard observed of the service and the VIP (observe.rs).
    observed: Observed,
    /// Holding through an etcd outage (hold.rs).
    hold: hold::Hold,
    /// Every rule holds, but in the mutation tests (mutant.rs).
    pub mutant: Mutant,
}

/// The VIP as the machine holds it (vip.rs).
#[derive(Debug)]
struct Vip {
    state: VipState,
    /// The kernel keeps the VIP at least until then (`vip::floor`): it may be replaced in
    /// place (its lifetime extended) only before.
    floor: Duration,
    /// Failed removals in a row (the retry backs off to a second).
    failures: u32,
}

/// The service as the machine knows it (raise.rs starts it, lower.rs stops it and looks).
#[derive(Debug)]
struct Service {
    state: ServiceState,
    look: Look,
    /// What the service's leader said when it exited.
    exit_detail: Option<String>,
    /// The last "cannot tell" a look at the service said (logged once, not at every look).
    doubt: Option<String>,
}

/// The keepalives.
#[derive(Debug)]
struct Renewal {
    /// The keepalive out (its send time); the next one's time is Timer::Renewal's.
    out: Option<Duration>,
    /// The send time of the last renewal applied.
    last_sent: Duration,
    /// When a keepalive's failure was last logged.
    last_log: Option<Duration>,
}

impl<K: Kernel> Machine<K> {
    /// The machine of a leadership whose grant was sent at `sent` and answered with `ttl`.
    pub fn new(plan: Plan, sent: Duration, ttl: Duration, kernel: K) -> Machine<K> {
        let lead = Leadership::new(plan.clock, sent, ttl);
        let first = if plan.watchdog != WatchdogPlan::Off {
            RaiseStep::ArmWatchdog
        } else if plan.vip {
            RaiseStep::AddVip
        } else {
            RaiseStep::WriteToken
        };
        let mut m = Machine {
            dog: Watchdog::new(plan.watchdog),
            renewal: Renewal {
                out: None,
                last_sent: sent,
                last_log: None,
            },
            hold: hold::Hold::new(plan.hold.clone(), sent),
            plan,
            leadership: lead,
            kernel,
            state: State::Raising(first),
            vip: Vip {
                state: VipState::NotRaised,
                floor: Duration::ZERO,
                failures: 0,
            },
            service: Service {
                state: ServiceState::NotStarted,
                look: Look::Idle,
                exit_detail: None,
                doubt: None,
            },
            timers: Timers::default(),
            orders: VecDeque::new(),
            mutant: Mutant::default(),
            observed: Observed::default(),
        };
        // Counted from when the grant was sent: the time the raise takes is no reason to
        // renew late.
        let first_renewal = sent + m.plan.clock.keepalive_interval();
        m.plan_renewal(first_renewal);
        m
    }

    pub fn phase(&self) -> Phase {
        self.state.phase()
    }
    pub fn deadline(&self) -> Duration {
        self.leadership.deadline()
    }
    pub fn fenced(&self) -> Option<&(Duration, Cause)> {
        self.state.fenced()
    }
    pub fn failure(&self) -> Option<&RaiseFailure> {
        self.state.failure()
    }
    pub fn vip(&self) -> VipState {
        self.vip.state
    }
    pub fn watchdog(&self) -> &WatchdogState {
        self.dog.state()
    }
    /// watchdog=auto and its reset may come after the lease's end (a driver that takes no
    /// shorter timeout; logged).
    pub fn watchdog_late(&self) -> bool {
        self.dog.late()
    }
    pub fn service(&self) -> &ServiceState {
        &self.service.state
    }

    /// What is wrong, in words, for the status: a failed raise first (promote reports why it
    /// failed), then a fence.
    pub fn problem(&self) -> Option<String> {
        match &self.state {
            State::Raising(_) => Some("raising VIP and service".to_string()),
            State::Up { .. } => None,
            State::Lowering(l) | State::Done(l) => match (&l.failure, &l.fenced) {
                (Some(why), Some((_, cause))) => Some(format!("{why}; then fenced: {cause}")),
                (Some(why), None) => Some(why.to_string()),
                (None, Some((_, cause))) => Some(format!("fenced: {cause}")),
                (None, None) => None,
            },
        }
    }

    /// When the guard fences itself: its deadline, or earlier, by WATCHDOG_LEAD, than the
    /// watchdog would reset the node (its timeout is whole seconds: the reset may come before
    /// the deadline).
    pub fn fence_at(&self) -> Duration {
        match self.dog.state().fires_at() {
            Some(f) => self
                .leadership
                .deadline()
                .min(f.saturating_sub(WATCHDOG_LEAD)),
            None => self.leadership.deadline(),
        }
    }

    /// The next order for the shell, oldest first.
    pub fn poll_order(&mut self) -> Option<Order> {
        self.orders.pop_front()
    }

    /// What the rest of the guard may see of the machine: a copy, published by the fencing
    /// thread after each step (status, state.json, metrics and the shell's questions read it,
    /// never the machine itself).
    pub fn view(&self) -> View {
        View {
            state: self.state.clone(),
            vip: self.vip.state,
            service: self.service.state.clone(),
            exit_detail: self.service.exit_detail.clone(),
            problem: self.problem(),
            deadline: self.leadership.deadline(),
            fence_at: self.fence_at(),
            last_renewal_sent: self.renewal.last_sent,
            watchdog: self.dog.state().clone(),
            watchdog_late: self.dog.late(),
            vip_floor: self.vip.floor,
            observed: self.observed.clone(),
            hold: self.hold.view(self.holding_since()),
        }
    }

    /// When the machine must be called again (with `Tick`), on the boot clock: the earliest
    /// armed timer, or the fence.
    pub fn next_wake(&self) -> Option<Duration> {
        self.timers.next().into_iter().chain(self.fence_due()).min()
    }

    /// When the guard fences itself (`fence_at`), while it still may: not fenced yet, not
    /// done. The one reading of it for the wake-up and for `check_deadline`.
    fn fence_due(&self) -> Option<Duration> {
        let pending = match &self.state {
            State::Raising(_) | State::Up { .. } => true,
            State::Lowering(l) => l.fenced.is_none(),
            State::Done(_) => false,
        };
        (pending && self.holds(Rule::Deadline)).then(|| self.fence_at())
    }

    /// One input at `now` (boot clock); the kernel effects it calls for are made before it
    /// returns, the other effects are queued as orders.
    pub fn handle(&mut self, now: Duration, input: Input) {
        if let State::Done(_) = self.state {
            return;
        }
        self.mutant.input_at(now);
        // Deadline first: nothing in an input is worth more than the fence.
        self.check_deadline(now);
        match input {
            Input::Tick if !self.holds(Rule::PingOnRenewal) => self.ping_watchdog(),
            Input::Tick => {}
            Input::Renewed { sent, ttl } => self.renewed(now, sent, ttl),
            Input::RenewFailed { sent, why } => self.renew_failed(now, sent, why),
            Input::LeaseGone { sent } => {
                if self.renewal.out == Some(sent) {
                    self.renewal.out = None;
                    self.plan_renewal(now + hold::RETRY_HOLDING);
                }
                self.lease_gone(now);
            }
            Input::KeyLost(None) => self.key_deleted(now),
            Input::KeyLost(Some(other)) => self.lost(now, Cause::KeyTaken(other)),
            Input::VipGone { how, detail } => self.vip_gone(now, how, detail),
            Input::VipClaimed(claim) => self.vip_claimed(now, claim),
            Input::Health(report) => self.health_checked(now, report),
            Input::Settled(r) => self.settled(now, r),
            Input::TokenWritten(r) => self.token_written(now, r),
            Input::ServiceStarted(r) => self.service_started(now, r),
            Input::ServiceExited(detail) => {
                if self.phase().is_leading() {
                    self.log(Level::Error, format!("service {detail}"));
                }
                // Its leader gone, nothing can confirm the role given back: what is left of
                // its group is stopped (only while a take-back is out; otherwise nothing).
                self.take_back_failed(
                    now,
                    format!("the service {detail} while giving the role back"),
                );
                // Known exited before anything follows from it (a campaign's step-down stops
                // what is left; it never asks an exited service to give the role back).
                self.service.exit_detail = Some(detail.clone());
                self.push_exit(now, &detail);
                // Its group may live on: look, and forget its pid once the group is empty
                // (while its leader is unreaped, the group's id is ours).
                self.look_at(now);
            }
            Input::TakenBack(r) => self.taken_back(now, r),
            Input::ServiceChecked(r) => self.service_checked(now, r),
            Input::Released(r) => self.released_answer(now, r),
            Input::StepDown { by } => self.step_down(now, by),
            Input::Membership {
                asked,
                seen,
                pacemaker,
            } => self.membership(now, asked, seen, pacemaker),
            Input::Retaken(r) => self.retaken(now, r),
        }
        self.advance(now);
    }

    /// A keepalive failed: retried soon (racing for a member that answers), or, after a few
    /// failures in a row or while holding, once in a while (etcd is out: no storm).
    fn renew_failed(&mut self, now: Duration, sent: Duration, why: String) {
        if self.renewal.out == Some(sent) {
            self.renewal.out = None;
            let in_row = self.renewal_failed();
            // Racing for a member that answers; after a few failures in a row, or
            // while holding, etcd is out: no storm of attempts.
            let retry = match (self.phase(), in_row) {
                (Phase::Holding, _) => hold::RETRY_HOLDING,
                (_, n) if n > RACE_ATTEMPTS => hold::RETRY_HOLDING,
                _ => RENEW_RETRY,
            };
            self.plan_renewal(now + retry);
            // Said once, then once in a while: an outage is not a log flood.
            if self
                .renewal
                .last_log
                .is_none_or(|t| now >= t + RENEW_LOG_EVERY)
            {
                self.renewal.last_log = Some(now);
                self.log(
                    Level::Warn,
                    format!("keepalive: {why} ({in_row} failed in a row)"),
                );
            }
        }
    }

    /// Everything the rules call for at `now`, after the input: each timer due, by its arm,
    /// then what follows from the state. An arm or a rule may arm a timer for now (a KILL due
    /// at once): a few passes, as long as one is due.
    fn advance(&mut self, now: Duration) {
        self.apply_queued_loss(now);
        for _ in 0..PASSES {
            for timer in timers::ALL {
                if self.timers.take(timer, now) {
                    self.on_timer(now, timer);
                }
            }
            self.follow_state(now);
            if self.timers.next().is_none_or(|t| t > now) {
                break;
            }
        }
    }

    /// The one dispatch of timers: each timer's arm, taken when it is due.
    fn on_timer(&mut self, now: Duration, timer: Timer) {
        match timer {
            // A removal that failed is tried again in every phase (a VIP whose lifetime could
            // not be extended is removed while leading).
            Timer::VipRetry => self.lower_vip(now),
            Timer::TakeBack => {
                self.take_back_failed(now, "demote_command did not confirm in its budget".into())
            }
            Timer::Kill => self.kill(now),
            Timer::Look => self.look(),
            Timer::SecondPing => self.second_ping(now),
            Timer::Ask => self.ask(now),
            Timer::Retake => self.retake(),
            Timer::Renewal => self.renew(now),
            Timer::ReleaseRetry => self.release_now(now),
            Timer::Budget => self.budget_spent(),
        }
    }

    /// What follows from the state, whatever woke the machine, in this order. `handle` has
    /// looked at the deadline first: a deadline no proof covers has fenced already, so the
    /// hold's move into Holding (hold_step) sees only a covered one.
    fn follow_state(&mut self, now: Duration) {
        if self.phase().is_down() {
            self.lower(now);
        }
        if self.phase().is_raising() {
            self.raise_step();
        }
        self.hold_step(now);
        if self.phase().is_down() {
            self.disarm_step(now);
            self.release_step(now);
            self.answer_step();
        }
    }

    /// Timer::Renewal: the next keepalive, while anything is kept.
    fn renew(&mut self, now: Duration) {
        if self.renewing() && self.renewal.out.is_none() {
            self.renewal.out = Some(now);
            self.out(Order::Keepalive { sent: now });
        }
    }

    /// The next keepalive at `at`, unless one is out (its answer plans the next).
    fn plan_renewal(&mut self, at: Duration) {
        if self.renewal.out.is_none() {
            self.timers.set(Timer::Renewal, at);
        }
    }

    fn renewing(&self) -> bool {
        // Renewals go on while anything may still be up in an orderly step-down; once fenced
        // the lease is left to run out; once everything is down there is nothing to keep.
        match &self.state {
            State::Raising(_) | State::Up { .. } => true,
            State::Lowering(l) => {
                l.fenced.is_none() && l.release == Release::NotYet && !self.all_down()
            }
            State::Done(_) => false,
        }
    }

    fn all_down(&self) -> bool {
        matches!(self.vip.state, VipState::NotRaised | VipState::Absent)
            && !self.service.state.may_run()
    }

    /// Whether `rule` holds (always, but in the mutation tests).
    fn holds(&self, rule: Rule) -> bool {
        self.mutant.holds(rule)
    }

    /// The release, as far as it went (not begun before anything goes down).
    fn release(&self) -> Release {
        self.state.lowering().map_or(Release::NotYet, |l| l.release)
    }

    /// The step-down asked, if any.
    fn step_down_asked(&self) -> Option<StepDown> {
        self.state.lowering().and_then(|l| l.step_down)
    }

    /// Things go down (or go on going down) for the reason `change` writes into the
    /// lowering.
    fn lower_for(&mut self, change: impl FnOnce(&mut Lowering)) {
        let mut l = match &self.state {
            State::Lowering(l) => l.clone(),
            _ => Lowering::default(),
        };
        change(&mut l);
        self.set_state(State::Lowering(l));
    }

    fn renewed(&mut self, now: Duration, sent: Duration, ttl: Duration) {
        if self.renewal.out == Some(sent) {
            self.renewal.out = None;
            // Renewed again at once unless this answer is applied (which plans the next).
            self.plan_renewal(now);
        }
        if ttl.is_zero() {
            self.lease_gone(now);
            return;
        }
        // The classic mistake (a mutation test): counting from the answer.
        let sent = if self.holds(Rule::SendTime) {
            sent
        } else {
            now
        };
        // A late answer still says how long etcd keeps the lease: the release must not
        // think it gone before it is.
        self.leadership.heard(sent, ttl);
        if self.fenced().is_some() || !self.leadership.renew(now, sent, ttl, &self.mutant.rules) {
            return;
        }
        if self.renewed_while_key_gone(now) {
            return;
        }
        self.renewal_applied(now);
        self.renewal.last_log = None;
        self.renewal.last_sent = self.renewal.last_sent.max(sent);
        self.plan_renewal(sent + self.plan.clock.keepalive_interval());
        self.ping_watchdog();
        if self.vip.state == VipState::Up {
            self.extend_vip();
        }
        self.renew_before_floor();
        // Apart from the watch: a key deleted while the watch was broken is found here.
        self.out(Order::Confirm);
    }

    /// The boot clock now, after the effects made so far in this call (each one takes time).
    fn time(&mut self) -> Duration {
        match self.mutant.stale_clock() {
            // The mistake: every effect timed by the clock read when the input came in.
            Some(then) => then,
            None => self.kernel.now(),
        }
    }

    /// The boot clock now, after the effects made so far in this call; the deadline is looked
    /// at again first (an effect before may have taken until past it).
    fn clock(&mut self) -> Duration {
        let now = self.time();
        self.check_deadline(now);
        now
    }

    /// Moves to `to`, along `state::TRANSITIONS` only.
    fn set_state(&mut self, to: State) {
        debug_assert!(
            state::may_move(self.state.phase(), to.phase()),
            "no transition from {:?} to {:?}",
            self.state,
            to
        );
        self.state = to;
    }

    /// Since when the machine holds through an etcd outage, if it does.
    fn holding_since(&self) -> Option<Duration> {
        match self.state {
            State::Up { holding_since } => holding_since,
            _ => None,
        }
    }

    fn out(&mut self, order: Order) {
        self.orders.push_back(order);
    }

    fn log(&mut self, level: Level, text: String) {
        self.out(Order::Log(level, text));
    }
}
