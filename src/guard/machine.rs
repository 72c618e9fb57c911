//! The guard's whole protocol from the moment it holds the leader key, as one plain value
//! without I/O, in the style of quinn-proto: the time and every outside event go in
//! (`Machine::handle`), kernel effects are made through the small `Kernel` trait while the
//! caller holds the machine's lock, every other effect comes out as an `Order` for the tokio
//! shell to perform and answer, and `next_wake` says when the machine must be called again.
//! The fencing thread (guard::fence) is the machine's only clock: it calls `handle(Tick)` at
//! every wake-up, so the deadline never waits for the shell. The simulation (guard::sim)
//! drives this same value, with faults on every input and on every effect.
//!
//! The rules it enforces, in every phase (docs/safety.md):
//! - the deadline is `send time of the last renewal applied in time + granted TTL − margin`;
//!   it only moves forward, never once it has passed;
//! - ownership lost (the deadline, a watch or confirm saying the key is gone or carries
//!   another lease, etcd saying the lease is gone) fences at once, raising included: the raise
//!   is abandoned, the VIP goes first, then the service (TERM, KILL half a margin after the
//!   deadline or the loss, but before an armed watchdog's reset); once everything is down and
//!   the release has begun, the key's deletion (the guard's own) or another holder's key is
//!   the release's end, not a fence;
//! - with a hardware watchdog: armed before anything is raised, pinged only for a renewal
//!   applied in time (and once more, derived from it, before the deadline), its reset always
//!   before the lease can end at etcd, fenced before the reset, disarmed only once VIP and
//!   service are confirmed down;
//! - nothing is raised once ownership is lost, the deadline has passed or a step-down began;
//! - the key is released and the lease revoked only once the VIP is confirmed absent and the
//!   service confirmed stopped; until then the guard renews (an orderly step-down) or lets the
//!   lease run out (fenced) — it never shortens the lease while anything may still serve;
//! - a step-down answers by its budget: done, or what is still up;
//! - a service confirmed stopped is forgotten: no signal ever goes to its pid again.

use std::collections::VecDeque;
use std::time::Duration;

pub use super::watchdog::ArmError;
use crate::lease::clock::KERNEL_EXPIRY_SLACK;
use crate::lease::LeaseClock;
use crate::presence::Presence;

/// What a step-down keeps back from its budget for the release and the answer.
pub const RELEASE_RESERVE: Duration = Duration::from_secs(2);

/// The budget of a step-down nobody timed (a signal, a raise that failed).
pub const DEFAULT_STEP_DOWN: Duration = Duration::from_secs(30);

/// How much later than its timeout a watchdog may reset the node (i6300esb counts 1.024 s per
/// second of timeout): the timeout the guard sets is its room divided by 1 + this.
pub const WATCHDOG_TOLERANCE: f64 = 1.0 / 32.0;

/// With a watchdog armed the guard fences at least this long before it would reset the node,
/// so that a guard that is alive stops its service and disarms instead of being reset.
pub const WATCHDOG_LEAD: Duration = Duration::from_millis(200);

/// A second ping closer than this to the first is not worth a wake-up.
const SECOND_PING_MIN: Duration = Duration::from_millis(50);

/// The kernel deletes an address up to ADDRCONF_TIMER_FUZZ_MINUS (HZ/50, at most 20 ms) before
/// its lifetime's end.
const KERNEL_EXPIRY_EARLY: Duration = Duration::from_millis(20);
/// A replace is not begun this close to the moment the address may go (it would race it).
const REPLACE_TAKES: Duration = Duration::from_millis(10);
/// A keepalive goes out at least this long before the VIP's lifetime may run out.
const RENEW_BEFORE_FLOOR: Duration = Duration::from_millis(200);

/// Retry of a VIP removal that failed (by the fencing thread: soon, it is the deadline's work).
pub const VIP_RETRY: Duration = Duration::from_millis(20);
/// How often a stopping service is looked at.
const CHECK_EVERY: Duration = Duration::from_millis(100);
/// Retry of a keepalive that failed (racing for a member that answers).
const RENEW_RETRY: Duration = Duration::from_millis(20);
/// Retry of a release that failed.
const RELEASE_RETRY: Duration = Duration::from_secs(1);

use crate::service::{ServiceRef, STOP_GRACE};

/// Why the guard fenced itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The deadline passed without a renewal.
    Deadline,
    /// The key was deleted in etcd.
    KeyDeleted,
    /// The key carries another lease now.
    KeyTaken(i64),
    /// etcd says our lease does not exist any more (TTL 0, or "lease not found").
    LeaseGone,
    /// The watchdog would reset the node before the deadline (a ping failed, or could not be
    /// made): fenced first, so that the node is not reset under a running service.
    WatchdogDue,
    /// With watchdog=required, no timeout the driver takes resets the node before the lease
    /// can end at etcd (a coarse driver, or a ping made too late).
    WatchdogLate,
}

impl Cause {
    /// Every cause's label in the metrics (hamaster_fences_total{cause=...}).
    pub const LABELS: [&'static str; 6] = [
        "deadline",
        "key_deleted",
        "key_taken",
        "lease_gone",
        "watchdog_due",
        "watchdog_late",
    ];

    pub fn label(&self) -> &'static str {
        match self {
            Cause::Deadline => Cause::LABELS[0],
            Cause::KeyDeleted => Cause::LABELS[1],
            Cause::KeyTaken(_) => Cause::LABELS[2],
            Cause::LeaseGone => Cause::LABELS[3],
            Cause::WatchdogDue => Cause::LABELS[4],
            Cause::WatchdogLate => Cause::LABELS[5],
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Deadline => write!(f, "lease not renewed in time"),
            Cause::KeyDeleted => write!(f, "leader key was deleted in etcd"),
            Cause::KeyTaken(l) => write!(
                f,
                "leader key now carries another lease ({})",
                crate::lease::LeaseId(*l)
            ),
            Cause::LeaseGone => write!(f, "etcd says the lease no longer exists"),
            Cause::WatchdogLate => write!(
                f,
                "watchdog=required: the watchdog cannot be set to reset the node before the lease \
                 could end at etcd"
            ),
            Cause::WatchdogDue => write!(
                f,
                "the watchdog would reset the node before the lease's deadline (its last ping \
                 failed or could not be made)"
            ),
        }
    }
}

/// Why an effect, or a step the shell performed, failed: what failed, with the lower layer's
/// words. The machine decides by which effect or step failed (never by the words), logs the
/// fault and reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// netlink refused or failed (the VIP writer's error).
    #[error("{0}")]
    Netlink(String),
    /// The VIP could not be settled: its link, DAD, the announcements (vip::up).
    #[error("{0}")]
    Settle(String),
    /// The watchdog refused a ping or the magic close, or there is no device.
    #[error("{0}")]
    Watchdog(String),
    /// A signal to the service's process group failed.
    #[error("process group {pid}: {errno}")]
    Signal { pid: u32, errno: nix::errno::Errno },
    /// A process group the guard never signals (0 or 1).
    #[error("refusing to signal process group {0}")]
    NoGroup(u32),
    /// systemctl could not be run, or said the unit is in no state it knows.
    #[error("{0}")]
    Systemd(String),
    /// The service could not be started.
    #[error("{0}")]
    Service(String),
    /// The fencing token file could not be written.
    #[error("{0}")]
    Token(String),
    /// etcd refused or did not answer (the release).
    #[error("{0}")]
    Etcd(String),
}

/// The kernel effects, made by the fencing thread: each one short system call (or the spawn
/// of one `systemctl`), so it can make them at the deadline. Each effect that depends on the
/// time is timed by `now`, read right before it, and checked by `now` read right after it.
pub trait Kernel {
    /// The boot clock now, after the effects made so far (each one takes time).
    fn now(&mut self) -> Duration;
    /// Adds the VIP with valid and preferred lifetimes of `lifetime_s` seconds.
    fn add_vip(&mut self, lifetime_s: u32) -> Result<(), Fault>;
    /// Moves the VIP's lifetimes to `lifetime_s` from now (RTM_NEWADDR with NLM_F_REPLACE,
    /// which the kernel makes an add when the address is gone: the machine calls it only while
    /// the address is surely there). Err: not extended; the old, shorter lifetime stays.
    fn extend_vip(&mut self, lifetime_s: u32) -> Result<(), Fault>;
    /// Removes the VIP. Ok only when it is absent afterwards (removed, or gone already).
    fn remove_vip(&mut self) -> Result<(), Fault>;
    /// Opens the watchdog and sets its timeout to `timeout_s`; Ok: the timeout the driver
    /// applied (read back).
    fn arm_watchdog(&mut self, timeout_s: u32) -> Result<u32, ArmError>;
    /// Pings the armed watchdog so that it resets the node `timeout_s` from now at the latest
    /// (setting that timeout where it differs); Ok: the timeout in force, and the boot-clock
    /// time right after the ping (a guard stopped in between pinged later than it thinks).
    fn ping_watchdog(&mut self, timeout_s: u32) -> Result<(u32, Duration), Fault>;
    /// The magic close: the watchdog stops. Err: it could not be stopped (the node resets).
    fn disarm_watchdog(&mut self) -> Result<(), Fault>;
    /// SIGTERM (`kill` false) or SIGKILL to the service. Ok when sent or when nothing of it
    /// is left to signal.
    fn signal_service(&mut self, service: &ServiceRef, kill: bool) -> Result<(), Fault>;
    /// The machine is about to take something down itself (a fence, a step-down, a failed
    /// raise, a VIP it may not extend): told before the effect, so that nothing is raised from
    /// then on (a start asking right before its fork, on another thread, never races it) and
    /// a watcher seeing the kernel's event knows it for the guard's own doing. Never undone.
    fn lowering(&mut self);
    /// The service is confirmed stopped and will never be signalled again: a supervised
    /// command's leader, kept unreaped until now so that its group's id stayed ours, is reaped.
    fn forget_service(&mut self, service: &ServiceRef);
}

