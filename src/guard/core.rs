//! The guard's leadership as a plain value, with no clock, thread or socket of its own: the
//! time comes in as an argument, effects go out through the `Effects` trait. It owns the rules
//! that make the guard never late:
//! - the deadline is `send time of the last successful renewal + granted TTL − margin`, it only
//!   moves forward, and never once it has passed (a late answer does not revive a lease that
//!   may already be gone);
//! - nothing is raised at or after the deadline, and what is raised when the deadline passes
//!   (or ownership is lost) is lowered at once: VIP first, then the service (TERM, then KILL
//!   half a margin later);
//! - the guarded VIP carries a kernel lifetime that runs out before the lease can at etcd, so
//!   a guard that is killed or frozen loses its VIP all the same.
//!
//! The real guard holds a `FenceCore` under one lock shared by its fencing thread and its async
//! side (guard::fence); the fault-schedule simulation (guard::sim) drives the same value.

use std::time::Duration;

use crate::lease::LeaseClock;

/// How late after its lifetime the kernel may still show an address: measured here at
/// 0.03–0.35 s (IPv4 and IPv6; docs/safety.md), rounded up.
pub const KERNEL_EXPIRY_SLACK: Duration = Duration::from_millis(500);

/// What the guard supervises, as the fencing side addresses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceRef {
    /// A supervised command: the leader of its own process group.
    Group(u32),
    /// A systemd unit.
    Unit(String),
}

/// Why the guard fenced itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The deadline passed without a renewal.
    Deadline,
    /// Ownership lost for a reason etcd told us (key deleted or taken, lease gone).
    Lost(String),
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Deadline => write!(f, "lease not renewed in time"),
            Cause::Lost(why) => write!(f, "{why}"),
        }
    }
}

/// The side effects the fencing logic orders. Each is one short kernel call (or the spawn of
/// one `systemctl`): they run under the fence lock.
pub trait Effects {
    /// Adds the VIP with valid and preferred lifetimes of `lifetime_s` seconds.
    fn add_vip(&mut self, lifetime_s: u32) -> Result<(), String>;
    /// Moves the VIP's lifetimes to `lifetime_s` seconds from now (RTM_NEWADDR, NLM_F_REPLACE).
    fn extend_vip(&mut self, lifetime_s: u32) -> Result<(), String>;
    fn remove_vip(&mut self) -> Result<(), String>;
    /// SIGTERM (`kill` false) or SIGKILL to the service.
    fn signal_service(&mut self, service: &ServiceRef, kill: bool);
}

/// The deadline arithmetic of one leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    clock: LeaseClock,
    deadline: Duration,
    /// The latest moment (boot clock) the lease may still live at etcd, as far as we know:
    /// the send time of the last renewal plus the granted TTL.
    lease_end: Duration,
    fenced: Option<(Duration, Cause)>,
    /// An orderly step-down has begun: nothing goes up any more.
    stepping_down: bool,
}

