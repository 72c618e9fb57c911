//! Deterministic fault-schedule simulation of the guard machine (guard::machine) — the very
//! value the guard runs, not a model of it — in virtual time, with a node as unkind as a real
//! one. Each schedule draws, from one seed, a lease setting and faults on every input and every
//! effect:
//! - the clocks: this node's boot clock and etcd's each run at their own rate, anywhere within
//!   chrony's largest slew (docs/safety.md, assumption 2; the extremes in a third of the
//!   schedules) — the machine reads its own clock, etcd counts the lease on its own, and the
//!   invariants are judged in true time;
//! - every kernel effect takes time (a fraction of a millisecond, or milliseconds on a slow
//!   node; a slow watchdog driver's ioctls), inside the machine's own step: the clock the
//!   machine reads after an effect has moved on, and the world has moved with it (a VIP's
//!   kernel lifetime may run out between two effects; a replace of an address the kernel let
//!   go adds it anew, as the real kernel does);
//! - etcd members silent, slow, refusing or without a leader; etcd leader changes that extend
//!   the lease; the key deleted or the lease revoked behind the guard's back, with the watch
//!   working or not; a VIP removal that fails once or always; DAD that takes up to 10 s; a
//!   `systemctl start` that takes up to 90 s; a service that ignores SIGTERM or cannot be
//!   killed; looks at the service that cannot tell (a `systemctl` that cannot reach systemd
//!   prints nothing and exits 1 — read through the shell's own reader); releases that fail;
//!   stalls of the guard's async side that do not touch the fencing thread; an orderly
//!   step-down with its budget; the guard frozen (SIGSTOP) or killed; a hardware watchdog with
//!   its own faults.
//!
//! The simulated shell performs the machine's orders the way guard::lead does, through the same
//! answers (guard::answers) at the I/O boundary: every input it feeds is made by the function
//! the real shell calls (a keepalive's fake result, a confirm, the watch's events, a release, a
//! start, a look at the service, the wire watch's event or its look at the address — which may
//! not tell — a step-down, a retake). The shell sees the machine only as the fencing thread
//! publishes it, by the fencing thread's own step (guard::fence::step: the view given out
//! before the step's orders, as state.json and the start's last ask need): the view at the end
//! of each step (a start task that asks while a step is still making its effects reads the
//! one before) and the host's standing, cleared by the
//! machine's `lowering()` before its first effect (guard::fence's fast path). The host
//! (`World`, world.rs) is the one kernel double: the machine's own unit tests use it too, and
//! it records every call.
//!
//! After every step it checks, in true time:
//! (i)   the VIP and the service are down no later than the deadline (send time of the last
//!       renewal applied in time + TTL − margin, on this node's clock; the service: TERM by
//!       then, KILL half a margin later), the fencing thread's wake-up latency and its effects'
//!       own time aside; with a VIP removal that always fails, the kernel's lifetime takes it
//!       before the lease can end at etcd; nothing outlives the lease at etcd, frozen or
//!       killed guard included (a frozen guard's service without a watchdog is the residual
//!       risk docs/safety.md names);
//! (ii)  the key is never released (nor the lease revoked) while the VIP or the service is
//!       up, and a service is never forgotten (its leader reaped) while it runs;
//! (iii) nothing is raised once the machine has been told ownership is lost, nor at or after
//!       the deadline, and no renewal adds anew a VIP the kernel let go;
//! (iv)  a step-down is answered within its budget;
//! (v)   with a hardware watchdog: nothing raised before it is armed, no ping after the
//!       deadline or the loss, no magic close while VIP or service may be up, its reset always
//!       before the lease can end at etcd at the stated slew, and never a reset of a guard on
//!       time.
//!
//! A failing schedule names its seed; `HAMASTER_SIM_SEED=N cargo test --lib sim` replays it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::answers;
use super::fence::Out;
use super::machine::{
    ArmError, Cause, Fault, Input, Kernel, Machine, Order, Plan, Regrant, RetakeError, Rule, Rules,
    View, WatchdogPlan, VIP_RETRY, WATCHDOG_TOLERANCE,
};
use crate::failsafe::clearance::{self, Clearance, Facts, Fencing, NodeSeen, Outside};
use crate::failsafe::witness::{Cluster, Node};
use crate::failsafe::{Home, OwnView, Record, ASK_EVERY, ASK_LIMIT, PROOF_LIFE};
use crate::lease::clock::MAX_SLEW;
use crate::lease::{LeaseClock, LeaseError, LeaseId, RenewError};
use crate::presence::Presence;
use crate::service::ServiceRef;
use crate::splitmix::SplitMix64;

