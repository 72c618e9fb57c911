//! The guard's timing rule, as arithmetic on CLOCK_BOOTTIME (the fencing thread's timer,
//! guard::fence, runs on the same clock). A lease renewed by a keepalive request sent at `t`
//! lives at etcd until at least `ttl` has passed on etcd's clock since (etcd can only extend
//! it, e.g. across its own leader changes). With etcd's clock fast and this one slow, both at
//! the largest slew `r` (assumption 2 of docs/safety.md), that is `ttl (1 − r)/(1 + r)` on
//! this node's boot clock after `t`: `earliest_end`, the one moment every bound derives from —
//! the deadline, the VIP's kernel lifetime, the service's SIGKILL and the watchdog's reset all
//! come before it. The guard treats the lease as lost at `t + ttl − margin` (never later than
//! that moment allows). Send time, not reply time: a reply that arrives late says nothing about
//! when etcd renewed. BOOTTIME, not MONOTONIC: it keeps counting while the machine is
//! suspended, so a guard on a VM that was paused for a minute knows it on waking.

use std::time::Duration;

/// Time since boot, including time spent suspended.
pub fn boottime() -> Duration {
    // CLOCK_BOOTTIME exists on every Linux this runs on; the zero fallback is never reached.
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(Duration::from)
        .unwrap_or_default()
}

/// Days from 1970-01-01 to a civil date (proleptic Gregorian; Howard Hinnant's
/// days_from_civil), for timestamps written by other programs.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Wall-clock time, ms since the epoch (for status and logs, never for the lease).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The wall-clock time (ms since the epoch) of an earlier moment on the boot clock.
pub fn unix_ms_at(boot: Duration) -> u64 {
    unix_ms().saturating_sub(boottime().saturating_sub(boot).as_millis() as u64)
}

/// How fast, relative to true time, a disciplined clock may run: chrony's default
/// maxslewrate (83,333 ppm) plus the kernel's frequency limit (500 ppm). CLOCK_BOOTTIME and
/// etcd's monotonic clock are both slewed by it (never stepped).
pub const MAX_SLEW: f64 = 0.083_833;

/// How late after its lifetime the kernel may still show an address: measured here at
/// 0.03–0.35 s on an idle host (IPv4 and IPv6; docs/safety.md), rounded up. The kernel's own
/// rule (its expiry work may defer by up to ADDRCONF_TIMER_FUZZ_MAX, a second, plus rounding)
/// allows more; sizing this from that rule is open work (docs/safety.md).
pub const KERNEL_EXPIRY_SLACK: Duration = Duration::from_millis(500);

/// SIGKILL goes to a fenced service at least this long before the lease can end at etcd: the
/// fencing thread's wake-up latency (its p99 bound, 50 ms) and the kill's own time.
pub const KILL_LEAD: Duration = Duration::from_millis(100);

/// The least time between SIGTERM at the deadline and SIGKILL that a derived margin leaves the
/// service (at the largest slew; more where the clocks are better).
pub const MIN_TERM_GRACE: Duration = Duration::from_millis(250);

/// The lease timing policy, all of it: the TTL and margin (the parameters lease_ttl and
/// lease_margin, or what follows from the TTL), and everything the guard times by them —
/// keepalive interval, renewal attempt, etcd operation timeout, the deadline, the VIP's kernel
/// lifetime, the service's kill after a fence, the watchdog's room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseClock {
    pub ttl: Duration,
    pub margin: Duration,
}

impl LeaseClock {
    /// Whether a margin (s) works with a TTL (s): at least 1, and the deadline (ttl − margin
    /// after a keepalive) after the next keepalive (ttl/3), or every renewal would come late.
    pub fn margin_allowed(ttl: u64, margin: u64) -> bool {
        margin >= 1 && 3 * margin < 2 * ttl
    }

    /// lease_margin when it is not set: a fifth of the TTL, rounded, but at least 2 s and at
    /// least what chrony's largest slew needs with a SIGTERM grace (`needed_margin`), kept
    /// within `margin_allowed` (1 for a TTL of 2 or 3, 2 from 4 to 10, 3 for 11 to 17, 6 for
    /// 30).
    pub fn derived_margin(ttl: u64) -> u64 {
        let slew = LeaseClock {
            ttl: Duration::from_secs(ttl),
            margin: Duration::ZERO,
        }
        .needed_margin()
        .as_secs_f64()
        .ceil() as u64;
        ((ttl + 2) / 5)
            .max(2)
            .max(slew)
            .clamp(1, ((2 * ttl).saturating_sub(1) / 3).max(1))
    }

    /// The TTL for a margin set alone: the cluster's TTL, raised so that the margin stays
    /// allowed (what corosync says on one node must not make the setting wrong everywhere).
    pub fn ttl_for_margin(cluster_ttl: u64, margin: u64) -> u64 {
        cluster_ttl.max(3 * margin / 2 + 1)
    }

