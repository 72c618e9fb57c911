//! Deterministic fault-schedule simulation of the guard machine (guard::machine) — the very
//! value the guard runs, not a model of it — in virtual time. Each schedule draws, from one
//! seed, a lease setting and faults on every input and every effect: etcd members silent,
//! slow, refusing or without a leader; etcd leader changes that extend the lease; the key
//! deleted or the lease revoked behind the guard's back, with the watch working or not; a VIP
//! removal that fails once or always; DAD that takes up to 10 s; a `systemctl start` that
//! takes up to 90 s; a service that ignores SIGTERM or cannot be killed; a stop that hangs;
//! checks and releases that fail; stalls of the guard's async side (a blocked log sink, a
//! hanging health check) that do not touch the fencing thread; an orderly step-down with its
//! budget; the guard frozen (SIGSTOP) or killed. The simulated shell performs the machine's
//! orders the way guard::lead does and answers them, late or failed as the schedule says.
//!
//! After every step it checks:
//! (i)   the VIP and the service are down no later than the deadline (send time of the last
//!       renewal applied in time + TTL − margin; the service: TERM by then, KILL half a margin
//!       later), the fencing thread's wake-up latency aside; with a VIP removal that always
//!       fails, the kernel's lifetime takes it before the lease can end at etcd; nothing
//!       outlives the lease at etcd, frozen or killed guard included (a frozen guard's service
//!       is the residual risk docs/safety.md names);
//! (ii)  the key is never released (nor the lease revoked) while the VIP or the service is up;
//! (iii) nothing is raised once the machine has been told ownership is lost, nor at or after
//!       the deadline;
//! (iv)  a step-down is answered within its budget.
//!
//! A failing schedule names its seed; `HAMASTER_SIM_SEED=N cargo test --lib sim` replays it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::machine::{
    ArmError, Cause, Fault, Input, Kernel, Machine, Mutations, Order, Plan, WatchdogPlan,
    VIP_RETRY, WATCHDOG_TOLERANCE,
};
use crate::lease::clock::MAX_SLEW;
use crate::lease::LeaseClock;
use crate::service::ServiceRef;
use crate::splitmix::SplitMix64;

/// The fencing thread's wake-up latency allowed by invariant (i) (the benchmark's p99 target).
const FENCE_LATENCY_BOUND: Duration = Duration::from_millis(50);
const HORIZON: Duration = Duration::from_secs(120);
/// The default lease settings where no corosync runs: lease_ttl 10, lease_margin 2.
const DEFAULTS: LeaseClock = LeaseClock {
    ttl: Duration::from_secs(10),
    margin: Duration::from_secs(2),
};
/// Ticks a stopped service's check takes (the shell's killpg / systemctl is-active).
const CHECK_TAKES: Duration = Duration::from_millis(5);

struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }
    /// Uniform in [lo, hi] milliseconds.
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi.saturating_sub(lo) + 1))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Normal,
    /// Answers, late: possibly after the attempt timeout, possibly after the deadline.
    Slow,
    /// A dead link: packets dropped, the attempt times out.
    Silent,
    /// A stopped process, or a member cut off from its quorum: refused at once.
    Refusing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RemoveFault {
    Never,
    /// The first removal fails, the retry works.
    Once,
    /// Every removal fails (the kernel's lifetime is the last line).
    Always,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    /// The fencing thread wakes (not delayed by the async side's stalls).
    FenceWake,
    /// An answer the shell feeds into the machine (delayed by stalls).
    Deliver(Input),
    /// etcd receives a keepalive sent at `sent`; its answer takes `reply_in`.
    EtcdRenews {
        sent: Duration,
        reply_in: Duration,
    },
    EtcdLeaderChange,
    /// Behind the guard's back: `etcdctl del` (false) or `etcdctl lease revoke` (true).
    OwnershipLost {
        revoked: bool,
    },
    KernelExpiry,
    ServiceDies,
    StepDown {
        budget: Duration,
    },
    /// The shell's task forks the command, if the machine still wants it, and tells the
    /// machine its pid at once.
    Spawn,
    Freeze,
    Unfreeze,
    /// The watchdog's time, if no ping moved it since.
    WatchdogFires,
}

impl Ev {
    fn on_async_side(&self) -> bool {
        matches!(self, Ev::Deliver(_) | Ev::StepDown { .. } | Ev::Spawn)
    }
}

/// The host as the machine's kernel effects meet it, with the schedule's faults.
#[derive(Default)]
struct World {
    now: Duration,
    vip: bool,
    vip_kernel_end: Duration,
    kernel_slack: Duration,
    remove_fault: Option<RemoveFault>,
    removals: u32,
    service: bool,
    ignores_term: bool,
    unkillable: bool,
    term_exit: Duration,
    termed_at: Option<Duration>,
    /// Raise effects made, with their times: checked against (iii).
    raised: Vec<Duration>,
    /// The hardware watchdog: the plan arms one.
    dog_planned: bool,
    /// Arming fails (no device, EBUSY).
    dog_arm_fails: bool,
    /// The driver's granularity: a timeout is rounded up to a multiple of it.
    dog_step: u32,
    /// A ping fails now and then; the magic close fails.
    dog_ping_fails: f64,
    dog_disarm_fails: bool,
    /// How much later than nominal the hardware resets (1 ..= 1 + WATCHDOG_TOLERANCE).
    dog_late: f64,
    /// Armed: the timeout in force and when the reset comes.
    dog: Option<(u32, Duration)>,
    dog_armed_at: Option<Duration>,
    dog_disarmed: bool,
    /// The magic close was tried and failed (everything down): the reset is expected.
    dog_close_failed: bool,
    /// Pings made, with their times: checked against (v).
    pings: Vec<Duration>,
    /// What a kernel effect found wrong with the watchdog protocol (v).
    dog_violations: Vec<String>,
    /// The service was forgotten (its leader reaped) while it still ran.
    forgotten_while_up: bool,
    scheduled: Vec<(Duration, Ev)>,
    trace: Vec<String>,
}

impl World {
    fn note(&mut self, what: String) {
        if self.trace.len() < 600 {
            self.trace
                .push(format!("{:>10.3} {what}", self.now.as_secs_f64()));
        }
    }
}

impl World {
    /// (v): nothing is raised before the watchdog is armed (unless arming failed and the plan
    /// leads without it).
    fn check_armed_for_raise(&mut self, what: &str) {
        if self.dog_planned && self.dog.is_none() && !self.dog_arm_fails && !self.dog_disarmed {
            let t = self.now;
            self.dog_violations
                .push(format!("{what} at {t:?} before the watchdog was armed"));
        }
    }

    fn dog_set(&mut self, secs: u32) -> u32 {
        let step = self.dog_step.max(1);
        let applied = secs.div_ceil(step) * step;
        let fires = self.now + Duration::from_secs(applied.into()).mul_f64(self.dog_late);
        self.dog = Some((applied, fires));
        self.scheduled.push((fires, Ev::WatchdogFires));
        applied
    }
}