use schedule::{rate, rtc_at};

mod check;
mod hold;
mod mutants;
mod run;
mod schedule;
mod shell;
mod world;

/// The fencing thread's wake-up latency allowed by invariant (i) (the benchmark's p99 target).
const FENCE_LATENCY_BOUND: Duration = Duration::from_millis(50);
const HORIZON: Duration = Duration::from_secs(120);
/// The default lease settings where no corosync runs: lease_ttl 10, lease_margin 2.
const DEFAULTS: LeaseClock = LeaseClock {
    ttl: Duration::from_secs(10),
    margin: Duration::from_secs(2),
};
/// Ticks a stopped service's check takes (the shell's killpg / systemctl show).
const CHECK_TAKES: Duration = Duration::from_millis(5);
/// The lease of the simulated guard.
const LEASE: LeaseId = LeaseId(0x5eed);

struct Rng(SplitMix64);

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
pub(crate) enum RemoveFault {
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
    /// etcd receives a keepalive the machine ordered at `sent` (its clock), sent by the shell
    /// at `sent_true`; its answer takes `reply_in`.
    EtcdRenews {
        sent: Duration,
        sent_true: Duration,
        reply_in: Duration,
    },
    EtcdLeaderChange,
    /// Behind the guard's back: `etcdctl del` (false) or `etcdctl lease revoke` (true).
    OwnershipLost {
        /// How soon the watch sees it (None: drawn, when the watch works at all).
        watched_in: Option<Duration>,
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
    /// demote_command exits 0: the service has given the role up, and the machine is told.
    GaveBack,
    Freeze,
    Unfreeze,
    /// The watchdog's time, if no ping moved it since.
    WatchdogFires,
    /// etcd loses its quorum (hold schedules): no leader, no lease expires until it is back.
    QuorumLost,
    /// The successor (another node, running the real takeover rule) looks at the failsafe
    /// record, its corosync and the key (hold schedules).
    SuccessorLooks,
}

/// The host as the machine's kernel effects meet it, with the schedule's faults: the one
/// kernel double, which the machine's own unit tests use too (`World::plain`), recording every
/// call the machine makes (`calls`). Its `now` is true time; the machine sees this node's
/// clock, which runs at `node_rate`.
#[derive(Default)]
pub(crate) struct World {
    pub(crate) now: Duration,
    node_rate: f64,
    /// The node paused (a VM stopped by its hypervisor), true time (from, until): its clock,
    /// its kernel's address lifetimes and its emulated watchdog stand still meanwhile.
    paused: Option<(Duration, Duration)>,
    rng: Option<Rng>,
    /// How long one effect may take (each draws up to this), and one watchdog ioctl.
    effect_max: Duration,
    ping_max: Duration,
    pub(crate) vip: bool,
    /// When the kernel lets the VIP go (true time).
    vip_kernel_end: Duration,
    /// How late (positive) or early (negative, the kernel's HZ/50) the kernel deletes an
    /// address after its lifetime, in ms of true time.
    kernel_slack_ms: i64,
    /// Replaces that added the VIP anew after the kernel let it go: (iii).
    recreated: Vec<Duration>,
    /// When a VIP that was up was removed (true time).
    removed_at: Vec<Duration>,
    /// Service starts asked of the kernel (a unit started, a command forked).
    starts: u32,
    /// The kernel let the VIP go by its lifetime.
    expiries: u32,
    pub(crate) remove_fault: Option<RemoveFault>,
    removals: u32,
    /// Adds and extensions that take effect and still fail (several VIPs: one address
    /// failed, the others took it), half of them.
    partial_faults: bool,
    pub(crate) service: bool,
    ignores_term: bool,
    unkillable: bool,
    term_exit: Duration,
    termed_at: Option<Duration>,
    /// When the role was first asked back from a warm service (demote_command).
    take_back_at: Option<Duration>,
    /// Raise effects made, with their times: checked against (iii).
    raised: Vec<Duration>,
    /// The hardware watchdog: the plan arms one.
    dog_planned: bool,
    /// Arming fails (no device, EBUSY).
    pub(crate) dog_arm_fails: bool,
    /// The driver's granularity: a timeout is rounded up to a multiple of it.
    pub(crate) dog_step: u32,
    /// A ping fails now and then; the magic close fails.
    dog_ping_fails: f64,
    pub(crate) dog_disarm_fails: bool,
    /// How much later than nominal the hardware resets (1 ..= 1 + WATCHDOG_TOLERANCE).
    dog_late: f64,
    /// Armed: the timeout in force and when the reset comes (true time).
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
    /// When the machine first told the host it is lowering (Kernel::lowering, true time):
    /// the shell's fast path (Fence::standing) reads it before the step's view is published.
    lowered_at: Option<Duration>,
    /// A mutant host: its standing is never cleared, so the shell knows the machine's
    /// lowering only from the view published at its step's end.
    no_standing: bool,
    scheduled: Vec<(Duration, Ev)>,
    pub(crate) trace: Vec<String>,
    /// Every call the machine made of its kernel, in order.
    pub(crate) calls: Vec<Call>,
    /// The machine tests' exact cases: the next ping's clock read this much later (a guard
    /// stopped between the ioctl and the read); extensions that fail, and take this long.
    pub(crate) ping_late: Duration,
    pub(crate) extend_fails: bool,
    pub(crate) extend_takes: Duration,
}

/// A call the machine made of its kernel (`Kernel`), as `World` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    AddVip(u32),
    ExtendVip(u32),
    RemoveVip,
    ArmWatchdog(u32),
    PingWatchdog(u32),
    DisarmWatchdog,
    /// SIGKILL (`kill`) or SIGTERM.
    Signal {
        kill: bool,
    },
    Lowering,
    ForgetService,
}

