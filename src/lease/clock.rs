//! The guard's timing rule, as arithmetic on CLOCK_BOOTTIME (the fencing thread's timer,
//! guard::fence, runs on the same clock). A lease renewed by a
//! keepalive request sent at `t` lives at etcd until at least `t + ttl` (etcd can only extend
//! it, e.g. across its own leader changes). The guard treats it as lost at
//! `t + ttl - margin`, so that fencing is complete before any other node can take the key.
//! Send time, not reply time: a reply that arrives late says nothing about when etcd renewed.
//! BOOTTIME, not MONOTONIC: it keeps counting while the machine is suspended, so a guard on a
//! VM that was paused for a minute knows it on waking.

use std::time::Duration;

/// Time since boot, including time spent suspended.
pub fn boottime() -> Duration {
    // CLOCK_BOOTTIME exists on every Linux this runs on; the zero fallback is never reached.
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(Duration::from)
        .unwrap_or_default()
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
    /// least what chrony's largest slew needs (`slew_margin`), kept within `margin_allowed`
    /// (1 for a TTL of 2 or 3, 2 from 4 to 12, 6 for 30).
    pub fn derived_margin(ttl: u64) -> u64 {
        let slew = LeaseClock {
            ttl: Duration::from_secs(ttl),
            margin: Duration::ZERO,
        }
        .slew_margin()
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

    /// When a fenced service that got SIGTERM gets SIGKILL: half a margin after the fence.
    pub fn kill_delay(&self) -> Duration {
        self.margin / 2
    }

    /// The kernel lifetime (whole seconds) to give the VIP at `now`. It must run out, kernel
    /// slack included, before the lease can at etcd (`lease_end`); within that, it is the
    /// shortest whole number of seconds that still reaches our own `deadline`, so the kernel
    /// never takes the VIP from a guard that is on time. None: too little lease left for even
    /// one second.
    pub fn vip_lifetime(deadline: Duration, lease_end: Duration, now: Duration) -> Option<u32> {
        let latest = lease_end
            .saturating_sub(now)
            .saturating_sub(KERNEL_EXPIRY_SLACK)
            .as_secs();
        let remaining = deadline.saturating_sub(now);
        let wanted = remaining.as_secs() + u64::from(remaining.subsec_nanos() > 0);
        let secs = wanted.min(latest);
        (secs >= 1).then(|| secs.min(u64::from(u32::MAX - 1)) as u32)
    }

    /// The earliest moment (boot clock) the lease may end at etcd after a keepalive sent at
    /// `sent` that etcd answered with `granted` TTL (etcd can only extend it).
    pub fn lease_end(sent: Duration, granted: Duration) -> Duration {
        sent + granted
    }

    /// How long the release (delete the key if it carries the lease, revoke the lease) may
    /// take: three renewal attempts.
    pub fn release_timeout(&self) -> Duration {
        self.renewal_attempt_timeout() * 3
    }

    /// The moment (on the boot clock) to self-fence, given a keepalive sent at `sent` that
    /// etcd answered with `granted` TTL. A granted TTL at or below the margin means "now".
    pub fn deadline(&self, sent: Duration, granted: Duration) -> Duration {
        sent + granted.saturating_sub(self.margin)
    }

    /// How much true time, at the latest, is left at `now` (this boot clock) before a lease
    /// renewed by a keepalive sent at `sent` with `granted` TTL can end at etcd — etcd's clock
    /// fast and this one slow, both at MAX_SLEW (assumption 2 of docs/safety.md): a hardware
    /// watchdog counts true time, so its reset must come within this. Negative: none.
    pub fn watchdog_room(&self, sent: Duration, granted: Duration, now: Duration) -> f64 {
        let since = now.as_secs_f64() - sent.as_secs_f64();
        granted.as_secs_f64() / (1.0 + MAX_SLEW) - since / (1.0 - MAX_SLEW)
    }

    /// The boot-clock time after `sent` at which `watchdog_room` is down to `room` seconds.
    pub fn watchdog_room_at(&self, sent: Duration, granted: Duration, room: f64) -> Duration {
        let since = (granted.as_secs_f64() / (1.0 + MAX_SLEW) - room) * (1.0 - MAX_SLEW);
        sent + Duration::from_secs_f64(since.max(0.0))
    }

    /// The smallest margin that still fences before the lease can end at etcd when this
    /// node's clock runs slow and etcd's leader's runs fast, both at MAX_SLEW:
    /// `(T − M)/(1 − r) ≤ T/(1 + r)`, so `M ≥ 2rT/(1 + r)` (about 15.5 % of the TTL).
    pub fn slew_margin(&self) -> Duration {
        self.ttl.mul_f64(2.0 * MAX_SLEW / (1.0 + MAX_SLEW))
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