    /// Keepalives go out every TTL/3, like etcd's Go client.
    pub fn keepalive_interval(&self) -> Duration {
        self.ttl / 3
    }

    /// How long one renewal attempt may take. The slack between the next keepalive and the
    /// deadline (`ttl - margin - ttl/3`) must hold several attempts on different members: one
    /// member that hangs (restarting, cut off) must not use it all up.
    pub fn renewal_attempt_timeout(&self) -> Duration {
        let slack = self
            .ttl
            .saturating_sub(self.margin)
            .saturating_sub(self.keepalive_interval());
        (slack / 3).clamp(Duration::from_millis(100), self.keepalive_interval())
    }

    /// How long one etcd call outside the renewals may take (connect, grant, the first take
    /// of the key): a third of the TTL, within 0.5–2 s.
    pub fn etcd_op_timeout(&self) -> Duration {
        (self.ttl / 3).clamp(Duration::from_millis(500), Duration::from_secs(2))
    }

    /// When a fenced service that got SIGTERM gets SIGKILL: half a margin after the fence, but
    /// at the latest KILL_LEAD before the lease can end at etcd (`Leadership::kill_by`).
    pub fn kill_delay(&self) -> Duration {
        self.margin / 2
    }

    /// The earliest moment (this node's boot clock) the lease may end at etcd after a
    /// keepalive sent at `sent` that etcd answered with `granted` TTL: etcd counts `granted` on
    /// its own clock, which may run fast by MAX_SLEW (the lease ends after `granted/(1 + r)` of
    /// true time), and this clock may run slow by as much (it shows `(1 − r)` of true time).
    /// Every bound of the guard derives from it.
    pub fn earliest_end(sent: Duration, granted: Duration) -> Duration {
        sent + granted.mul_f64((1.0 - MAX_SLEW) / (1.0 + MAX_SLEW))
    }

    /// The kernel lifetime (whole seconds) to give the VIP when it is set at `now` (read right
    /// before the call). It must run out, kernel slack included, before the lease can end at
    /// etcd (`earliest_end`, counted on this clock, which the kernel's timers follow); within
    /// that, it is the shortest whole number of seconds that still reaches our own `deadline`,
    /// so the kernel never takes the VIP from a guard that is on time. None: too little lease
    /// left for even one second.
    pub fn vip_lifetime(deadline: Duration, earliest_end: Duration, now: Duration) -> Option<u32> {
        let latest = earliest_end
            .saturating_sub(now)
            .saturating_sub(KERNEL_EXPIRY_SLACK)
            .as_secs();
        let remaining = deadline.saturating_sub(now);
        let wanted = remaining.as_secs() + u64::from(remaining.subsec_nanos() > 0);
        let secs = wanted.min(latest);
        (secs >= 1).then(|| secs.min(u64::from(u32::MAX - 1)) as u32)
    }

    /// The latest moment the lease may still live at etcd as far as this node can tell without
    /// asking (etcd's clock slow, this one fast): past it, a release has nothing left to do.
    pub fn latest_end(sent: Duration, granted: Duration) -> Duration {
        sent + granted.mul_f64((1.0 + MAX_SLEW) / (1.0 - MAX_SLEW))
    }

    /// How long the release (delete the key if it carries the lease, revoke the lease) may
    /// take: three renewal attempts.
    pub fn release_timeout(&self) -> Duration {
        self.renewal_attempt_timeout() * 3
    }

    /// The moment (on the boot clock) to self-fence, given a keepalive sent at `sent` that
    /// etcd answered with `granted` TTL: `sent + granted − margin`, but never later than
    /// KILL_LEAD before the lease can end at etcd (a margin below `needed_margin` is thus
    /// taken as large as the clocks need; validate-all says so). A granted TTL at or below the
    /// margin means "now".
    pub fn deadline(&self, sent: Duration, granted: Duration) -> Duration {
        let asked = sent + granted.saturating_sub(self.margin);
        let latest = LeaseClock::earliest_end(sent, granted).saturating_sub(KILL_LEAD);
        asked.min(latest.max(sent))
    }

    /// How much true time, at the latest, is left at `now` (this boot clock) before a lease
    /// that can end at `earliest_end` (this clock) does end at etcd: this clock may run slow by
    /// MAX_SLEW, and a hardware watchdog counts true time, so its reset must come within this.
    /// Negative: none.
    pub fn watchdog_room(earliest_end: Duration, now: Duration) -> f64 {
        (earliest_end.as_secs_f64() - now.as_secs_f64()) / (1.0 - MAX_SLEW)
    }