impl Kernel for World {
    fn arm_watchdog(&mut self, secs: u32) -> Result<u32, ArmError> {
        if self.dog_arm_fails {
            return Err(ArmError::NotArmed(
                "/dev/watchdog0 is held by another process (simulated)".into(),
            ));
        }
        self.dog_armed_at = Some(self.now);
        let applied = self.dog_set(secs);
        self.note(format!("watchdog armed, {applied} s"));
        Ok(applied)
    }
    fn ping_watchdog(&mut self, secs: u32) -> Result<(u32, Duration), Fault> {
        if self.dog.is_none() {
            return Err(Fault::Watchdog("not armed".into()));
        }
        self.pings.push(self.now);
        // Failures while leading, not while arming (its probes are pings too).
        let leading = self.dog_armed_at.is_some_and(|t| self.now > t);
        if self.dog_ping_fails > 0.0 && leading && self.pings.len().is_multiple_of(3) {
            return Err(Fault::Watchdog("EIO (simulated)".into()));
        }
        let applied = self.dog_set(secs);
        self.note(format!("watchdog pinged, {applied} s (asked {secs})"));
        Ok((applied, self.now))
    }
    fn disarm_watchdog(&mut self) -> Result<(), Fault> {
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
        self.check_armed_for_raise("VIP added");
        self.raised.push(self.now);
        self.vip = true;
        self.vip_kernel_end = self.now + Duration::from_secs(secs.into()) + self.kernel_slack;
        self.scheduled.push((self.vip_kernel_end, Ev::KernelExpiry));
        self.note(format!("VIP added, lifetime {secs} s"));
        Ok(())
    }
    fn extend_vip(&mut self, secs: u32) -> Result<(), Fault> {
        if !self.vip {
            return Err(Fault::VipGone);
        }
        self.vip_kernel_end = self.now + Duration::from_secs(secs.into()) + self.kernel_slack;
        self.scheduled.push((self.vip_kernel_end, Ev::KernelExpiry));
        Ok(())
    }
    fn remove_vip(&mut self) -> Result<(), Fault> {
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
            self.note("VIP removed".into());
        }
        self.vip = false;
        Ok(())
    }
    fn forget_service(&mut self, _: &ServiceRef) {
        if self.service {
            self.forgotten_while_up = true;
        }
    }
    fn signal_service(&mut self, _: &ServiceRef, kill: bool) -> Result<(), Fault> {
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
        Ok(())
    }
}

struct Schedule {
    clock: LeaseClock,
    unit: bool,
    fence_latency: Duration,
    faults: Vec<(Duration, Duration, Member)>,
    stalls: Vec<(Duration, Duration)>,
    /// (at, for): SIGSTOP for that long; None: SIGKILL.
    freeze: Option<(Duration, Option<Duration>)>,
    settle_takes: Duration,
    settle_fails: bool,
    start_takes: Duration,
    start_fails: bool,
    /// The watch delivers a deletion (else only the renewal's confirm finds it).
    watch_works: bool,
    check_fails: f64,
    release_fails: f64,
    step_down: Option<(Duration, Duration)>,
    ownership_lost: Option<(Duration, bool)>,
}

impl Schedule {
    fn draw(rng: &mut Rng) -> Schedule {
        let clock = match rng.next() % 4 {
            0 | 1 => DEFAULTS,
            2 => LeaseClock {
                ttl: Duration::from_secs(3),
                margin: Duration::from_secs(1),
            },
            _ => {
                // Any valid setting: T ≥ 2, 1 ≤ M < 2T/3.
                let ttl = 2 + rng.next() % 29;
                let max_margin = (2 * ttl).div_ceil(3) - 1;
                let margin = 1 + rng.next() % max_margin.max(1);
                LeaseClock {
                    ttl: Duration::from_secs(ttl),
                    margin: Duration::from_secs(margin),
                }
            }
        };
        let mut faults = Vec::new();
        for _ in 0..rng.next() % 5 {
            let from = rng.ms(0, 60_000);
            let to = from + rng.ms(50, 25_000);
            let kind = match rng.next() % 4 {
                0 => Member::Slow,
                1 => Member::Silent,
                2 => Member::Refusing,
                _ => Member::Normal,
            };
            faults.push((from, to, kind));
        }
        let mut stalls = Vec::new();
        for _ in 0..rng.next() % 4 {
            let from = rng.ms(0, 60_000);
            let long = rng.chance(0.3);
            let len = if long {
                rng.ms(1_000, 30_000)
            } else {
                rng.ms(1, 500)
            };
            stalls.push((from, from + len));
        }
        let unit = rng.chance(0.3);
        Schedule {
            clock,
            unit,
            fence_latency: if rng.chance(0.9) {
                rng.ms(0, 2)
            } else {
                rng.ms(0, FENCE_LATENCY_BOUND.as_millis() as u64)
            },
            faults,
            stalls,
            freeze: rng.chance(0.1).then(|| {
                (
                    rng.ms(0, 40_000),
                    (!rng.chance(0.4)).then(|| rng.ms(100, 40_000)),
                )
            }),
            // DAD up to 10 s, or a long foreground announcement burst.
            settle_takes: if rng.chance(0.7) {
                rng.ms(0, 50)
            } else {
                rng.ms(0, 10_000)
            },
            settle_fails: rng.chance(0.03),
            // `systemctl start` up to 90 s.
            start_takes: if rng.chance(0.7) {
                rng.ms(0, 50)
            } else if unit {
                rng.ms(0, 90_000)
            } else {
                rng.ms(0, 200)
            },
            start_fails: rng.chance(0.03),
            watch_works: rng.chance(0.7),
            check_fails: if rng.chance(0.2) { 0.3 } else { 0.0 },
            release_fails: if rng.chance(0.2) { 0.5 } else { 0.0 },
            step_down: rng
                .chance(0.35)
                .then(|| (rng.ms(0, 60_000), rng.ms(3_000, 40_000))),
            ownership_lost: rng
                .chance(0.3)
                .then(|| (rng.ms(0, 40_000), rng.chance(0.5))),
        }
    }

    fn member(&self, at: Duration) -> Member {
        self.faults
            .iter()
            .rev()
            .find(|(from, to, _)| *from <= at && at < *to)
            .map_or(Member::Normal, |f| f.2)
    }

    /// When the async side can next act at or after `t`.
    fn async_free_at(&self, mut t: Duration) -> Duration {
        for _ in 0..16 {
            match self.stalls.iter().find(|(a, b)| *a <= t && t < *b) {
                Some((_, b)) => t = *b,
                None => break,
            }
        }
        t
    }
}

