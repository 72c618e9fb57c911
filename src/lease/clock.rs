//! The guard's timing rule, as arithmetic on CLOCK_BOOTTIME, and a timer on that clock
//! (`BootTimer`) to wake at the deadline it gives. A lease renewed by a
//! keepalive request sent at `t` lives at etcd until at least `t + ttl` (etcd can only extend
//! it, e.g. across its own leader changes). The guard treats it as lost at
//! `t + ttl - margin`, so that fencing is complete before any other node can take the key.
//! Send time, not reply time: a reply that arrives late says nothing about when etcd renewed.
//! BOOTTIME, not MONOTONIC: it keeps counting while the machine is suspended, so a guard on a
//! VM that was paused for a minute knows it on waking.

use std::time::Duration;

/// Time since boot, including time spent suspended.
pub fn boottime() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A one-shot timer on CLOCK_BOOTTIME (a timerfd, armed at an absolute boot-clock time). It
/// keeps counting while the machine is suspended and fires at once on resume when its time
/// has passed, which tokio's timers (CLOCK_MONOTONIC) do not: the guard sleeps until its
/// deadline on it instead of waking every few hundred milliseconds to look at the clock.
pub struct BootTimer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl BootTimer {
    /// Needs a tokio runtime with I/O enabled.
    pub fn new() -> std::io::Result<BootTimer> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: the OwnedFd is the descriptor's only owner and keeps it open, unchanged,
        // for as long as the AsyncFd holds it.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE)
        }
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(BootTimer { fd })
    }

    /// Arms the timer for boot-clock time `at` (a time already past fires at once).
    pub fn set(&self, at: Duration) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        // An all-zero value would disarm the timer: the earliest time is 1 ns.
        let at = at.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: at.as_secs() as libc::time_t,
                tv_nsec: at.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until the timer fires (re-arming it before then moves the time).
    pub async fn fired(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            let read = ready.try_io(|fd| {
                // SAFETY: reads 8 bytes into a buffer of 8 bytes.
                let n = unsafe {
                    libc::read(
                        fd.as_raw_fd(),
                        expirations.as_mut_ptr().cast(),
                        expirations.len(),
                    )
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match read {
                Ok(result) => return result,
                // Not expired after all (re-armed meanwhile): wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

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
    fn the_boot_timer_fires_at_its_time_and_can_be_moved() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = BootTimer::new().unwrap();
            let start = boottime();
            timer.set(start + Duration::from_millis(60)).unwrap();
            // Moved later before it fired: the first time no longer counts.
            timer.set(start + Duration::from_millis(120)).unwrap();
            timer.fired().await.unwrap();
            assert!(boottime() >= start + Duration::from_millis(120));
            // A time already past fires at once.
            timer.set(start).unwrap();
            let quick = tokio::time::timeout(Duration::from_secs(5), timer.fired()).await;
            assert!(quick.is_ok(), "a past time fires at once");
        });
    }

    #[test]
    fn the_boot_clock_moves_forward() {
        let a = boottime();
        std::thread::sleep(Duration::from_millis(5));
        assert!(boottime() >= a + Duration::from_millis(5));
    }
}
