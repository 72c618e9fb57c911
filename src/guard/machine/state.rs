//! The machine's states, each a type of its own, so that no combination of them means
//! nonsense: the `State` (each phase with what only it has: the raise's step, the hold's
//! start, why things go down and how far the release is), what is up (the VIP, the service
//! with its start and its stop), what is out (a look at the service, the release), and the
//! step-down. `Phase` is a state's name, for status and state.json. The phases' transitions
//! are one table (`TRANSITIONS`): the machine moves only along it, and docs/architecture.md's
//! diagram is drawn from it (a test compares them).

use std::time::Duration;

use super::types::Cause;
use crate::service::ServiceRef;

/// The machine's state: each phase with what only it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Raising, at this step.
    Raising(RaiseStep),
    /// Everything raised and kept up: leading on the lease, or, since `holding_since`, past
    /// the lease's deadline on a fresh proof that the cluster is whole while etcd cannot be
    /// reached (hold.rs).
    Up { holding_since: Option<Duration> },
    /// Things go down (and come no more up).
    Lowering(Lowering),
    /// VIP and service down, the release settled: how it ended.
    Done(Lowering),
}

impl State {
    /// The state's name.
    pub fn phase(&self) -> Phase {
        match self {
            State::Raising(_) => Phase::Raising,
            State::Up {
                holding_since: None,
            } => Phase::Leading,
            State::Up { .. } => Phase::Holding,
            State::Lowering(l) if l.failure.is_some() => Phase::Failed,
            State::Lowering(l) if l.fenced.is_some() => Phase::Fenced,
            State::Lowering(_) => Phase::SteppingDown,
            State::Done(_) => Phase::Done,
        }
    }

    /// Why things went down, from the moment they began to.
    pub fn lowering(&self) -> Option<&Lowering> {
        match self {
            State::Lowering(l) | State::Done(l) => Some(l),
            _ => None,
        }
    }

    /// Whether anything may be raised at `now`, with the fence due at `fence_at`: only while
    /// raising (a fence or a step-down ends the raise), and before the fence.
    pub fn may_raise(&self, now: Duration, fence_at: Duration) -> bool {
        matches!(self, State::Raising(_)) && now < fence_at
    }

    /// Why and when ownership ended, if it did.
    pub fn fenced(&self) -> Option<&(Duration, Cause)> {
        self.lowering().and_then(|l| l.fenced.as_ref())
    }

    /// Why the raise failed, if it did.
    pub fn failure(&self) -> Option<&RaiseFailure> {
        self.lowering().and_then(|l| l.failure.as_ref())
    }
}

/// Why things go down, and how far the release is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lowering {
    /// The raise failed: stepping down, then exiting with 1 (it stays failed, fenced or not).
    pub failure: Option<RaiseFailure>,
    /// The guard fenced itself (ownership lost, the deadline, the watchdog's reset near):
    /// when, and why.
    pub fenced: Option<(Duration, Cause)>,
    /// An orderly step-down was asked (also after a fence: its answer is owed).
    pub step_down: Option<StepDown>,
    pub release: Release,
}

/// Why a raise failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaiseFailure {
    /// Too little of the lease is left to raise the VIP.
    NoTimeForVip,
    /// The VIP could not be added, settled, or kept with a lifetime that fits.
    Vip(String),
    /// The watchdog is required and could not be armed as it must.
    Watchdog(String),
    /// The fencing token could not be written.
    Token(String),
    /// The service did not start.
    Service(String),
}

impl std::fmt::Display for RaiseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RaiseFailure::NoTimeForVip => {
                f.write_str("too little of the lease is left to raise the VIP")
            }
            RaiseFailure::Vip(why) => write!(f, "VIP: {why}"),
            RaiseFailure::Watchdog(why) | RaiseFailure::Token(why) => f.write_str(why),
            RaiseFailure::Service(why) => write!(f, "service: {why}"),
        }
    }
}

/// A state's name: what the machine is doing, for status and state.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Raising,
    Leading,
    /// Leading past the lease's deadline on a fresh proof that the cluster is whole, while
    /// etcd cannot be reached (hold.rs).
    Holding,
    Fenced,
    SteppingDown,
    /// The raise failed: stepping down, then exiting with 1.
    Failed,
    Done,
}