    /// The boot-clock time at which `watchdog_room` is down to `room` seconds.
    pub fn watchdog_room_at(earliest_end: Duration, room: f64) -> Duration {
        earliest_end.saturating_sub(Duration::from_secs_f64((room * (1.0 - MAX_SLEW)).max(0.0)))
    }

    /// The smallest margin that still fences before the lease can end at etcd when this
    /// node's clock runs slow and etcd's leader's runs fast, both at MAX_SLEW:
    /// `(T − M)/(1 − r) ≤ T/(1 + r)`, so `M ≥ 2rT/(1 + r)` (about 15.5 % of the TTL).
    pub fn slew_margin(&self) -> Duration {
        self.ttl.mul_f64(2.0 * MAX_SLEW / (1.0 + MAX_SLEW))
    }

    /// The smallest margin that, at the largest slew, leaves the fenced service MIN_TERM_GRACE
    /// between SIGTERM at the deadline and SIGKILL KILL_LEAD before the lease's earliest end.
    pub fn needed_margin(&self) -> Duration {
        self.slew_margin() + KILL_LEAD + MIN_TERM_GRACE
    }

    /// At the largest slew, how long a service fenced at the deadline has between SIGTERM and
    /// SIGKILL (None: none at all — the deadline is taken earlier, and the service is killed
    /// when it is fenced).
    pub fn term_grace(&self) -> Option<Duration> {
        let fence = self.deadline(Duration::ZERO, self.ttl);
        let end = LeaseClock::earliest_end(Duration::ZERO, self.ttl);
        let kill = (fence + self.kill_delay()).min(end.saturating_sub(KILL_LEAD));
        Some(kill.saturating_sub(fence)).filter(|g| !g.is_zero())
    }

    /// How long the lease may still live at etcd, seen from here: the deadline plus margin.
    pub fn ttl_left(&self, deadline: Duration, now: Duration) -> Duration {
        (deadline + self.margin).saturating_sub(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOCK: LeaseClock = LeaseClock {
        ttl: Duration::from_secs(3),
        margin: Duration::from_secs(1),
    };

    #[test]
    fn deadline_counts_from_the_send_time_minus_the_margin() {
        let sent = Duration::from_secs(100);
        assert_eq!(
            CLOCK.deadline(sent, Duration::from_secs(3)),
            Duration::from_secs(102)
        );
        assert_eq!(CLOCK.keepalive_interval(), Duration::from_secs(1));
    }

    #[test]
    fn a_hanging_member_leaves_time_for_two_more_attempts() {
        // ttl 3, margin 1: slack 1 s after the next keepalive; attempts of 333 ms.
        assert_eq!(CLOCK.renewal_attempt_timeout(), Duration::from_secs(1) / 3);
        let defaults = LeaseClock {
            ttl: Duration::from_secs(10),
            margin: Duration::from_secs(2),
        };
        assert!(defaults.renewal_attempt_timeout() > Duration::from_millis(1500));
        assert!(defaults.renewal_attempt_timeout() <= defaults.keepalive_interval());
    }

    #[test]
    fn a_granted_ttl_within_the_margin_fences_at_once() {
        let sent = Duration::from_secs(100);
        assert_eq!(CLOCK.deadline(sent, Duration::from_millis(800)), sent);
        assert_eq!(CLOCK.deadline(sent, Duration::ZERO), sent);
    }

    #[test]
    fn ttl_left_adds_the_margin_back() {
        let now = Duration::from_secs(100);
        assert_eq!(
            CLOCK.ttl_left(now + Duration::from_millis(1500), now),
            Duration::from_millis(2500)
        );
        assert_eq!(
            CLOCK.ttl_left(now, now + Duration::from_secs(5)),
            Duration::ZERO
        );
    }

    #[test]
    fn the_margin_that_covers_chronys_largest_slew_grows_with_the_ttl() {
        let at = |ttl: u64, margin: u64| LeaseClock {
            ttl: Duration::from_secs(ttl),
            margin: Duration::from_secs(margin),
        };
        // 10 s / 2 s and the derived margins (a fifth, at least 2 s where allowed) are covered.
        assert!(at(10, 2).slew_margin() < Duration::from_secs(2));
        assert!(at(3, 1).slew_margin() < Duration::from_secs(1));
        assert!(at(30, 6).slew_margin() < Duration::from_secs(6));
        // A margin of 1 s at 30 s is not: 4.6 s are needed.
        let need = at(30, 1).slew_margin();
        assert!(need > Duration::from_millis(4600) && need < Duration::from_millis(4700));
    }

    #[test]
    fn the_boot_clock_moves_forward() {
        let a = boottime();
        std::thread::sleep(Duration::from_millis(5));
        assert!(boottime() >= a + Duration::from_millis(5));
    }
}
