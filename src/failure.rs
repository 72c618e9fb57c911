//! The one place where errors become OCF exit codes. Every module's error implements
//! `Failure`: the exit code it means and its reason (the one `ocf-exit-reason:` line, or the
//! `hamaster VERB:` line). Agents' actions and CLI verbs return `Result<_, Failed>`; only
//! `main` turns the result into a number.
//!
//! The rule, as OCF and Pacemaker read the codes: 6 (ERR_CONFIGURED) for a value that is
//! wrong wherever it runs — Pacemaker stops the resource everywhere; 5 (ERR_INSTALLED) for
//! what this node lacks (a program, a readable file, a supported Pacemaker); 4 (ERR_PERM) for
//! privileges; 3 (ERR_UNIMPLEMENTED) for an unknown action; 1 (ERR_GENERIC) for what is wrong
//! on this node only, so that Pacemaker may try another; 9 (FAILED_PROMOTED) for a promoted
//! instance that is not a healthy master.

use crate::agents::master::MasterError;
use crate::agents::ActionError;
use crate::cli::CliError;
use crate::guard::GuardError;
use crate::lease::LeaseError;
use crate::ocf::OcfExit;
use crate::params::ConfigError;
use crate::resource::config::InstallError;
use crate::resource::status::ClientError;
use crate::service::ServiceError;
use crate::vip::VipError;

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

impl Failure for ConfigError {
    fn exit(&self) -> OcfExit {
        OcfExit::ErrConfigured
    }
}

impl Failure for VipError {
    fn exit(&self) -> OcfExit {
        match self {
            VipError::Config(_) => OcfExit::ErrConfigured,
            VipError::Netlink(n) if n.is_permission() => OcfExit::ErrPerm,
            VipError::Announce(a) if a.is_permission() => OcfExit::ErrPerm,
            VipError::Namespace { source, .. }
                if matches!(source.raw_os_error(), Some(libc::EPERM | libc::EACCES)) =>
            {
                OcfExit::ErrPerm
            }
            VipError::NotHere(_)
            | VipError::Netlink(_)
            | VipError::Announce(_)
            | VipError::Namespace { .. }
            | VipError::Conflict { .. }
            | VipError::Duplicate { .. }
            | VipError::DadFailed { .. }
            | VipError::DadTimeout { .. }
            | VipError::Abandoned { .. } => OcfExit::ErrGeneric,
        }
    }

    fn reason(&self) -> String {
        match self {
            VipError::Netlink(_) | VipError::Announce(_) if self.exit() == OcfExit::ErrPerm => {
                format!("insufficient privileges (needs root): {self}")
            }
            _ => self.to_string(),
        }
    }
}

impl Failure for LeaseError {
    /// A TLS file that cannot be read is this node's lack; one that holds no PEM is wrong
    /// everywhere; the rest (etcd unreachable, refused) is this node's trouble.
    fn exit(&self) -> OcfExit {
        match self {
            LeaseError::Unreadable { .. } => OcfExit::ErrInstalled,
            LeaseError::BadPem { .. } => OcfExit::ErrConfigured,
            _ => OcfExit::ErrGeneric,
        }
    }
}

impl Failure for ServiceError {
    fn exit(&self) -> OcfExit {
        match self {
            ServiceError::NotInstalled(_) => OcfExit::ErrInstalled,
            ServiceError::Invalid(_) => OcfExit::ErrConfigured,
            ServiceError::Failed(_) => OcfExit::ErrGeneric,
        }
    }
}

/// Unreadable files and missing programs are this node's lack (5), malformed contents a
/// configuration error (6).
impl Failure for InstallError {
    fn exit(&self) -> OcfExit {
        match self {
            InstallError::Lease(e) => e.exit(),
            InstallError::Service(e) => e.exit(),
        }
    }
}

impl Failure for ClientError {
    fn exit(&self) -> OcfExit {
        OcfExit::ErrGeneric
    }
}

