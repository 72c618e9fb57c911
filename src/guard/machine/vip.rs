//! The VIP as the machine holds it: taken down first by every lowering (a failed removal tried
//! again by the fencing thread), and its kernel lifetime — the dead-man switch that removes it
//! from a killed or frozen guard — set at its own time, never past the lease's earliest end,
//! and extended only while the kernel surely still has the address (a replace after that would
//! add it anew).

use std::time::Duration;

use super::state::{RaiseFailure, VipState};
use super::types::{Kernel, Level, Order};
use super::{Machine, Timer, VIP_RETRY};
use crate::lease::clock::KERNEL_EXPIRY_SLACK;
use crate::rules::Rule;

/// The kernel deletes an address up to ADDRCONF_TIMER_FUZZ_MINUS (HZ/50, at most 20 ms) before
/// its lifetime's end.
const KERNEL_EXPIRY_EARLY: Duration = Duration::from_millis(20);
/// A replace is not begun this close to the moment the address may go (it would race it).
const REPLACE_TAKES: Duration = Duration::from_millis(10);
/// Besides two renewal attempts (one may go to a silent member and time out), a keepalive
/// leaves this much before the VIP's lifetime may run out.
const RENEW_BEFORE_FLOOR: Duration = Duration::from_millis(200);

/// The kernel keeps an address given `secs` of lifetime by a call that began at `began` at
/// least until then: it counts from when it applied the call (no earlier), and deletes up to
/// ADDRCONF_TIMER_FUZZ_MINUS (HZ/50) early.
pub(super) fn floor(began: Duration, secs: u32) -> Duration {
    (began + Duration::from_secs(secs.into())).saturating_sub(KERNEL_EXPIRY_EARLY)
}

impl<K: Kernel> Machine<K> {
    /// Takes the VIP down (its lowering told first): confirmed absent, or tried again soon.
    pub(super) fn lower_vip(&mut self, now: Duration) {
        if self.vip.state.may_be_up() {
            self.kernel.lowering();
            match self.kernel.remove_vip() {
                Ok(()) => {
                    self.vip.state = VipState::Absent;
                    self.timers.clear(Timer::VipRetry);
                    self.vip.failures = 0;
                }
                Err(e) => {
                    self.vip.state = VipState::MaybeUp;
                    let backoff = VIP_RETRY * 2u32.saturating_pow(self.vip.failures.min(6));
                    let at = now + backoff.min(Duration::from_secs(1));
                    self.timers.set(Timer::VipRetry, at);
                    if self.vip.failures == 0 {
                        self.log(Level::Error, format!("removing the VIP: {e}; trying again"));
                    }
                    self.vip.failures += 1;
                }
            }
            self.out(Order::CancelAnnouncements);
        } else if self.vip.state == VipState::NotRaised && self.plan.vip {
            // Never added: nothing can be up.
            self.vip.state = VipState::Absent;
        }
    }

    /// A renewal applied in time: the VIP's lifetime is set afresh, only while the address is
    /// surely still there — a replace after the kernel let it go would add it anew, so a VIP
    /// whose lifetime may have run out (a renewal answered late) is removed instead, and one
    /// whose replace ended past that moment too.
    pub(super) fn extend_vip(&mut self) {
        let now = self.time();
        let kept_until = match self.holds(Rule::ReplaceBeforeFloor) {
            true => self.vip.floor,
            false => Duration::MAX,
        };
        if now + REPLACE_TAKES >= kept_until {
            return self.vip_given_up(
                now,
                "the VIP's kernel lifetime ran out before a renewal could extend it",
            );
        }
        let Some(secs) = self.leadership.vip_lifetime(now) else {
            // None fits: the old, shorter lifetime stays.
            return;
        };
        match self.kernel.extend_vip(secs) {
            Ok(()) if self.time() >= kept_until => {
                let now = self.time();
                self.vip_given_up(
                    now,
                    "the VIP's lifetime was set again only as it could run out",
                );
            }
            Ok(()) => {
                self.vip.floor = floor(now, secs);
                self.fit_vip(secs);
            }
            // The address that failed keeps its old, shorter lifetime, and with it the floor;
            // others (extra_vips) may have taken the new one, and are checked as after a
            // success: a call that ended too late gives them up, a lifetime that now outlasts
            // the lease is set again shorter.
            Err(e) => {
                self.log(Level::Warn, format!("extending the VIP's lifetime: {e}"));
                let now = self.time();
                if now >= kept_until {
                    return self.vip_given_up(
                        now,
                        "the VIP's lifetime was set again only as it could run out",
                    );
                }
                self.fit_vip(secs);
            }
        }
    }

    /// A VIP whose lifetime cannot be kept safely is taken down, never kept or added anew: a
    /// raise under way fails; a leader goes on without it (monitor reports it, Pacemaker
    /// recovers).
    fn vip_given_up(&mut self, now: Duration, why: &str) {
        if self.phase().is_raising() {
            return self.raise_failed(now, RaiseFailure::Vip(why.to_string()));
        }
        self.log(
            Level::Error,
            format!("{why}: the VIP is removed, not added anew (monitor reports it)"),
        );
        self.lower_vip(now);
    }

    /// The next keepalive goes out early enough for its answer to extend the VIP's lifetime
    /// while the address is surely still there, even when its first attempt goes to a silent
    /// member and times out: whole seconds of lifetime at a small TTL can leave less than one
    /// keepalive interval.
    pub(super) fn renew_before_floor(&mut self) {
        if self.vip.state == VipState::Up {
            let attempts = self.plan.clock.renewal_attempt_timeout() * 2;
            let before = self.vip.floor.saturating_sub(attempts + RENEW_BEFORE_FLOOR);
            if self.renewal.out.is_none() {
                self.timers.set_earlier(Timer::Renewal, before);
            }
        }
    }

    /// After a lifetime of `secs` was set: when the call ended so late that the address could
    /// now outlive the lease (its end, kernel slack included, after the lease's earliest end),
    /// it is set again shorter, from the clock read then; where none fits, removed.
    pub(super) fn fit_vip(&mut self, mut secs: u32) {
        for _ in 0..3 {
            let done = self.time();
            let gone_by = done + Duration::from_secs(secs.into()) + KERNEL_EXPIRY_SLACK;
            if gone_by <= self.leadership.earliest_end() {
                return;
            }
            let Some(shorter) = self.leadership.vip_lifetime(done) else {
                break;
            };
            if self.kernel.extend_vip(shorter).is_err() {
                break;
            }
            secs = shorter;
            self.vip.floor = floor(done, secs);
        }
        let now = self.time();
        self.vip_given_up(
            now,
            "no kernel lifetime of the VIP fits before the lease could end",
        );
    }
}
