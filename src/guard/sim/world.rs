//! The simulated node: its kernel (VIP, service, watchdog, clocks that a pause stops) as the
//! machine's Kernel, and the schedule's random draws.

use super::*;

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    pub(super) fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }
    /// Uniform in [lo, hi] milliseconds.
    pub(super) fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi.saturating_sub(lo) + 1))
    }
    /// Uniform in [0, max].
    pub(super) fn upto(&mut self, max: Duration) -> Duration {
        let n = max.as_nanos() as u64;
        Duration::from_nanos(if n == 0 { 0 } else { self.next() % (n + 1) })
    }
    /// Uniform in [lo, hi].
    pub(super) fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

impl Ev {
    pub(super) fn on_async_side(&self) -> bool {
        matches!(self, Ev::Deliver(_) | Ev::StepDown { .. } | Ev::Spawn)
    }
    pub(super) fn guard_side(&self) -> bool {
        self.on_async_side() || *self == Ev::FenceWake
    }
}

impl World {
    /// A host with no faults and no time taken by effects, its clock true: the machine's own
    /// unit tests set the faults they need.
    pub(crate) fn plain() -> World {
        World {
            node_rate: 1.0,
            ..World::default()
        }
    }

    /// The timeouts asked of the watchdog (armed or pinged), in order.
    pub(crate) fn watchdog_asks(&self) -> Vec<u32> {
        let asked = |c: &Call| match c {
            Call::ArmWatchdog(s) | Call::PingWatchdog(s) => Some(*s),
            _ => None,
        };
        self.calls.iter().filter_map(asked).collect()
    }

    /// The signals sent to the service (true: SIGKILL), in order.
    pub(crate) fn signals(&self) -> Vec<bool> {
        let sent = |c: &Call| match c {
            Call::Signal { kill } => Some(*kill),
            _ => None,
        };
        self.calls.iter().filter_map(sent).collect()
    }

    pub(super) fn note(&mut self, what: String) {
        if self.trace.len() < 600 {
            self.trace
                .push(format!("{:>10.3} {what}", self.now.as_secs_f64()));
        }
    }

    /// This node's clock at true time `t` (standing still through a pause).
    pub(super) fn node_at(&self, t: Duration) -> Duration {
        let stood = match self.paused {
            Some((from, until)) if t > from => t.min(until) - from,
            _ => Duration::ZERO,
        };
        (t - stood).mul_f64(self.node_rate)
    }

    /// The true time at which this node's clock shows `n` (rounded up: a wake-up armed for
    /// `n` never comes a nanosecond before it on this clock).
    pub(super) fn true_at(&self, n: Duration) -> Duration {
        let t = Duration::from_nanos((n.as_nanos() as f64 / self.node_rate).ceil() as u64 + 1);
        match self.paused {
            Some((from, until)) if t > from => t + (until - from),
            _ => t,
        }
    }

    /// The true time at which `d` of this node's running time has passed from true time `t`
    /// (a pause in between adds its length): a timer of its kernel or of its emulated device.
    pub(super) fn running_after(&self, t: Duration, d: Duration) -> Duration {
        match self.paused {
            // From inside the pause: its time starts at the resume.
            Some((from, until)) if from <= t && t < until => until + d,
            // Across it: the pause adds its length.
            Some((from, until)) if t < from && t + d > from => t + d + (until - from),
            _ => t + d,
        }
    }

    /// One effect's time passes (the world goes on meanwhile: a lifetime may run out).
    pub(super) fn take(&mut self, max: Duration) {
        let d = self.rng.as_mut().map_or(Duration::ZERO, |r| r.upto(max));
        self.now += d;
        self.expire();
    }

    pub(super) fn expire(&mut self) {
        if self.vip && self.now >= self.vip_kernel_end {
            self.vip = false;
            self.expiries += 1;
            self.note("VIP expired in the kernel".into());
        }
    }

    /// When the kernel lets an address go that was given `secs` now: its lifetime counts on
    /// this node's clock, its expiry work comes a little late (or up to HZ/50 early).
    /// The effect took place, and fails all the same (partial_faults, half the time).
    pub(super) fn partial_fault(&mut self, what: &str) -> Result<(), Fault> {
        let fails = self.partial_faults && self.rng.as_mut().is_some_and(|r| r.chance(0.5));
        if !fails {
            return Ok(());
        }
        self.note(format!(
            "VIP {what} took effect, and failed for another address"
        ));
        Err(Fault::Netlink("ENOBUFS (simulated)".into()))
    }

    pub(super) fn kernel_end(&self, secs: u32) -> Duration {
        let end = self.running_after(
            self.now,
            Duration::from_secs(secs.into()).div_f64(self.node_rate),
        );
        let slack = Duration::from_millis(self.kernel_slack_ms.unsigned_abs());
        if self.kernel_slack_ms < 0 {
            end.saturating_sub(slack)
        } else {
            end + slack
        }
    }

    /// (v): nothing is raised before the watchdog is armed (unless arming failed and the plan
    /// leads without it).
    pub(super) fn check_armed_for_raise(&mut self, what: &str) {
        if self.dog_planned && self.dog.is_none() && !self.dog_arm_fails && !self.dog_disarmed {
            let t = self.now;
            self.dog_violations
                .push(format!("{what} at {t:?} before the watchdog was armed"));
        }
    }

    pub(super) fn dog_set(&mut self, secs: u32) -> u32 {
        let step = self.dog_step.max(1);
        let applied = secs.div_ceil(step) * step;
        let fires = self.running_after(
            self.now,
            Duration::from_secs(applied.into()).mul_f64(self.dog_late),
        );
        self.dog = Some((applied, fires));
        self.scheduled.push((fires, Ev::WatchdogFires));
        applied
    }
}

