//! Taking things down: the fence (ownership lost, or the deadline), the orderly step-down and
//! a failed raise all lower the same way — the VIP first, then the service (SIGTERM, SIGKILL
//! by its time), looked at until a proven absence — and only then release the key and answer.
//! Until then an orderly step-down keeps renewing and a fenced guard lets its lease run out.

use std::time::Duration;

use super::state::{Look, Lowering, Phase, Release, ServiceState, State, StepDown};
use super::types::{Cause, Fault, Kernel, Level, Order};
use super::{
    Machine, Timer, CHECK_EVERY, DEFAULT_STEP_DOWN, RELEASE_RESERVE, RELEASE_RETRY, WATCHDOG_LEAD,
};
use crate::params::master::DEMOTE_COMMAND_LIMIT;
use crate::presence::Presence;
use crate::rules::Rule;
use crate::service::stop::{self, STOP_GRACE};

/// The least budget demote_command is run with: below it, the service is stopped at once
/// (after a fence the time left is a fraction of lease_margin).
pub const TAKE_BACK_MIN: Duration = Duration::from_millis(500);

impl<K: Kernel> Machine<K> {
    pub(super) fn check_deadline(&mut self, now: Duration) {
        if self.fence_due().is_some_and(|at| now >= at) {
            let cause = match (now >= self.leadership.deadline(), self.phase()) {
                (true, Phase::Holding) => Cause::HoldLapsed,
                (true, _) => Cause::Deadline,
                (false, _) => Cause::WatchdogDue,
            };
            self.fence(now, cause);
        }
    }

    pub(super) fn lost(&mut self, now: Duration, cause: Cause) {
        let raising = self.phase().is_raising();
        // The old guard (a mutation test): the loss queued until the raise was over.
        let Some(cause) = self.mutant.loss(raising, cause) else {
            return;
        };
        // Once the release began, everything is down and the key is ours to delete: its
        // deletion, or another holder's key after it, is the release's end, not a loss.
        let releasing = self.release() != Release::NotYet && self.all_down();
        if self.fenced().is_none() && !releasing {
            self.fence(now, cause);
        }
    }

    /// Rule::LossFencesTheRaise off: the loss heard while raising, once the raise is over.
    pub(super) fn apply_queued_loss(&mut self, now: Duration) {
        let raising = self.phase().is_raising();
        if let Some(cause) = self.mutant.queued_loss(raising) {
            if self.fenced().is_none() {
                self.fence(now, cause);
            }
        }
    }

    /// Ownership is over: the VIP goes at once, the service is signalled, the raise is
    /// abandoned; renewals stop (the lease is left to run out unless released).
    pub(super) fn fence(&mut self, now: Duration, cause: Cause) {
        self.kernel.lowering();
        // A failed raise stays failed (promote reads it), fenced or not.
        self.lower_for(|l| l.fenced = Some((now, cause)));
        self.timers.clear(Timer::SecondPing);
        self.lower_vip(now);
        let kill_at = self.kill_time(now);
        self.stop_service(now, kill_at);
    }

    /// Takes the role back: by its hook first where the service has one (Plan::take_back),
    /// else — and when the hook does not confirm — TERM now, KILL at `kill_at` (kept if an
    /// earlier KILL time is set already).
    pub(super) fn stop_service(&mut self, now: Duration, kill_at: Duration) {
        let end = self.take_back_end(now, kill_at);
        // Only a service whose leader runs can confirm anything: one that exited (its group
        // may live on) is stopped; so is one when too little time is left.
        let may_ask =
            self.plan.take_back && self.service.exit_detail.is_none() && end >= now + TAKE_BACK_MIN;
        match &self.service.state {
            ServiceState::Running(s) if may_ask => {
                self.service.state = ServiceState::GivingBack(s.clone());
                self.timers.set_earlier(Timer::TakeBack, end);
                self.log(
                    Level::Info,
                    format!(
                        "taking the role back by demote_command (within {:.1} s)",
                        (end - now).as_secs_f64()
                    ),
                );
                self.out(Order::TakeBack { within: end - now });
                return;
            }
            // A fence during a step-down's take-back: its budget may only shrink.
            ServiceState::GivingBack(_) => return self.timers.set_earlier(Timer::TakeBack, end),
            _ => {}
        }
        self.terminate(now, kill_at);
    }