impl Phase {
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Raising => "Raising",
            Phase::Leading => "Leading",
            Phase::Holding => "Holding",
            Phase::Fenced => "Fenced",
            Phase::SteppingDown => "SteppingDown",
            Phase::Failed => "Failed",
            Phase::Done => "Done",
        }
    }

    pub fn is_raising(&self) -> bool {
        *self == Phase::Raising
    }

    /// Everything raised and kept up: leading on the lease, or holding on a proof.
    pub fn is_leading(&self) -> bool {
        matches!(self, Phase::Leading | Phase::Holding)
    }

    /// A phase in which things go down (and come no more up).
    pub fn is_down(&self) -> bool {
        matches!(self, Phase::SteppingDown | Phase::Failed | Phase::Fenced)
    }
}

/// Every move between phases (None: the start), with what makes it (the raise's own steps
/// stay in Raising).
pub const TRANSITIONS: [(Option<Phase>, Phase, &str); 15] = [
    (None, Phase::Raising, "the leader key taken"),
    (
        Some(Phase::Raising),
        Phase::Leading,
        "the service started, the raise is complete",
    ),
    (
        Some(Phase::Raising),
        Phase::Failed,
        "an effect of the raise failed",
    ),
    (
        Some(Phase::Raising),
        Phase::Fenced,
        "ownership lost or the deadline passed",
    ),
    (Some(Phase::Raising), Phase::SteppingDown, "step-down asked"),
    (
        Some(Phase::Leading),
        Phase::Fenced,
        "ownership lost or the deadline passed",
    ),
    (Some(Phase::Leading), Phase::SteppingDown, "step-down asked"),
    (
        Some(Phase::Leading),
        Phase::Holding,
        "etcd silent past the deadline, the cluster proven whole",
    ),
    (
        Some(Phase::Holding),
        Phase::Leading,
        "etcd answers: the lease renewed, or the key taken back",
    ),
    (
        Some(Phase::Holding),
        Phase::Fenced,
        "the proof lapsed or failed, or ownership lost",
    ),
    (Some(Phase::Holding), Phase::SteppingDown, "step-down asked"),
    (
        Some(Phase::SteppingDown),
        Phase::Fenced,
        "ownership lost or the deadline passed",
    ),
    (
        Some(Phase::SteppingDown),
        Phase::Done,
        "VIP and service down, the release settled",
    ),
    (
        Some(Phase::Fenced),
        Phase::Done,
        "VIP and service down, the release settled, a step-down asked",
    ),
    (
        Some(Phase::Failed),
        Phase::Done,
        "VIP and service down, the release settled",
    ),
];

/// Whether the machine may move from `from` to `to`.
pub fn may_move(from: Phase, to: Phase) -> bool {
    from == to
        || TRANSITIONS
            .iter()
            .any(|(a, b, _)| *a == Some(from) && *b == to)
}

/// The phases as a Mermaid state diagram, drawn from `TRANSITIONS`.
pub fn diagram() -> String {
    let mut d = String::from("```mermaid\nstateDiagram-v2\n");
    for (from, to, why) in TRANSITIONS {
        let from = from.map_or("[*]", |p| p.name());
        d.push_str(&format!("    {from} --> {}: {why}\n", to.name()));
    }
    d.push_str("    Done --> [*]\n```\n");
    d
}

/// How the raise goes, step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaiseStep {
    /// Before anything is raised.
    ArmWatchdog,
    AddVip,
    /// Settle ordered, waiting for its answer.
    Settling,
    WriteToken,
    /// WriteToken ordered, waiting.
    WritingToken,
    StartService,
    /// StartService ordered, waiting (the service's start is out).
    StartingService,
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

impl VipState {
    pub fn may_be_up(&self) -> bool {
        matches!(self, VipState::Up | VipState::MaybeUp)
    }
}