impl Failure for MasterError {
    fn exit(&self) -> OcfExit {
        match self {
            MasterError::Config(e) => e.exit(),
            MasterError::Install(e) => e.exit(),
            MasterError::NoInstance | MasterError::BadName(_) => OcfExit::ErrConfigured,
            MasterError::Unsupported(_) => OcfExit::ErrInstalled,
            MasterError::GuardGone(_) | MasterError::Unhealthy(_) | MasterError::KeyCheck(_) => {
                OcfExit::FailedPromoted
            }
            MasterError::Locked(_)
            | MasterError::Reload(_)
            | MasterError::Write { .. }
            | MasterError::Spawn(_)
            | MasterError::NotPromoted(_)
            | MasterError::Undo { .. }
            | MasterError::StepDown { .. }
            | MasterError::Cleanup(_) => OcfExit::ErrGeneric,
        }
    }
}

impl Failure for ActionError {
    fn exit(&self) -> OcfExit {
        match self {
            ActionError::NotGiven | ActionError::Unimplemented { .. } => OcfExit::ErrUnimplemented,
            ActionError::Panic(_) => OcfExit::ErrGeneric,
        }
    }
}

impl Failure for GuardError {
    /// A configuration the guard cannot read is the agent's mistake (6); every other end of a
    /// guard is this node's (1).
    fn exit(&self) -> OcfExit {
        match self {
            GuardError::Config(_) => OcfExit::ErrConfigured,
            _ => OcfExit::ErrGeneric,
        }
    }
}

impl Failure for CliError {
    fn exit(&self) -> OcfExit {
        match self {
            CliError::Unreadable { .. } => OcfExit::ErrInstalled,
            CliError::Config { .. } | CliError::BadName(_) => OcfExit::ErrConfigured,
            CliError::Install(e) => e.exit(),
            CliError::NoAgent(_) => OcfExit::ErrInstalled,
            CliError::Usage(_) | CliError::Args(_) => OcfExit::ErrArgs,
            CliError::Guard(e) => e.exit(),
            CliError::Refused(_) | CliError::Announce { .. } | CliError::StepDown { .. } => {
                OcfExit::ErrGeneric
            }
            CliError::Etcd(_) => OcfExit::ErrGeneric,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_map_to_err_perm() {
        let e = VipError::Netlink(crate::vip::netlink::NetlinkError::Io {
            op: "add address",
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        });
        let f = Failed::from(e);
        assert_eq!(f.exit, OcfExit::ErrPerm);
        assert!(f.reason.starts_with("insufficient privileges"));
    }

    #[test]
    fn a_namespace_not_entered_is_this_nodes_trouble_or_privileges() {
        let at = |errno| VipError::Namespace {
            name: "blue".into(),
            path: "/run/netns/blue".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        assert_eq!(at(libc::ENOENT).exit(), OcfExit::ErrGeneric);
        assert_eq!(at(libc::EPERM).exit(), OcfExit::ErrPerm);
        assert!(at(libc::EPERM)
            .reason()
            .starts_with("parameter network_namespace=\"blue\": cannot enter /run/netns/blue"));
    }

    #[test]
    fn what_the_node_lacks_is_5_and_what_is_malformed_is_6() {
        let unreadable = InstallError::Lease(LeaseError::Unreadable {
            param: "etcd_cacert",
            path: "/x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
        assert_eq!(unreadable.exit(), OcfExit::ErrInstalled);
        let pem = InstallError::Lease(LeaseError::BadPem {
            param: "etcd_cacert",
            path: "/x".into(),
            what: "certificate",
        });
        assert_eq!(pem.exit(), OcfExit::ErrConfigured);
        assert_eq!(
            InstallError::Service(ServiceError::NotInstalled("no systemctl".into())).exit(),
            OcfExit::ErrInstalled
        );
        // A file with no certificate is the configuration's fault; a start that failed now is
        // this node's, not a reason to stop the resource everywhere.
        assert_eq!(
            ServiceError::Invalid("no PEM".into()).exit(),
            OcfExit::ErrConfigured
        );
        assert_eq!(
            ServiceError::Failed("systemctl start api.service failed".into()).exit(),
            OcfExit::ErrGeneric
        );
    }
}