    /// Where the take-back's budget ends: DEMOTE_COMMAND_LIMIT at most, and early enough that
    /// a hook that does not confirm leaves the service its TERM's grace (STOP_GRACE, or half
    /// the time left when less is left) before it must be gone: the step-down's budget less
    /// the release's reserve, or the KILL time (`kill_at`) once fenced.
    fn take_back_end(&self, now: Duration, kill_at: Duration) -> Duration {
        let stop_by = match self.timers.get(Timer::Budget) {
            Some(by) if self.fenced().is_none() => by.saturating_sub(RELEASE_RESERVE).max(kill_at),
            _ => kill_at,
        };
        let left = stop_by.saturating_sub(now);
        now + DEMOTE_COMMAND_LIMIT.min(left.saturating_sub(STOP_GRACE).max(left / 2))
    }

    /// The take-back's answer: confirmed within the budget, the service runs on as a standby;
    /// failed, or confirmed only after the budget's end (an answer queued behind a late
    /// wake-up), it is stopped. Once it is stopping, an answer changes nothing.
    pub(super) fn taken_back(&mut self, now: Duration, r: Result<(), Fault>) {
        if !matches!(self.service.state, ServiceState::GivingBack(_)) {
            return;
        }
        let r = match r {
            Ok(()) if self.timers.due(Timer::TakeBack, now) => Err(Fault::Service(
                "demote_command confirmed after its budget's end".into(),
            )),
            other => other,
        };
        match r {
            Ok(()) => {
                self.timers.clear(Timer::TakeBack);
                self.service.state = ServiceState::GivenBack;
                self.log(
                    Level::Info,
                    "the service gave the role back (demote_command); it runs on as a standby"
                        .into(),
                );
                self.out(Order::Persist);
            }
            Err(e) => self.take_back_failed(now, format!("demote_command failed ({e})")),
        }
    }

    /// The hook failed, or did not confirm in its budget: the service is stopped.
    pub(super) fn take_back_failed(&mut self, now: Duration, why: String) {
        if let ServiceState::GivingBack(service) = &self.service.state {
            let service = service.clone();
            let kill_at = self.kill_time(now);
            self.timers.clear(Timer::TakeBack);
            self.log(
                Level::Error,
                format!("{why}: the service is stopped instead"),
            );
            self.service.state = ServiceState::Running(service);
            self.terminate(now, kill_at);
        }
    }

    /// TERM now, KILL at `kill_at` (a stop already under way keeps an earlier KILL time).
    fn terminate(&mut self, now: Duration, kill_at: Duration) {
        let (service, start_out) = match &mut self.service.state {
            ServiceState::Running(s) => (s.clone(), false),
            ServiceState::Starting(Some(s)) => (s.clone(), true),
            ServiceState::Stopping { killed, .. } => {
                if !*killed {
                    self.timers.set_earlier(Timer::Kill, kill_at);
                }
                return;
            }
            // A command whose spawn is under way: the answer brings its pid, and the fence
            // then signals it at once (service_started).
            _ => return,
        };
        if let Err(e) = self.kernel.signal_service(&service, false) {
            self.log(Level::Error, format!("SIGTERM to the service: {e}"));
        }
        self.service.state = ServiceState::Stopping {
            service,
            killed: false,
            start_out,
        };
        self.timers.set(Timer::Kill, kill_at);
        self.look_at(now + CHECK_EVERY);
    }

    /// When a service signalled now gets SIGKILL: half a margin after the deadline (or the
    /// loss) once fenced — counted from the deadline, so the fencing thread's wake-up latency
    /// is not paid twice — but KILL_LEAD before the lease can end at etcd at the largest slew
    /// and before an armed watchdog would reset the node; else at the end of the step-down's
    /// grace.
    pub(super) fn kill_time(&self, now: Duration) -> Duration {
        match self.fenced() {
            Some((at, _)) => {
                let at = (*at).min(self.fence_at());
                let kill = self.leadership.kill_at(at);
                match self.dog.state().fires_at() {
                    Some(f) => kill.min(f.saturating_sub(WATCHDOG_LEAD / 2)).max(at),
                    None => kill,
                }
            }
            None => now + self.grace(now),
        }
    }

    /// TERM → KILL time for an orderly stop: the budget less what the release needs (none
    /// once the budget is spent).
    fn grace(&self, now: Duration) -> Duration {
        if !self.holds(Rule::Budget) {
            return STOP_GRACE;
        }
        let by = match (self.timers.get(Timer::Budget), self.step_down_asked()) {
            (Some(by), _) => by,
            (None, Some(_)) => now,
            (None, None) => now + DEFAULT_STEP_DOWN,
        };
        stop::grace(by.saturating_sub(now))
    }

