//! The OCF agents: `vip` maps OCF actions onto `vip/`; `master` onto the guard it spawns
//! (`guard/`), with `lease/` for the key and `service/` for what cleanup finds left.
//! This module owns the one mapping from errors to OCF exit codes, and the entry point that
//! turns an invocation into an exit code without ever letting a panic decide it.

pub mod master;
mod score;
pub mod vip;

use std::panic::{self, AssertUnwindSafe};

use crate::ocf::metadata::{self, AgentInfo};
use crate::ocf::{reason, Action, OcfEnv, OcfExit, Outcome};
use crate::params::ConfigError;
use crate::vip::VipError;

/// An OCF agent: its description and its action handler.
pub struct AgentDef {
    pub info: &'static AgentInfo,
    pub run: fn(Action, &OcfEnv) -> Outcome,
}

pub fn by_name(name: &str) -> Option<&'static AgentDef> {
    match name {
        "vip" => Some(&vip::AGENT),
        "master" => Some(&master::AGENT),
        _ => None,
    }
}

impl AgentDef {
    /// The actions the agent implements: those its meta-data advertises, plus usage.
    pub fn action_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for a in self
            .info
            .actions
            .iter()
            .map(|a| a.name)
            .chain([Action::Usage.name()])
        {
            if !names.contains(&a) {
                names.push(a);
            }
        }
        names
    }
}

pub fn usage(agent: &AgentDef) -> String {
    format!(
        "usage: {} {{{}}}",
        agent.info.name,
        agent.action_names().join("|")
    )
}

/// Runs one OCF invocation and returns the process exit code.
pub fn run_ocf(agent: &AgentDef, action: Option<&str>) -> i32 {
    let env = OcfEnv::from_process();
    let outcome = dispatch(agent, action, &env);
    if let Some(why) = &outcome.reason {
        if outcome.exit != OcfExit::Success {
            log::error!("{} {}: {why}", agent.info.name, action.unwrap_or(""));
        }
        reason::print_reason(&env.exit_reason_prefix, why);
    }
    outcome.exit.code()
}

pub fn dispatch(agent: &AgentDef, action: Option<&str>, env: &OcfEnv) -> Outcome {
    let parsed = action
        .and_then(Action::parse)
        .filter(|a| agent.action_names().contains(&a.name()));
    let Some(action) = parsed else {
        eprintln!("{}", usage(agent));
        let why = match action {
            None => "no action given".to_string(),
            Some(a) => format!("action {a:?} is not implemented by {}", agent.info.name),
        };
        return Outcome::with_reason(OcfExit::ErrUnimplemented, why);
    };
    match action {
        Action::MetaData => {
            print!("{}", metadata::render(agent.info, installed_generation()));
            Outcome::ok()
        }
        Action::Usage => {
            println!("{}", usage(agent));
            Outcome::ok()
        }
        _ => guarded(|| (agent.run)(action, env)),
    }
}

/// The installed Pacemaker's generation, told by its CIB schemas where Pacemaker looks for
/// them (PCMK_schema_directory, else /usr/share/pacemaker): before 2.1 when the newest schema
/// is older than pacemaker-3.7. pcs copies the meta-data's monitor roles into the CIB, which
/// the older schema would refuse; Pacemaker 2.0 knows no reload-agent.
pub fn installed_generation() -> metadata::Generation {
    let dir = std::env::var_os("PCMK_schema_directory")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/share/pacemaker".into());
    let newest = std::fs::read_dir(dir).ok().and_then(|entries| {
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let v = name.strip_prefix("pacemaker-")?.strip_suffix(".rng")?;
                let (major, minor) = v.split_once('.')?;
                Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
            })
            .max()
    });
    match newest {
        Some(v) if v < (3, 7) => metadata::Generation::Pacemaker20,
        _ => metadata::Generation::Pacemaker21,
    }
}

/// Runs `f`; a panic becomes OCF_ERR_GENERIC with its message as the reason.
pub fn guarded(f: impl FnOnce() -> Outcome) -> Outcome {
    let previous = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(previous);
    result.unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Outcome::with_reason(
            OcfExit::ErrGeneric,
            format!("internal error (please report): {msg}"),
        )
    })
}

impl From<ConfigError> for Outcome {
    fn from(e: ConfigError) -> Outcome {
        Outcome::with_reason(OcfExit::ErrConfigured, e.to_string())
    }
}

/// The one place where VIP failures become exit codes.
impl From<VipError> for Outcome {
    fn from(e: VipError) -> Outcome {
        let exit = match &e {
            VipError::Config(_) => OcfExit::ErrConfigured,
            VipError::NotHere(_) => OcfExit::ErrGeneric,
            VipError::Netlink(n) if n.is_permission() => OcfExit::ErrPerm,
            VipError::Announce(a) if a.is_permission() => OcfExit::ErrPerm,
            VipError::Netlink(_)
            | VipError::Announce(_)
            | VipError::Conflict { .. }
            | VipError::Duplicate { .. }
            | VipError::DadFailed { .. }
            | VipError::DadTimeout { .. }
            | VipError::Abandoned { .. } => OcfExit::ErrGeneric,
        };
        let why = if exit == OcfExit::ErrPerm {
            format!("insufficient privileges (needs root): {e}")
        } else {
            e.to_string()
        };
        Outcome::with_reason(exit, why)
    }
}

/// The one place where a node's missing pieces become exit codes: unreadable files and
/// missing programs are this node's lack (5), malformed contents a configuration error (6).
impl From<crate::resource::config::InstallError> for Outcome {
    fn from(e: crate::resource::config::InstallError) -> Outcome {
        use crate::lease::LeaseError;
        use crate::resource::config::InstallError;
        use crate::service::ServiceError;
        let exit = match &e {
            InstallError::Lease(LeaseError::Unreadable { .. })
            | InstallError::Service(ServiceError::NotInstalled(_)) => OcfExit::ErrInstalled,
            InstallError::Lease(LeaseError::BadPem { .. })
            | InstallError::Service(ServiceError::Failed(_)) => OcfExit::ErrConfigured,
            InstallError::Lease(_) => OcfExit::ErrGeneric,
        };
        Outcome::with_reason(exit, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_generic_error_with_reason() {
        let out = guarded(|| panic!("boom"));
        assert_eq!(out.exit, OcfExit::ErrGeneric);
        assert_eq!(
            out.reason.as_deref(),
            Some("internal error (please report): boom")
        );
        assert_eq!(guarded(Outcome::ok).exit, OcfExit::Success);
    }

    #[test]
    fn unknown_or_missing_action_is_unimplemented() {
        let env = OcfEnv::default();
        let agent = by_name("vip").unwrap();
        let out = dispatch(agent, Some("reload"), &env);
        assert_eq!(out.exit, OcfExit::ErrUnimplemented);
        assert!(out.reason.unwrap().contains("\"reload\""));
        assert_eq!(dispatch(agent, None, &env).exit, OcfExit::ErrUnimplemented);
        assert_eq!(
            dispatch(agent, Some("promote"), &env).exit,
            OcfExit::ErrUnimplemented,
            "vip is not promotable"
        );
    }

    #[test]
    fn permission_errors_map_to_err_perm() {
        let e = VipError::Netlink(crate::vip::netlink::NetlinkError::Io {
            op: "add address",
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        });
        let out = Outcome::from(e);
        assert_eq!(out.exit, OcfExit::ErrPerm);
        assert!(out.reason.unwrap().starts_with("insufficient privileges"));
    }
}
