//! What goes in and out of the guard machine: its inputs (`Input`), its orders to the shell
//! (`Order`), the kernel effects it makes itself (`Kernel`), why it fenced (`Cause`) and
//! what failed (`Fault`). No behaviour here.

use std::time::Duration;

use super::observe::{Claim, Gone, HealthReport};
use crate::failsafe::witness::Cluster;
use crate::failsafe::OwnView;
pub use crate::guard::watchdog::ArmError;
use crate::presence::Presence;
use crate::service::ServiceRef;

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
    /// Holding through an etcd outage, no fresh proof that the cluster is whole came within
    /// the proof's life (corosync silent, slow, or its answers doubtful).
    HoldLapsed,
    /// Holding through an etcd outage (or about to), corosync said the cluster is not whole:
    /// a node missing from the membership, or no quorum.
    ClusterNotWhole(String),
    /// Holding through an etcd outage (or about to), this node's Pacemaker said what takes the
    /// hold's ground away: fencing turned off or a fabric device added (etcd_outage=auto), or
    /// this node no longer online with its controller (the cluster recovers the resource
    /// elsewhere), or the nodelist changed.
    HoldWithdrawn(String),
    /// Taking the key back after an etcd outage, the failsafe record no longer named this
    /// node: someone else may have taken over.
    RecordLost,
}

impl Cause {
    /// Every cause's label in the metrics (hamaster_fences_total{cause=...}).
    pub const LABELS: [&'static str; 10] = [
        "deadline",
        "key_deleted",
        "key_taken",
        "lease_gone",
        "watchdog_due",
        "watchdog_late",
        "hold_lapsed",
        "cluster_not_whole",
        "record_lost",
        "hold_withdrawn",
    ];

    pub fn label(&self) -> &'static str {
        match self {
            Cause::Deadline => Cause::LABELS[0],
            Cause::KeyDeleted => Cause::LABELS[1],
            Cause::KeyTaken(_) => Cause::LABELS[2],
            Cause::LeaseGone => Cause::LABELS[3],
            Cause::WatchdogDue => Cause::LABELS[4],
            Cause::WatchdogLate => Cause::LABELS[5],
            Cause::HoldLapsed => Cause::LABELS[6],
            Cause::ClusterNotWhole(_) => Cause::LABELS[7],
            Cause::RecordLost => Cause::LABELS[8],
            Cause::HoldWithdrawn(_) => Cause::LABELS[9],
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
            Cause::HoldLapsed => write!(
                f,
                "holding through an etcd outage, no fresh proof that the cluster is whole came \
                 in time (corosync silent or slow)"
            ),
            Cause::ClusterNotWhole(why) => write!(
                f,
                "etcd not answering and the cluster not whole ({why}): no proof that no other \
                 node may take over"
            ),
            Cause::HoldWithdrawn(why) => write!(
                f,
                "etcd not answering and the hold's ground gone ({why}): no proof that no other \
                 node may take over"
            ),
            Cause::RecordLost => write!(
                f,
                "the failsafe record no longer names this node: another node may have taken over"
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
    /// TERM or KILL to the service could not be sent (service::stop).
    #[error("{0}")]
    Signal(#[from] crate::service::stop::SignalError),
    /// systemctl said the unit is in no state it knows.
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
    /// The VIP is settled: tell the clients the last master left (guard::sessions,
    /// vip::tickle), each round only while `View::may_repoint` says yes. Never answered: what
    /// it did is the status's, and nothing of the raise waits for it.
    Repoint,
    /// Stop any announcement burst for the VIP (it is going down).
    CancelAnnouncements,
    /// Write the fencing token for the service. Answer TokenWritten.
    WriteToken,
    /// Start the service. Answer ServiceStarted.
    StartService,
    /// Take the role back from the running service by its hook (demote_command), killed if
    /// still running after `within`. Answer TakenBack.
    TakeBack { within: Duration },
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
    /// Tell Pacemaker now that the resource failed here (`crm_resource --fail`), once per
    /// leadership; `regardless`: whatever push_failures says (conflict_action=push).
    Push { why: String, regardless: bool },
    /// One announcement of this VIP (one of the master's addresses), defending it against
    /// another host's claim.
    Defend { address: String },
    /// Ask this node's corosync what it sees of the cluster (failsafe::witness::ask), asked at
    /// `asked` (boot clock), within failsafe::ASK_LIMIT. Answer Membership.
    AskMembership {
        asked: Duration,
        /// Ask Pacemaker too: how the cluster fences (`fencing`), whether this node is online
        /// with its controller (`online`, under the name this guard was started with).
        fencing: bool,
        online: bool,
    },
    /// etcd says our lease is gone after a hold: take the key back with a new lease, only
    /// while it is absent and the failsafe record still names this node (one transaction).
    /// Answer Retaken.
    Retake,
    /// The guard's work is over; `raise_failed`: it ends because the raise failed.
    Exit {
        raise_failed: bool,
        /// The service gave the role back (demote_command): it serves on as a standby.
        given_back: bool,
    },
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
    /// The wire watch saw the VIP go (deleted, its link down or removed), in words: never
    /// extended again; unless the guard took it down itself, told to Pacemaker.
    VipGone {
        how: Gone,
        detail: String,
    },
    /// The wire watch saw another host claim the VIP.
    VipClaimed(Claim),
    /// The health watch's verdict on the service.
    Health(HealthReport),
    Settled(Result<(), Fault>),
    TokenWritten(Result<(), Fault>),
    ServiceStarted(Result<ServiceRef, Fault>),
    /// The supervised command's leader process exited (its group may live on).
    ServiceExited(String),
    /// The take-back's outcome: Ok when the service confirmed it gave the role up.
    TakenBack(Result<(), Fault>),
    /// Whether anything of the service is left: only Absent confirms it stopped.
    ServiceChecked(Presence),
    Released(Result<(), Fault>),
    /// Step down in order, answering by `by` (boot clock).
    StepDown {
        by: Duration,
    },
    /// What this node's corosync said of the cluster, for the ask made at `asked` (Err: no
    /// answer within the bound, or none that could be read).
    Membership {
        asked: Duration,
        seen: Result<Cluster, String>,
        /// What this node's Pacemaker said at the same ask (as the order asked).
        pacemaker: OwnView,
    },
    /// The retake's outcome.
    Retaken(Result<Regrant, RetakeError>),
}

/// The key taken back after a hold: a new lease, granted by a request sent at `sent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regrant {
    pub sent: Duration,
    pub ttl: Duration,
}

/// Why the key could not be taken back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetakeError {
    /// The key carries another lease (which, when it could be read).
    Taken(Option<i64>),
    /// The failsafe record was changed or deleted.
    RecordChanged,
    /// etcd did not answer or refused: tried again while the hold lasts.
    Failed(String),
}