    /// Lowering goes on until VIP and service are confirmed down: a service still running (or
    /// starting, a unit) is stopped, SIGKILL goes at its time.
    pub(super) fn lower(&mut self, now: Duration) {
        if matches!(
            self.service.state,
            ServiceState::Running(_) | ServiceState::Starting(Some(_))
        ) {
            let kill_at = self.kill_time(now);
            self.stop_service(now, kill_at);
        }
    }

    /// Timer::Kill: SIGKILL to a service that got SIGTERM.
    pub(super) fn kill(&mut self, now: Duration) {
        if let ServiceState::Stopping {
            service,
            killed: false,
            ..
        } = &self.service.state
        {
            let service = service.clone();
            if let Err(e) = self.kernel.signal_service(&service, true) {
                self.log(Level::Error, format!("SIGKILL to the service: {e}"));
            }
            if let ServiceState::Stopping { killed, .. } = &mut self.service.state {
                *killed = true;
            }
            self.look_at(now);
        }
    }

    /// Asks for a look at the service at `at`; one already out is answered first, and its
    /// answer, which says nothing of what happened since, is followed by a fresh look.
    pub(super) fn look_at(&mut self, at: Duration) {
        match self.service.look {
            Look::Idle => self.timers.set(Timer::Look, at),
            Look::Out { .. } => self.service.look = Look::Out { stale: true },
        }
    }

    /// A look already out says nothing of the service as it is now.
    pub(super) fn look_is_stale(&mut self) {
        if let Look::Out { .. } = self.service.look {
            self.service.look = Look::Out { stale: true };
        }
    }

    /// Timer::Look: a look at whether anything of the service is left (one at a time: the
    /// timer is armed only while none is out).
    pub(super) fn look(&mut self) {
        if let Some(s) = self.service.state.reference().cloned() {
            self.service.look = Look::Out { stale: false };
            self.out(Order::CheckService(s));
        }
    }

    pub(super) fn service_checked(&mut self, now: Duration, look: Presence) {
        let look = match look {
            Presence::CannotTell(_) if !self.holds(Rule::OnlyAbsence) => Presence::Absent,
            other => other,
        };
        let stale = self.service.look == Look::Out { stale: true };
        self.service.look = Look::Idle;
        if stale {
            return self.look_at(now);
        }
        if look.doubt().is_none() {
            self.service.doubt = None;
        }
        match look {
            Presence::Absent if self.service.state.start_out() => {
                // Not up yet is not stopped: the start has not answered.
                self.look_at(now + CHECK_EVERY);
            }
            Presence::Absent => {
                if let Some(s) = self.service.state.reference().cloned() {
                    self.kernel.forget_service(&s);
                }
                if self.service.state.may_run() {
                    self.service.state = ServiceState::Stopped;
                    self.timers.clear(Timer::Kill);
                    self.timers.clear(Timer::TakeBack);
                    self.timers.clear(Timer::Look);
                    self.out(Order::Persist);
                }
            }
            Presence::Present => {
                if matches!(self.service.state, ServiceState::Stopping { .. }) {
                    self.look_at(now + CHECK_EVERY);
                } else if self.phase().is_leading() {
                    // Remnants of an exited leader while leading: left to the step-down.
                    self.timers.clear(Timer::Look);
                }
            }
            // Never taken for stopped: look again; said once per doubt.
            Presence::CannotTell(why) => {
                if self.service.doubt.as_ref() != Some(&why) {
                    self.log(
                        Level::Warn,
                        format!("cannot tell whether the service is stopped: {why}"),
                    );
                    self.service.doubt = Some(why);
                }
                self.look_at(now + CHECK_EVERY);
            }
        }
    }

    pub(super) fn step_down(&mut self, now: Duration, by: Duration) {
        self.kernel.lowering();
        let asked = StepDown { answered: false };
        if self.holds(Rule::Budget) {
            // A request while another waits: the earlier answer is owed. A request after an
            // answer (demote failed, now stop asks): its own budget.
            match self.step_down_asked() {
                Some(s) if !s.answered => self.timers.set_earlier(Timer::Budget, by),
                _ => self.timers.set(Timer::Budget, by),
            }
        }
        if let State::Lowering(l) = &mut self.state {
            l.step_down = Some(asked);
        } else {
            self.lower_for(|l| l.step_down = Some(asked));
            self.log(Level::Info, "stepping down".into());
        }
        self.lower_vip(now);
        let kill_at = self.kill_time(now);
        self.stop_service(now, kill_at);
    }

