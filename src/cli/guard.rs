//! `hamaster guard`: runs a guard in the foreground with the configuration the master agent
//! parsed, as JSON on standard input (never the environment parsed a second time).

use std::time::Duration;

use clap::Args;

use crate::guard::{self as g, GuardArgs, GuardError};
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::resource::config::MasterConfig;

#[derive(Debug, Args)]
pub struct GuardCmd {
    /// Resource name (without clone suffix).
    #[arg(long)]
    pub resource: String,
    /// This node's name, written into the leader key.
    #[arg(long)]
    pub node: String,
    /// How long to wait for the leader key before giving up.
    #[arg(long = "acquire-timeout-ms", default_value_t = 60_000)]
    pub acquire_timeout_ms: u64,
    /// A resident standby (standby=warm): runs the service as a standby and leads when the
    /// agent's promote asks it to (guard::resident).
    #[arg(long)]
    pub standby: bool,
}

/// The agent's configuration is at most this long (it is a few hundred bytes).
const MAX_CONFIG: u64 = 1 << 20;

impl super::Verb for GuardCmd {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init(&format!("hamaster-guard({})", self.resource));
        // The guard logs why it ends; its stderr keeps what it cannot log (a crash).
        run(self).map_err(|e| Failed::from(e).logged())?;
        Ok(OcfExit::Success)
    }
}

fn run(cmd: &GuardCmd) -> Result<(), GuardError> {
    // The configuration the agent parsed and checked, as JSON on standard input: never the
    // inherited environment parsed a second time.
    let mut text = String::new();
    let read = std::io::Read::read_to_string(
        &mut std::io::Read::take(std::io::stdin(), MAX_CONFIG),
        &mut text,
    );
    let config = match read
        .map_err(|e| e.to_string())
        .and_then(|_| MasterConfig::from_json(&text))
    {
        Ok(c) => c,
        Err(e) => {
            let e = GuardError::Config(e);
            log::error!("guard {}: {e}", cmd.resource);
            return Err(e);
        }
    };
    let args = GuardArgs {
        resource: cmd.resource.clone(),
        node: cmd.node.clone(),
        config,
        acquire_for: Duration::from_millis(cmd.acquire_timeout_ms),
        run_dir: crate::runfiles::root(),
        // The agent that spawned this guard ran under Pacemaker's execd, which named it.
        pacemaker_resource: std::env::var("OCF_RESOURCE_INSTANCE")
            .ok()
            .filter(|r| !r.is_empty()),
        holder_down: None,
        campaign: None,
    };
    match cmd.standby {
        true => g::resident::standby(args),
        false => g::run(args),
    }
}
