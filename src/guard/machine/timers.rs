//! Every wake-up the machine can want, in one table (quinn-proto's connection/timer.rs): a
//! step that schedules something arms its timer, the step that acts on it takes it when it is
//! due, and the machine's next wake-up is the earliest armed one. No condition is written
//! twice: a timer that must not fire is not armed.

use std::time::Duration;

/// What the machine may be woken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The fence: the deadline, or earlier, before an armed watchdog would reset the node.
    Fence,
    /// SIGKILL to a service that got SIGTERM.
    Kill,
    /// The end of the take-back's budget: a service that has not confirmed is stopped.
    TakeBack,
    /// A renewal's second watchdog ping (machine::watchdog).
    SecondPing,
    /// A VIP removal that failed, tried again.
    VipRetry,
    /// The next look at whether anything of the service is left.
    Look,
    /// The next keepalive.
    Renewal,
    /// A release that failed, tried again.
    ReleaseRetry,
    /// A step-down's budget: the answer is owed by then.
    Budget,
    /// The next ask of corosync while holding, or about to (machine::hold).
    Ask,
    /// The next try to take the key back after a hold.
    Retake,
}

const ALL: [Timer; 11] = [
    Timer::Fence,
    Timer::Kill,
    Timer::TakeBack,
    Timer::SecondPing,
    Timer::VipRetry,
    Timer::Look,
    Timer::Renewal,
    Timer::ReleaseRetry,
    Timer::Budget,
    Timer::Ask,
    Timer::Retake,
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
        t.set(Timer::Fence, s(8));
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
    }
}
