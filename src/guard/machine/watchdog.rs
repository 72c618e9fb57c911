//! The hardware watchdog as the machine knows it: a sub-value with its own state and rules,
//! made of the kernel's effects (guard::watchdog holds the device itself). Armed before
//! anything is raised, with the longest whole-second timeout whose reset, the driver's
//! tolerance included, comes before the lease can end at etcd; pinged only for a renewal
//! applied in time, a fresh proof while holding or the key taken back (hold.rs), and once
//! more, derived from it, when the same timeout then ends exactly at that bound; its reset judged on this node's clock at its slowest; disarmed only once VIP
//! and service are confirmed down. What each step comes to is the machine's to act on (a
//! failed raise, a fence, a log line).

use std::time::Duration;

use super::lease::Leadership;
use super::timers::Timer;
use super::types::{ArmError, Cause, Fault, Kernel, Level};
use crate::rules::{Rule, Rules};

/// How much later than its timeout a watchdog may reset the node (i6300esb counts 1.024 s per
/// second of timeout): the timeout the guard sets is its room divided by 1 + this.
pub const WATCHDOG_TOLERANCE: f64 = 1.0 / 32.0;

/// With a watchdog armed the guard fences at least this long before it would reset the node,
/// so that a guard that is alive stops its service and disarms instead of being reset.
pub const WATCHDOG_LEAD: Duration = Duration::from_millis(200);

/// How long a watchdog ioctl may take (a slow driver's; the simulation draws up to 20 ms): a
/// ping asks for the timeout that still fits if it takes effect this much later, since its
/// reset counts from then. Without it, a ping that asked for just the room left, took 20 ms and
/// was rounded up by the driver put the reset past the lease's end (simulation, seed
/// 15821113133237655244).
pub const PING_ALLOWANCE: Duration = Duration::from_millis(50);

/// A second ping closer than this to the first is not worth a wake-up.
const SECOND_PING_MIN: Duration = Duration::from_millis(50);

/// The watchdog's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchdogState {
    /// None in the plan (watchdog=off, or auto without a device).
    Off,
    NotArmed,
    /// It resets the node `timeout_s` after `pinged` (boot clock) unless pinged again.
    Armed {
        timeout_s: u32,
        pinged: Duration,
    },
    /// Stopped by the magic close, VIP and service confirmed down.
    Disarmed,
    /// watchdog=auto and arming failed: leading without, for this reason.
    Unavailable(String),
    /// The magic close failed: the node resets at `fires_at`.
    DisarmFailed {
        fires_at: Duration,
        why: Fault,
    },
}

impl WatchdogState {
    /// The earliest moment, on this node's boot clock, the watchdog may reset the node unless
    /// pinged: it counts true time, and this clock may run slow by MAX_SLEW, so `timeout_s`
    /// of it may show as `timeout_s (1 − r)` here. The guard fences before that, so that a
    /// guard that is on time is never reset, whatever the clocks do within the slew.
    pub fn fires_at(&self) -> Option<Duration> {
        match self {
            WatchdogState::Armed { timeout_s, pinged } => Some(*pinged + shown(*timeout_s)),
            WatchdogState::DisarmFailed { fires_at, .. } => Some(*fires_at),
            _ => None,
        }
    }
}

/// How long `secs` of true time may show on this clock, at the least.
fn shown(secs: u32) -> Duration {
    Duration::from_secs(secs.into()).mul_f64(1.0 - crate::lease::clock::MAX_SLEW)
}

/// How the plan wants the watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogPlan {
    Off,
    /// Arm it; lead without it when arming fails.
    Auto,
    /// Arm it; a failure fails the raise.
    Required,
}

