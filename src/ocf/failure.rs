//! How errors become OCF exit codes. Every module's error implements `Failure` where the error
//! is defined (this lowest layer holds the trait; each module maps its own errors): the exit
//! code it means and its reason (the one `ocf-exit-reason:` line, or the
//! `hamaster VERB:` line). Agents' actions and CLI verbs return `Result<_, Failed>`; only
//! `main` turns the result into a number.
//!
//! The rule, as OCF and Pacemaker read the codes: 6 (ERR_CONFIGURED) for a value that is
//! wrong wherever it runs — Pacemaker stops the resource everywhere; 5 (ERR_INSTALLED) for
//! what this node lacks (a program, a readable file, a supported Pacemaker); 4 (ERR_PERM) for
//! privileges; 3 (ERR_UNIMPLEMENTED) for an unknown action; 1 (ERR_GENERIC) for what is wrong
//! on this node only, so that Pacemaker may try another; 9 (FAILED_PROMOTED) for a promoted
//! instance that is not a healthy master.

use super::OcfExit;

/// An error that knows what it means to Pacemaker.
pub trait Failure: std::fmt::Display {
    fn exit(&self) -> OcfExit;

    /// The reason line: the error's own words unless the code adds to them.
    fn reason(&self) -> String {
        self.to_string()
    }
}

/// A failure as actions and verbs return it: its exit code and its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub exit: OcfExit,
    pub reason: String,
    /// The reason is in the log already (the guard's own end, an announcement's): it is not
    /// printed again.
    pub logged: bool,
}

impl Failed {
    /// The same failure, said in the log already.
    pub fn logged(self) -> Failed {
        Failed {
            logged: true,
            ..self
        }
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl<E: Failure> From<E> for Failed {
    fn from(e: E) -> Failed {
        Failed {
            exit: e.exit(),
            reason: e.reason(),
            logged: false,
        }
    }
}