impl Leadership {
    /// A leadership that starts with a grant whose request was sent at `sent` (boot clock).
    pub fn new(clock: LeaseClock, sent: Duration, granted: Duration) -> Leadership {
        Leadership {
            clock,
            deadline: clock.deadline(sent, granted),
            lease_end: sent + granted,
            fenced: None,
            stepping_down: false,
        }
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    pub fn clock(&self) -> LeaseClock {
        self.clock
    }

    pub fn fenced(&self) -> Option<&(Duration, Cause)> {
        self.fenced.as_ref()
    }

    /// Whether the deadline has come and fencing has not happened yet.
    pub fn due(&self, now: Duration) -> bool {
        self.fenced.is_none() && now >= self.deadline
    }

    /// Whether something may still go up now.
    pub fn may_raise(&self, now: Duration) -> bool {
        self.fenced.is_none() && !self.stepping_down && now < self.deadline
    }

    /// A renewal sent at `sent` that etcd answered with `granted`. Applied only while the
    /// deadline is ahead; returns whether it was.
    fn renew(&mut self, now: Duration, sent: Duration, granted: Duration) -> bool {
        // Renewals go on during an orderly step-down: the lease is kept until the release.
        if self.fenced.is_some() || now >= self.deadline {
            return false;
        }
        self.deadline = self.deadline.max(self.clock.deadline(sent, granted));
        self.lease_end = self.lease_end.max(sent + granted);
        true
    }

    /// The kernel lifetime (whole seconds) to give the VIP now. It must run out, kernel slack
    /// included, before the lease can at etcd (`lease_end`); within that, it is the shortest
    /// whole number of seconds that still reaches our own deadline, so the kernel never takes
    /// the VIP from a guard that is on time. None: too little lease left for even one second.
    pub fn vip_lifetime(&self, now: Duration) -> Option<u32> {
        let latest = self
            .lease_end
            .saturating_sub(now)
            .saturating_sub(KERNEL_EXPIRY_SLACK);
        let latest = latest.as_secs();
        let wanted = ceil_secs(self.deadline.saturating_sub(now));
        let secs = wanted.min(latest);
        (secs >= 1).then(|| secs.min(u64::from(u32::MAX - 1)) as u32)
    }

    fn fence(&mut self, now: Duration, cause: Cause) -> bool {
        if self.fenced.is_some() {
            return false;
        }
        self.fenced = Some((now, cause));
        true
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raise {
    Done,
    /// The deadline has passed or the guard has fenced: nothing goes up.
    TooLate,
}

/// The lock-protected heart of the guard: leadership, what is up, and the orders that follow.
pub struct FenceCore<E> {
    pub lead: Leadership,
    pub effects: E,
    vip_up: bool,
    service: Option<ServiceRef>,
    /// When the service got SIGTERM from fencing; it gets SIGKILL half a margin later.
    term_sent: Option<Duration>,
    killed: bool,
}

impl<E: Effects> FenceCore<E> {
    pub fn new(lead: Leadership, effects: E) -> FenceCore<E> {
        FenceCore {
            lead,
            effects,
            vip_up: false,
            service: None,
            term_sent: None,
            killed: false,
        }
    }

    pub fn vip_up(&self) -> bool {
        self.vip_up
    }

    /// When the fencing thread must wake next: the deadline, or the KILL after a TERM.
    pub fn next_wake(&self) -> Option<Duration> {
        match (&self.lead.fenced, self.term_sent) {
            (None, _) => Some(self.lead.deadline),
            (Some(_), Some(t)) if !self.killed && self.service.is_some() => Some(self.kill_at(t)),
            _ => None,
        }
    }

    /// SIGKILL half a margin after the deadline (or after an earlier TERM): counted from the
    /// deadline, not from the TERM, so the fencing thread's wake-up latency is not paid twice.
    fn kill_at(&self, term_sent: Duration) -> Duration {
        term_sent.min(self.lead.deadline) + self.lead.clock.margin / 2
    }

    /// A successful renewal; extends the VIP's kernel lifetime. false: too late, the
    /// leadership is over (or about to be, at this very moment).
    pub fn renewed(&mut self, now: Duration, sent: Duration, granted: Duration) -> bool {
        if !self.lead.renew(now, sent, granted) {
            return false;
        }
        if self.vip_up {
            if let Some(secs) = self.lead.vip_lifetime(now) {
                // A failed extension leaves the old, shorter lifetime: safe, and logged by
                // the caller on the next status read of the VIP.
                let _ = self.effects.extend_vip(secs);
            }
        }
        true
    }

    /// Adds the VIP, only while the deadline is ahead, with its kernel lifetime.
    pub fn add_vip(&mut self, now: Duration) -> Result<Raise, String> {
        let Some(secs) = self
            .lead
            .vip_lifetime(now)
            .filter(|_| self.lead.may_raise(now))
        else {
            return Ok(Raise::TooLate);
        };
        self.effects.add_vip(secs)?;
        self.vip_up = true;
        Ok(Raise::Done)
    }

    /// The service has been started. If the guard fenced meanwhile (a slow start), it is
    /// stopped at once.
    pub fn service_started(&mut self, now: Duration, service: ServiceRef) -> Raise {
        self.service = Some(service);
        if self.lead.may_raise(now) {
            return Raise::Done;
        }
        if self.lead.due(now) {
            self.fence(now, Cause::Deadline);
        } else {
            self.term_service(now);
        }
        Raise::TooLate
    }

    /// Fences if the deadline has come; returns whether this call fenced.
    pub fn on_timer(&mut self, now: Duration) -> bool {
        let fenced = self.lead.due(now) && self.fence(now, Cause::Deadline);
        self.kill_if_due(now);
        fenced
    }

    /// Fences now (ownership lost); returns whether this call fenced.
    pub fn fence(&mut self, now: Duration, cause: Cause) -> bool {
        if !self.lead.fence(now, cause) {
            return false;
        }
        self.lower_vip();
        self.term_service(now);
        true
    }

    fn term_service(&mut self, now: Duration) {
        if let (Some(s), None) = (&self.service, self.term_sent) {
            self.effects.signal_service(s, false);
            self.term_sent = Some(now);
        }
    }

    fn kill_if_due(&mut self, now: Duration) {
        if let (Some(s), Some(t), false) = (&self.service, self.term_sent, self.killed) {
            if now >= self.kill_at(t) {
                self.effects.signal_service(s, true);
                self.killed = true;
            }
        }
    }

    /// The first step of an orderly step-down: nothing goes up from now on, the VIP goes.
    /// The service is stopped by the caller next; the deadline stays armed meanwhile.
    pub fn begin_step_down(&mut self) {
        self.lead.stepping_down = true;
        self.lower_vip();
    }

    fn lower_vip(&mut self) {
        if self.vip_up && self.effects.remove_vip().is_ok() {
            self.vip_up = false;
        }
    }

    /// The service is gone (stopped in order, or reaped): nothing left to signal.
    pub fn service_gone(&mut self) {
        self.service = None;
    }

    pub fn service_killed(&self) -> bool {
        self.killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder {
        log: Vec<String>,
    }

    impl Effects for Recorder {
        fn add_vip(&mut self, s: u32) -> Result<(), String> {
            self.log.push(format!("add {s}"));
            Ok(())
        }
        fn extend_vip(&mut self, s: u32) -> Result<(), String> {
            self.log.push(format!("extend {s}"));
            Ok(())
        }
        fn remove_vip(&mut self) -> Result<(), String> {
            self.log.push("remove".into());
            Ok(())
        }
        fn signal_service(&mut self, _: &ServiceRef, kill: bool) {
            self.log.push(if kill { "kill" } else { "term" }.into());
        }
    }

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    const DEFAULTS: LeaseClock = LeaseClock {
        ttl: Duration::from_secs(10),
        margin: Duration::from_secs(2),
    };

    /// The defaults, a grant sent at 0 s: deadline 8 s, lease at etcd until 10 s.
    fn granted_at_zero() -> FenceCore<Recorder> {
        FenceCore::new(
            Leadership::new(DEFAULTS, s(0.0), s(10.0)),
            Recorder::default(),
        )
    }

    #[test]
    fn the_kernel_lifetime_covers_our_deadline_and_ends_before_the_lease() {
        let lead = Leadership::new(DEFAULTS, s(100.0), s(10.0));
        // Deadline 108, lease at etcd until 110: 8 s from a reply at 100.002.
        assert_eq!(lead.vip_lifetime(s(100.002)), Some(8));
        let small = LeaseClock {
            ttl: s(3.0),
            margin: s(1.0),
        };
        let lead = Leadership::new(small, s(100.0), s(3.0));
        assert_eq!(lead.vip_lifetime(s(100.001)), Some(2));
        // Close to the lease's end, less than a whole second fits before it: nothing.
        assert_eq!(lead.vip_lifetime(s(101.6)), None);
    }

    #[test]
    fn fencing_lowers_the_vip_before_it_signals_the_service_and_kills_after_half_a_margin() {
        let mut core = granted_at_zero();
        assert_eq!(core.add_vip(s(0.01)), Ok(Raise::Done));
        assert_eq!(
            core.service_started(s(0.02), ServiceRef::Group(42)),
            Raise::Done
        );
        assert!(!core.on_timer(s(7.99)), "not before the deadline");
        assert!(core.on_timer(s(8.0)));
        assert_eq!(core.next_wake(), Some(s(9.0)));
        assert!(!core.on_timer(s(8.5)));
        core.on_timer(s(9.0));
        assert_eq!(
            core.effects.log,
            vec!["add 8", "remove", "term", "kill"],
            "VIP first, then TERM, then KILL at deadline + margin/2"
        );
    }

    #[test]
    fn a_late_renewal_does_not_revive_the_lease_and_nothing_goes_up_after_the_deadline() {
        let mut core = granted_at_zero();
        assert!(
            !core.renewed(s(8.0), s(5.0), s(10.0)),
            "answer after the deadline"
        );
        assert_eq!(core.lead.deadline(), s(8.0));
        assert_eq!(core.add_vip(s(8.0)), Ok(Raise::TooLate));
        assert_eq!(
            core.service_started(s(8.1), ServiceRef::Group(7)),
            Raise::TooLate
        );
        assert_eq!(
            core.effects.log,
            vec!["term"],
            "a late start is stopped at once"
        );
    }

    #[test]
    fn a_renewal_moves_the_deadline_and_the_kernel_lifetime() {
        let mut core = granted_at_zero();
        core.add_vip(s(0.0)).unwrap();
        assert!(core.renewed(s(3.4), s(3.333), s(10.0)));
        assert_eq!(core.lead.deadline(), s(11.333));
        // An older renewal answered later never moves the deadline back.
        assert!(core.renewed(s(3.5), s(1.0), s(10.0)));
        assert_eq!(core.lead.deadline(), s(11.333));
        assert_eq!(core.effects.log[..2], ["add 8", "extend 8"]);
    }
}