/// What arming came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arming {
    /// The driver took `timeout_s`, within the bound: armed once the machine says when its
    /// calls ended (`Watchdog::armed`).
    Fitted { timeout_s: u32 },
    /// Armed with `timeout_s`; a renewal's second ping then, if one is worth it.
    Armed {
        timeout_s: u32,
        second_ping: Option<Duration>,
    },
    /// Armed, but the arming took so long that the timeout no longer fits: ping at once.
    ArmedLate,
    /// watchdog=auto: leading without one, for this reason.
    Without(String),
    /// The raise fails, for this reason (required, or a device that will reset the node).
    Fails(String),
}

/// What a ping came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinging {
    /// Nothing asked: no room left to move the reset (it stays within the old bound).
    Skipped,
    /// Moved; a renewal's second ping then, if one is worth it.
    Pinged { second_ping: Option<Duration> },
    /// The first ping failed: nothing moved (the reset stays where it was, within its bound).
    Failed(Fault),
    /// No timeout the driver takes fits the bound (a coarse driver, or a ping made too late).
    /// `changed`: the timeout in force now, when it differs from before.
    Late { changed: Option<u32> },
}

/// The watchdog and what the machine learned of its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watchdog {
    plan: WatchdogPlan,
    state: WatchdogState,
    /// How much the driver rounded a timeout up, at most (its granularity): later asks are
    /// that much shorter, so a ping never sets a reset later than allowed.
    excess: u32,
    /// watchdog=auto, and the last ping could not meet the bound (said in the log).
    late: bool,
}

impl Watchdog {
    pub fn new(plan: WatchdogPlan) -> Watchdog {
        Watchdog {
            plan,
            state: match plan {
                WatchdogPlan::Off => WatchdogState::Off,
                _ => WatchdogState::NotArmed,
            },
            excess: 0,
            late: false,
        }
    }

    pub fn plan(&self) -> WatchdogPlan {
        self.plan
    }

    pub fn state(&self) -> &WatchdogState {
        &self.state
    }

    /// watchdog=auto and its reset may come after the lease's end (said in the log).
    pub fn late(&self) -> bool {
        self.late
    }

    /// Arming (nothing is raised yet), at `now`: the longest timeout whose reset comes before
    /// the lease can end at etcd, read back; `done` tells the clock after the arming's calls.
    pub fn arm<K: Kernel>(
        &mut self,
        kernel: &mut K,
        lead: &Leadership,
        now: Duration,
        rules: &Rules,
    ) -> Arming {
        let Some(wanted) = lead.watchdog_timeout(now) else {
            return Arming::Fails("too little of the lease is left to arm the watchdog".into());
        };
        let wanted = if rules.holds(Rule::WatchdogBound) {
            wanted
        } else {
            // The mistake: the whole TTL, believed to fit.
            lead.clock().ttl.as_secs() as u32
        };
        let armed = match kernel.arm_watchdog(wanted) {
            Ok(a) => Ok(a),
            Err(ArmError::NotArmed(e)) => Err(Fault::Watchdog(e)),
            Err(ArmError::Counting(why)) => {
                // A device that could not be stopped again resets the node: nothing is raised.
                self.state = WatchdogState::DisarmFailed {
                    fires_at: now + shown(wanted),
                    why: Fault::Watchdog(why.clone()),
                };
                return Arming::Fails(format!("watchdog: {why}: it will reset the node"));
            }
        };
        let opened = armed.is_ok();
        let problem = match self.fit(kernel, wanted, armed) {
            Ok(applied) if applied <= wanted => return Arming::Fitted { timeout_s: applied },
            Ok(applied) => format!(
                "the watchdog took a timeout of {applied} s for {wanted} s: its reset could come \
                 after the lease ends"
            ),
            Err(e) => e.to_string(),
        };
        if let Some(Err(e)) = opened.then(|| kernel.disarm_watchdog()) {
            self.state = WatchdogState::DisarmFailed {
                fires_at: now + shown(wanted),
                why: e.clone(),
            };
            return Arming::Fails(format!(
                "watchdog: {problem}; then {e}: it will reset the node"
            ));
        }
        if self.plan == WatchdogPlan::Required {
            return Arming::Fails(format!("watchdog=required: {problem}"));
        }
        self.state = WatchdogState::Unavailable(problem.clone());
        Arming::Without(problem)
    }