struct Sim {
    rng: Rng,
    s: Schedule,
    m: Machine<World>,
    queue: BinaryHeap<Reverse<(Duration, u64, EvBox)>>,
    seq: u64,
    /// Ground truth, apart from the machine: the deadline by the rule, from what etcd
    /// answered and when the answers arrived.
    deadline: Duration,
    /// When etcd would let the lease (and the key) go.
    etcd_expiry: Duration,
    key_ours: bool,
    lease_alive: bool,
    /// When the machine was first told that ownership is lost.
    told_lost: Option<Duration>,
    frozen_until: Option<Option<Duration>>,
    killed: bool,
    released: bool,
    /// When the machine first ordered the release.
    release_ordered_at: Option<Duration>,
    /// The watch's report of the guard's own deletion, heard while the release was going on.
    own_deletions_heard: u32,
    step_down_by: Option<Duration>,
    answered: Option<(Duration, bool)>,
    exited: bool,
    late_answers: u32,
    /// When the watchdog reset the node.
    reset_at: Option<Duration>,
    /// The sequence number of the fencing thread's one armed wake-up.
    fence_wake: Option<u64>,
    /// Ground truth, apart from the machine: the latest a watchdog's reset may come — the
    /// send time of a renewal applied in time + its TTL / (1 + max slew): before the lease
    /// can end at etcd with etcd's clock fast.
    watchdog_bound: Duration,
}

/// Events in the heap, ordered by time and sequence only.
#[derive(Debug, Clone)]
struct EvBox(Ev);
impl PartialEq for EvBox {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for EvBox {}
impl PartialOrd for EvBox {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for EvBox {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Sim {
    fn new(seed: u64, mutations: Mutations) -> Sim {
        Sim::shaped(seed, mutations, |_, _| {})
    }

    /// A schedule drawn from `seed`, then changed by `shape` before anything is scheduled.
    fn shaped(seed: u64, mutations: Mutations, shape: impl Fn(&mut Schedule, &mut World)) -> Sim {
        let mut rng = Rng(SplitMix64(seed));
        let s = Schedule::draw(&mut rng);
        let world = World {
            kernel_slack: rng.ms(0, 350),
            remove_fault: Some(match rng.next() % 10 {
                0 => RemoveFault::Always,
                1 | 2 => RemoveFault::Once,
                _ => RemoveFault::Never,
            }),
            ignores_term: rng.chance(0.3),
            unkillable: rng.chance(0.03),
            term_exit: rng.ms(0, 800),
            dog_planned: rng.chance(0.7),
            dog_arm_fails: rng.chance(0.05),
            dog_step: match rng.next() % 20 {
                0 | 1 => 2,
                2 => 5,
                3 => 10,
                _ => 1,
            },
            dog_ping_fails: if rng.chance(0.05) { 1.0 } else { 0.0 },
            dog_disarm_fails: rng.chance(0.03),
            dog_late: 1.0 + WATCHDOG_TOLERANCE * (rng.next() % 1001) as f64 / 1000.0,
            ..World::default()
        };
        let (mut s, mut world) = (s, world);
        shape(&mut s, &mut world);
        Sim::with(rng, s, world, mutations)
    }

    fn with(mut rng: Rng, s: Schedule, world: World, mutations: Mutations) -> Sim {
        // The grant: sent at 0, taken by etcd a little later.
        let granted_at_etcd = rng.ms(0, 20);
        let ttl = s.clock.ttl;
        let plan = Plan {
            clock: s.clock,
            vip: true,
            unit: s.unit.then(|| "api.service".to_string()),
            watchdog: match (world.dog_planned, world.dog_step) {
                (false, _) => WatchdogPlan::Off,
                // Coarse drivers: arming learns the steps, the pings ask what the driver is
                // known to round to; where no timeout fits, required fences, auto says so.
                (true, 2 | 10) => WatchdogPlan::Required,
                (true, _) => WatchdogPlan::Auto,
            },
        };
        let mut m = Machine::new(plan, Duration::ZERO, ttl, world);
        m.mutations = mutations;
        let deadline = m.deadline();
        let mut sim = Sim {
            rng,
            m,
            queue: BinaryHeap::new(),
            seq: 0,
            deadline,
            etcd_expiry: granted_at_etcd + ttl,
            key_ours: true,
            lease_alive: true,
            told_lost: None,
            frozen_until: None,
            killed: false,
            released: false,
            release_ordered_at: None,
            own_deletions_heard: 0,
            step_down_by: None,
            answered: None,
            exited: false,
            late_answers: 0,
            reset_at: None,
            fence_wake: None,
            watchdog_bound: ttl.div_f64(1.0 + MAX_SLEW),
            s,
        };
        // The grant's answer: the shell starts the machine then.
        let started = granted_at_etcd + sim.rng.ms(0, 20);
        sim.wake_at(started);
        for _ in 0..sim.rng.next() % 3 {
            let t = sim.rng.ms(0, 60_000);
            sim.at(t, Ev::EtcdLeaderChange);
        }
        if let Some((t, revoked)) = sim.s.ownership_lost {
            sim.at(t, Ev::OwnershipLost { revoked });
        }
        if let Some((t, budget)) = sim.s.step_down {
            sim.at(t, Ev::StepDown { budget });
        }
        if let Some((t, _)) = sim.s.freeze {
            sim.at(t, Ev::Freeze);
        }
        sim
    }

    fn at(&mut self, t: Duration, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, EvBox(ev))));
    }

    /// Arms the fencing thread's timer at `t`, replacing the expiry it had.
    fn wake_at(&mut self, t: Duration) {
        self.at(t, Ev::FenceWake);
        self.fence_wake = Some(self.seq);
    }

    fn now(&self) -> Duration {
        self.m.kernel.now
    }

    fn fail(&self, seed: u64, what: String) -> String {
        format!(
            "seed {seed}: {what}\nsetting ttl {:?} margin {:?} unit {}; faults {:?}; stalls {:?}; \
             freeze {:?}; step-down {:?}; lost {:?}; remove {:?}\ntrace:\n{}",
            self.s.clock.ttl,
            self.s.clock.margin,
            self.s.unit,
            self.s.faults,
            self.s.stalls,
            self.s.freeze,
            self.s.step_down,
            self.s.ownership_lost,
            self.m.kernel.remove_fault,
            self.m.kernel.trace.join("\n")
        )
    }

    fn frozen(&self) -> bool {
        match self.frozen_until {
            Some(None) => true,
            Some(Some(until)) => self.now() < until,
            None => false,
        }
    }