    pub(super) fn release_step(&mut self, now: Duration) {
        if !self.may_release() {
            if self.release() == Release::Failed {
                // Tried again once everything is down again; meanwhile renewed again.
                self.timers.clear(Timer::ReleaseRetry);
                self.set_release(Release::NotYet);
                if self.renewing() {
                    self.plan_renewal(now);
                }
            }
            return;
        }
        if self.release() == Release::NotYet {
            self.release_now(now);
        }
    }

    fn may_release(&self) -> bool {
        self.all_down() || !self.holds(Rule::ReleaseWhenDown)
    }

    /// The release begins (also Timer::ReleaseRetry: one that failed, tried again), once
    /// everything is down.
    pub(super) fn release_now(&mut self, now: Duration) {
        let due = matches!(self.release(), Release::NotYet | Release::Failed);
        if !due || !self.may_release() {
            return;
        }
        // Past the lease's end it is gone at etcd anyway.
        if now >= self.leadership.latest_end() && self.renewal.out.is_none() {
            return self.set_release(Release::Done);
        }
        self.set_release(Release::InFlight);
        self.out(Order::Release);
    }

    pub(super) fn released_answer(&mut self, now: Duration, r: Result<(), Fault>) {
        match r {
            Ok(()) => {
                self.set_release(Release::Done);
                self.log(Level::Info, "leader key released".into());
            }
            Err(e) => {
                self.set_release(Release::Failed);
                self.timers.set(Timer::ReleaseRetry, now + RELEASE_RETRY);
                self.log(
                    Level::Warn,
                    format!("releasing the leader key: {e} (it expires with the lease)"),
                );
            }
        }
    }

    /// Once VIP and service are down and the release settled, a step-down is answered done
    /// (and a failed raise ends): the machine is Done.
    pub(super) fn answer_step(&mut self) {
        let failed = self.failure().is_some();
        let Some(step_down) = self
            .step_down_asked()
            .or(failed.then_some(StepDown { answered: true }))
        else {
            return;
        };
        if self.all_down() && self.release().settled() {
            if !step_down.answered {
                self.answer(Ok(()));
            }
            self.out(Order::Exit {
                raise_failed: failed,
                given_back: self.service.state == ServiceState::GivenBack,
            });
            if let State::Lowering(l) = &self.state {
                self.set_state(State::Done(l.clone()));
            }
            self.timers.clear_all();
        }
    }

    /// Timer::Budget: the step-down's budget is spent; it is answered now — done, or what is
    /// still up.
    pub(super) fn budget_spent(&mut self) {
        if self.step_down_asked().is_none_or(|s| s.answered) {
            return;
        }
        if self.all_down() {
            // VIP and service down, the release still under way: the step-down is done (an
            // unreleased key only delays the next leader until the lease runs out).
            return self.answer(Ok(()));
        }
        let why = self.still_up();
        self.log(
            Level::Error,
            format!("step-down not complete in time: {why}"),
        );
        self.answer(Err(why));
    }

    /// The release as it now is (only ever in a lowering).
    fn set_release(&mut self, to: Release) {
        if let State::Lowering(l) = &mut self.state {
            l.release = to;
        }
    }

    fn answer(&mut self, r: Result<(), String>) {
        if let State::Lowering(Lowering {
            step_down: Some(s), ..
        }) = &mut self.state
        {
            s.answered = true;
        }
        self.out(Order::StepDownAnswer(r));
    }

    /// What keeps the step-down from being complete, in words.
    fn still_up(&self) -> String {
        let mut up = Vec::new();
        if self.vip.state.may_be_up() {
            up.push("the VIP may still be up (not confirmed removed)".to_string());
        }
        if self.service.state.may_run() {
            up.push(match &self.service.doubt {
                Some(why) => format!("the service is not confirmed stopped (cannot tell: {why})"),
                None => "the service is not confirmed stopped".to_string(),
            });
        }
        if up.is_empty() {
            up.push("the leader key is not released yet".to_string());
        }
        up.join("; ")
    }
}
