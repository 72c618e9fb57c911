//! The deadline arithmetic of one leadership (docs/safety.md, "The timing rule"): the
//! deadline, the lease's earliest end at the stated slew (`LeaseClock::earliest_end`), which
//! every bound derives from — the VIP's kernel lifetime, the SIGKILL, the watchdog's timeout
//! — and the latest the lease may still live at etcd (for the release).

use std::time::Duration;

use super::watchdog::WATCHDOG_TOLERANCE;
use crate::lease::LeaseClock;
use crate::rules::{Rule, Rules};

/// The deadline arithmetic of one leadership. Two things may cover it: the lease (renewals
/// applied in time), and while etcd cannot be reached, a fresh proof that the cluster is
/// whole (hold.rs), which other nodes honour through the failsafe record. The deadline and
/// the bounds are the later of the two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    clock: LeaseClock,
    /// The lease's own deadline.
    deadline: Duration,
    /// The earliest moment (boot clock) the lease may end at etcd after the renewals applied
    /// in time (LeaseClock::earliest_end, at the largest slew).
    earliest_end: Duration,
    /// A proof's deadline: asked + its life, while no later answer said the cluster is not
    /// whole.
    cover: Option<Duration>,
    /// The latest end any proof promised (asked + its life + the fence's bound): no other node
    /// may raise before it (failsafe::clearance). Never taken back.
    cover_end: Duration,
    /// The latest moment the lease may still live at etcd after any answer, late ones
    /// included (LeaseClock::latest_end): past it a release has nothing left to do.
    latest_end: Duration,
}

impl Leadership {
    /// A leadership that starts with a grant whose request was sent at `sent` (boot clock).
    pub fn new(clock: LeaseClock, sent: Duration, granted: Duration) -> Leadership {
        Leadership {
            clock,
            deadline: clock.deadline(sent, granted),
            earliest_end: LeaseClock::earliest_end(sent, granted),
            cover: None,
            cover_end: Duration::ZERO,
            latest_end: LeaseClock::latest_end(sent, granted),
        }
    }

    /// When the guard fences itself: the lease's deadline, or a fresh proof's, the later.
    pub fn deadline(&self) -> Duration {
        self.deadline.max(self.cover.unwrap_or_default())
    }

    /// The lease's own deadline: past it, the guard holds on a proof (or fences).
    pub fn lease_deadline(&self) -> Duration {
        self.deadline
    }

    pub fn clock(&self) -> LeaseClock {
        self.clock
    }

    /// The earliest moment the lease may end at etcd (LeaseClock::earliest_end), or the end a
    /// proof promised, the later: every bound (the VIP's lifetime, the SIGKILL, the watchdog's
    /// reset) comes before it.
    pub fn earliest_end(&self) -> Duration {
        self.earliest_end.max(self.cover_end)
    }

    /// A proof asked at `asked`: the guard may hold until `asked + life`, and everything it
    /// holds is gone by `asked + life + fence_bound` (docs/safety.md, "Holding through an etcd
    /// outage").
    pub fn cover(&mut self, asked: Duration, life: Duration, fence_bound: Duration) {
        self.cover = Some(self.cover.unwrap_or_default().max(asked + life));
        self.cover_end = self.cover_end.max(asked + life + fence_bound);
    }

    /// A later answer said the cluster is not whole: the proof covers the deadline no more
    /// (the bounds it set stay: they were promised).
    pub fn void_cover(&mut self) {
        self.cover = None;
    }

    /// The key taken back with a new lease granted to a request sent at `sent`.
    pub fn regrant(&mut self, sent: Duration, granted: Duration) {
        self.deadline = self.deadline.max(self.clock.deadline(sent, granted));
        self.earliest_end = self
            .earliest_end
            .max(LeaseClock::earliest_end(sent, granted));
        self.latest_end = self.latest_end.max(LeaseClock::latest_end(sent, granted));
    }

    /// The latest moment the lease may still live at etcd (LeaseClock::latest_end).
    pub fn latest_end(&self) -> Duration {
        self.latest_end
    }