    fn run(&mut self, seed: u64) -> Result<(), String> {
        let mut steps = 0u32;
        while let Some(Reverse((t, seq, EvBox(ev)))) = self.queue.pop() {
            // The fencing thread's timerfd holds one expiry: a wake-up that a later arming
            // replaced never fires.
            if ev == Ev::FenceWake && self.fence_wake != Some(seq) {
                continue;
            }
            steps += 1;
            if t > HORIZON {
                break;
            }
            if steps > 300_000 {
                // A machine that asks to be woken again and again without progress spins the
                // real fencing thread (at real-time priority): a failure, not an end.
                return Err(self.fail(seed, format!("no progress: 300000 steps by {t:?}")));
            }
            self.check(t, seed)?;
            self.m.kernel.now = t;
            let guard_side = ev.on_async_side() || ev == Ev::FenceWake;
            if guard_side && self.frozen() {
                if let Some(Some(until)) = self.frozen_until {
                    // Stopped: it waits for SIGCONT (a timerfd fires at once then).
                    if ev == Ev::FenceWake {
                        self.wake_at(until);
                    } else {
                        self.at(until, ev);
                    }
                }
                continue;
            }
            if ev.on_async_side() {
                let free = self.s.async_free_at(t);
                if free > t {
                    self.at(free, ev);
                    continue;
                }
            }
            self.step(ev, seed)?;
            for (t, ev) in std::mem::take(&mut self.m.kernel.scheduled) {
                self.at(t, ev);
            }
        }
        Ok(())
    }

    /// The machine takes one input; its orders are performed, its next wake-up armed.
    fn feed(&mut self, input: Input, seed: u64) -> Result<(), String> {
        if self.exited {
            return Ok(());
        }
        let now = self.now();
        if matches!(input, Input::KeyLost(_) | Input::LeaseGone { .. }) {
            self.told_lost.get_or_insert(now);
        }
        if let Input::Renewed { ttl, .. } = &input {
            if ttl.is_zero() {
                self.told_lost.get_or_insert(now);
            }
        }
        let raised_before = self.m.kernel.raised.len();
        let pinged_before = self.m.kernel.pings.len();
        self.m.handle(now, input);
        self.check_raises(raised_before, seed)?;
        self.check_watchdog(pinged_before, seed)?;
        while let Some(order) = self.m.poll_order() {
            self.perform(order, seed)?;
        }
        match self.m.next_wake() {
            Some(w) => {
                let t = w.max(now) + self.s.fence_latency;
                self.wake_at(t);
            }
            // Disarmed (timerfd_settime with zero).
            None => self.fence_wake = None,
        }
        Ok(())
    }

    /// (iii): raises only while ownership stands and the deadline is ahead.
    fn check_raises(&self, since: usize, seed: u64) -> Result<(), String> {
        for &t in &self.m.kernel.raised[since..] {
            if self.told_lost.is_some_and(|l| t >= l) {
                return Err(self.fail(seed, format!("raised at {t:?}, after the loss was told")));
            }
            if t >= self.deadline {
                return Err(self.fail(
                    seed,
                    format!("raised at {t:?}, deadline {:?}", self.deadline),
                ));
            }
        }
        Ok(())
    }

    /// A magic close that failed with nothing up: the reset that follows is harmless.
    fn harmless_close_failure(&self) -> bool {
        let w = &self.m.kernel;
        w.dog_close_failed && !w.vip && !w.service
    }

    /// (v): pings only while the promise holds (before the deadline, ownership not known
    /// lost); the reset always before the lease can end at etcd; the protocol's order.
    fn check_watchdog(&self, since: usize, seed: u64) -> Result<(), String> {
        let w = &self.m.kernel;
        if let Some(v) = w.dog_violations.first() {
            return Err(self.fail(seed, v.clone()));
        }
        for &t in &w.pings[since..] {
            if t >= self.deadline || self.told_lost.is_some_and(|l| t >= l) {
                return Err(self.fail(
                    seed,
                    format!(
                        "watchdog pinged at {t:?}, after the deadline {:?} or the loss",
                        self.deadline
                    ),
                ));
            }
        }
        if let Some((_, fires)) = w.dog {
            // A magic close that failed with nothing up: that reset is harmless. A required
            // guard that fenced because no timeout fits: everything is going down. An auto
            // guard whose driver takes no shorter timeout says so (the reset may come late).
            let close_failed = self.harmless_close_failure();
            let fenced_for_it = matches!(self.m.fenced(), Some((_, Cause::WatchdogLate)));
            if fires > self.watchdog_bound
                && !self.released
                && !close_failed
                && !fenced_for_it
                && !self.m.watchdog_late()
            {
                return Err(self.fail(
                    seed,
                    format!(
                        "watchdog resets at {fires:?}, after the lease could end at etcd with \
                         etcd's clock fast ({:?}; at true speed {:?})",
                        self.watchdog_bound, self.etcd_expiry
                    ),
                ));
            }
        }
        Ok(())
    }

    fn deliver(&mut self, after: Duration, input: Input) {
        let t = self.now() + after;
        self.at(t, Ev::Deliver(input));
    }

    fn perform(&mut self, order: Order, seed: u64) -> Result<(), String> {
        let now = self.now();
        match order {
            Order::Keepalive { sent } => self.keepalive(sent),
            Order::Confirm => {
                if !self.key_ours && self.s.member(now) == Member::Normal {
                    let d = self.rng.ms(1, 20);
                    self.deliver(d, Input::KeyLost(None));
                }
            }
            Order::Settle { dad_wait } => {
                let takes = self.s.settle_takes.min(dad_wait);
                let r = if self.s.settle_fails {
                    Err(Fault::Settle("DAD failed (simulated)".into()))
                } else {
                    Ok(())
                };
                self.deliver(takes, Input::Settled(r));
            }
            Order::CancelAnnouncements => {}
            Order::WriteToken => self.deliver(Duration::ZERO, Input::TokenWritten(Ok(()))),
            Order::StartService => {
                self.m.kernel.check_armed_for_raise("service start ordered");
                if self.told_lost.is_some() || now >= self.deadline {
                    return Err(self.fail(
                        seed,
                        format!("service started at {now:?}, after the loss told or the deadline"),
                    ));
                }
                let takes = self.s.start_takes;
                if self.s.unit {
                    // A unit may run from the moment its start is asked, even when the start
                    // fails; the machine knows its name from before.
                    self.m.kernel.service = true;
                    self.m.kernel.note("service starting".into());
                    let r = if self.s.start_fails {
                        Err(Fault::Service("start failed (simulated)".into()))
                    } else {
                        Ok(ServiceRef::Unit("api.service".into()))
                    };
                    self.deliver(takes, Input::ServiceStarted(r));
                } else {
                    // A command is forked by the shell's task, which tells the machine its pid
                    // in the same breath (see Ev::Spawn).
                    let t = now + takes;
                    self.at(t, Ev::Spawn);
                }
            }
            Order::CheckService(_) => {
                let look = self.look_at_service();
                self.deliver(CHECK_TAKES, Input::ServiceChecked(look));
            }
            Order::Release => {
                self.release_ordered_at.get_or_insert(now);
                let w = &self.m.kernel;
                if w.vip || w.service {
                    return Err(self.fail(
                        seed,
                        format!(
                            "release at {now:?} with the VIP ({}) or the service ({}) up",
                            w.vip, w.service
                        ),
                    ));
                }
                if self.rng.chance(self.s.release_fails) || self.s.member(now) != Member::Normal {
                    let d = self.rng.ms(1, 2_000);
                    self.deliver(
                        d,
                        Input::Released(Err(Fault::Etcd("etcd unreachable (simulated)".into()))),
                    );
                } else {
                    self.released = true;
                    self.etcd_expiry = self.etcd_expiry.min(now);
                    self.m.kernel.note("key released, lease revoked".into());
                    // The answer may be slow to come back (a slow member).
                    let d = if self.rng.chance(0.1) {
                        self.rng.ms(1, 5_000)
                    } else {
                        Duration::from_millis(2)
                    };
                    self.deliver(d, Input::Released(Ok(())));
                    // The watch sees the guard's own deletion, before or after the answer.
                    if self.s.watch_works {
                        let seen = if self.rng.chance(0.5) {
                            self.rng.ms(0, d.as_millis() as u64)
                        } else {
                            d + self.rng.ms(1, 200)
                        };
                        self.deliver(seen, Input::KeyLost(None));
                    }
                }
            }
            Order::Persist | Order::Log(..) => {}
            Order::StepDownAnswer(r) => {
                if self.answered.is_none() {
                    self.answered = Some((now, r.is_ok()));
                }
                if r.is_ok() && (self.m.kernel.vip || self.m.kernel.service) {
                    return Err(self.fail(seed, "step-down answered done with things up".into()));
                }
            }
            Order::Exit { .. } => self.exited = true,
        }
        Ok(())
    }