/// How a warm service's demote_command goes: it confirms after this long (the role given
/// back then: a confirmation past its budget is killed instead), fails after this long, or
/// hangs until killed at its budget's end.
#[derive(Debug, Clone, Copy)]
enum TakeBackDraw {
    Confirms(Duration),
    Fails(Duration),
    Hangs,
}

struct Schedule {
    clock: LeaseClock,
    unit: bool,
    /// A warm standby's command (standby=warm): running before the leadership, its start is
    /// the hand-over of the role, which may hold from the moment it is asked (as a unit's
    /// start may), and the machine knows its group from before.
    warm: bool,
    /// A warm standby's demote_command (Plan::take_back), and how it goes.
    take_back: Option<TakeBackDraw>,
    /// This node's clock and etcd's, against true time.
    node_rate: f64,
    etcd_rate: f64,
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
    /// How often a look at the service cannot tell.
    check_fails: f64,
    release_fails: f64,
    step_down: Option<(Duration, Duration)>,
    ownership_lost: Option<(Duration, bool)>,
    /// Ownership lost (besides `ownership_lost`, in schedules that have it) this long before a
    /// command's fork, seen by the watch at once: the loss lands while the shell's start task
    /// is about to fork (its own draw).
    loss_into_start: Option<Duration>,
    /// Where the kernel's deletion event of the expired VIP was dropped (ENOBUFS), the wire
    /// watch's look instead, which proves the absence or cannot tell (its own draw).
    expiry_looked: Option<Presence>,
    /// The failsafe world: the guard wrote a failsafe record and may hold through an etcd
    /// outage (None: etcd_outage=fence, the lease alone).
    hold: Option<HoldSchedule>,
}