    /// An answer to a renewal sent at `sent` with `granted`: however late, it says how long
    /// etcd may keep the lease (for the release).
    pub fn heard(&mut self, sent: Duration, granted: Duration) {
        self.latest_end = self.latest_end.max(LeaseClock::latest_end(sent, granted));
    }

    /// A renewal sent at `sent` that etcd answered with `granted`, applied only while the
    /// deadline is ahead (a late answer does not revive a lease that may already be gone).
    pub fn renew(
        &mut self,
        now: Duration,
        sent: Duration,
        granted: Duration,
        rules: &Rules,
    ) -> bool {
        if now >= self.deadline() {
            return false;
        }
        if !rules.holds(Rule::Slew) {
            // The mistake: etcd's clock and ours taken to run alike.
            self.deadline = self
                .deadline
                .max(sent + granted.saturating_sub(self.clock.margin));
            self.earliest_end = self.earliest_end.max(sent + granted);
            return true;
        }
        self.deadline = self.deadline.max(self.clock.deadline(sent, granted));
        self.earliest_end = self
            .earliest_end
            .max(LeaseClock::earliest_end(sent, granted));
        true
    }

    /// The watchdog timeout (whole seconds) to set now: the longest whose reset, the driver's
    /// tolerance included, still comes before the lease can end at etcd. None: less than a
    /// second is left.
    pub fn watchdog_timeout(&self, now: Duration) -> Option<u32> {
        let room = LeaseClock::watchdog_room(self.earliest_end(), now);
        let secs = (room / (1.0 + WATCHDOG_TOLERANCE)).floor();
        (secs >= 1.0).then(|| secs.min(f64::from(u32::MAX - 1)) as u32)
    }

    /// When a ping with `timeout_s` would put the reset exactly at the bound (see
    /// `watchdog_timeout`).
    pub fn watchdog_exact(&self, timeout_s: u32) -> Duration {
        let reset = f64::from(timeout_s) * (1.0 + WATCHDOG_TOLERANCE);
        LeaseClock::watchdog_room_at(self.earliest_end(), reset)
    }

    /// The kernel lifetime (whole seconds) to give the VIP when it is set at `now`
    /// (LeaseClock::vip_lifetime).
    pub fn vip_lifetime(&self, now: Duration) -> Option<u32> {
        LeaseClock::vip_lifetime(self.deadline(), self.earliest_end(), now)
    }