    /// Armed with `timeout_s` by calls that ended at `done`: the reset counts from then.
    pub fn armed(&mut self, lead: &Leadership, timeout_s: u32, done: Duration) -> Arming {
        self.state = WatchdogState::Armed {
            timeout_s,
            pinged: done,
        };
        if lead.watchdog_timeout(done).is_some_and(|w| timeout_s <= w) {
            return Arming::Armed {
                timeout_s,
                second_ping: second_ping_at(lead, done, timeout_s),
            };
        }
        Arming::ArmedLate
    }

    /// The driver's granularity is learned by asking for `wanted` and the three seconds below
    /// it (each ask pings too), then the timeout is set to the longest ask that the driver does
    /// not round above `wanted`. Ok: what it applied.
    fn fit<K: Kernel>(
        &mut self,
        kernel: &mut K,
        wanted: u32,
        first: Result<u32, Fault>,
    ) -> Result<u32, Fault> {
        let mut applied = first?;
        self.excess = applied.saturating_sub(wanted);
        for ask in (wanted.saturating_sub(3).max(1)..wanted).rev() {
            applied = self.ask(kernel, ask)?.0;
        }
        // The longest ask the driver does not round above `wanted` (each of these asks
        // teaches the rounding too: asked 13 of a driver with 10-s steps, 20 is applied; 10 is
        // the ask that fits 19).
        let mut ask = wanted.saturating_sub(self.excess);
        while ask >= 1 {
            applied = self.ask(kernel, ask)?.0;
            if applied <= wanted {
                break;
            }
            ask -= 1;
        }
        Ok(applied)
    }

    /// One ping asking for `ask` seconds, and what the driver's rounding of it teaches: every
    /// later ask stays that far below the bound.
    fn ask<K: Kernel>(&mut self, kernel: &mut K, ask: u32) -> Result<(u32, Duration), Fault> {
        let (applied, done) = kernel.ping_watchdog(ask)?;
        self.excess = self.excess.max(applied.saturating_sub(ask));
        Ok((applied, done))
    }

    /// After a renewal applied in time, at `now`: the reset moves to just before the lease's
    /// new end. No ping when that cannot be had — less than a second of room, or less than
    /// what the driver is known to round up by. A ping that took effect too late (the guard
    /// stopped just before it) or that the driver rounded up is made again at once, shorter.
    pub fn ping<K: Kernel>(
        &mut self,
        kernel: &mut K,
        lead: &Leadership,
        now: Duration,
        rules: &Rules,
    ) -> Pinging {
        let WatchdogState::Armed { timeout_s, .. } = self.state else {
            return Pinging::Skipped;
        };
        if !rules.holds(Rule::WatchdogBound) {
            // The mistake: the whole TTL, believed to fit.
            let ttl = lead.clock().ttl.as_secs() as u32;
            if let Ok((applied, done)) = kernel.ping_watchdog(ttl) {
                self.state = WatchdogState::Armed {
                    timeout_s: applied,
                    pinged: done,
                };
            }
            return Pinging::Pinged { second_ping: None };
        }
        let mut at = now;
        for attempt in 0..4 {
            let wanted = lead
                .watchdog_timeout(at + PING_ALLOWANCE)
                .filter(|w| *w > self.excess);
            let Some(wanted) = wanted else {
                if attempt == 0 {
                    return Pinging::Skipped;
                }
                break;
            };
            let ask = wanted - self.excess;
            match self.ask(kernel, ask) {
                Ok((applied, done)) => {
                    let done = done.max(at);
                    self.state = WatchdogState::Armed {
                        timeout_s: applied,
                        pinged: done,
                    };
                    if lead.watchdog_timeout(done).is_some_and(|w| applied <= w) {
                        self.late = false;
                        return Pinging::Pinged {
                            second_ping: second_ping_at(lead, done, applied),
                        };
                    }
                    at = done;
                }
                // A failed SETTIMEOUT or KEEPALIVE did not ping: the reset stays where it was
                // (within its bound, unless an earlier attempt here set it too long), and the
                // guard fences before it.
                Err(e) if attempt == 0 => return Pinging::Failed(e),
                Err(_) => break,
            }
        }
        let WatchdogState::Armed {
            timeout_s: now_s, ..
        } = self.state
        else {
            return Pinging::Skipped;
        };
        if self.plan == WatchdogPlan::Auto {
            self.late = true;
        }
        Pinging::Late {
            changed: (now_s != timeout_s).then_some(now_s),
        }
    }