/// The cluster around a guard that may hold (node n1; n2 the successor; n3 in a three-node
/// cluster): corosync's views over time, etcd's quorum, and the successor's clock.
#[derive(Debug, Clone)]
struct HoldSchedule {
    /// 2 (two_node: both halves keep quorum) or 3.
    nodes: u32,
    /// corosync's membership time: how much two nodes' views of one change may differ.
    membership_time: Duration,
    /// etcd without quorum for everyone: (from, to), and how members answer meanwhile.
    quorum_loss: Option<(Duration, Duration)>,
    quorum_answer: Member,
    /// n1 cut off from the others (and from etcd's majority): at, healed at; each side's
    /// view changes within membership_time of the cut (and of the heal).
    partition: Option<Cut>,
    /// n3 leaves the cluster and comes back (three nodes).
    third_away: Option<Cut>,
    /// n1's corosync stopped (SIGSTOP): its answers stop; the others drop n1.
    corosync_frozen: Option<Cut>,
    /// How long corosync takes to answer an ask, at most (past ASK_LIMIT: no answer).
    answer_max: Duration,
    /// The successor's clock against true time.
    successor_rate: f64,
    /// Pacemaker, a witness that can be wrong.
    pacemaker: PacemakerSchedule,
    /// The successor is a host outside the cluster: a one-node corosync of its own (the DR
    /// host of the runbook), whose Pacemaker knows nothing of n1.
    successor_outside: bool,
    /// n1 paused as a whole (a VM stopped by its hypervisor).
    pause: Option<Pause>,
}

/// n1 paused: everything of it stands still from `at` for `length` — its guard, its clock, its
/// kernel's timers, its corosync — while the others see it gone `seen_b` after `at`. After the
/// resume its corosync answers from its old membership for `stale` (until its token runs out),
/// then finds itself alone until it merges again `merge` later.
#[derive(Debug, Clone, Copy)]
struct Pause {
    at: Duration,
    length: Duration,
    stale: Duration,
    seen_b: Duration,
    merge: Duration,
}

/// How Pacemaker sees n1 and fences it, over time.
#[derive(Debug, Clone)]
struct PacemakerSchedule {
    /// etcd_outage=auto (a proof needs power fencing, read at every ask) or hold.
    auto: bool,
    /// How the cluster fences from the start (power under auto: else no record is written),
    /// and a change at a moment: fencing turned off, or a fabric device added.
    fencing: Fencing,
    change: Option<(Duration, Fencing)>,
    /// n1's controller dies (pacemakerd frozen, the controller killed) at this moment: the DC
    /// sees it `dc_lag` later — n1 offline, its instance shown stopped, and fenced where fencing
    /// is on; n1's own Pacemaker shows it offline `own_lag` later (None: it stops answering).
    controller_dies: Option<Duration>,
    dc_lag: Duration,
    own_lag: Option<Duration>,
    /// How long a fence takes from the DC's decision to its confirmation. A power device ends
    /// every process of n1 by then; a fabric one ends none.
    fence_takes: Duration,
}

/// A change of membership and its end: when it happens, when each side sees it (a, b: n1's
/// and the successor's view), and the same for its end (None: never ends).
#[derive(Debug, Clone, Copy)]
struct Cut {
    at: Duration,
    seen_a: Duration,
    seen_b: Duration,
    until: Option<(Duration, Duration, Duration)>,
}

/// The failsafe world as the run goes.
#[derive(Debug, Default)]
struct HoldWorld {
    /// The successor's look at how long n1 has been out of its membership (the real code).
    outside: Outside,
    /// When the successor took the key and raised (true time).
    successor_at: Option<Duration>,
    /// n1's step-down was answered done: Pacemaker's CIB shows its instance demoted.
    demoted: bool,
    /// Ground truth: the latest proof's deadline (n1's clock), while no later answer said the
    /// cluster is not whole; and the latest ask answered.
    proof_deadline: Option<Duration>,
    answered: Option<Duration>,
    /// What the run reached.
    held: bool,
    retaken: bool,
    blocked: bool,
}

/// What the runs reached, typed as it happened (never read back from the trace).
#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    lost_while_raising: bool,
    own_deletions_heard: u32,
    late_answers: u32,
    doubts: u32,
    /// The guard was stopped or killed.
    froze: bool,
    /// The shell's start read a view published before the step it raced; of those, the
    /// host's standing alone refused the fork (the view still wanted it).
    stale_views: u32,
    standing_refused: u32,
}

