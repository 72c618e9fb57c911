//! `hamaster takeover` and `hamaster release`: the cold-standby path of the runbook. With the
//! cluster stack down, an operator runs the guard in the foreground from a config file: it
//! waits for the old holder's key to go, takes the lease, raises the VIP, starts the service
//! and guards them until `hamaster release` or a signal, then steps down cleanly.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use super::CliError;
use crate::guard::{self as g, GuardArgs};
use crate::lease::leader_key;
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::resource::config::MasterConfig;
use crate::resource::dir::ResourceDir;
use crate::resource::status;

#[derive(Debug, Args)]
pub struct TakeoverArgs {
    /// Resource configuration (TOML: the master agent's parameters; unknown keys are errors).
    #[arg(long)]
    pub config: PathBuf,
    /// Resource name; default: the config file's name without extension.
    #[arg(long)]
    pub resource: Option<String>,
    /// Node name written into the leader key; default: this host's name.
    #[arg(long)]
    pub node: Option<String>,
    /// Seconds to wait for the current holder's key to go before giving up (at most a day).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(0..=MAX_WAIT))]
    pub wait: u64,
    /// Confirms that the cluster stack configured on this host is down on purpose on every
    /// node (runbook step 2); without it, takeover refuses where the CIB names the resource.
    #[arg(long)]
    pub cluster_down: bool,
    /// Confirms that this node, named by the failsafe record of a master that may be holding
    /// through an etcd outage, is down (powered off, fenced): without it, takeover waits while
    /// the record names another node it cannot prove down (docs/runbook.md).
    #[arg(long, value_name = "NODE")]
    pub holder_down: Option<String>,
}

/// Where Pacemaker keeps its configuration on a cluster node, whether it runs or not.
const CIB_ON_DISK: &str = "/var/lib/pacemaker/cib/cib.xml";

/// The longest `--wait` accepted: a day. Beyond it a deadline computed from it could overflow.
const MAX_WAIT: u64 = 86_400;

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Resource name (as given to takeover).
    #[arg(long)]
    pub resource: String,
    /// Seconds to wait for the guard to step down (at most a day).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=MAX_WAIT))]
    pub wait: u64,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Why takeover must not assume the cluster is gone, when this host's CIB names the resource
/// while Pacemaker is not running here: the stack may be starting, stopped here only, or
/// about to be restarted, and would then manage the resource beside us.
fn cluster_configured_with(resource: &str) -> Option<String> {
    let cib = std::fs::read_to_string(CIB_ON_DISK).ok()?;
    let named = [
        format!("id=\"{resource}\""),
        format!("id=\"{resource}-clone\""),
    ];
    named.iter().any(|n| cib.contains(n.as_str())).then(|| {
        format!(
            "the cluster configured on this host ({CIB_ON_DISK}) manages {resource}, though \
             Pacemaker is not running here. If the cluster stack is down on purpose on every \
             node (docs/runbook.md, step 2), say so with --cluster-down"
        )
    })
}

/// Why Pacemaker on this host must keep this resource, if it manages it: two managers of
/// one master is exactly what hamaster exists to prevent.
fn pacemaker_manages(resource: &str) -> Option<String> {
    let out = crate::service::tool_output(
        std::time::Duration::from_secs(10),
        "crm_resource",
        &["--resource", resource, "--locate"],
    );
    out.map(|stdout| {
        let where_ = stdout.trim().replace('\n', "; ");
        format!(
            "Pacemaker on this host is running and manages {resource} ({}). Use pcs (pcs resource move/ban) \
             instead, or stop the cluster stack on this host first (pcs cluster stop)",
            if where_.is_empty() { "not running anywhere".into() } else { where_ }
        )
    })
}

impl super::Verb for TakeoverArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init(&format!(
            "hamaster-takeover({})",
            self.resource.clone().unwrap_or_default()
        ));
        // A guard that ran has logged why it ended; a refusal is said here.
        takeover(self).map_err(|e| match e {
            CliError::Guard(_) => Failed::from(e).logged(),
            e => Failed::from(e),
        })
    }
}

impl super::Verb for ReleaseArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init("hamaster-release");
        release(self).map_err(Failed::from)
    }
}

fn takeover(a: &TakeoverArgs) -> Result<OcfExit, CliError> {
    let (config, resource) =
        super::config::load_as(&a.config, a.resource.as_deref(), MasterConfig::from_values)?;
    ResourceDir::check(&crate::runfiles::root(), &resource).map_err(CliError::BadName)?;
    config.check_installed()?;
    if let Some(why) = pacemaker_manages(&resource) {
        return Err(CliError::Refused(why));
    }
    if let (false, Some(why)) = (a.cluster_down, cluster_configured_with(&resource)) {
        return Err(CliError::Refused(why));
    }
    // Held for the guard's whole life: agent actions on this node wait for it and then fail
    // with a reason naming this takeover.
    let dir = ResourceDir::new(&crate::runfiles::root(), &resource);
    let _lock = dir
        .lock(Duration::from_secs(2), "hamaster takeover")
        .map_err(|e| CliError::Refused(e.to_string()))?;
    let node = a.node.clone().unwrap_or_else(hostname);
    eprintln!(
        "hamaster takeover: {resource} as {node}: waiting up to {} s for the leader key {}; `hamaster release --resource {resource}` or Ctrl-C steps down",
        a.wait,
        leader_key(&config.etcd.prefix, &resource)
    );
    g::run(GuardArgs {
        resource,
        node,
        config,
        acquire_for: Duration::from_secs(a.wait),
        run_dir: crate::runfiles::root(),
        pacemaker_resource: None,
        holder_down: a.holder_down.clone(),
    })?;
    Ok(OcfExit::Success)
}

fn release(a: &ReleaseArgs) -> Result<OcfExit, CliError> {
    let dir = ResourceDir::new(&crate::runfiles::root(), &a.resource);
    let Some(pid) = dir.live_guard() else {
        println!(
            "no guard runs for {} on this host: nothing to release",
            a.resource
        );
        return Ok(OcfExit::Success);
    };
    match status::block_on(status::step_down(
        &dir.socket(),
        Duration::from_secs(a.wait),
    )) {
        Ok(st) => {
            let until = Instant::now() + Duration::from_secs(5);
            while dir.is_guard(pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            println!(
                "released {}: service stopped, VIP removed, leader key given back (fencing token was {})",
                a.resource,
                st.fencing_token.map_or("-".into(), |t| t.to_string())
            );
            Ok(OcfExit::Success)
        }
        Err(source) => Err(CliError::StepDown { pid, source }),
    }
}
