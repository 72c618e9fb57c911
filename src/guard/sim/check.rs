//! The invariants, judged in true time after every step, and the tally of what the schedules
//! reached.

use super::*;

impl Sim {
    /// (iii): raises only while ownership stands and the deadline is ahead; no renewal adds
    /// anew a VIP the kernel let go.
    pub(super) fn check_raises(&self, since: usize, seed: u64) -> Result<(), String> {
        let w = &self.m.kernel;
        for &t in &w.raised[since..] {
            if self.told_lost.is_some_and(|l| t >= l) {
                return Err(self.fail(seed, format!("raised at {t:?}, after the loss was told")));
            }
            if w.node_at(t) >= self.deadline {
                return Err(self.fail(
                    seed,
                    format!("raised at {t:?}, deadline {:?}", self.deadline),
                ));
            }
        }
        if let Some(t) = w.recreated.first() {
            return Err(self.fail(
                seed,
                format!(
                    "VIP added anew at {t:?} by a renewal's replace after the kernel let it go"
                ),
            ));
        }
        Ok(())
    }

    /// A magic close that failed with nothing up: the reset that follows is harmless.
    pub(super) fn harmless_close_failure(&self) -> bool {
        let w = &self.m.kernel;
        w.dog_close_failed && !w.vip && !w.service
    }