/// What the shell performs for the machine, answering with an `Input` when it is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// One lease keepalive, sent now (`sent`, boot clock): answer Renewed, RenewFailed or
    /// LeaseGone, always within the renewal attempt timeout.
    Keepalive { sent: Duration },
    /// Does the key still carry our lease? Answer KeyLost when it does not (else nothing).
    Confirm,
    /// The VIP was added: bring its link up, wait out DAD (at most `dad_wait`), announce.
    /// Stop announcing as soon as `may_announce` says no. Answer Settled.
    Settle { dad_wait: Duration },
    /// Stop any announcement burst for the VIP (it is going down).
    CancelAnnouncements,
    /// Write the fencing token for the service. Answer TokenWritten.
    WriteToken,
    /// Start the service. Answer ServiceStarted.
    StartService,
    /// Is anything of the service left (its process group, the unit as systemd says)? Answer
    /// ServiceChecked: present, absent, or cannot tell.
    CheckService(ServiceRef),
    /// Delete the key if it still carries our lease, then revoke the lease. Answer Released.
    Release,
    /// Record the machine's view (state.json).
    Persist,
    /// Log a line (the fencing thread never logs itself).
    Log(Level, String),
    /// Answer the step-down request: Ok when VIP and service are down, else what is up.
    StepDownAnswer(Result<(), String>),
    /// The guard's work is over; `raise_failed`: it ends because the raise failed.
    Exit { raise_failed: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
}

/// Everything that goes in, besides the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A timer fired (the fencing thread), or anything else asks the machine to look.
    Tick,
    /// A keepalive sent at `sent` was answered with `ttl` (zero: the lease is gone).
    Renewed {
        sent: Duration,
        ttl: Duration,
    },
    RenewFailed {
        sent: Duration,
        why: String,
    },
    /// etcd does not know our lease (a fresh keepalive stream says "lease not found").
    LeaseGone {
        sent: Duration,
    },
    /// The watch or a confirm: the key was deleted (None) or carries this other lease.
    KeyLost(Option<i64>),
    /// The VIP was deleted from its interface (the wire watch's address event): by another
    /// program, or by the kernel at the end of its lifetime. It is never extended again.
    VipGone,
    Settled(Result<(), Fault>),
    TokenWritten(Result<(), Fault>),
    ServiceStarted(Result<ServiceRef, Fault>),
    /// The supervised command's leader process exited (its group may live on).
    ServiceExited(String),
    /// Whether anything of the service is left: only Absent confirms it stopped.
    ServiceChecked(Presence),
    Released(Result<(), Fault>),
    /// Step down in order, answering by `by` (boot clock).
    StepDown {
        by: Duration,
    },
}

/// What the machine is doing, for status and state.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Raising,
    Leading,
    Fenced,
    SteppingDown,
    /// The raise failed: stepping down, then exiting with 1.
    Failed,
    Done,
}

/// The watchdog as the machine knows it.
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
            WatchdogState::Armed { timeout_s, pinged } => Some(*pinged + Self::shown(*timeout_s)),
            WatchdogState::DisarmFailed { fires_at, .. } => Some(*fires_at),
            _ => None,
        }
    }

    /// How long `secs` of true time may show on this clock, at the least.
    fn shown(secs: u32) -> Duration {
        Duration::from_secs(secs.into()).mul_f64(1.0 - crate::lease::clock::MAX_SLEW)
    }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VipState {
    /// No VIP configured, or not added yet.
    NotRaised,
    Up,
    /// A removal failed: it may still be up.
    MaybeUp,
    /// Confirmed absent.
    Absent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceState {
    NotStarted,
    /// A start is under way (for a unit, the unit is known: fencing can stop it mid-start).
    Starting(Option<ServiceRef>),
    Running(ServiceRef),
    /// Signalled, not yet confirmed stopped.
    Stopping {
        service: ServiceRef,
        kill_at: Duration,
        killed: bool,
    },
    Stopped,
}

impl ServiceState {
    fn reference(&self) -> Option<&ServiceRef> {
        match self {
            ServiceState::Starting(r) => r.as_ref(),
            ServiceState::Running(r) | ServiceState::Stopping { service: r, .. } => Some(r),
            _ => None,
        }
    }

    /// Whether the service may be running (anything short of confirmed stopped or never).
    pub fn may_run(&self) -> bool {
        !matches!(self, ServiceState::NotStarted | ServiceState::Stopped)
    }
}

/// The deadline arithmetic of one leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    clock: LeaseClock,
    deadline: Duration,
    /// The earliest moment (boot clock) the lease may end at etcd after the renewals applied
    /// in time (LeaseClock::earliest_end, at the largest slew): the VIP's lifetime, the
    /// service's SIGKILL and the watchdog's reset all come before it.
    earliest_end: Duration,
    /// The latest moment the lease may still live at etcd after any answer, late ones
    /// included (LeaseClock::latest_end): past it a release has nothing left to do.
    latest_end: Duration,
    /// The slew_blind mutation (Mutations): the bounds from send time + TTL.
    #[cfg(test)]
    slew_blind: bool,
}

impl Leadership {
    /// A leadership that starts with a grant whose request was sent at `sent` (boot clock).
    pub fn new(clock: LeaseClock, sent: Duration, granted: Duration) -> Leadership {
        Leadership {
            clock,
            deadline: clock.deadline(sent, granted),
            earliest_end: LeaseClock::earliest_end(sent, granted),
            latest_end: LeaseClock::latest_end(sent, granted),
            #[cfg(test)]
            slew_blind: false,
        }
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    pub fn clock(&self) -> LeaseClock {
        self.clock
    }

    /// The earliest moment the lease may end at etcd (LeaseClock::earliest_end).
    pub fn earliest_end(&self) -> Duration {
        self.earliest_end
    }

    /// An answer to a renewal sent at `sent` with `granted`: however late, it says how long
    /// etcd may keep the lease (for the release).
    fn heard(&mut self, sent: Duration, granted: Duration) {
        self.latest_end = self.latest_end.max(LeaseClock::latest_end(sent, granted));
    }

    /// A renewal sent at `sent` that etcd answered with `granted`, applied only while the
    /// deadline is ahead (a late answer does not revive a lease that may already be gone).
    fn renew(&mut self, now: Duration, sent: Duration, granted: Duration) -> bool {
        if now >= self.deadline {
            return false;
        }
        #[cfg(test)]
        if self.slew_blind {
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
        let room = LeaseClock::watchdog_room(self.earliest_end, now);
        let secs = (room / (1.0 + WATCHDOG_TOLERANCE)).floor();
        (secs >= 1.0).then(|| secs.min(f64::from(u32::MAX - 1)) as u32)
    }

    /// When a ping with `timeout_s` would put the reset exactly at the bound (see
    /// `watchdog_timeout`).
    fn watchdog_exact(&self, timeout_s: u32) -> Duration {
        let reset = f64::from(timeout_s) * (1.0 + WATCHDOG_TOLERANCE);
        LeaseClock::watchdog_room_at(self.earliest_end, reset)
    }

    /// The kernel lifetime (whole seconds) to give the VIP when it is set at `now`
    /// (LeaseClock::vip_lifetime).
    pub fn vip_lifetime(&self, now: Duration) -> Option<u32> {
        LeaseClock::vip_lifetime(self.deadline, self.earliest_end, now)
    }

    /// When a service fenced at `at` gets SIGKILL: half a margin later, but KILL_LEAD before
    /// the lease can end at etcd (and never before the fence).
    pub fn kill_at(&self, at: Duration) -> Duration {
        let by = self
            .earliest_end
            .saturating_sub(crate::lease::clock::KILL_LEAD);
        (at + self.clock.kill_delay()).min(by).max(at)
    }
}

/// What the machine shows the rest of the guard (`Machine::view`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub phase: Phase,
    pub vip: VipState,
    pub service: ServiceState,
    /// What the service's leader said when it exited.
    pub exit_detail: Option<String>,
    pub fenced: Option<(Duration, Cause)>,
    /// Why the raise failed.
    pub failure: Option<String>,
    /// What is wrong, in words (`Machine::problem`).
    pub problem: Option<String>,
    pub deadline: Duration,
    /// When the guard fences itself (its deadline, or before the watchdog's reset).
    pub fence_at: Duration,
    pub last_renewal_sent: Duration,
    pub watchdog: WatchdogState,
    /// watchdog=auto and its reset may come after the lease's end (said in the log).
    pub watchdog_late: bool,
    /// The raise has ordered its service's start and waits for it.
    pub starting_service: bool,
    /// The kernel keeps the VIP at least until then (its lifetime's end, less HZ/50): a
    /// deletion seen after it is the kernel's, at the end of the lifetime.
    pub vip_floor: Duration,
}

impl View {
    fn may_raise(&self, now: Duration) -> bool {
        self.fenced.is_none() && self.phase == Phase::Raising && now < self.fence_at
    }

