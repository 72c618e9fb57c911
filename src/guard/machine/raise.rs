//! The raise, step by step: the watchdog armed before anything else, the VIP added with its
//! kernel lifetime, settled (link, DAD, announcements), the fencing token written, the
//! service started — each step only while the key is ours and the deadline ahead (read again
//! right before it), and a loss abandons it at once.

use std::time::Duration;

use super::state::{RaiseFailure, RaiseStep, ServiceState, State, VipState};
use super::types::{Fault, Kernel, Level, Order};
use super::watchdog::Arming;
use super::{Machine, CHECK_EVERY};
use crate::rules::Rule;
use crate::service::ServiceRef;

impl<K: Kernel> Machine<K> {
    /// Whether anything may be raised at `now`.
    pub(super) fn may_raise(&self, now: Duration) -> bool {
        self.state.may_raise(now, self.fence_at())
    }

    pub(super) fn raise_step(&mut self) {
        // The effects before this step took time: the clock is read again, the deadline first.
        let now = self.clock();
        if !self.may_raise(now) {
            return;
        }
        let State::Raising(step) = self.state else {
            return;
        };
        match step {
            RaiseStep::ArmWatchdog if self.holds(Rule::ArmFirst) => {
                self.arm_watchdog(now);
                if self.phase().is_raising() {
                    self.raise_step();
                }
            }
            RaiseStep::ArmWatchdog => {
                // The mutation: the VIP first, the watchdog after it.
                self.set_state(State::Raising(RaiseStep::AddVip));
                self.raise_step();
                self.arm_watchdog(now);
                if self.phase().is_raising() {
                    self.set_state(State::Raising(RaiseStep::Settling));
                }
            }
            RaiseStep::AddVip => self.add_vip(now),
            RaiseStep::WriteToken => {
                self.set_state(State::Raising(RaiseStep::WritingToken));
                self.out(Order::WriteToken);
            }
            RaiseStep::StartService => {
                self.set_state(State::Raising(RaiseStep::StartingService));
                // A unit (or a warm standby's service) is known before its start, so fencing
                // can stop it mid-start.
                self.service.state = ServiceState::Starting(self.plan.known.clone());
                self.out(Order::StartService);
            }
            RaiseStep::Settling | RaiseStep::WritingToken | RaiseStep::StartingService => {}
        }
    }

    /// The step after the watchdog: the VIP if there is one.
    fn after_watchdog(&self) -> RaiseStep {
        if self.plan.vip {
            RaiseStep::AddVip
        } else {
            RaiseStep::WriteToken
        }
    }

    fn add_vip(&mut self, now: Duration) {
        let Some(secs) = self.leadership.vip_lifetime(now) else {
            return self.raise_failed(now, RaiseFailure::NoTimeForVip);
        };
        match self.kernel.add_vip(secs) {
            Ok(()) => {
                self.vip.state = VipState::Up;
                self.vip.floor = super::vip::floor(now, secs);
                self.fit_vip(secs);
                if !self.phase().is_raising() {
                    // No lifetime fitted: the raise failed, the VIP went again.
                    return;
                }
                self.renew_before_floor();
                self.set_state(State::Raising(RaiseStep::Settling));
                self.out(Order::Persist);
                // Not bounded by the deadline: renewals go on while DAD runs, and the
                // deadline fences on its own (the settle's announcements ask first).
                self.out(Order::Settle {
                    dad_wait: crate::vip::up::DAD_WAIT,
                });
            }
            Err(e) => {
                // It may have gone on all the same (a lost answer): treat as maybe up.
                self.vip.state = VipState::MaybeUp;
                self.timers.set(super::Timer::VipRetry, now);
                self.raise_failed(now, RaiseFailure::Vip(e.to_string()));
            }
        }
    }