    /// (v): pings only while the promise holds (before the deadline, ownership not known
    /// lost); the reset always before the lease can end at etcd; the protocol's order.
    pub(super) fn check_watchdog(&self, since: usize, seed: u64) -> Result<(), String> {
        let w = &self.m.kernel;
        if let Some(v) = w.dog_violations.first() {
            return Err(self.fail(seed, v.clone()));
        }
        for &t in &w.pings[since..] {
            if w.node_at(t) >= self.ground_deadline() || self.told_lost.is_some_and(|l| t >= l) {
                return Err(self.fail(
                    seed,
                    format!(
                        "watchdog pinged at {t:?}, after the deadline {:?} or the loss",
                        self.deadline
                    ),
                ));
            }
        }
        if let Some((_, fires)) = w.dog {
            // A magic close that failed with nothing up: that reset is harmless. A required
            // guard that fenced because no timeout fits: everything is going down. An auto
            // guard whose driver takes no shorter timeout says so (the reset may come late).
            let close_failed = self.harmless_close_failure();
            let fenced_for_it = matches!(self.m.fenced(), Some((_, Cause::WatchdogLate)));
            // A proof moves the reset past the lease: what bounds it then is the successor,
            // whom the VIP and the service must not overlap (check).
            let proven = self.hold.as_ref().is_some_and(|h| h.answered.is_some());
            if fires > self.watchdog_bound
                && !proven
                && !self.released
                && !close_failed
                && !fenced_for_it
                && !self.m.watchdog_late()
            {
                return Err(self.fail(
                    seed,
                    format!(
                        "watchdog resets at {fires:?}, after the lease could end at etcd with \
                         etcd's clock fast ({:?}; at its rate here {:?})",
                        self.watchdog_bound, self.etcd_expiry
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The invariants over the span [now, t), checked at its latest instant (true time).
    pub(super) fn check(&self, t: Duration, seed: u64) -> Result<(), String> {
        // A power fence ended everything of n1: it holds nothing from then on, whatever its
        // machine (which the simulation runs on) believes.
        if let Some(off) = self.s.hold.as_ref().and_then(HoldSchedule::powered_off_at) {
            if t >= off {
                return Ok(());
            }
        }
        let w = &self.m.kernel;
        let residual = self.frozen_until.is_some() || self.killed;
        // Once the release began (everything down), a loss is the release's own end: a fence
        // on it would count a fence that was none and name it as promote's reason.
        if let (Some(rel), Some((at, cause))) = (self.release_ordered_at, self.m.fenced()) {
            let on_loss = matches!(
                cause,
                Cause::KeyDeleted | Cause::KeyTaken(_) | Cause::LeaseGone
            );
            let rel = w.node_at(rel);
            if on_loss && *at > rel {
                return Err(self.fail(
                    seed,
                    format!("fenced ({cause}) at {at:?}, after its release began at {rel:?}"),
                ));
            }
        }
        if w.forgotten_while_up {
            return Err(self.fail(seed, "the service was forgotten while it ran".into()));
        }
        // Nothing outlives the lease at etcd — with a failsafe record, nothing is up once the
        // successor took over (never two holders); a frozen or killed guard's unit, and an
        // unkillable service, are the residual risks.
        let (other_since, what) = match &self.hold {
            None => (Some(self.etcd_expiry), "after the lease could end at etcd"),
            Some(h) => (h.successor_at, "two holders: the successor raised"),
        };
        // A paused node serves nothing; after the resume it serves until its next ask of
        // corosync is answered (its RTC then shows the pause): the residual docs/safety.md
        // states (H5), where no power fence ended it.
        // At the most until the cover of its last proof before the pause ends (W + F of its
        // own clock): its next ask may not get through (a stalled shell, a slow corosync), and
        // a removal that fails leaves the VIP to its kernel lifetime, set from that proof too.
        let until_noticed = match w.remove_fault {
            Some(RemoveFault::Once) => PROOF_LIFE + crate::failsafe::FENCE_BOUND + VIP_RETRY,
            _ => PROOF_LIFE + crate::failsafe::FENCE_BOUND,
        };
        let pause_residual = until_noticed.div_f64(self.s.node_rate) + self.late_by();
        // A service that SIGKILL does not end (or a frozen guard's) goes with the watchdog's
        // reset, whose timeout was set from that same proof's end at the slowest clock the
        // bound allows ((W + F)/(1 − r) after the pause at the most; a ping after the resume,
        // before the ask that notices the pause, sets it from there).
        // Signals cannot end the service (a frozen or killed guard, an unkillable service):
        // an armed watchdog's reset does, or nothing.
        let unsignalled = residual || w.unkillable;
        let service_residual = if unsignalled && w.dog.is_some() {
            until_noticed.div_f64(1.0 - MAX_SLEW) + self.late_by()
        } else {
            pause_residual
        };
        let within = |residual: Duration| {
            self.pause()
                .is_some_and(|p| p.at <= t && t <= p.end() + residual)
        };
        if let Some(since) = other_since {
            if w.vip && t > since && !within(pause_residual) {
                return Err(self.fail(seed, format!("VIP up at {t:?}, {what} ({since:?})")));
            }
            // An armed watchdog covers them both: its reset comes before the lease's end.
            let service_exempt = unsignalled && w.dog.is_none();
            if w.service && t > since && !service_exempt && !within(service_residual) {
                return Err(self.fail(seed, format!("service up at {t:?}, {what} ({since:?})")));
            }
        }
        if !residual {
            // The bounds are on this node's clock; the fencing thread's latency in true time.
            // (A pause in between adds its length: nothing of n1 runs meanwhile.)
            let on_time = |n: Duration| w.running_after(w.true_at(n), self.late_by());
            // One failed removal costs one retry, which is one more wake-up of the thread.
            let retry = if w.remove_fault == Some(RemoveFault::Once) {
                VIP_RETRY + FENCE_LATENCY_BOUND
            } else {
                Duration::ZERO
            };
            let deadline = self.ground_deadline();
            let late = w.running_after(on_time(deadline), retry);
            let removal_fails = w.remove_fault == Some(RemoveFault::Always);
            if w.vip && t > late && !removal_fails {
                return Err(self.fail(seed, format!("VIP up at {t:?}, deadline {deadline:?}")));
            }
            if let Some(told) = self.told_lost {
                let late = w.running_after(told, self.late_by() + retry);
                if w.vip && t > late && !removal_fails {
                    return Err(self.fail(seed, format!("VIP up at {t:?}, loss told at {told:?}")));
                }
            }
            // Taken back by the hook, or stopped: either was begun by the deadline (the lease's
            // end at etcd is the bound on both, checked against the successor).
            if w.service && t > late && w.termed_at.is_none() && w.take_back_at.is_none() {
                return Err(self.fail(
                    seed,
                    format!("service not signalled at {t:?}, deadline {deadline:?}"),
                ));
            }
            let kill_by = on_time(deadline + self.s.clock.kill_delay());
            if w.service && t > kill_by && !w.unkillable {
                return Err(self.fail(seed, format!("service alive at {t:?}, after {kill_by:?}")));
            }
            // (iv): the answer by the budget (the request itself may have waited for a stall).
            if let Some(by) = self.step_down_by {
                let answered_in_time = self.answered.is_some_and(|(at, _)| at <= on_time(by));
                if t > on_time(by) && !answered_in_time && !self.exited {
                    return Err(self.fail(
                        seed,
                        format!("step-down not answered by {by:?} (now {t:?})"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Sim {
    pub(super) fn tally(&self, t: &mut Tally) {
        match self.m.fenced() {
            Some((_, Cause::Deadline)) => t.fenced_at_deadline += 1,
            Some(_) => t.fenced_on_loss += 1,
            None => {}
        }
        let r = self.reached;
        t.lost_while_raising += u32::from(r.lost_while_raising);
        t.stale_views += r.stale_views;
        t.standing_refused += r.standing_refused;
        t.released += u32::from(self.released);
        t.answered_incomplete += u32::from(self.answered.is_some_and(|(_, ok)| !ok));
        let w = &self.m.kernel;
        t.kernel_expiries += u32::from(w.expiries > 0);
        t.late_answers += r.late_answers;
        if self.reset_at.is_some() {
            if r.froze && self.m.fenced().is_none() {
                t.frozen_resets += 1;
            } else {
                t.fenced_resets += 1;
            }
        }
        t.disarmed += u32::from(w.dog_disarmed);
        t.own_deletions_heard += r.own_deletions_heard;
        t.doubts += r.doubts;
        t.extreme_clocks +=
            u32::from(self.s.node_rate == 1.0 - MAX_SLEW && self.s.etcd_rate == 1.0 + MAX_SLEW);
        if self.s.warm {
            t.warm += 1;
            t.warm_fenced += u32::from(self.m.fenced().is_some());
            t.warm_failed_handovers += u32::from(self.s.start_fails && w.starts > 0);
            if self.s.take_back.is_some() {
                t.given_back +=
                    u32::from(*self.m.service() == crate::guard::machine::ServiceState::GivenBack);
                t.take_back_stopped += u32::from(w.termed_at.is_some());
            }
        }
        if let Some(h) = &self.hold {
            t.held += u32::from(h.held);
            t.retaken += u32::from(h.retaken);
            t.hold_fenced += u32::from(matches!(
                self.m.fenced(),
                Some((_, Cause::HoldLapsed | Cause::ClusterNotWhole(_)))
            ));
            t.taken_over_after_hold += u32::from(h.held && h.successor_at.is_some());
            t.successor_blocked += u32::from(h.blocked);
            t.hold_withdrawn += u32::from(matches!(
                self.m.fenced(),
                Some((_, Cause::HoldWithdrawn(_)))
            ));
            if let Some(s) = &self.s.hold {
                let fence = s.fence_confirmed();
                t.powered_off += u32::from(fence.is_some_and(|f| f.1));
                t.fabric_fenced += u32::from(fence.is_some_and(|f| !f.1));
                t.outside_blocked += u32::from(s.successor_outside && h.blocked);
                t.paused += u32::from(s.pause.is_some());
                t.pause_seen += u32::from(matches!(
                    self.m.fenced(),
                    Some((_, Cause::HoldWithdrawn(why))) if why.contains("paused")
                ));
            }
        }
    }
}