    /// Whether the renewal's second ping, woken at `now`, would move the reset later: woken
    /// late, the whole seconds may no longer reach past the first ping's reset.
    pub fn second_ping_helps(&self, lead: &Leadership, now: Duration) -> bool {
        match (lead.watchdog_timeout(now), self.state.fires_at()) {
            (Some(w), Some(f)) => now + shown(w) > f,
            _ => false,
        }
    }

    /// The magic close (VIP and service confirmed down). Ok(true): stopped now; Ok(false):
    /// nothing to stop; Err: it could not be stopped (the node resets at the time given).
    pub fn disarm<K: Kernel>(&mut self, kernel: &mut K) -> Result<bool, (Fault, Duration)> {
        let Some(fires_at) = self.state.fires_at() else {
            return Ok(false);
        };
        if matches!(self.state, WatchdogState::DisarmFailed { .. }) {
            return Ok(false);
        }
        match kernel.disarm_watchdog() {
            Ok(()) => {
                self.state = WatchdogState::Disarmed;
                Ok(true)
            }
            Err(why) => {
                self.state = WatchdogState::DisarmFailed {
                    fires_at,
                    why: why.clone(),
                };
                Err((why, fires_at))
            }
        }
    }
}

/// Whole seconds lose up to one against the lease: a second ping, when the same timeout ends
/// just at the bound, moves the reset up to a second later — room for a guard that fences at
/// its deadline to stop the service and disarm before the reset. None: not worth a wake-up.
fn second_ping_at(lead: &Leadership, now: Duration, applied: u32) -> Option<Duration> {
    let exact = lead.watchdog_exact(applied);
    (exact > now + SECOND_PING_MIN).then(|| exact.saturating_sub(Duration::from_millis(2)))
}

impl<K: Kernel> super::Machine<K> {
    /// After a renewal applied in time, a fresh proof or a retake (or at every wake-up, with
    /// Rule::PingOnRenewal off):
    /// the watchdog's reset moves to just before the lease's new end; where no timeout fits,
    /// a `required` guard fences (Cause::WatchdogLate) and an `auto` one says that the reset
    /// may come late.
    pub(super) fn ping_watchdog(&mut self) {
        let now = self.time();
        match self
            .dog
            .ping(&mut self.kernel, &self.leadership, now, &self.mutant.rules)
        {
            Pinging::Skipped => {}
            Pinging::Pinged { second_ping } => self.plan_second_ping(second_ping),
            Pinging::Failed(e) => self.log(Level::Error, format!("pinging the watchdog: {e}")),
            Pinging::Late { .. } if self.dog.plan() == WatchdogPlan::Required => {
                self.fence(now, Cause::WatchdogLate)
            }
            Pinging::Late { changed } => {
                if let Some(now_s) = changed {
                    self.log(
                        Level::Error,
                        format!(
                            "the watchdog's timeout of {now_s} s cannot be had shorter: a frozen \
                             guard's node may be reset after its lease could end at etcd"
                        ),
                    );
                }
            }
        }
    }

