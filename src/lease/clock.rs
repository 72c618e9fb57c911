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

/// How fast, relative to true time, a disciplined clock may run: chrony's default
/// maxslewrate (83,333 ppm) plus the kernel's frequency limit (500 ppm). CLOCK_BOOTTIME and
/// etcd's monotonic clock are both slewed by it (never stepped).
pub const MAX_SLEW: f64 = 0.083_833;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseClock {
    pub ttl: Duration,
    pub margin: Duration,
}

impl LeaseClock {
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