    /// Whether announcements for the VIP may go on (the raise is ours to finish).
    pub fn may_announce(&self, now: Duration) -> bool {
        self.may_raise(now) && self.vip == VipState::Up
    }

    /// Whether a conflict on the wire may be answered with an announcement of the VIP: the
    /// machine leads with it up, and the lease still covers it.
    pub fn may_defend(&self, now: Duration) -> bool {
        self.fenced.is_none()
            && self.phase == Phase::Leading
            && self.vip == VipState::Up
            && now < self.fence_at
    }

    /// Whether the service's start is still wanted: asked by the shell right before it
    /// spawns, so a start that waited in the queue never runs after ownership is lost.
    pub fn wants_service(&self, now: Duration) -> bool {
        self.may_raise(now) && self.starting_service
    }

    /// The service runs as the machine sees it: started, not exited, not being stopped.
    pub fn service_running(&self) -> bool {
        matches!(self.service, ServiceState::Running(_)) && self.exit_detail.is_none()
    }
}

/// How the raise goes, step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RaiseStep {
    /// Before anything is raised.
    ArmWatchdog,
    AddVip,
    /// Settle ordered, waiting for its answer.
    Settling,
    WriteToken,
    /// WriteToken ordered, waiting.
    WritingToken,
    StartService,
    /// StartService ordered, waiting.
    StartingService,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    NotYet,
    InFlight,
    /// Failed; again at this time.
    RetryAt(Duration),
    Done,
}

/// What the machine is set up with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub clock: LeaseClock,
    pub vip: bool,
    /// The unit, when the service is a systemd unit (known before its start).
    pub unit: Option<String>,
    pub watchdog: WatchdogPlan,
}

/// Rules the mutation tests switch off, one at a time, to show that the simulation notices.
/// Compiled into tests only: the production machine has no switch.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mutations {
    /// Fence at the deadline: off.
    pub no_deadline: bool,
    /// Release only once VIP and service are confirmed down: off.
    pub early_release: bool,
    /// Ownership lost while raising fences at once: off (wait for the raise to finish).
    pub lost_waits_for_raise: bool,
    /// A step-down answers by its budget: off (it answers when done).
    pub no_budget: bool,
    /// The lease counts from the keepalive's send time: off (from its answer).
    pub count_from_reply: bool,
    /// The watchdog is armed before anything is raised: off (after the VIP).
    pub arm_after_vip: bool,
    /// The watchdog is pinged only for a renewal applied in time: off (at every wake-up, a
    /// timer of its own).
    pub ping_on_wake: bool,
    /// The watchdog is disarmed only once VIP and service are down: off (at the step-down).
    pub early_disarm: bool,
    /// The watchdog's timeout ends before the lease can: off (the whole TTL).
    pub watchdog_full_ttl: bool,
    /// Only a proven absence is absence: off (a look that cannot tell counts as stopped).
    pub doubt_is_absence: bool,
    /// Every bound derives from the lease's earliest end at the largest slew: off (from
    /// send time + TTL, the deadline uncapped).
    pub slew_blind: bool,
    /// Every effect is timed by the clock read right before it: off (by the time the input
    /// came in).
    pub stale_now: bool,
    /// The VIP's lifetime is set again only while the address surely is there: off (every
    /// renewal replaces it, which adds it anew once the kernel let it go).
    pub extend_expired: bool,
}

pub struct Machine<K> {
    plan: Plan,
    lead: Leadership,
    pub kernel: K,
    phase: Phase,
    raise: RaiseStep,
    /// Why the guard fenced, and when.
    fenced: Option<(Duration, Cause)>,
    /// Why the raise failed.
    failure: Option<String>,
    vip: VipState,
    watchdog: WatchdogState,
    /// How much the watchdog's driver rounded a timeout up, at most (its granularity): later
    /// asks are that much shorter, so a ping never sets a reset later than allowed.
    watchdog_excess: u32,
    /// The second ping of a renewal: at the moment the whole-second timeout reaches the
    /// lease's end exactly (see `ping_watchdog`).
    watchdog_ping_at: Option<Duration>,
    /// watchdog=auto, and the last ping could not meet the bound (said in the log).
    watchdog_late: bool,
    vip_retry_at: Option<Duration>,
    /// The kernel keeps the VIP at least until then (`Machine::floor`): it may be replaced in
    /// place (its lifetime extended) only before.
    vip_floor: Duration,
    /// Failed removals in a row (the retry backs off to a second).
    vip_failures: u32,
    service: ServiceState,
    /// A CheckService is out.
    checking: bool,
    /// A StartService is out and not answered: whatever a look says, the start may still
    /// bring the service up (a unit's start job waiting on its dependencies).
    start_in_flight: bool,
    /// The look that is out was ordered before the start answered: its answer is stale.
    check_stale: bool,
    next_check_at: Option<Duration>,
    /// What the service's leader said when it exited.
    exit_detail: Option<String>,
    /// The last "cannot tell" a look at the service said (logged once, not at every look).
    doubt: Option<String>,
    /// The keepalive in flight (its send time), and when the next one goes.
    renewal_in_flight: Option<Duration>,
    next_renewal_at: Duration,
    last_renewal_sent: Duration,
    release: Release,
    /// A step-down: its budget's end, and whether it has been answered.
    step_down_by: Option<Duration>,
    answered: bool,
    exited: bool,
    orders: VecDeque<Order>,
    #[cfg(test)]
    pub mutations: Mutations,
    #[cfg(test)]
    pending_loss: Option<Cause>,
    /// When the input being handled came in (the stale_now mutation times effects by it).
    #[cfg(test)]
    handled_at: Duration,
}

