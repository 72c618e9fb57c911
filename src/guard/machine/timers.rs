//! Every wake-up the machine can want, in one table (quinn-proto's connection/timer.rs): a
//! step that schedules something arms its timer, and `Machine::on_timer` acts on each when it
//! is due, one arm per timer, in this table's order; the machine's next wake-up is the
//! earliest armed one, or the fence. A timer is the one record of its time: no field mirrors
//! it (where the time is data too, it is read from the timer: the step-down's budget is
//! Timer::Budget's while it runs, and spent once it fired). The fence is not a timer: its
//! time follows from the deadline and the watchdog (`Machine::fence_at`), checked before every
//! input and after every effect.

use std::time::Duration;

/// What the machine may be woken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// A VIP removal that failed, tried again.
    VipRetry,
    /// The end of the take-back's budget: a service that has not confirmed is stopped.
    TakeBack,
    /// SIGKILL to a service that got SIGTERM.
    Kill,
    /// The next look at whether anything of the service is left.
    Look,
    /// A renewal's second watchdog ping (machine::watchdog).
    SecondPing,
    /// The next ask of corosync while holding, or about to, or the ask out given up
    /// (machine::hold).
    Ask,
    /// The next try to take the key back after a hold.
    Retake,
    /// The next keepalive.
    Renewal,
    /// A release that failed, tried again.
    ReleaseRetry,
    /// A step-down's budget: the answer is owed by then (while armed, the budget's end).
    Budget,
}

/// Every timer, in the order their arms run.
pub const ALL: [Timer; 10] = [
    Timer::VipRetry,
    Timer::TakeBack,
    Timer::Kill,
    Timer::Look,
    Timer::SecondPing,
    Timer::Ask,
    Timer::Retake,
    Timer::Renewal,
    Timer::ReleaseRetry,
    Timer::Budget,
];

/// When each timer fires (boot clock), if armed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timers {
    at: [Option<Duration>; ALL.len()],
}

impl Timers {
    pub fn set(&mut self, timer: Timer, at: Duration) {
        self.at[timer as usize] = Some(at);
    }

    /// Arms `timer` at `at`, or keeps it where it is when that is earlier.
    pub fn set_earlier(&mut self, timer: Timer, at: Duration) {
        let t = &mut self.at[timer as usize];
        *t = Some(t.map_or(at, |old| old.min(at)));
    }

    pub fn clear(&mut self, timer: Timer) {
        self.at[timer as usize] = None;
    }

    pub fn get(&self, timer: Timer) -> Option<Duration> {
        self.at[timer as usize]
    }

    pub fn armed(&self, timer: Timer) -> bool {
        self.get(timer).is_some()
    }

    /// Whether `timer` is armed and its time has come (it stays armed).
    pub fn due(&self, timer: Timer, now: Duration) -> bool {
        self.get(timer).is_some_and(|t| now >= t)
    }

    /// Disarms `timer` and says true when its time has come; false (and armed) before.
    pub fn take(&mut self, timer: Timer, now: Duration) -> bool {
        let due = self.due(timer, now);
        if due {
            self.clear(timer);
        }
        due
    }

    /// The earliest armed timer's time: the machine's next wake-up.
    pub fn next(&self) -> Option<Duration> {
        self.at.iter().flatten().min().copied()
    }

    pub fn clear_all(&mut self) {
        *self = Timers::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_wake_up_is_the_earliest_armed_timer_and_a_taken_one_is_gone() {
        let s = Duration::from_secs;
        let mut t = Timers::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Budget, s(8));
        t.set(Timer::Renewal, s(3));
        t.set_earlier(Timer::Kill, s(9));
        t.set_earlier(Timer::Kill, s(12));
        assert_eq!(t.get(Timer::Kill), Some(s(9)), "kept the earlier");
        assert_eq!(t.next(), Some(s(3)));
        assert!(!t.take(Timer::Renewal, s(2)), "not yet");
        assert!(t.take(Timer::Renewal, s(3)));
        assert!(!t.armed(Timer::Renewal));
        assert_eq!(t.next(), Some(s(8)));
        t.clear_all();
        assert_eq!(t.next(), None);
        for (i, timer) in ALL.iter().enumerate() {
            assert_eq!(*timer as usize, i, "ALL lists the timers in their order");
        }
    }
}