    /// The shell's look at the service, as the real one reads it: a unit through
    /// service::process::read_unit_show from what systemctl printed — which, when it cannot
    /// reach systemd (PID 1 re-executing), is nothing on stdout and an error on stderr — and a
    /// group from the kernel's answer, or a /proc that cannot be read.
    fn look_at_service(&mut self) -> crate::presence::Presence {
        use crate::presence::Presence;
        let fails = self.rng.chance(self.s.check_fails);
        let up = self.m.kernel.service;
        if self.s.unit {
            let (code, out, err) = if fails {
                (
                    Some(1),
                    String::new(),
                    "Failed to connect to bus: Connection refused",
                )
            } else {
                let state = if up { "deactivating" } else { "inactive" };
                (
                    Some(0),
                    format!("LoadState=loaded\nActiveState={state}\nSubState=x\n"),
                    "",
                )
            };
            crate::service::process::read_unit_show(code, &out, err)
        } else if fails {
            Presence::CannotTell("cannot read /proc (simulated)".into())
        } else if up {
            Presence::Present
        } else {
            Presence::Absent
        }
    }

    /// etcd and the guard's renewal task, for one keepalive sent now.
    fn keepalive(&mut self, sent: Duration) {
        let timeout = self.s.clock.renewal_attempt_timeout();
        match self.s.member(sent) {
            Member::Normal | Member::Slow => {
                let (d1, d2) = if self.s.member(sent) == Member::Slow {
                    (self.rng.ms(0, 4_000), self.rng.ms(0, 4_000))
                } else {
                    (self.rng.ms(0, 20), self.rng.ms(0, 20))
                };
                self.at(sent + d1, Ev::EtcdRenews { sent, reply_in: d2 });
                if d1 + d2 > timeout {
                    self.at(
                        sent + timeout,
                        Ev::Deliver(Input::RenewFailed {
                            sent,
                            why: "no answer in time (simulated)".into(),
                        }),
                    );
                }
            }
            Member::Silent => self.at(
                sent + timeout,
                Ev::Deliver(Input::RenewFailed {
                    sent,
                    why: "silent member (simulated)".into(),
                }),
            ),
            Member::Refusing => {
                let d = self.rng.ms(0, 2);
                self.at(
                    sent + d,
                    Ev::Deliver(Input::RenewFailed {
                        sent,
                        why: "refused (simulated)".into(),
                    }),
                );
            }
        }
    }

