//! The OCF protocol layer: actions, exit codes, exit reasons, the environment and meta-data.
//! It performs no system effects: nothing here touches netlink, etcd or services.

pub mod action;
pub mod env;
pub mod exit;
pub mod failure;
pub mod metadata;
pub mod reason;

pub use action::Action;
pub use env::OcfEnv;
pub use exit::OcfExit;

/// How an agent action ended: an exit code, and for failures the one reason line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub exit: OcfExit,
    pub reason: Option<String>,
}

impl Outcome {
    pub fn ok() -> Outcome {
        Outcome {
            exit: OcfExit::Success,
            reason: None,
        }
    }

    pub fn new(exit: OcfExit) -> Outcome {
        Outcome { exit, reason: None }
    }

    pub fn with_reason(exit: OcfExit, reason: impl Into<String>) -> Outcome {
        Outcome {
            exit,
            reason: Some(reason.into()),
        }
    }
}
