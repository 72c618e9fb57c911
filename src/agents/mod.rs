//! The OCF agents: `vip` maps OCF actions onto `vip/`; `master` onto the guard it spawns
//! (`guard/`) and the resource's shared model (`resource/`: its configuration, run directory
//! and the guard's status), with `lease/` for the key and `service/` for what cleanup finds
//! left.
//! Actions return `Result<Outcome, Failed>` (errors become exit codes in crate::failure);
//! `run_ocf` prints the reason line and hands the exit code to main, never letting a panic
//! decide it.

pub mod master;
mod report;
mod score;
pub mod vip;

use std::panic::{self, AssertUnwindSafe};

use crate::ocf::failure::Failed;
use crate::ocf::metadata::{self, AgentInfo};
use crate::ocf::{reason, Action, OcfEnv, OcfExit, Outcome};

/// What goes wrong before or around an agent's own action.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("no action given")]
    NotGiven,
    #[error("action {action:?} is not implemented by {agent}")]
    Unimplemented { action: String, agent: &'static str },
    /// The action panicked: the process answers instead of dying (internal error).
    #[error("internal error (please report): {0}")]
    Panic(String),
}

/// An OCF agent: its description and its action handler.
pub struct AgentDef {
    pub info: &'static AgentInfo,
    pub run: fn(Action, &OcfEnv) -> Result<Outcome, Failed>,
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

/// Runs one OCF invocation: prints its reason line, returns its exit code.
pub fn run_ocf(agent: &AgentDef, action: Option<&str>) -> OcfExit {
    let env = OcfEnv::from_process();
    let outcome = dispatch(agent, action, &env).unwrap_or_else(|f| Outcome {
        exit: f.exit,
        reason: Some(f.reason),
    });
    if let Some(why) = &outcome.reason {
        let (name, action) = (agent.info.name, action.unwrap_or(""));
        match outcome.exit {
            OcfExit::Success => {}
            // Serving, in need of attention: no error.
            OcfExit::DegradedPromoted | OcfExit::Degraded => {
                log::warn!("{name} {action}: {why}")
            }
            _ => log::error!("{name} {action}: {why}"),
        }
        reason::print_reason(&env.exit_reason_prefix, why);
    }
    outcome.exit
}

pub fn dispatch(agent: &AgentDef, action: Option<&str>, env: &OcfEnv) -> Result<Outcome, Failed> {
    let parsed = action
        .and_then(Action::parse)
        .filter(|a| agent.action_names().contains(&a.name()));
    let Some(action) = parsed else {
        eprintln!("{}", usage(agent));
        let why = match action {
            None => ActionError::NotGiven,
            Some(a) => ActionError::Unimplemented {
                action: a.into(),
                agent: agent.info.name,
            },
        };
        return Err(why.into());
    };
    match action {
        Action::MetaData => {
            print!("{}", metadata::render(agent.info, installed_generation()));
            Ok(Outcome::ok())
        }
        Action::Usage => {
            println!("{}", usage(agent));
            Ok(Outcome::ok())
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
pub fn guarded<T>(f: impl FnOnce() -> Result<T, Failed>) -> Result<T, Failed> {
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
        Err(ActionError::Panic(msg).into())
    })
}

impl crate::ocf::failure::Failure for ActionError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            ActionError::NotGiven | ActionError::Unimplemented { .. } => {
                crate::ocf::OcfExit::ErrUnimplemented
            }
            ActionError::Panic(_) => crate::ocf::OcfExit::ErrGeneric,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_generic_error_with_reason() {
        let out = guarded(|| -> Result<Outcome, Failed> { panic!("boom") }).unwrap_err();
        assert_eq!(out.exit, OcfExit::ErrGeneric);
        assert_eq!(out.reason, "internal error (please report): boom");
        assert_eq!(guarded(|| Ok(Outcome::ok())), Ok(Outcome::ok()));
    }

    #[test]
    fn unknown_or_missing_action_is_unimplemented() {
        let env = OcfEnv::default();
        let agent = by_name("vip").unwrap();
        let out = dispatch(agent, Some("reload"), &env).unwrap_err();
        assert_eq!(out.exit, OcfExit::ErrUnimplemented);
        assert!(out.reason.contains("\"reload\""));
        let exit = |r: Result<Outcome, Failed>| r.map_or_else(|f| f.exit, |o| o.exit);
        assert_eq!(exit(dispatch(agent, None, &env)), OcfExit::ErrUnimplemented);
        assert_eq!(
            exit(dispatch(agent, Some("promote"), &env)),
            OcfExit::ErrUnimplemented,
            "vip is not promotable"
        );
    }
}