    fn step(&mut self, ev: Ev, seed: u64) -> Result<(), String> {
        let now = self.now();
        let etcd_side = matches!(
            ev,
            Ev::EtcdRenews { .. } | Ev::EtcdLeaderChange | Ev::OwnershipLost { .. }
        );
        if self.reset_at.is_some() && !etcd_side {
            // The node was reset: nothing on it happens any more; etcd goes on.
            return Ok(());
        }
        match ev {
            Ev::FenceWake => self.feed(Input::Tick, seed)?,
            Ev::Deliver(input) => {
                if matches!(input, Input::KeyLost(_))
                    && self.release_ordered_at.is_some()
                    && !self.exited
                {
                    self.own_deletions_heard += 1;
                }
                if let Input::ServiceStarted(Ok(ServiceRef::Unit(_))) = &input {
                    let w = &mut self.m.kernel;
                    if !w.service && w.termed_at.is_some() && self.rng.chance(0.5) {
                        // The start job waited (on its dependencies) and ran after the stop.
                        w.service = true;
                        w.note("the unit's start job ran after the stop".into());
                    }
                }
                if let Input::Renewed { sent, ttl } = &input {
                    if !ttl.is_zero() {
                        self.late_answers += u32::from(now >= self.deadline);
                        if now < self.deadline {
                            self.deadline = self.deadline.max(*sent + *ttl - self.s.clock.margin);
                            self.watchdog_bound =
                                self.watchdog_bound.max(*sent + ttl.div_f64(1.0 + MAX_SLEW));
                        }
                    }
                }
                self.feed(input, seed)?;
            }
            Ev::EtcdRenews { sent, reply_in } => {
                let timeout = self.s.clock.renewal_attempt_timeout();
                let answer = if !self.lease_alive || now >= self.etcd_expiry || self.released {
                    // A fresh stream says "lease not found"; an open one answers TTL 0.
                    if self.rng.chance(0.5) {
                        Input::LeaseGone { sent }
                    } else {
                        Input::Renewed {
                            sent,
                            ttl: Duration::ZERO,
                        }
                    }
                } else {
                    self.etcd_expiry = self.etcd_expiry.max(now + self.s.clock.ttl);
                    Input::Renewed {
                        sent,
                        ttl: self.s.clock.ttl,
                    }
                };
                if now + reply_in <= sent + timeout {
                    self.at(now + reply_in, Ev::Deliver(answer));
                }
            }
            Ev::EtcdLeaderChange => {
                if now < self.etcd_expiry && self.lease_alive && !self.released {
                    // A new etcd leader extends every live lease by a full TTL.
                    self.etcd_expiry = self.etcd_expiry.max(now + self.s.clock.ttl);
                }
            }
            Ev::OwnershipLost { revoked } => {
                self.key_ours = false;
                if revoked {
                    self.lease_alive = false;
                }
                // Another node may take the key from now on: the VIP must go as soon as the
                // guard hears of it (the watch, or the next renewal's answer or confirm).
                self.m.kernel.note(
                    if revoked {
                        "lease revoked behind the guard's back"
                    } else {
                        "key deleted behind the guard's back"
                    }
                    .into(),
                );
                if self.s.watch_works {
                    let d = self.rng.ms(1, 200);
                    self.at(now + d, Ev::Deliver(Input::KeyLost(None)));
                }
            }
            Ev::KernelExpiry => {
                let w = &mut self.m.kernel;
                if w.vip && now >= w.vip_kernel_end {
                    w.vip = false;
                    w.note("VIP expired in the kernel".into());
                }
            }
            Ev::ServiceDies => {
                let w = &mut self.m.kernel;
                if w.service {
                    w.service = false;
                    w.note("service exited".into());
                    if !self.s.unit {
                        self.at(
                            now,
                            Ev::Deliver(Input::ServiceExited("exited (simulated)".into())),
                        );
                    }
                }
            }
            Ev::Spawn => {
                let input = if !self.m.wants_service(now) {
                    Input::ServiceStarted(Err(Fault::Service(
                        "not started: the raise was abandoned".into(),
                    )))
                } else if self.s.start_fails {
                    Input::ServiceStarted(Err(Fault::Service("spawn failed (simulated)".into())))
                } else {
                    if self.told_lost.is_some() || now >= self.deadline {
                        return Err(self.fail(
                            seed,
                            format!(
                                "service forked at {now:?}, after the loss told or the deadline"
                            ),
                        ));
                    }
                    self.m.kernel.service = true;
                    self.m.kernel.note("service starting".into());
                    Input::ServiceStarted(Ok(ServiceRef::Group(4242)))
                };
                self.feed(input, seed)?;
            }
            Ev::StepDown { budget } => {
                self.step_down_by = Some(now + budget);
                self.m
                    .kernel
                    .note(format!("step-down asked, budget {budget:?}"));
                self.feed(Input::StepDown { by: now + budget }, seed)?;
            }
            Ev::Freeze => {
                let Some((_, dur)) = self.s.freeze else {
                    return Ok(());
                };
                self.frozen_until = Some(dur.map(|d| now + d));
                match dur {
                    None => {
                        self.killed = true;
                        // PR_SET_PDEATHSIG: a killed guard's command dies with it.
                        if !self.s.unit {
                            self.m.kernel.service = false;
                        }
                        self.m.kernel.note("guard SIGKILLed".into());
                    }
                    Some(d) => {
                        self.m.kernel.note("guard SIGSTOPped".into());
                        self.at(now + d, Ev::Unfreeze);
                    }
                }
            }
            Ev::Unfreeze => {
                if self.reset_at.is_none() {
                    self.m.kernel.note("guard resumed".into());
                    self.wake_at(now);
                }
            }
            Ev::WatchdogFires => {
                let Some((_, fires)) = self.m.kernel.dog else {
                    return Ok(());
                };
                if fires > now || self.reset_at.is_some() {
                    return Ok(());
                }
                let on_time = !self.frozen()
                    && !self.killed
                    && self.m.fenced().is_none()
                    && !self.harmless_close_failure();
                if on_time {
                    return Err(self.fail(
                        seed,
                        format!("the watchdog reset the node at {now:?}, its guard on time"),
                    ));
                }
                // The node resets: everything on it stops, the guard never acts again.
                let w = &mut self.m.kernel;
                w.vip = false;
                w.service = false;
                w.note("the watchdog reset the node".into());
                self.reset_at = Some(now);
                self.killed = true;
                self.frozen_until = Some(None);
            }
        }
        Ok(())
    }

