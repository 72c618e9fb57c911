//! The machine's states, each a type of its own, so that no combination of them means
//! nonsense: the phase (with the raise's step inside it: there is none outside the raise),
//! what is up (the VIP, the service with its start and its stop), what is out (a look at the
//! service, the release), and the step-down. The phases' transitions are one table
//! (`TRANSITIONS`): the machine moves only along it, and docs/architecture.md's diagram is
//! drawn from it (a test compares them).

use crate::service::ServiceRef;

/// What the machine is doing, for status and state.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Raising, at this step.
    Raising(RaiseStep),
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
            Phase::Raising(_) => "Raising",
            Phase::Leading => "Leading",
            Phase::Holding => "Holding",
            Phase::Fenced => "Fenced",
            Phase::SteppingDown => "SteppingDown",
            Phase::Failed => "Failed",
            Phase::Done => "Done",
        }
    }

    pub fn is_raising(&self) -> bool {
        matches!(self, Phase::Raising(_))
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

/// Every move between phases, with what makes it (the raise's own steps stay in Raising).
pub const TRANSITIONS: [(&str, &str, &str); 15] = [
    ("[*]", "Raising", "the leader key taken"),
    (
        "Raising",
        "Leading",
        "the service started, the raise is complete",
    ),
    ("Raising", "Failed", "an effect of the raise failed"),
    ("Raising", "Fenced", "ownership lost or the deadline passed"),
    ("Raising", "SteppingDown", "step-down asked"),
    ("Leading", "Fenced", "ownership lost or the deadline passed"),
    ("Leading", "SteppingDown", "step-down asked"),
    (
        "Leading",
        "Holding",
        "etcd silent past the deadline, the cluster proven whole",
    ),
    (
        "Holding",
        "Leading",
        "etcd answers: the lease renewed, or the key taken back",
    ),
    (
        "Holding",
        "Fenced",
        "the proof lapsed or failed, or ownership lost",
    ),
    ("Holding", "SteppingDown", "step-down asked"),
    (
        "SteppingDown",
        "Fenced",
        "ownership lost or the deadline passed",
    ),
    (
        "SteppingDown",
        "Done",
        "VIP and service down, the release settled",
    ),
    (
        "Fenced",
        "Done",
        "VIP and service down, the release settled",
    ),
    (
        "Failed",
        "Done",
        "VIP and service down, the release settled",
    ),
];

/// Whether the machine may move from `from` to `to`.
pub fn may_move(from: &Phase, to: &Phase) -> bool {
    from.name() == to.name()
        || TRANSITIONS
            .iter()
            .any(|(a, b, _)| *a == from.name() && *b == to.name())
}

/// The phases as a Mermaid state diagram, drawn from `TRANSITIONS`.
pub fn diagram() -> String {
    let mut d = String::from("```mermaid\nstateDiagram-v2\n");
    for (from, to, why) in TRANSITIONS {
        d.push_str(&format!("    {from} --> {to}: {why}\n"));
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
    /// Ordered; `stale`: the start answered meanwhile, so the answer says nothing now.
    Out {
        stale: bool,
    },
}

/// The key's release (delete the key while it carries our lease, revoke the lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    NotYet,
    InFlight,
    /// Failed; tried again when its timer fires (it expires with the lease anyway).
    Failed,
    Done,
}

impl Release {
    /// Settled for the step-down's answer: done, or left to the lease.
    pub fn settled(&self) -> bool {
        matches!(self, Release::Done | Release::Failed)
    }
}

/// An orderly step-down: its budget's end (boot clock), and whether it has been answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepDown {
    pub by: std::time::Duration,
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
        let r = Phase::Raising(RaiseStep::AddVip);
        assert!(may_move(&r, &Phase::Raising(RaiseStep::Settling)));
        assert!(may_move(&r, &Phase::Leading));
        assert!(may_move(&Phase::Leading, &Phase::Fenced));
        assert!(!may_move(&Phase::Leading, &r), "nothing is raised again");
        assert!(!may_move(&Phase::Fenced, &Phase::Leading));
        assert!(
            !may_move(&Phase::Failed, &Phase::Fenced),
            "a failed raise stays failed"
        );
        assert!(!may_move(&Phase::Done, &Phase::SteppingDown));
    }
}