    /// When a service fenced at `at` gets SIGKILL: half a margin later, but KILL_LEAD before
    /// the lease (or the proof) can end (and never before the fence).
    pub fn kill_at(&self, at: Duration) -> Duration {
        let by = self
            .earliest_end()
            .saturating_sub(crate::lease::clock::KILL_LEAD);
        (at + self.clock.kill_delay()).min(by).max(at)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::lead;
    use super::*;

    #[test]
    fn the_watchdog_timeout_resets_before_the_lease_can_end_with_etcd_fast() {
        // A ping 20 ms after the send time, as docs/tuning.md and docs/safety.md say.
        let ping = Duration::from_millis(100_020);
        for (ttl, margin, want) in [(10, 2, 8), (8, 2, 7), (6, 2, 5), (3, 1, 2), (2, 1, 1)] {
            let l = lead(ttl, margin);
            let w = l.watchdog_timeout(ping).unwrap();
            assert_eq!(w, want, "lease_ttl {ttl}");
            // In true time from the send time (this clock slow, etcd's fast, both at the
            // largest slew): the reset, the driver's tolerance included, before the lease's
            // earliest end.
            let r = crate::lease::clock::MAX_SLEW;
            let reset = 0.020 / (1.0 - r) + f64::from(w) * (1.0 + WATCHDOG_TOLERANCE);
            let end = ttl as f64 / (1.0 + r);
            assert!(reset <= end, "lease_ttl {ttl}: {reset} > {end}");
        }
        // Less than a second of room: no timeout at all.
        assert_eq!(
            lead(2, 1).watchdog_timeout(Duration::from_millis(101_000)),
            None
        );
        // This clock may run slow: 2 s here may be 2.18 s of true time (7 without the factor).
        assert_eq!(
            lead(10, 2).watchdog_timeout(Duration::from_millis(102_000)),
            Some(6)
        );
    }

    /// Every (lease_ttl, lease_margin) the parameter table allows, every reply delay up to the
    /// renewal attempt timeout, in true time with this node's clock slow and etcd's fast at
    /// the largest slew: the deadline, the SIGKILL, the VIP's kernel expiry and the watchdog's
    /// reset all come before the lease can end at etcd.
    #[test]
    fn every_bound_comes_before_the_earliest_lease_end_at_every_allowed_setting() {
        use crate::lease::clock::{KERNEL_EXPIRY_SLACK, MAX_SLEW};
        let r = MAX_SLEW;
        let (lo, hi) = crate::params::master::LEASE_TTL.range.unwrap();
        let mut checked = 0u64;
        for ttl in lo..=hi {
            // True seconds after the send time at which etcd may end the lease.
            let end = ttl as f64 / (1.0 + r);
            for margin in 1..ttl {
                if !LeaseClock::margin_allowed(ttl, margin) {
                    break;
                }
                let l = lead(ttl, margin);
                let sent = Duration::from_secs(100);
                // This clock shows (1 − r) of true time: its x seconds are x / (1 − r) true.
                let true_after = |t: Duration| (t.as_secs_f64() - 100.0) / (1.0 - r);
                let deadline = true_after(l.deadline());
                let kill = true_after(l.kill_at(l.deadline()));
                assert!(
                    deadline <= kill && kill < end,
                    "{ttl}/{margin}: fence {deadline}, kill {kill}, end {end}"
                );
                let attempt = l.clock.renewal_attempt_timeout();
                for step in 0..=4u32 {
                    let now = sent + attempt * step / 4;
                    if let Some(secs) = l.vip_lifetime(now) {
                        let gone = true_after(
                            now + Duration::from_secs(secs.into()) + KERNEL_EXPIRY_SLACK,
                        );
                        assert!(gone <= end, "{ttl}/{margin} at {now:?}: VIP {gone} > {end}");
                    }
                    if let Some(w) = l.watchdog_timeout(now) {
                        let reset = true_after(now) + f64::from(w) * (1.0 + WATCHDOG_TOLERANCE);
                        assert!(reset <= end, "{ttl}/{margin} at {now:?}: reset {reset}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 4_000_000, "{checked}");
    }

    /// docs/safety.md's table of bounds is the code's: each row recomputed.
    #[test]
    fn the_bounds_table_in_the_safety_document_is_the_codes() {
        let doc = include_str!("../../../docs/safety.md");
        let (_, rest) = doc
            .split_once("<!-- bounds:start -->")
            .expect("start marker");
        let (table, _) = rest.split_once("<!-- bounds:end -->").expect("end marker");
        let mut rows = 0;
        for line in table
            .lines()
            .filter(|l| l.starts_with("| ") && !l.contains("lease_ttl"))
        {
            let cells: Vec<&str> = line
                .split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let num = |c: &str| c.trim_end_matches(" s").parse::<f64>().unwrap();
            let (ttl, margin) = (num(cells[0]) as u64, num(cells[1]) as u64);
            let l = lead(ttl, margin);
            let at = |s: f64| Duration::from_secs(100) + Duration::from_secs_f64(s);
            let after = |d: Duration| (d - Duration::from_secs(100)).as_secs_f64();
            let ms = |x: f64| format!("{x:.3} s");
            assert_eq!(cells[2], ms(after(l.earliest_end())), "{line}");
            assert_eq!(cells[3], ms(after(l.deadline())), "{line}");
            assert_eq!(cells[4], ms(after(l.kill_at(l.deadline()))), "{line}");
            let grace = after(l.kill_at(l.deadline())) - after(l.deadline());
            assert_eq!(cells[5], ms(grace), "{line}");
            let life = |s: f64| l.vip_lifetime(at(s)).unwrap_or(0);
            assert_eq!(
                cells[6],
                format!("{} s / {} s", life(0.02), life(0.5)),
                "{line}"
            );
            let w = l.watchdog_timeout(at(0.02)).unwrap_or(0);
            assert_eq!(cells[7], format!("{w} s"), "{line}");
            rows += 1;
        }
        assert!(rows >= 4, "{rows} rows");
    }
}