/// The service's own sub-machine, inside every phase:
///
/// ```text
/// NotStarted --start ordered (raise.rs)--> Starting --Ok--> Running
///   Starting --Err, nothing spawned--> Stopped
///   Running --step-down with demote_command (lower.rs)--> GivingBack --hook Ok--> GivenBack
///   GivingBack --hook fails, Timer::TakeBack, exited--> Running --> Stopping
///   Running | Starting(known) --fence, step-down, failed raise--> Stopping (TERM; Timer::Kill)
///   Stopping --a look proves it absent, no start out (Timer::Look)--> Stopped (forgotten)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceState {
    NotStarted,
    /// Its start is out (a unit is known before its start: fencing can stop it mid-start).
    Starting(Option<ServiceRef>),
    Running(ServiceRef),
    /// Its role is being taken back by its hook (Plan::take_back): stopped if the hook fails
    /// or has not confirmed by Timer::TakeBack.
    GivingBack(ServiceRef),
    /// It confirmed it gave the role up: it runs on as a standby, nothing of the master's.
    GivenBack,
    /// Signalled, not yet confirmed stopped. `killed`: SIGKILL sent. `start_out`: a stop that
    /// overtook the start, whose answer is still to come (not up yet is not stopped).
    Stopping {
        service: ServiceRef,
        killed: bool,
        start_out: bool,
    },
    Stopped,
}

impl ServiceState {
    pub fn reference(&self) -> Option<&ServiceRef> {
        match self {
            ServiceState::Starting(r) => r.as_ref(),
            ServiceState::Running(r)
            | ServiceState::GivingBack(r)
            | ServiceState::Stopping { service: r, .. } => Some(r),
            _ => None,
        }
    }

    /// Whether the service may be running as the master (anything short of confirmed stopped,
    /// or its role confirmed given back, or never started).
    pub fn may_run(&self) -> bool {
        !matches!(
            self,
            ServiceState::NotStarted | ServiceState::Stopped | ServiceState::GivenBack
        )
    }

    /// Whether its start is out: an answer is still to come, which may bring it up.
    pub fn start_out(&self) -> bool {
        matches!(
            self,
            ServiceState::Starting(_)
                | ServiceState::Stopping {
                    start_out: true,
                    ..
                }
        )
    }
}

/// A look at whether anything of the service is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    Idle,
    /// Ordered; `stale`: something happened meanwhile (the start answered, a signal went, a
    /// fresh look was wanted), so its answer says nothing now and is followed by a fresh look.
    Out {
        stale: bool,
    },
}

/// The key's release (delete the key while it carries our lease, revoke the lease).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Release {
    #[default]
    NotYet,
    InFlight,
    /// Failed; tried again when its timer fires while the machine is not done yet. Settled
    /// all the same: the key expires with the lease anyway.
    Failed,
    Done,
}

impl Release {
    /// Settled for the step-down's answer: done, or left to the lease.
    pub fn settled(&self) -> bool {
        matches!(self, Release::Done | Release::Failed)
    }
}

/// An orderly step-down: whether it has been answered (its budget's end is Timer::Budget's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepDown {
    pub answered: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_documents_diagram_is_drawn_from_the_transitions() {
        let doc = include_str!("../../../docs/architecture.md");
        assert!(
            doc.contains(&diagram()),
            "docs/architecture.md must show this diagram (from machine::state::TRANSITIONS):\n{}",
            diagram()
        );
    }

    #[test]
    fn phases_move_only_along_the_table() {
        let r = Phase::Raising;
        assert!(may_move(r, r), "the raise's own steps");
        assert!(may_move(r, Phase::Leading));
        assert!(may_move(Phase::Leading, Phase::Fenced));
        assert!(!may_move(Phase::Leading, r), "nothing is raised again");
        assert!(!may_move(Phase::Fenced, Phase::Leading));
        assert!(
            !may_move(Phase::Failed, Phase::Fenced),
            "a failed raise stays failed"
        );
        assert!(!may_move(Phase::Done, Phase::SteppingDown));
        let failed = State::Lowering(Lowering {
            failure: Some(RaiseFailure::NoTimeForVip),
            fenced: Some((Duration::ZERO, Cause::Deadline)),
            ..Lowering::default()
        });
        assert_eq!(
            failed.phase(),
            Phase::Failed,
            "a failed raise stays failed, fenced or not"
        );
    }
}