    pub(super) fn plan_second_ping(&mut self, at: Option<Duration>) {
        match at {
            Some(t) if self.fenced().is_none() => self.timers.set(Timer::SecondPing, t),
            _ => self.timers.clear(Timer::SecondPing),
        }
    }

    /// Timer::SecondPing: the renewal's second ping, when the promise still holds (one per
    /// renewal).
    pub(super) fn second_ping(&mut self, now: Duration) {
        let helps = self.dog.second_ping_helps(&self.leadership, now);
        if helps && self.fenced().is_none() && now < self.fence_at() {
            self.ping_watchdog();
            self.timers.clear(Timer::SecondPing);
        }
    }

    /// The magic close, once VIP and service are confirmed down.
    pub(super) fn disarm_step(&mut self, now: Duration) {
        if !self.all_down() && self.holds(Rule::DisarmWhenDown) {
            return;
        }
        match self.dog.disarm(&mut self.kernel) {
            Ok(true) => self.log(Level::Info, "watchdog disarmed".into()),
            Ok(false) => {}
            Err((why, fires_at)) => {
                let left = fires_at.saturating_sub(now).as_secs_f64();
                self.log(
                    Level::Error,
                    format!(
                        "the watchdog could not be stopped ({why}): the node resets in {left:.1} s"
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::lead;
    use super::super::tests::World;
    use super::*;

    #[test]
    fn a_coarse_driver_is_learned_at_arming_and_asked_no_more_than_it_rounds_to() {
        // A driver that rounds every timeout up to an even number of seconds.
        let mut k = World::plain();
        k.dog_step = 2;
        k.now = Duration::from_millis(100_020);
        let l = lead(10, 2);
        let mut dog = Watchdog::new(WatchdogPlan::Required);
        let now = k.now;
        let armed = dog.arm(&mut k, &l, now, &Rules::default());
        // 8 wanted; 7, 6, 5 probed (8, 6, 6 applied: rounds up by one), then 7 asked → 8.
        assert_eq!(k.watchdog_asks(), [8, 7, 6, 5, 7]);
        assert_eq!(armed, Arming::Fitted { timeout_s: 8 });
        let armed = dog.armed(&l, 8, now);
        assert!(
            matches!(armed, Arming::Armed { timeout_s: 8, .. }),
            "{armed:?}"
        );
        // A ping 3.35 s on asks one less than the bound, so the rounding cannot overshoot.
        k.calls.clear();
        let ping = dog.ping(
            &mut k,
            &l,
            Duration::from_millis(103_350),
            &Rules::default(),
        );
        assert!(matches!(ping, Pinging::Pinged { .. }), "{ping:?}");
        let WatchdogState::Armed { timeout_s, .. } = dog.state().clone() else {
            panic!("{:?}", dog.state())
        };
        assert!(timeout_s as f64 * (1.0 + WATCHDOG_TOLERANCE) <= 10.0 / 1.0838 - 3.35 / 0.9162);
    }

    #[test]
    fn a_driver_with_ten_second_steps_is_asked_what_it_cannot_round_past_the_bound() {
        // Found by the simulation (seed 113714283457851294): the fit walked down from 13 to
        // 10 without learning that 11 had been rounded up to 20, so the renewal's ping asked
        // 13 again, got 20, and the reset lay past the lease's end.
        let mut k = World::plain();
        k.dog_step = 10;
        k.now = Duration::from_millis(100_020);
        let l = lead(21, 3);
        let mut dog = Watchdog::new(WatchdogPlan::Auto);
        let now = k.now;
        let Arming::Fitted { timeout_s } = dog.arm(&mut k, &l, now, &Rules::default()) else {
            panic!("{:?}", dog.state())
        };
        assert_eq!(timeout_s, 10, "asked {:?}", k.watchdog_asks());
        // Asked 11, it applied 20: the driver may round up by 9, and every later ask is kept
        // that far below the bound.
        assert!(
            k.watchdog_asks().contains(&11),
            "asked {:?}",
            k.watchdog_asks()
        );
        assert_eq!(dog.excess, 9, "asked {:?}", k.watchdog_asks());
        dog.armed(&l, timeout_s, now);
        k.calls.clear();
        let at = Duration::from_millis(106_540);
        let ping = dog.ping(&mut k, &l, at, &Rules::default());
        assert!(
            matches!(ping, Pinging::Pinged { .. }),
            "{ping:?} {:?}",
            k.watchdog_asks()
        );
        assert_eq!(
            k.watchdog_asks().len(),
            1,
            "one ask: {:?}",
            k.watchdog_asks()
        );
        let WatchdogState::Armed { timeout_s, .. } = dog.state().clone() else {
            panic!("{:?}", dog.state())
        };
        assert!(
            Some(timeout_s) <= l.watchdog_timeout(at),
            "{timeout_s} s within {:?}",
            l.watchdog_timeout(at)
        );
    }

    #[test]
    fn a_ping_leaves_room_for_its_own_ioctl_so_a_slow_one_never_sets_the_reset_past_the_lease() {
        // Found by the simulation (seed 15821113133237655244): a driver that rounds up to even
        // seconds (1 asked, 2 applied: learned at arming), a ping with just room for 2 s whose
        // ioctl takes 20 ms — its reset counts from then, and lay past the lease's end.
        let l = lead(3, 1);
        let at = l
            .watchdog_exact(2)
            .saturating_sub(Duration::from_millis(10));
        assert_eq!(l.watchdog_timeout(at), Some(2), "room for 2 s at the ping");
        let mut k = World::plain();
        k.dog_step = 2;
        k.now = at;
        k.ping_late = Duration::from_millis(20);
        let mut dog = Watchdog::new(WatchdogPlan::Auto);
        dog.excess = 1;
        dog.state = WatchdogState::Armed {
            timeout_s: 2,
            pinged: at.saturating_sub(Duration::from_millis(700)),
        };
        let ping = dog.ping(&mut k, &l, at, &Rules::default());
        // Not pinged: the reset stays where the last ping put it, within its bound, and the
        // guard fences before it.
        assert_eq!(ping, Pinging::Skipped, "asked {:?}", k.watchdog_asks());
        assert!(
            k.watchdog_asks().is_empty(),
            "asked {:?}",
            k.watchdog_asks()
        );
    }

    #[test]
    fn auto_leads_without_a_device_that_refuses_and_required_fails_the_raise() {
        for (plan, want_fails) in [(WatchdogPlan::Auto, false), (WatchdogPlan::Required, true)] {
            let mut k = World::plain();
            k.dog_arm_fails = true;
            let mut dog = Watchdog::new(plan);
            let r = dog.arm(
                &mut k,
                &lead(10, 2),
                Duration::from_secs(100),
                &Rules::default(),
            );
            match (r, want_fails) {
                (Arming::Fails(why), true) => assert!(why.starts_with("watchdog=required")),
                (Arming::Without(_), false) => {
                    assert!(matches!(dog.state(), WatchdogState::Unavailable(_)))
                }
                (other, _) => panic!("{plan:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_magic_close_that_fails_says_when_the_node_resets() {
        let mut k = World::plain();
        let mut dog = Watchdog::new(WatchdogPlan::Auto);
        let l = lead(10, 2);
        let Arming::Fitted { timeout_s } =
            dog.arm(&mut k, &l, Duration::from_secs(100), &Rules::default())
        else {
            panic!("fitted")
        };
        dog.armed(&l, timeout_s, Duration::from_secs(100));
        k.dog_disarm_fails = true;
        let Err((_, at)) = dog.disarm(&mut k) else {
            panic!("the close failed")
        };
        assert_eq!(Some(at), dog.state().fires_at());
        assert_eq!(dog.disarm(&mut k), Ok(false), "tried once");
    }
}