    /// Arming: with a timeout whose reset comes before the lease can end at etcd, read back.
    /// A failure (or a driver that applied more) fails the raise when the watchdog is
    /// required; with auto the guard leads without it and says why.
    fn arm_watchdog(&mut self, now: Duration) {
        if self.state == State::Raising(RaiseStep::ArmWatchdog) {
            let next = self.after_watchdog();
            self.set_state(State::Raising(next));
        }
        let mut arming = self
            .dog
            .arm(&mut self.kernel, &self.leadership, now, &self.mutant.rules);
        if let Arming::Fitted { timeout_s } = arming {
            // The reset counts from the last of the arming's calls, which ended by now.
            let done = self.time().max(now);
            arming = self.dog.armed(&self.leadership, timeout_s, done);
        }
        match arming {
            Arming::Fitted { .. } => {}
            Arming::Armed {
                timeout_s,
                second_ping,
            } => {
                self.log(
                    Level::Info,
                    format!("watchdog armed: it resets the node {timeout_s} s after the last ping"),
                );
                self.plan_second_ping(second_ping);
            }
            Arming::ArmedLate => {
                self.log(Level::Info, "watchdog armed".into());
                // Arming took so long that the timeout no longer fits: shorter, at once.
                self.ping_watchdog();
            }
            Arming::Without(why) => {
                self.log(Level::Warn, format!("leading without a watchdog: {why}"));
            }
            Arming::Fails(why) => self.raise_failed(now, RaiseFailure::Watchdog(why)),
        }
    }

    pub(super) fn settled(&mut self, now: Duration, r: Result<(), Fault>) {
        if self.state != State::Raising(RaiseStep::Settling) {
            return;
        }
        match r {
            Ok(()) => {
                self.set_state(State::Raising(RaiseStep::WriteToken));
                // Beside the rest of the raise, never before it: the VIP is up and ours.
                if self.may_raise(now) {
                    self.out(Order::Repoint);
                }
            }
            Err(e) => self.raise_failed(now, RaiseFailure::Vip(e.to_string())),
        }
    }

    pub(super) fn token_written(&mut self, now: Duration, r: Result<(), Fault>) {
        if self.state != State::Raising(RaiseStep::WritingToken) {
            return;
        }
        match r {
            Ok(()) => self.set_state(State::Raising(RaiseStep::StartService)),
            Err(e) => self.raise_failed(now, RaiseFailure::Token(e.to_string())),
        }
    }

    pub(super) fn service_started(&mut self, now: Duration, r: Result<ServiceRef, Fault>) {
        let starting = matches!(self.service.state, ServiceState::Starting(_));
        if let ServiceState::Stopping { start_out, .. } = &mut self.service.state {
            *start_out = false;
        }
        // A look already out saw the service before this answer: it says nothing now.
        self.look_is_stale();
        match r {
            Ok(s) if !starting => {
                // A stop overtook the start, and the start may have won the race after it:
                // stop again, and look again before anything counts as stopped.
                match self.service.state.clone() {
                    ServiceState::Stopping { killed, .. } => {
                        if let Err(e) = self.kernel.signal_service(&s, false) {
                            self.log(Level::Error, format!("SIGTERM to the service: {e}"));
                        }
                        self.service.state = ServiceState::Stopping {
                            service: s,
                            killed: false,
                            start_out: false,
                        };
                        // And a KILL again, at the same time or at once if it was sent.
                        if killed {
                            self.timers.set(super::Timer::Kill, now);
                        } else {
                            let at = self.kill_time(now);
                            self.timers.set_earlier(super::Timer::Kill, at);
                        }
                    }
                    _ => {
                        self.service.state = ServiceState::Running(s);
                        let kill_at = self.kill_time(now);
                        self.stop_service(now, kill_at);
                    }
                }
                self.look_at(now + CHECK_EVERY);
            }
            Ok(s) => {
                self.service.state = ServiceState::Running(s);
                if self.state == State::Raising(RaiseStep::StartingService) && self.may_raise(now) {
                    self.set_state(State::Up {
                        holding_since: None,
                    });
                    self.out(Order::Persist);
                    return;
                }
                // Fenced or stepping down meanwhile (a slow start): stopped at once.
                let kill_at = self.kill_time(now);
                self.stop_service(now, kill_at);
            }
            Err(e) => {
                if starting {
                    // A unit whose start failed may still be activating: stop it and look
                    // before forgetting it. A command that never spawned is nothing.
                    match self.service.state.reference().cloned() {
                        Some(s) => {
                            self.service.state = ServiceState::Running(s);
                            let kill_at = self.kill_time(now);
                            self.stop_service(now, kill_at);
                        }
                        None => self.service.state = ServiceState::Stopped,
                    }
                }
                if self.phase().is_raising() {
                    self.raise_failed(now, RaiseFailure::Service(e.to_string()));
                }
            }
        }
    }

    pub(super) fn raise_failed(&mut self, now: Duration, why: RaiseFailure) {
        self.kernel.lowering();
        self.log(Level::Error, why.to_string());
        self.lower_for(|l| l.failure = Some(why));
        self.lower_vip(now);
        let kill_at = self.kill_time(now);
        self.stop_service(now, kill_at);
    }
}