struct Sim {
    rng: Rng,
    /// The machine's view as the fencing thread last published it (at the end of its step,
    /// `published_at`), and the one before: the shell reads a view, never the machine.
    published: View,
    prior: View,
    published_at: Duration,
    s: Schedule,
    m: Machine<World>,
    queue: BinaryHeap<Reverse<(Duration, u64, EvBox)>>,
    seq: u64,
    /// Ground truth, apart from the machine (this node's clock): the deadline by the rule,
    /// from what etcd answered and when the answers arrived.
    deadline: Duration,
    /// When etcd lets the lease (and the key) go, in true time, by its own clock.
    etcd_expiry: Duration,
    key_ours: bool,
    lease_alive: bool,
    /// When the machine was first told that ownership is lost (true time).
    told_lost: Option<Duration>,
    frozen_until: Option<Option<Duration>>,
    killed: bool,
    released: bool,
    /// When the machine first ordered the release.
    release_ordered_at: Option<Duration>,
    step_down_by: Option<Duration>,
    answered: Option<(Duration, bool)>,
    exited: bool,
    /// When the watchdog reset the node.
    reset_at: Option<Duration>,
    /// The sequence number of the fencing thread's one armed wake-up.
    fence_wake: Option<u64>,
    /// Ground truth, apart from the machine: the latest a watchdog's reset may come — the
    /// true send time of a renewal applied in time + its TTL / (1 + max slew): before the lease
    /// can end at etcd with etcd's clock fast, whatever this one does.
    watchdog_bound: Duration,
    reached: Reached,
    /// The failsafe world (hold schedules).
    hold: Option<HoldWorld>,
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
    /// Looks at the service that could not tell.
    doubts: u32,
    /// Schedules with this node's clock at its slowest and etcd's at its fastest.
    extreme_clocks: u32,
    /// Warm standbys: all of them, those fenced, those whose hand-over failed.
    warm: u32,
    warm_fenced: u32,
    warm_failed_handovers: u32,
    /// Warm masters with demote_command: the role given back, or the service stopped instead.
    given_back: u32,
    take_back_stopped: u32,
    /// Failsafe schedules: the guard held through an outage; took the key back; fenced when
    /// its proof lapsed or the cluster was not whole; the successor took over after a hold;
    /// the successor was blocked by the record.
    held: u32,
    retaken: u32,
    hold_fenced: u32,
    taken_over_after_hold: u32,
    successor_blocked: u32,
    /// Pacemaker as a fallible witness: the hold withdrawn (fencing changed, the controller
    /// gone, the nodelist changed); n1 powered off by a fence; a fabric fence confirmed; the
    /// successor outside the cluster and blocked.
    hold_withdrawn: u32,
    powered_off: u32,
    fabric_fenced: u32,
    outside_blocked: u32,
    /// n1 paused while it held; of those, fenced for the pause its RTC showed.
    paused: u32,
    pause_seen: u32,
    /// The shell read a stale view; the host's standing alone refused a start.
    stale_views: u32,
    standing_refused: u32,
}

fn run_one(seed: u64, rules: Rules, tally: &mut Tally) -> Result<(), String> {
    let mut sim = Sim::new(seed, rules);
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
        run_one(seed, Rules::default(), &mut Tally::default()).unwrap_or_else(|e| panic!("{e}"));
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
        if let Err(e) = run_one(seed, Rules::default(), &mut tally) {
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
        tally.stale_views > 0 && tally.standing_refused > 0,
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
    assert!(
        tally.doubts > runs as u32 / 10 && tally.extreme_clocks > runs as u32 / 20,
        "{tally:?}"
    );
    assert!(
        tally.warm > runs as u32 / 10 && tally.warm_fenced > 0 && tally.warm_failed_handovers > 0,
        "{tally:?}"
    );
    assert!(
        tally.given_back > runs as u32 / 200 && tally.take_back_stopped > runs as u32 / 100,
        "{tally:?}"
    );
    // The failsafe's situations: holds, retakes, holds ended, takeovers after a hold, and
    // successors the record held back.
    assert!(
        tally.held > runs as u32 / 20 && tally.retaken > 0 && tally.hold_fenced > 0,
        "{tally:?}"
    );
    assert!(
        tally.taken_over_after_hold > 0 && tally.successor_blocked > runs as u32 / 20,
        "{tally:?}"
    );
    // Paused holders, and of them some fenced for the pause their RTC showed.
    assert!(
        tally.paused > runs as u32 / 100 && tally.pause_seen > 0,
        "{tally:?}"
    );
}