    /// The invariants over the span [now, t), checked at its latest instant.
    fn check(&self, t: Duration, seed: u64) -> Result<(), String> {
        use super::machine::Cause;
        let w = &self.m.kernel;
        let residual = self.frozen_until.is_some() || self.killed;
        // Once the release began (everything down), a loss is the release's own end: a fence
        // on it would count a fence that was none and name it as promote's reason.
        if let (Some(rel), Some((at, cause))) = (self.release_ordered_at, self.m.fenced()) {
            let on_loss = matches!(
                cause,
                Cause::KeyDeleted | Cause::KeyTaken(_) | Cause::LeaseGone
            );
            if on_loss && *at > rel {
                return Err(self.fail(
                    seed,
                    format!("fenced ({cause}) at {at:?}, after its release began at {rel:?}"),
                ));
            }
        }
        if w.forgotten_while_up {
            return Err(self.fail(seed, "the service was forgotten while it ran".into()));
        }
        // Nothing outlives the lease at etcd; a frozen or killed guard's unit, and an
        // unkillable service, are the residual risks.
        if w.vip && t > self.etcd_expiry {
            return Err(self.fail(
                seed,
                format!(
                    "VIP up at {t:?}, after the lease could end at etcd ({:?})",
                    self.etcd_expiry
                ),
            ));
        }
        // An armed watchdog covers them both: its reset comes before the lease's end.
        let service_exempt = (residual || w.unkillable) && w.dog.is_none();
        if w.service && t > self.etcd_expiry && !service_exempt {
            return Err(self.fail(
                seed,
                format!(
                    "service up at {t:?}, after the lease could end at etcd ({:?})",
                    self.etcd_expiry
                ),
            ));
        }
        if !residual {
            // One failed removal costs one retry, which is one more wake-up of the thread.
            let retry = if w.remove_fault == Some(RemoveFault::Once) {
                VIP_RETRY + FENCE_LATENCY_BOUND
            } else {
                Duration::ZERO
            };
            let late = self.deadline + FENCE_LATENCY_BOUND + retry;
            let removal_fails = w.remove_fault == Some(RemoveFault::Always);
            if w.vip && t > late && !removal_fails {
                return Err(self.fail(
                    seed,
                    format!("VIP up at {t:?}, deadline {:?}", self.deadline),
                ));
            }
            if let Some(told) = self.told_lost {
                if w.vip && t > told + FENCE_LATENCY_BOUND + retry && !removal_fails {
                    return Err(self.fail(seed, format!("VIP up at {t:?}, loss told at {told:?}")));
                }
            }
            if w.service && t > late && w.termed_at.is_none() {
                return Err(self.fail(
                    seed,
                    format!(
                        "service not signalled at {t:?}, deadline {:?}",
                        self.deadline
                    ),
                ));
            }
            let kill_by = self.deadline + self.s.clock.kill_delay() + FENCE_LATENCY_BOUND;
            if w.service && t > kill_by && !w.unkillable {
                return Err(self.fail(seed, format!("service alive at {t:?}, after {kill_by:?}")));
            }
            // (iv): the answer by the budget (the request itself may have waited for a stall).
            if let Some(by) = self.step_down_by {
                let answered_in_time = self
                    .answered
                    .is_some_and(|(at, _)| at <= by + FENCE_LATENCY_BOUND);
                if t > by + FENCE_LATENCY_BOUND && !answered_in_time && !self.exited {
                    return Err(self.fail(
                        seed,
                        format!("step-down not answered by {by:?} (now {t:?})"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What the schedules ended in, to show what the runs exercised.
#[derive(Debug, Default)]
struct Tally {
    fenced_at_deadline: u32,
    fenced_on_loss: u32,
    lost_while_raising: u32,
    released: u32,
    answered_incomplete: u32,
    kernel_expiries: u32,
    late_answers: u32,
    /// The watchdog reset a frozen or killed guard's node; reset one that had fenced (its
    /// service not confirmed stopped in time); was disarmed in order.
    frozen_resets: u32,
    fenced_resets: u32,
    disarmed: u32,
    /// The watch's report of the guard's own deletion reached it during the release.
    own_deletions_heard: u32,
}

impl Sim {
    fn tally(&self, t: &mut Tally) {
        use super::machine::Cause;
        match self.m.fenced() {
            Some((_, Cause::Deadline)) => t.fenced_at_deadline += 1,
            Some(_) => t.fenced_on_loss += 1,
            None => {}
        }
        let trace = &self.m.kernel.trace;
        let lost_at = trace
            .iter()
            .position(|l| l.contains("behind the guard's back"));
        let leading_at = trace.iter().position(|l| l.contains("service starting"));
        if let Some(l) = lost_at {
            t.lost_while_raising += u32::from(leading_at.is_none_or(|s| l < s));
        }
        t.released += u32::from(self.released);
        t.answered_incomplete += u32::from(self.answered.is_some_and(|(_, ok)| !ok));
        t.kernel_expiries += u32::from(trace.iter().any(|l| l.contains("expired in the kernel")));
        t.late_answers += self.late_answers;
        if self.reset_at.is_some() {
            let frozen =
                trace_has(trace, "guard SIGSTOPped") || trace_has(trace, "guard SIGKILLed");
            if frozen && self.m.fenced().is_none() {
                t.frozen_resets += 1;
            } else {
                t.fenced_resets += 1;
            }
        }
        t.disarmed += u32::from(self.m.kernel.dog_disarmed);
        t.own_deletions_heard += self.own_deletions_heard;
    }
}

fn trace_has(trace: &[String], what: &str) -> bool {
    trace.iter().any(|l| l.contains(what))
}

fn run_one(seed: u64, mutations: Mutations, tally: &mut Tally) -> Result<(), String> {
    let mut sim = Sim::new(seed, mutations);
    sim.run(seed)?;
    sim.tally(tally);
    Ok(())
}

fn base_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

#[test]
fn ten_thousand_fault_schedules_hold_every_invariant_of_the_real_machine() {
    if let Ok(seed) = std::env::var("HAMASTER_SIM_SEED") {
        let seed: u64 = seed.parse().expect("HAMASTER_SIM_SEED is a number");
        run_one(seed, Mutations::default(), &mut Tally::default())
            .unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    // A fresh base seed each run: every run explores new schedules, and a failure names its
    // seed, which replays it exactly.
    let base = base_seed();
    let runs = 10_000u64;
    eprintln!("fault-schedule simulation: {runs} schedules from base seed {base}");
    let mut tally = Tally::default();
    for i in 0..runs {
        let seed = base.wrapping_add(i.wrapping_mul(0x2545_f491_4f6c_dd1d));
        if let Err(e) = run_one(seed, Mutations::default(), &mut tally) {
            panic!("{e}\nreplay: HAMASTER_SIM_SEED={seed} cargo test --lib sim");
        }
    }
    eprintln!("fault-schedule simulation: all {runs} schedules held: {tally:?}");
    // The schedules must reach the situations the checks are about.
    assert!(tally.fenced_at_deadline > runs as u32 / 50, "{tally:?}");
    assert!(
        tally.fenced_on_loss > 0 && tally.lost_while_raising > 0,
        "{tally:?}"
    );
    assert!(
        tally.released > 0 && tally.answered_incomplete > 0 && tally.own_deletions_heard > 0,
        "{tally:?}"
    );
    assert!(
        tally.kernel_expiries > 0 && tally.late_answers > 0,
        "{tally:?}"
    );
    assert!(
        tally.frozen_resets > 0 && tally.fenced_resets > 0 && tally.disarmed > runs as u32 / 10,
        "{tally:?}"
    );
}

/// Runs schedules with one rule of the machine switched off; some must fail, each with the
/// invariant the rule is for.
fn caught(
    mutations: Mutations,
    expect: &[&str],
    shape: impl Fn(&mut Schedule, &mut World),
) -> usize {
    let base = base_seed();
    let mut caught = 0;
    for i in 0..400u64 {
        let seed = base.wrapping_add(i.wrapping_mul(0x9e37_79b9));
        let mut sim = Sim::shaped(seed, mutations, &shape);
        if let Err(e) = sim.run(seed) {
            assert!(
                expect.iter().any(|x| e.contains(x)),
                "caught for another reason than {expect:?}:\n{e}"
            );
            caught += 1;
        }
    }
    caught
}

/// A quiet schedule: no freeze, no stalls, no faults but what the test sets.
fn quiet(s: &mut Schedule, w: &mut World) {
    s.freeze = None;
    s.stalls.clear();
    s.faults.clear();
    s.step_down = None;
    s.ownership_lost = None;
    s.settle_fails = false;
    s.start_fails = false;
    w.remove_fault = Some(RemoveFault::Never);
    w.unkillable = false;
    // The watchdog's own rules have their own cases; these are about the others.
    w.dog_planned = false;
}

#[test]
fn without_the_deadline_rule_the_simulation_finds_a_vip_past_the_deadline() {
    let n = caught(
        Mutations {
            no_deadline: true,
            ..Mutations::default()
        },
        &["deadline"],
        |s, w| {
            quiet(s, w);
            s.faults = vec![(Duration::from_secs(5), HORIZON, Member::Silent)];
        },
    );
    assert!(
        n > 0,
        "no schedule caught a guard that never fences at its deadline"
    );
}

#[test]
fn without_the_release_rule_the_simulation_finds_a_release_with_the_service_up() {
    let n = caught(
        Mutations {
            early_release: true,
            ..Mutations::default()
        },
        // A release while a start is still out shows as the watch's report of it fencing a
        // guard whose release began (nothing was down yet): the same broken rule.
        &["release at", "after its release began"],
        |s, w| {
            quiet(s, w);
            w.ignores_term = true;
            s.step_down = Some((Duration::from_secs(4), Duration::from_secs(20)));
        },
    );
    assert!(
        n > 0,
        "no schedule caught a release before the service was down"
    );
}

#[test]
fn without_the_raise_rule_the_simulation_finds_a_raise_after_the_loss() {
    let n = caught(
        Mutations {
            lost_waits_for_raise: true,
            ..Mutations::default()
        },
        &["loss told"],
        |s, w| {
            quiet(s, w);
            // The key deleted one second into a 5 s raise, the watch working.
            s.settle_takes = Duration::from_secs(5);
            s.watch_works = true;
            s.ownership_lost = Some((Duration::from_secs(1), false));
        },
    );
    assert!(
        n > 0,
        "no schedule caught a guard that finishes its raise after a loss"
    );
}

#[test]
fn without_the_budget_rule_the_simulation_finds_a_late_step_down() {
    let n = caught(
        Mutations {
            no_budget: true,
            ..Mutations::default()
        },
        &["not answered by"],
        |s, w| {
            quiet(s, w);
            w.ignores_term = true;
            s.step_down = Some((Duration::from_secs(4), Duration::from_secs(5)));
        },
    );
    assert!(
        n > 0,
        "no schedule caught a step-down that overran its budget"
    );
}

#[test]
fn without_the_send_time_rule_the_simulation_finds_a_vip_past_the_lease() {
    // Counting the lease from when the answer came back instead of when the request was
    // sent is the classic mistake; with slow members and then silence, some schedule must
    // show the VIP outliving the lease at etcd.
    let n = caught(
        Mutations {
            count_from_reply: true,
            ..Mutations::default()
        },
        &[
            "VIP up at",
            "service not signalled",
            "service alive",
            "service up at",
        ],
        |s, w| {
            quiet(s, w);
            s.clock = LeaseClock {
                ttl: Duration::from_secs(30),
                margin: Duration::from_secs(1),
            };
            s.faults = vec![
                (Duration::ZERO, Duration::from_secs(40), Member::Slow),
                (Duration::from_secs(40), HORIZON, Member::Silent),
            ];
        },
    );
    assert!(n > 0, "no schedule caught the reply-time mistake");
}

#[test]
fn a_key_deleted_one_second_into_a_five_second_raise_takes_the_vip_at_once() {
    // The bug seen: the VIP stayed up until the announcement burst had finished.
    for seed in 0..50u64 {
        let mut sim = Sim::shaped(seed, Mutations::default(), |s, w| {
            quiet(s, w);
            s.clock = DEFAULTS;
            s.settle_takes = Duration::from_secs(5);
            s.watch_works = true;
            s.ownership_lost = Some((Duration::from_secs(1), false));
        });
        sim.run(seed).unwrap_or_else(|e| panic!("{e}"));
        let trace = sim.m.kernel.trace.join("\n");
        assert!(sim.m.fenced().is_some(), "fenced:\n{trace}");
        assert!(
            !trace.contains("service starting"),
            "the service never started:\n{trace}"
        );
        let removed = sim
            .m
            .kernel
            .trace
            .iter()
            .find(|l| l.contains("VIP removed"))
            .expect("removed");
        let at: f64 = removed.split_whitespace().next().unwrap().parse().unwrap();
        assert!(
            at < 1.25,
            "VIP removed at {at} s, the key went at 1 s:\n{trace}"
        );
    }
}

/// The watchdog's rules, with the hardware watchdog in every schedule and no fault of its own.
fn with_watchdog(s: &mut Schedule, w: &mut World) {
    quiet(s, w);
    w.dog_planned = true;
    w.dog_arm_fails = false;
    w.dog_step = 1;
    w.dog_ping_fails = 0.0;
    w.dog_disarm_fails = false;
}

#[test]
fn without_arming_first_the_simulation_finds_a_vip_raised_before_the_watchdog() {
    let n = caught(
        Mutations {
            arm_after_vip: true,
            ..Mutations::default()
        },
        &["before the watchdog was armed"],
        with_watchdog,
    );
    assert!(
        n > 0,
        "no schedule caught a VIP raised before the watchdog was armed"
    );
}

#[test]
fn pinging_on_a_timer_of_its_own_is_found_as_a_ping_after_the_deadline() {
    let n = caught(
        Mutations {
            ping_on_wake: true,
            ..Mutations::default()
        },
        &["watchdog pinged at"],
        |s, w| {
            with_watchdog(s, w);
            // etcd silent: fenced at the deadline, the service holding out until the KILL.
            w.ignores_term = true;
            s.faults = vec![(Duration::from_secs(5), HORIZON, Member::Silent)];
        },
    );
    assert!(n > 0, "no schedule caught a ping after the deadline");
}

#[test]
fn disarming_at_the_step_down_is_found_with_the_service_still_up() {
    let n = caught(
        Mutations {
            early_disarm: true,
            ..Mutations::default()
        },
        &["watchdog disarmed at"],
        |s, w| {
            with_watchdog(s, w);
            w.ignores_term = true;
            s.step_down = Some((Duration::from_secs(5), Duration::from_secs(20)));
        },
    );
    assert!(n > 0, "no schedule caught a disarm with the service up");
}

#[test]
fn a_timeout_of_the_whole_ttl_is_found_resetting_after_the_lease() {
    let n = caught(
        Mutations {
            watchdog_full_ttl: true,
            ..Mutations::default()
        },
        &["after the lease could end at etcd with etcd's clock fast"],
        with_watchdog,
    );
    assert!(n > 0, "no schedule caught a reset after the lease's end");
}

#[test]
fn a_frozen_guard_is_reset_before_its_lease_ends_and_a_step_down_disarms() {
    for seed in 0..50u64 {
        // Frozen for good at 5 s, at the default settings: the reset takes VIP and service
        // before etcd could let the key go.
        let mut sim = Sim::shaped(seed, Mutations::default(), |s, w| {
            with_watchdog(s, w);
            s.clock = DEFAULTS;
            s.freeze = Some((Duration::from_secs(5), Some(HORIZON)));
        });
        sim.run(seed).unwrap_or_else(|e| panic!("{e}"));
        let trace = sim.m.kernel.trace.join("\n");
        let reset = sim.reset_at.unwrap_or_else(|| panic!("no reset:\n{trace}"));
        assert!(
            reset < sim.etcd_expiry && !sim.m.kernel.service && !sim.m.kernel.vip,
            "reset at {reset:?}, lease until {:?}:\n{trace}",
            sim.etcd_expiry
        );
        // And after the guard's own deadline: a guard that is alive fences first (the second
        // ping wins back what whole seconds lose).
        assert!(
            reset > sim.deadline,
            "reset at {reset:?}, before the deadline {:?}:\n{trace}",
            sim.deadline
        );
        // An orderly step-down: disarmed, never reset.
        let mut sim = Sim::shaped(seed, Mutations::default(), |s, w| {
            with_watchdog(s, w);
            s.step_down = Some((Duration::from_secs(5), Duration::from_secs(20)));
        });
        sim.run(seed).unwrap_or_else(|e| panic!("{e}"));
        let trace = sim.m.kernel.trace.join("\n");
        assert!(
            sim.reset_at.is_none() && sim.m.kernel.dog_disarmed,
            "step-down:\n{trace}"
        );
    }
}