impl Kernel for World {
    fn now(&mut self) -> Duration {
        self.node_at(self.now)
    }
    fn arm_watchdog(&mut self, secs: u32) -> Result<u32, ArmError> {
        self.calls.push(Call::ArmWatchdog(secs));
        self.take(self.ping_max);
        if self.dog_arm_fails {
            return Err(ArmError::NotArmed(
                "/dev/watchdog0 is held by another process (simulated)".into(),
            ));
        }
        self.dog_armed_at = Some(self.now);
        let applied = self.dog_set(secs);
        self.note(format!("watchdog armed, {applied} s"));
        self.take(self.ping_max);
        Ok(applied)
    }
    fn ping_watchdog(&mut self, secs: u32) -> Result<(u32, Duration), Fault> {
        self.calls.push(Call::PingWatchdog(secs));
        self.take(self.ping_max);
        if self.dog.is_none() {
            return Err(Fault::Watchdog("not armed".into()));
        }
        self.pings.push(self.now);
        // Failures while leading, not while arming (its probes are pings too).
        let leading = self
            .dog_armed_at
            .is_some_and(|t| self.now > t + self.ping_max * 8);
        if self.dog_ping_fails > 0.0 && leading && self.pings.len().is_multiple_of(3) {
            return Err(Fault::Watchdog("EIO (simulated)".into()));
        }
        let applied = self.dog_set(secs);
        self.note(format!("watchdog pinged, {applied} s (asked {secs})"));
        self.take(self.ping_max);
        self.now += std::mem::take(&mut self.ping_late);
        Ok((applied, self.node_at(self.now)))
    }
    fn disarm_watchdog(&mut self) -> Result<(), Fault> {
        self.calls.push(Call::DisarmWatchdog);
        self.take(self.ping_max);
        if self.dog.is_none() {
            return Ok(());
        }
        if self.vip || self.service {
            let t = self.now;
            self.dog_violations.push(format!(
                "watchdog disarmed at {t:?} with the VIP ({}) or the service ({}) up",
                self.vip, self.service
            ));
        }
        if self.dog_disarm_fails {
            self.note("watchdog magic close failed".into());
            self.dog_close_failed = true;
            return Err(Fault::Watchdog("EIO (simulated)".into()));
        }
        self.dog = None;
        self.dog_disarmed = true;
        self.note("watchdog disarmed".into());
        Ok(())
    }
    fn add_vip(&mut self, secs: u32) -> Result<(), Fault> {
        self.calls.push(Call::AddVip(secs));
        self.take(self.effect_max);
        self.check_armed_for_raise("VIP added");
        self.raised.push(self.now);
        self.vip = true;
        self.vip_kernel_end = self.kernel_end(secs);
        self.scheduled.push((self.vip_kernel_end, Ev::KernelExpiry));
        self.note(format!("VIP added, lifetime {secs} s"));
        self.take(self.effect_max);
        self.partial_fault("add")
    }
    fn extend_vip(&mut self, secs: u32) -> Result<(), Fault> {
        self.calls.push(Call::ExtendVip(secs));
        self.take(self.effect_max);
        self.now += self.extend_takes;
        if !self.vip {
            // RTM_NEWADDR with NLM_F_REPLACE adds an address that is not there.
            self.vip = true;
            self.recreated.push(self.now);
            self.note("VIP added anew by a replace".into());
        }
        self.vip_kernel_end = self.kernel_end(secs);
        self.scheduled.push((self.vip_kernel_end, Ev::KernelExpiry));
        self.take(self.effect_max);
        if self.extend_fails {
            return Err(Fault::Netlink("ENOBUFS (simulated)".into()));
        }
        self.partial_fault("extension")
    }
    fn remove_vip(&mut self) -> Result<(), Fault> {
        self.calls.push(Call::RemoveVip);
        self.take(self.effect_max);
        self.removals += 1;
        let fails = match self.remove_fault {
            Some(RemoveFault::Always) => true,
            Some(RemoveFault::Once) => self.removals == 1,
            _ => false,
        };
        if fails && self.vip {
            self.note("VIP removal failed".into());
            return Err(Fault::Netlink("EBUSY (simulated)".into()));
        }
        if self.vip {
            self.removed_at.push(self.now);
            self.note("VIP removed".into());
        }
        self.vip = false;
        self.take(self.effect_max);
        Ok(())
    }
    fn signal_service(&mut self, _: &ServiceRef, kill: bool) -> Result<(), Fault> {
        self.calls.push(Call::Signal { kill });
        self.take(self.effect_max);
        if kill {
            if self.service && !self.unkillable {
                self.service = false;
                self.note("service SIGKILLed".into());
            }
        } else {
            self.termed_at.get_or_insert(self.now);
            self.note("service SIGTERMed".into());
            if !self.ignores_term && !self.unkillable {
                self.scheduled
                    .push((self.now + self.term_exit, Ev::ServiceDies));
            }
        }
        self.take(self.effect_max);
        Ok(())
    }
    fn lowering(&mut self) {
        self.calls.push(Call::Lowering);
        if self.lowered_at.is_none() {
            self.lowered_at = Some(self.now);
            self.note("lowering: the host's standing cleared".into());
        }
    }
    fn forget_service(&mut self, _: &ServiceRef) {
        self.calls.push(Call::ForgetService);
        if self.service {
            self.forgotten_while_up = true;
        }
    }
}