impl<K: Kernel> Machine<K> {
    /// The machine of a leadership whose grant was sent at `sent` and answered with `ttl`.
    pub fn new(plan: Plan, sent: Duration, ttl: Duration, kernel: K) -> Machine<K> {
        let lead = Leadership::new(plan.clock, sent, ttl);
        let interval = plan.clock.keepalive_interval();
        Machine {
            raise: if plan.watchdog != WatchdogPlan::Off {
                RaiseStep::ArmWatchdog
            } else if plan.vip {
                RaiseStep::AddVip
            } else {
                RaiseStep::WriteToken
            },
            watchdog_excess: 0,
            watchdog_ping_at: None,
            watchdog_late: false,
            watchdog: match plan.watchdog {
                WatchdogPlan::Off => WatchdogState::Off,
                _ => WatchdogState::NotArmed,
            },
            plan,
            lead,
            kernel,
            phase: Phase::Raising,
            fenced: None,
            failure: None,
            vip: VipState::NotRaised,
            vip_retry_at: None,
            vip_floor: Duration::ZERO,
            vip_failures: 0,
            service: ServiceState::NotStarted,
            checking: false,
            start_in_flight: false,
            check_stale: false,
            next_check_at: None,
            exit_detail: None,
            doubt: None,
            renewal_in_flight: None,
            // Counted from when the grant was sent: the time the raise takes is no reason to
            // renew late.
            next_renewal_at: sent + interval,
            last_renewal_sent: sent,
            release: Release::NotYet,
            step_down_by: None,
            answered: false,
            exited: false,
            orders: VecDeque::new(),
            #[cfg(test)]
            mutations: Mutations::default(),
            #[cfg(test)]
            pending_loss: None,
            #[cfg(test)]
            handled_at: Duration::ZERO,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }
    pub fn deadline(&self) -> Duration {
        self.lead.deadline
    }
    pub fn fenced(&self) -> Option<&(Duration, Cause)> {
        self.fenced.as_ref()
    }
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// What is wrong, in words, for the status: a failed raise first (promote reports why it
    /// failed), then a fence.
    pub fn problem(&self) -> Option<String> {
        match (&self.failure, &self.fenced) {
            (Some(why), Some((_, cause))) => Some(format!("{why}; then fenced: {cause}")),
            (Some(why), None) => Some(why.clone()),
            (None, Some((_, cause))) => Some(format!("fenced: {cause}")),
            (None, None) => {
                (self.phase == Phase::Raising).then(|| "raising VIP and service".to_string())
            }
        }
    }
    pub fn vip(&self) -> VipState {
        self.vip
    }
    pub fn watchdog(&self) -> &WatchdogState {
        &self.watchdog
    }
    /// watchdog=auto and its reset may come after the lease's end (a driver that takes no
    /// shorter timeout; logged).
    pub fn watchdog_late(&self) -> bool {
        self.watchdog_late
    }

    /// When the guard fences itself: its deadline, or earlier, by WATCHDOG_LEAD, than the
    /// watchdog would reset the node (its timeout is whole seconds: the reset may come before
    /// the deadline).
    pub fn fence_at(&self) -> Duration {
        match self.watchdog.fires_at() {
            Some(f) => self.lead.deadline.min(f.saturating_sub(WATCHDOG_LEAD)),
            None => self.lead.deadline,
        }
    }
    pub fn service(&self) -> &ServiceState {
        &self.service
    }
    pub fn exit_detail(&self) -> Option<&str> {
        self.exit_detail.as_deref()
    }
    pub fn last_renewal_sent(&self) -> Duration {
        self.last_renewal_sent
    }

    /// The next order for the shell, oldest first.
    pub fn poll_order(&mut self) -> Option<Order> {
        self.orders.pop_front()
    }

    /// What the rest of the guard may see of the machine: a copy, published by the fencing
    /// thread after each step (status, state.json, metrics and the shell's questions read it,
    /// never the machine itself).
    pub fn view(&self) -> View {
        View {
            phase: self.phase,
            vip: self.vip,
            service: self.service.clone(),
            exit_detail: self.exit_detail.clone(),
            fenced: self.fenced.clone(),
            failure: self.failure.clone(),
            problem: self.problem(),
            deadline: self.lead.deadline,
            fence_at: self.fence_at(),
            last_renewal_sent: self.last_renewal_sent,
            watchdog: self.watchdog.clone(),
            watchdog_late: self.watchdog_late,
            starting_service: self.raise == RaiseStep::StartingService,
            vip_floor: self.vip_floor,
        }
    }

    fn may_raise(&self, now: Duration) -> bool {
        self.fenced.is_none() && self.phase == Phase::Raising && now < self.fence_at()
    }

    fn out(&mut self, order: Order) {
        self.orders.push_back(order);
    }

    fn log(&mut self, level: Level, text: String) {
        self.out(Order::Log(level, text));
    }

    /// When the machine must be called again (with `Tick`), on the boot clock.
    pub fn next_wake(&self) -> Option<Duration> {
        if self.exited {
            return None;
        }
        let mut wake: Vec<Duration> = Vec::new();
        #[cfg(test)]
        let deadline_rule = !self.mutations.no_deadline;
        #[cfg(not(test))]
        let deadline_rule = true;
        if self.fenced.is_none() && deadline_rule {
            wake.push(self.fence_at());
        }
        if let ServiceState::Stopping {
            kill_at,
            killed: false,
            ..
        } = self.service
        {
            wake.push(kill_at);
        }
        wake.extend(self.watchdog_ping_at.filter(|_| self.fenced.is_none()));
        wake.extend(self.vip_retry_at);
        wake.extend(self.next_check_at.filter(|_| !self.checking));
        if self.renewing() && self.renewal_in_flight.is_none() {
            wake.push(self.next_renewal_at);
        }
        if let (Release::RetryAt(t), true) = (self.release, self.all_down()) {
            wake.push(t);
        }
        #[cfg(test)]
        let budget_rule = !self.mutations.no_budget;
        #[cfg(not(test))]
        let budget_rule = true;
        if let (Some(by), false, true) = (self.step_down_by, self.answered, budget_rule) {
            wake.push(by);
        }
        wake.into_iter().min()
    }

    /// One input at `now` (boot clock); the kernel effects it calls for are made before it
    /// returns, the other effects are queued as orders.
    pub fn handle(&mut self, now: Duration, input: Input) {
        if self.exited {
            return;
        }
        #[cfg(test)]
        {
            self.handled_at = now;
            self.lead.slew_blind = self.mutations.slew_blind;
        }
        // Deadline first: nothing in an input is worth more than the fence.
        self.check_deadline(now);
        match input {
            #[cfg(test)]
            Input::Tick if self.mutations.ping_on_wake => self.ping_watchdog(),
            Input::Tick => {}
            Input::Renewed { sent, ttl } => self.renewed(now, sent, ttl),
            Input::RenewFailed { sent, why } => {
                if self.renewal_in_flight == Some(sent) {
                    self.renewal_in_flight = None;
                    self.next_renewal_at = now + RENEW_RETRY;
                    self.log(Level::Warn, format!("keepalive: {why}"));
                }
            }
            Input::LeaseGone { sent } => {
                if self.renewal_in_flight == Some(sent) {
                    self.renewal_in_flight = None;
                }
                self.lost(now, Cause::LeaseGone);
            }
            Input::KeyLost(None) => self.lost(now, Cause::KeyDeleted),
            Input::KeyLost(Some(other)) => self.lost(now, Cause::KeyTaken(other)),
            Input::VipGone => {
                if self.vip == VipState::Up {
                    self.vip = VipState::Absent;
                    self.out(Order::Persist);
                }
            }
            Input::Settled(r) => self.settled(now, r),
            Input::TokenWritten(r) => self.token_written(now, r),
            Input::ServiceStarted(r) => self.service_started(now, r),
            Input::ServiceExited(detail) => {
                self.exit_detail = Some(detail.clone());
                if self.phase == Phase::Leading {
                    self.log(Level::Error, format!("service {detail}"));
                }
                // Its group may live on: look, and forget its pid once the group is empty
                // (after the reap the pid may be reused; the group's id is not while it lives).
                self.next_check_at = Some(now);
            }
            Input::ServiceChecked(r) => self.service_checked(now, r),
            Input::Released(r) => self.released_answer(now, r),
            Input::StepDown { by } => self.step_down(now, by),
        }
        self.advance(now);
    }

    fn check_deadline(&mut self, now: Duration) {
        #[cfg(test)]
        if self.mutations.no_deadline {
            return;
        }
        if self.fenced.is_none() && now >= self.fence_at() {
            let cause = if now >= self.lead.deadline {
                Cause::Deadline
            } else {
                Cause::WatchdogDue
            };
            self.fence(now, cause);
        }
    }

    fn lost(&mut self, now: Duration, cause: Cause) {
        #[cfg(test)]
        if self.mutations.lost_waits_for_raise && self.phase == Phase::Raising {
            // The old guard: the loss queued until the raise was over.
            self.pending_loss = Some(cause);
            return;
        }
        // Once the release began, everything is down and the key is ours to delete: its
        // deletion, or another holder's key after it, is the release's end, not a loss.
        let releasing = self.release != Release::NotYet && self.all_down();
        if self.fenced.is_none() && !releasing {
            self.fence(now, cause);
        }
    }

    /// Ownership is over: the VIP goes at once, the service is signalled, the raise is
    /// abandoned; renewals stop (the lease is left to run out unless released).
    fn fence(&mut self, now: Duration, cause: Cause) {
        self.kernel.lowering();
        self.fenced = Some((now, cause));
        // A failed raise stays failed (promote reads it), fenced or not.
        if self.phase != Phase::Failed {
            self.phase = Phase::Fenced;
        }
        self.lower_vip(now);
        let kill_at = self.kill_time(now);
        self.stop_service(now, kill_at);
    }

    fn lower_vip(&mut self, now: Duration) {
        if matches!(self.vip, VipState::Up | VipState::MaybeUp) {
            self.kernel.lowering();
            match self.kernel.remove_vip() {
                Ok(()) => {
                    self.vip = VipState::Absent;
                    self.vip_retry_at = None;
                    self.vip_failures = 0;
                }
                Err(e) => {
                    self.vip = VipState::MaybeUp;
                    let backoff = VIP_RETRY * 2u32.saturating_pow(self.vip_failures.min(6));
                    self.vip_retry_at = Some(now + backoff.min(Duration::from_secs(1)));
                    if self.vip_failures == 0 {
                        self.log(Level::Error, format!("removing the VIP: {e}; trying again"));
                    }
                    self.vip_failures += 1;
                }
            }
            self.out(Order::CancelAnnouncements);
        } else if self.vip == VipState::NotRaised && self.plan.vip {
            // Never added: nothing can be up.
            self.vip = VipState::Absent;
        }
    }

    /// TERM now, KILL at `kill_at` (kept if an earlier KILL time is set already).
    fn stop_service(&mut self, now: Duration, kill_at: Duration) {
        let service = match &self.service {
            ServiceState::Running(s) | ServiceState::Starting(Some(s)) => s.clone(),
            ServiceState::Stopping {
                service,
                kill_at: at,
                killed,
            } => {
                let (service, at, killed) = (service.clone(), *at, *killed);
                self.service = ServiceState::Stopping {
                    service,
                    kill_at: at.min(kill_at),
                    killed,
                };
                return;
            }
            // A command whose spawn is under way: the answer brings its pid, and the fence
            // then signals it at once (service_started).
            _ => return,
        };
        if let Err(e) = self.kernel.signal_service(&service, false) {
            self.log(Level::Error, format!("SIGTERM to the service: {e}"));
        }
        self.service = ServiceState::Stopping {
            service,
            kill_at,
            killed: false,
        };
        self.next_check_at = Some(now + CHECK_EVERY);
    }

    fn renewing(&self) -> bool {
        // Renewals go on while anything may still be up in an orderly step-down; once fenced
        // the lease is left to run out; once everything is down there is nothing to keep.
        self.fenced.is_none()
            && self.release == Release::NotYet
            && !(self.is_down_phase() && self.all_down())
            && self.phase != Phase::Done
    }

    fn is_down_phase(&self) -> bool {
        matches!(
            self.phase,
            Phase::SteppingDown | Phase::Failed | Phase::Fenced
        )
    }

    fn all_down(&self) -> bool {
        matches!(self.vip, VipState::NotRaised | VipState::Absent)
            && !self.service.may_run()
            && !self.start_in_flight
    }

    fn renewed(&mut self, now: Duration, sent: Duration, ttl: Duration) {
        if self.renewal_in_flight == Some(sent) {
            self.renewal_in_flight = None;
        }
        if ttl.is_zero() {
            self.lost(now, Cause::LeaseGone);
            return;
        }
        #[cfg(test)]
        let sent = if self.mutations.count_from_reply {
            now
        } else {
            sent
        };
        // A late answer still says how long etcd keeps the lease: the release must not
        // think it gone before it is.
        self.lead.heard(sent, ttl);
        if self.fenced.is_some() || !self.lead.renew(now, sent, ttl) {
            return;
        }
        self.last_renewal_sent = self.last_renewal_sent.max(sent);
        self.next_renewal_at = sent + self.plan.clock.keepalive_interval();
        self.ping_watchdog();
        if self.vip == VipState::Up {
            self.extend_vip();
        }
        self.renew_before_floor();
        // Apart from the watch: a key deleted while the watch was broken is found here.
        self.out(Order::Confirm);
    }

    /// The boot clock now, after the effects made so far in this call (each one takes time).
    fn time(&mut self) -> Duration {
        #[cfg(test)]
        if self.mutations.stale_now {
            // The mistake: every effect timed by the clock read when the input came in.
            return self.handled_at;
        }
        self.kernel.now()
    }

    /// The boot clock now, after the effects made so far in this call; the deadline is looked
    /// at again first (an effect before may have taken until past it).
    fn clock(&mut self) -> Duration {
        let now = self.time();
        self.check_deadline(now);
        now
    }

    /// The kernel keeps an address given `secs` of lifetime by a call that began at `began`
    /// at least until then: it counts from when it applied the call (no earlier), and deletes
    /// up to ADDRCONF_TIMER_FUZZ_MINUS (HZ/50) early.
    fn floor(began: Duration, secs: u32) -> Duration {
        (began + Duration::from_secs(secs.into())).saturating_sub(KERNEL_EXPIRY_EARLY)
    }

    /// A renewal applied in time: the VIP's lifetime is set afresh, only while the address is
    /// surely still there — a replace after the kernel let it go would add it anew, so a VIP
    /// whose lifetime may have run out (a renewal answered late) is removed instead, and one
    /// whose replace ended past that moment too.
    fn extend_vip(&mut self) {
        let now = self.time();
        #[cfg(test)]
        let floor = match self.mutations.extend_expired {
            true => Duration::MAX,
            false => self.vip_floor,
        };
        #[cfg(not(test))]
        let floor = self.vip_floor;
        if now + REPLACE_TAKES >= floor {
            return self.vip_given_up(
                now,
                "the VIP's kernel lifetime ran out before a renewal could extend it",
            );
        }
        let Some(secs) = self.lead.vip_lifetime(now) else {
            // None fits: the old, shorter lifetime stays.
            return;
        };
        match self.kernel.extend_vip(secs) {
            Ok(()) if self.time() >= floor => {
                let now = self.time();
                self.vip_given_up(
                    now,
                    "the VIP's lifetime was set again only as it could run out",
                );
            }
            Ok(()) => {
                self.vip_floor = Self::floor(now, secs);
                self.fit_vip(secs);
            }
            // The old, shorter lifetime stays: safe.
            Err(e) => self.log(Level::Warn, format!("extending the VIP's lifetime: {e}")),
        }
    }

    /// A VIP whose lifetime cannot be kept safely is taken down, never kept or added anew: a
    /// raise under way fails; a leader goes on without it (monitor reports it, Pacemaker
    /// recovers).
    fn vip_given_up(&mut self, now: Duration, why: &str) {
        if self.phase == Phase::Raising {
            return self.raise_failed(now, format!("VIP: {why}"));
        }
        self.log(
            Level::Error,
            format!("{why}: the VIP is removed, not added anew (monitor reports it)"),
        );
        self.lower_vip(now);
    }

    /// The next keepalive goes out early enough for its answer to extend the VIP's lifetime
    /// while the address is surely still there: whole seconds of lifetime at a small TTL can
    /// leave less than one keepalive interval.
    fn renew_before_floor(&mut self) {
        if self.vip == VipState::Up {
            let before = self.vip_floor.saturating_sub(RENEW_BEFORE_FLOOR);
            self.next_renewal_at = self.next_renewal_at.min(before);
        }
    }

    /// After a lifetime of `secs` was set: when the call ended so late that the address could
    /// now outlive the lease (its end, kernel slack included, after the lease's earliest end),
    /// it is set again shorter, from the clock read then; where none fits, removed.
    fn fit_vip(&mut self, mut secs: u32) {
        for _ in 0..3 {
            let done = self.time();
            let gone_by = done + Duration::from_secs(secs.into()) + KERNEL_EXPIRY_SLACK;
            if gone_by <= self.lead.earliest_end() {
                return;
            }
            let Some(shorter) = self.lead.vip_lifetime(done) else {
                break;
            };
            if self.kernel.extend_vip(shorter).is_err() {
                break;
            }
            secs = shorter;
            self.vip_floor = Self::floor(done, secs);
        }
        let now = self.time();
        self.vip_given_up(
            now,
            "no kernel lifetime of the VIP fits before the lease could end",
        );
    }

    fn settled(&mut self, now: Duration, r: Result<(), Fault>) {
        if self.raise != RaiseStep::Settling || self.phase != Phase::Raising {
            return;
        }
        match r {
            Ok(()) => self.raise = RaiseStep::WriteToken,
            Err(e) => self.raise_failed(now, format!("VIP: {e}")),
        }
    }

    fn token_written(&mut self, now: Duration, r: Result<(), Fault>) {
        if self.raise != RaiseStep::WritingToken || self.phase != Phase::Raising {
            return;
        }
        match r {
            Ok(()) => self.raise = RaiseStep::StartService,
            Err(e) => self.raise_failed(now, e.to_string()),
        }
    }

    fn service_started(&mut self, now: Duration, r: Result<ServiceRef, Fault>) {
        let starting = matches!(self.service, ServiceState::Starting(_));
        self.start_in_flight = false;
        // A look already out saw the service before this answer: it says nothing now.
        self.check_stale = self.checking;
        match r {
            Ok(s) if !starting => {
                // A stop overtook the start, and the start may have won the race after it:
                // stop again, and look again before anything counts as stopped.
                match self.service.clone() {
                    ServiceState::Stopping { kill_at, .. } => {
                        if let Err(e) = self.kernel.signal_service(&s, false) {
                            self.log(Level::Error, format!("SIGTERM to the service: {e}"));
                        }
                        // And a KILL again, at the same time or at once if it has passed.
                        self.service = ServiceState::Stopping {
                            service: s,
                            kill_at: kill_at.min(self.kill_time(now)),
                            killed: false,
                        };
                    }
                    _ => {
                        self.service = ServiceState::Running(s);
                        let kill_at = self.kill_time(now);
                        self.stop_service(now, kill_at);
                    }
                }
                self.next_check_at = Some(now + CHECK_EVERY);
            }
            Ok(s) => {
                self.service = ServiceState::Running(s);
                if self.phase == Phase::Raising && self.may_raise(now) {
                    self.raise = RaiseStep::Done;
                    self.phase = Phase::Leading;
                    self.out(Order::Persist);
                    return;
                }
                // Fenced or stepping down meanwhile (a slow start): stopped at once.
                let kill_at = self.kill_time(now);
                self.stop_service(now, kill_at);
            }
            Err(e) => {
                if starting {
                    // A unit whose start failed may still be activating: stop it and look
                    // before forgetting it. A command that never spawned is nothing.
                    match self.service.reference().cloned() {
                        Some(s) => {
                            self.service = ServiceState::Running(s);
                            let kill_at = self.kill_time(now);
                            self.stop_service(now, kill_at);
                        }
                        None => self.service = ServiceState::Stopped,
                    }
                }
                if self.phase == Phase::Raising {
                    self.raise_failed(now, format!("service: {e}"));
                }
            }
        }
    }

    /// When a service signalled now gets SIGKILL: half a margin after the deadline (or the
    /// loss) once fenced — counted from the deadline, so the fencing thread's wake-up latency
    /// is not paid twice — but KILL_LEAD before the lease can end at etcd at the largest slew
    /// and before an armed watchdog would reset the node; else at the end of the step-down's
    /// grace.
    fn kill_time(&self, now: Duration) -> Duration {
        match &self.fenced {
            Some((at, _)) => {
                let at = (*at).min(self.fence_at());
                let kill = self.lead.kill_at(at);
                match self.watchdog.fires_at() {
                    Some(f) => kill.min(f.saturating_sub(WATCHDOG_LEAD / 2)).max(at),
                    None => kill,
                }
            }
            None => now + self.grace(now),
        }
    }

    fn service_checked(&mut self, now: Duration, look: Presence) {
        #[cfg(test)]
        let look = match look {
            Presence::CannotTell(_) if self.mutations.doubt_is_absence => Presence::Absent,
            other => other,
        };
        self.checking = false;
        if std::mem::take(&mut self.check_stale) {
            self.next_check_at = Some(now);
            return;
        }
        if look.doubt().is_none() {
            self.doubt = None;
        }
        match look {
            Presence::Absent if self.start_in_flight => {
                // Not up yet is not stopped: the start has not answered.
                self.next_check_at = Some(now + CHECK_EVERY);
            }
            Presence::Absent => {
                if let Some(s) = self.service.reference().cloned() {
                    self.kernel.forget_service(&s);
                }
                if self.service.may_run() {
                    self.service = ServiceState::Stopped;
                    self.next_check_at = None;
                    self.out(Order::Persist);
                }
            }
            Presence::Present => {
                if matches!(self.service, ServiceState::Stopping { .. }) {
                    self.next_check_at = Some(now + CHECK_EVERY);
                } else if self.phase == Phase::Leading {
                    // Remnants of an exited leader while leading: left to the step-down.
                    self.next_check_at = None;
                }
            }
            // Never taken for stopped: look again; said once per doubt.
            Presence::CannotTell(why) => {
                if self.doubt.as_ref() != Some(&why) {
                    self.log(
                        Level::Warn,
                        format!("cannot tell whether the service is stopped: {why}"),
                    );
                    self.doubt = Some(why);
                }
                self.next_check_at = Some(now + CHECK_EVERY);
            }
        }
    }

    fn released_answer(&mut self, now: Duration, r: Result<(), Fault>) {
        match r {
            Ok(()) => {
                self.release = Release::Done;
                self.log(Level::Info, "leader key released".into());
            }
            Err(e) => {
                self.release = Release::RetryAt(now + RELEASE_RETRY);
                self.log(
                    Level::Warn,
                    format!("releasing the leader key: {e} (it expires with the lease)"),
                );
            }
        }
    }

    fn step_down(&mut self, now: Duration, by: Duration) {
        self.kernel.lowering();
        // A request while another waits: the earlier answer is owed. A request after an
        // answer (demote failed, now stop asks): its own budget.
        self.step_down_by = match self.step_down_by {
            Some(b) if !self.answered => Some(b.min(by)),
            _ => Some(by),
        };
        self.answered = false;
        match self.phase {
            Phase::Raising | Phase::Leading => {
                self.phase = Phase::SteppingDown;
                self.out(Order::Log(Level::Info, "stepping down".into()));
            }
            Phase::Fenced | Phase::SteppingDown | Phase::Failed | Phase::Done => {}
        }
        self.lower_vip(now);
        let kill_at = self.kill_time(now);
        self.stop_service(now, kill_at);
    }

    /// TERM → KILL time for an orderly stop: the budget less what the release needs.
    fn grace(&self, now: Duration) -> Duration {
        #[cfg(test)]
        if self.mutations.no_budget {
            return STOP_GRACE;
        }
        let by = self.step_down_by.unwrap_or(now + DEFAULT_STEP_DOWN);
        by.saturating_sub(now)
            .saturating_sub(RELEASE_RESERVE)
            .min(STOP_GRACE)
    }

    fn raise_failed(&mut self, now: Duration, why: String) {
        self.kernel.lowering();
        self.log(Level::Error, why.clone());
        self.failure = Some(why);
        self.phase = Phase::Failed;
        self.raise = RaiseStep::Done;
        self.lower_vip(now);
        let kill_at = self.kill_time(now);
        self.stop_service(now, kill_at);
    }

    #[cfg(test)]
    fn apply_pending_loss(&mut self, now: Duration) {
        if self.phase != Phase::Raising {
            if let Some(cause) = self.pending_loss.take() {
                if self.fenced.is_none() {
                    self.fence(now, cause);
                }
            }
        }
    }

    /// Everything the rules call for at `now`, after the input.
    fn advance(&mut self, now: Duration) {
        #[cfg(test)]
        self.apply_pending_loss(now);
        // A removal that failed is tried again in every phase (a VIP whose lifetime could not
        // be extended is removed while leading).
        if self.vip == VipState::MaybeUp && self.vip_retry_at.is_some_and(|t| now >= t) {
            self.lower_vip(now);
        }
        if self.is_down_phase() {
            self.lower(now);
        }
        self.check_step(now);
        self.second_ping(now);
        if self.phase == Phase::Raising {
            self.raise_step();
        }
        if self.renewing() && self.renewal_in_flight.is_none() && now >= self.next_renewal_at {
            self.renewal_in_flight = Some(now);
            self.out(Order::Keepalive { sent: now });
        }
        if self.is_down_phase() {
            self.disarm_step(now);
            self.release_step(now);
            self.answer_step(now);
        }
    }

    /// After a renewal applied in time: the watchdog's reset moves to just before the lease's
    /// new end. No ping when that cannot be had — less than a second of room, or less than
    /// what the driver is known to round up by: the reset then comes where it was, within the
    /// old bound. A ping that took effect too late (the guard stopped just before it) or that
    /// the driver rounded up is made again at once, shorter; where none fits, a `required`
    /// guard fences (WatchdogLate) and an `auto` one says that the reset may come late.
    fn ping_watchdog(&mut self) {
        let WatchdogState::Armed { timeout_s, .. } = self.watchdog else {
            return;
        };
        let now = self.time();
        #[cfg(test)]
        if self.mutations.watchdog_full_ttl {
            // The mistake: the whole TTL, believed to fit.
            let ttl = self.plan.clock.ttl.as_secs() as u32;
            if let Ok((applied, done)) = self.kernel.ping_watchdog(ttl) {
                self.watchdog = WatchdogState::Armed {
                    timeout_s: applied,
                    pinged: done,
                };
            }
            return;
        }
        let mut at = now;
        for attempt in 0..4 {
            let wanted = self
                .lead
                .watchdog_timeout(at)
                .filter(|w| *w > self.watchdog_excess);
            let Some(wanted) = wanted else {
                if attempt == 0 {
                    return;
                }
                break;
            };
            let ask = wanted - self.watchdog_excess;
            match self.kernel.ping_watchdog(ask) {
                Ok((applied, done)) => {
                    let done = done.max(at);
                    self.watchdog_excess = self.watchdog_excess.max(applied.saturating_sub(ask));
                    self.watchdog = WatchdogState::Armed {
                        timeout_s: applied,
                        pinged: done,
                    };
                    if self
                        .lead
                        .watchdog_timeout(done)
                        .is_some_and(|w| applied <= w)
                    {
                        self.watchdog_late = false;
                        return self.plan_second_ping(done, applied);
                    }
                    at = done;
                }
                // A failed SETTIMEOUT or KEEPALIVE did not ping: the reset stays where it was
                // (within its bound, unless an earlier attempt here set it too long), and the
                // guard fences before it.
                Err(e) => {
                    self.log(Level::Error, format!("pinging the watchdog: {e}"));
                    if attempt == 0 {
                        return;
                    }
                    break;
                }
            }
        }
        let WatchdogState::Armed {
            timeout_s: now_s, ..
        } = self.watchdog
        else {
            return;
        };
        if self.plan.watchdog == WatchdogPlan::Required {
            return self.fence(now, Cause::WatchdogLate);
        }
        self.watchdog_late = true;
        if now_s != timeout_s {
            self.log(
                Level::Error,
                format!(
                    "the watchdog's timeout of {now_s} s cannot be had shorter: a frozen guard's \
                     node may be reset after its lease could end at etcd"
                ),
            );
        }
    }

    /// Whole seconds lose up to one against the lease: a second ping, when the same timeout
    /// ends just at the bound, moves the reset up to a second later — room for a guard that
    /// fences at its deadline to stop the service and disarm before the reset.
    fn plan_second_ping(&mut self, now: Duration, applied: u32) {
        let exact = self.lead.watchdog_exact(applied);
        self.watchdog_ping_at =
            (exact > now + SECOND_PING_MIN).then(|| exact.saturating_sub(Duration::from_millis(2)));
    }

    /// The renewal's second ping, when it is due and the promise still holds.
    fn second_ping(&mut self, now: Duration) {
        let Some(at) = self.watchdog_ping_at else {
            return;
        };
        if now < at {
            return;
        }
        self.watchdog_ping_at = None;
        let later = match (self.lead.watchdog_timeout(now), self.watchdog.fires_at()) {
            (Some(w), Some(f)) => now + WatchdogState::shown(w) > f,
            _ => false,
        };
        // Woken late, the whole seconds may no longer reach past the first ping's reset.
        if later && self.fenced.is_none() && now < self.fence_at() {
            self.ping_watchdog();
            // One second ping per renewal.
            self.watchdog_ping_at = None;
        }
    }

    /// At arming (nothing is raised yet): the driver's granularity is learned by asking for
    /// `wanted` and the three seconds below it (each ask pings too), then the timeout is set
    /// to the longest ask that the driver does not round above `wanted`. Ok: what it applied.
    fn fit_watchdog(&mut self, wanted: u32, first: Result<u32, Fault>) -> Result<u32, Fault> {
        let mut applied = first?;
        self.watchdog_excess = applied.saturating_sub(wanted);
        for ask in (wanted.saturating_sub(3).max(1)..wanted).rev() {
            applied = self.kernel.ping_watchdog(ask)?.0;
            self.watchdog_excess = self.watchdog_excess.max(applied.saturating_sub(ask));
        }
        // The longest ask the driver does not round above `wanted`.
        let mut ask = wanted.saturating_sub(self.watchdog_excess);
        while ask >= 1 {
            applied = self.kernel.ping_watchdog(ask)?.0;
            if applied <= wanted {
                break;
            }
            ask -= 1;
        }
        Ok(applied)
    }

    /// The magic close, once VIP and service are confirmed down.
    fn disarm_step(&mut self, now: Duration) {
        let down = self.all_down();
        #[cfg(test)]
        let down = down || self.mutations.early_disarm;
        if !down {
            return;
        }
        let Some(fires_at) = self.watchdog.fires_at() else {
            return;
        };
        if matches!(self.watchdog, WatchdogState::DisarmFailed { .. }) {
            return;
        }
        match self.kernel.disarm_watchdog() {
            Ok(()) => {
                self.watchdog = WatchdogState::Disarmed;
                self.log(Level::Info, "watchdog disarmed".into());
            }
            Err(why) => {
                let left = fires_at.saturating_sub(now).as_secs_f64();
                self.log(
                    Level::Error,
                    format!(
                        "the watchdog could not be stopped ({why}): the node resets in {left:.1} s"
                    ),
                );
                self.watchdog = WatchdogState::DisarmFailed { fires_at, why };
            }
        }
    }

    /// Arming: with a timeout whose reset comes before the lease can end at etcd, read back.
    /// A failure (or a driver that applied more) fails the raise when the watchdog is
    /// required; with auto the guard leads without it and says why.
    fn arm_watchdog(&mut self, now: Duration) {
        self.raise = if self.plan.vip {
            RaiseStep::AddVip
        } else {
            RaiseStep::WriteToken
        };
        let Some(wanted) = self.lead.watchdog_timeout(now) else {
            return self.raise_failed(
                now,
                "too little of the lease is left to arm the watchdog".into(),
            );
        };
        #[cfg(test)]
        let wanted = if self.mutations.watchdog_full_ttl {
            self.plan.clock.ttl.as_secs() as u32
        } else {
            wanted
        };
        let armed = match self.kernel.arm_watchdog(wanted) {
            Ok(a) => Ok(a),
            Err(ArmError::NotArmed(e)) => Err(Fault::Watchdog(e)),
            Err(ArmError::Counting(why)) => {
                // A device that could not be stopped again resets the node: nothing is raised.
                let fires_at = now + WatchdogState::shown(wanted);
                self.watchdog = WatchdogState::DisarmFailed {
                    fires_at,
                    why: Fault::Watchdog(why.clone()),
                };
                return self.raise_failed(now, format!("watchdog: {why}: it will reset the node"));
            }
        };
        let opened = armed.is_ok();
        let problem = match self.fit_watchdog(wanted, armed) {
            Ok(applied) if applied <= wanted => {
                // The reset counts from the last of the arming's calls, which ended by now.
                let done = self.time();
                self.watchdog = WatchdogState::Armed {
                    timeout_s: applied,
                    pinged: done,
                };
                self.log(
                    Level::Info,
                    format!("watchdog armed: it resets the node {applied} s after the last ping"),
                );
                if self
                    .lead
                    .watchdog_timeout(done)
                    .is_some_and(|w| applied <= w)
                {
                    self.plan_second_ping(done, applied);
                } else {
                    // Arming took so long that the timeout no longer fits: shorter, at once.
                    self.ping_watchdog();
                }
                return;
            }
            Ok(applied) => format!(
                "the watchdog took a timeout of {applied} s for {wanted} s: its reset could come \
                 after the lease ends"
            ),
            Err(e) => e.to_string(),
        };
        if let Some(Err(e)) = opened.then(|| self.kernel.disarm_watchdog()) {
            let fires_at = now + WatchdogState::shown(wanted);
            self.watchdog = WatchdogState::DisarmFailed {
                fires_at,
                why: e.clone(),
            };
            return self.raise_failed(
                now,
                format!("watchdog: {problem}; then {e}: it will reset the node"),
            );
        }
        if self.plan.watchdog == WatchdogPlan::Required {
            self.raise_failed(now, format!("watchdog=required: {problem}"));
        } else {
            self.log(
                Level::Warn,
                format!("leading without a watchdog: {problem}"),
            );
            self.watchdog = WatchdogState::Unavailable(problem);
        }
    }

    /// Lowering goes on until VIP and service are confirmed down.
    fn lower(&mut self, now: Duration) {
        if matches!(
            self.service,
            ServiceState::Running(_) | ServiceState::Starting(Some(_))
        ) {
            let kill_at = self.kill_time(now);
            self.stop_service(now, kill_at);
        }
        if let ServiceState::Stopping {
            service,
            kill_at,
            killed: false,
        } = self.service.clone()
        {
            if now >= kill_at {
                if let Err(e) = self.kernel.signal_service(&service, true) {
                    self.log(Level::Error, format!("SIGKILL to the service: {e}"));
                }
                self.service = ServiceState::Stopping {
                    service,
                    kill_at,
                    killed: true,
                };
                self.next_check_at = Some(now);
            }
        }
    }

    fn check_step(&mut self, now: Duration) {
        if let (Some(t), false) = (self.next_check_at, self.checking) {
            if now >= t {
                if let Some(s) = self.service.reference().cloned() {
                    self.checking = true;
                    self.out(Order::CheckService(s));
                }
                self.next_check_at = None;
            }
        }
    }

    fn raise_step(&mut self) {
        // The effects before this step took time: the clock is read again, the deadline first.
        let now = self.clock();
        if !self.may_raise(now) {
            return;
        }
        #[cfg(test)]
        let arm_late = self.mutations.arm_after_vip;
        #[cfg(not(test))]
        let arm_late = false;
        match self.raise {
            RaiseStep::ArmWatchdog if !arm_late => {
                self.arm_watchdog(now);
                if self.phase == Phase::Raising {
                    self.raise_step();
                }
            }
            RaiseStep::ArmWatchdog => {
                // The mutation: the VIP first, the watchdog at the next step.
                self.raise = RaiseStep::AddVip;
                self.raise_step();
                self.arm_watchdog(now);
                self.raise = RaiseStep::Settling;
            }
            RaiseStep::AddVip => {
                let Some(secs) = self.lead.vip_lifetime(now) else {
                    return self.raise_failed(
                        now,
                        "too little of the lease is left to raise the VIP".into(),
                    );
                };
                match self.kernel.add_vip(secs) {
                    Ok(()) => {
                        self.vip = VipState::Up;
                        self.vip_floor = Self::floor(now, secs);
                        self.fit_vip(secs);
                        if self.phase != Phase::Raising {
                            // No lifetime fitted: the raise failed, the VIP went again.
                            return;
                        }
                        self.renew_before_floor();
                        self.raise = RaiseStep::Settling;
                        self.out(Order::Persist);
                        // Not bounded by the deadline: renewals go on while DAD runs, and the
                        // deadline fences on its own (the settle's announcements ask first).
                        self.out(Order::Settle {
                            dad_wait: crate::vip::up::DAD_WAIT,
                        });
                    }
                    Err(e) => {
                        // It may have gone on all the same (a lost answer): treat as maybe up.
                        self.vip = VipState::MaybeUp;
                        self.vip_retry_at = Some(now);
                        self.raise_failed(now, format!("VIP: {e}"));
                    }
                }
            }
            RaiseStep::WriteToken => {
                self.raise = RaiseStep::WritingToken;
                self.out(Order::WriteToken);
            }
            RaiseStep::StartService => {
                self.raise = RaiseStep::StartingService;
                // A unit is known before its start, so fencing can stop it mid-start.
                self.service = ServiceState::Starting(self.plan.unit.clone().map(ServiceRef::Unit));
                self.start_in_flight = true;
                self.out(Order::StartService);
            }
            RaiseStep::Settling
            | RaiseStep::WritingToken
            | RaiseStep::StartingService
            | RaiseStep::Done => {}
        }
    }

    fn release_step(&mut self, now: Duration) {
        let may_release = self.all_down();
        #[cfg(test)]
        let may_release = may_release || self.mutations.early_release;
        if !may_release {
            return;
        }
        let due = match self.release {
            Release::NotYet => true,
            Release::RetryAt(t) => now >= t,
            Release::InFlight | Release::Done => false,
        };
        // Past the lease's end it is gone at etcd anyway.
        if due && now >= self.lead.latest_end && self.renewal_in_flight.is_none() {
            self.release = Release::Done;
            return;
        }
        if due {
            self.release = Release::InFlight;
            self.out(Order::Release);
        }
    }

    fn answer_step(&mut self, now: Duration) {
        let failed = self.failure.is_some();
        let Some(by) = self
            .step_down_by
            .or_else(|| failed.then_some(now + DEFAULT_STEP_DOWN))
        else {
            return;
        };
        let down = self.all_down();
        let settled = matches!(self.release, Release::Done | Release::RetryAt(_));
        if down && settled {
            if self.step_down_by.is_some() && !self.answered {
                self.answered = true;
                self.out(Order::StepDownAnswer(Ok(())));
            }
            self.exited = true;
            self.out(Order::Exit {
                raise_failed: failed,
            });
            self.phase = Phase::Done;
            return;
        }
        #[cfg(test)]
        if self.mutations.no_budget {
            return;
        }
        if now >= by && !self.answered && self.step_down_by.is_some() && down {
            // VIP and service down, the release still under way: the step-down is done (an
            // unreleased key only delays the next leader until the lease runs out).
            self.answered = true;
            self.out(Order::StepDownAnswer(Ok(())));
            return;
        }
        if now >= by && !self.answered && self.step_down_by.is_some() {
            self.answered = true;
            let why = self.still_up();
            self.log(
                Level::Error,
                format!("step-down not complete in time: {why}"),
            );
            self.out(Order::StepDownAnswer(Err(why)));
        }
    }

    /// What keeps the step-down from being complete, in words.
    fn still_up(&self) -> String {
        let mut up = Vec::new();
        if matches!(self.vip, VipState::Up | VipState::MaybeUp) {
            up.push("the VIP may still be up (its removal failed)".to_string());
        }
        if self.service.may_run() {
            up.push(match &self.doubt {
                Some(why) => format!("the service is not confirmed stopped (cannot tell: {why})"),
                None => "the service is not confirmed stopped".to_string(),
            });
        }
        if up.is_empty() {
            up.push("the leader key is not released yet".to_string());
        }
        up.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(ttl: u64, margin: u64) -> Leadership {
        let clock = LeaseClock {
            ttl: Duration::from_secs(ttl),
            margin: Duration::from_secs(margin),
        };
        Leadership::new(clock, Duration::from_secs(100), clock.ttl)
    }

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

    /// A kernel whose watchdog pings take effect `late` after the machine read the clock (a
    /// guard stopped in between), recording the timeouts asked for; its VIP removals fail
    /// while `removal_fails`.
    #[derive(Default)]
    struct Late {
        now: Duration,
        late: Duration,
        asks: Vec<u32>,
        removal_fails: bool,
    }

    impl Kernel for Late {
        fn add_vip(&mut self, _: u32) -> Result<(), Fault> {
            Ok(())
        }
        fn extend_vip(&mut self, _: u32) -> Result<(), Fault> {
            Ok(())
        }
        fn remove_vip(&mut self) -> Result<(), Fault> {
            match self.removal_fails {
                true => Err(Fault::Netlink("EBUSY (test)".into())),
                false => Ok(()),
            }
        }
        fn arm_watchdog(&mut self, secs: u32) -> Result<u32, ArmError> {
            self.asks.push(secs);
            Ok(secs)
        }
        fn ping_watchdog(&mut self, secs: u32) -> Result<(u32, Duration), Fault> {
            self.asks.push(secs);
            Ok((secs, self.now + std::mem::take(&mut self.late)))
        }
        fn disarm_watchdog(&mut self) -> Result<(), Fault> {
            Ok(())
        }
        fn signal_service(&mut self, _: &ServiceRef, _: bool) -> Result<(), Fault> {
            Ok(())
        }
        fn forget_service(&mut self, _: &ServiceRef) {}
        fn lowering(&mut self) {}
        fn now(&mut self) -> Duration {
            self.now
        }
    }

    #[test]
    fn a_ping_that_took_effect_late_is_made_again_shorter() {
        let clock = LeaseClock {
            ttl: Duration::from_secs(10),
            margin: Duration::from_secs(2),
        };
        let plan = Plan {
            clock,
            vip: false,
            unit: None,
            watchdog: WatchdogPlan::Required,
        };
        let t = Duration::from_millis;
        let mut m = Machine::new(plan, t(0), clock.ttl, Late::default());
        m.kernel.now = t(20);
        m.handle(t(20), Input::Tick);
        assert!(matches!(
            m.watchdog(),
            WatchdogState::Armed { timeout_s: 8, .. }
        ));
        // A renewal sent at 3.33 s, answered at 3.35 s; the ping lands 1.5 s later.
        m.kernel.asks.clear();
        m.kernel.now = t(3350);
        m.kernel.late = t(1500);
        m.handle(
            t(3350),
            Input::Renewed {
                sent: t(3330),
                ttl: clock.ttl,
            },
        );
        // 8 s asked at 3.35 s; at 4.85 s only 7 s still fit: asked again.
        assert_eq!(m.kernel.asks, [8, 7]);
        let WatchdogState::Armed { timeout_s, pinged } = m.watchdog().clone() else {
            panic!("{:?}", m.watchdog());
        };
        let r = crate::lease::clock::MAX_SLEW;
        let since = (pinged.as_secs_f64() - 3.33) / (1.0 - r);
        let true_reset = since + f64::from(timeout_s) * (1.0 + WATCHDOG_TOLERANCE);
        assert!(true_reset <= 10.0 / (1.0 + r), "{true_reset}");
        assert!(m.fenced().is_none());
    }

    /// A machine with a VIP, no service and no watchdog, leading from 0 with the lease given.
    fn vip_machine(ttl: u64, margin: u64) -> Machine<Late> {
        let clock = LeaseClock {
            ttl: Duration::from_secs(ttl),
            margin: Duration::from_secs(margin),
        };
        let plan = Plan {
            clock,
            vip: true,
            unit: None,
            watchdog: WatchdogPlan::Off,
        };
        Machine::new(plan, Duration::ZERO, clock.ttl, Late::default())
    }

    #[test]
    fn the_vip_is_defended_only_while_leading_with_it_up_and_the_lease_covering_it() {
        let t = Duration::from_millis;
        let mut m = vip_machine(10, 2);
        m.handle(t(10), Input::Tick);
        assert_eq!(m.phase(), Phase::Raising);
        m.handle(t(20), Input::Settled(Ok(())));
        assert!(
            !m.view().may_defend(t(20)),
            "raising: the burst announces, not a defence"
        );
        m.handle(t(30), Input::TokenWritten(Ok(())));
        m.handle(t(40), Input::ServiceStarted(Ok(ServiceRef::Group(12345))));
        assert_eq!(m.phase(), Phase::Leading, "{:?}", m.failure());
        assert_eq!(m.vip(), VipState::Up);
        assert!(m.view().may_defend(t(50)));
        assert!(!m.view().may_defend(m.fence_at()), "past the fencing time");
        m.handle(m.fence_at(), Input::Tick);
        assert!(m.fenced().is_some());
        assert!(!m.view().may_defend(m.fence_at()), "fenced");
    }

    #[test]
    fn the_release_after_a_failed_raise_is_not_a_loss_and_the_failure_stays_the_reason() {
        let t = Duration::from_millis;
        let mut m = vip_machine(3, 1);
        m.handle(t(10), Input::Tick);
        let mut orders = Vec::new();
        while let Some(o) = m.poll_order() {
            orders.push(o);
        }
        // DAD may take the kernel up to about 2 s: the settle is not cut at the deadline.
        assert!(
            orders.iter().any(
                |o| matches!(o, Order::Settle { dad_wait } if *dad_wait == crate::vip::up::DAD_WAIT)
            ),
            "{orders:?}"
        );
        m.handle(
            t(1500),
            Input::Settled(Err(Fault::Settle("DAD did not finish".into()))),
        );
        assert_eq!(m.phase(), Phase::Failed);
        let mut released = false;
        while let Some(o) = m.poll_order() {
            released |= matches!(o, Order::Release);
        }
        assert!(released, "everything down: the key is released");
        // While the release is out, the watch sees the key go (our own deletion), then
        // another node's key.
        m.handle(t(1505), Input::KeyLost(None));
        m.handle(t(1507), Input::KeyLost(Some(7)));
        assert!(m.fenced().is_none(), "{:?}", m.fenced());
        assert_eq!(m.problem().as_deref(), Some("VIP: DAD did not finish"));
        m.handle(t(1510), Input::Released(Ok(())));
        let mut exit = None;
        while let Some(o) = m.poll_order() {
            if let Order::Exit { raise_failed } = o {
                exit = Some(raise_failed);
            }
        }
        assert_eq!(exit, Some(true), "the guard ends as a failed raise");
    }

    #[test]
    fn a_fence_after_a_failed_raise_is_named_after_the_failure() {
        let t = Duration::from_millis;
        let mut m = vip_machine(3, 1);
        m.handle(t(10), Input::Tick);
        assert_eq!(m.problem().as_deref(), Some("raising VIP and service"));
        // The VIP cannot be removed yet: nothing is released while it may be up.
        m.kernel.removal_fails = true;
        m.handle(
            t(1500),
            Input::Settled(Err(Fault::Settle("DAD failed".into()))),
        );
        // Before the release began: the key taken by another node is a loss.
        m.handle(t(1505), Input::KeyLost(Some(7)));
        assert!(m.fenced().is_some());
        assert_eq!(m.phase(), Phase::Failed, "a failed raise stays failed");
        let problem = m.problem().unwrap();
        assert!(
            problem
                .starts_with("VIP: DAD failed; then fenced: leader key now carries another lease"),
            "{problem}"
        );
    }

    /// docs/safety.md's table of bounds is the code's: each row recomputed.
    #[test]
    fn the_bounds_table_in_the_safety_document_is_the_codes() {
        let doc = include_str!("../../docs/safety.md");
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
