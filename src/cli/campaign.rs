//! `hamaster campaign`: the master elected by the lease alone, without Pacemaker. On every
//! node (the `hamaster-campaign@RESOURCE` unit), from the same TOML as the cold standby: a
//! candidate watches the leader key, takes it when it is free, and leads with the guard of a
//! promoted master (same machine, same rules, same VIP and service); when its leadership ends
//! (fenced, or a failure it would have told Pacemaker), it becomes a candidate again. There
//! is no second witness: an etcd outage fences (etcd_outage=hold is refused).

use std::time::Duration;

use clap::Args;

use super::config::ResourceFile;
use super::takeover::{cib_on_disk_names, pacemaker_manages, CIB_ON_DISK};
use super::CliError;
use crate::guard::{self as g, GuardArgs};
use crate::lease::config::EtcdOutage;
use crate::lease::leader_key;
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::resource::dir::ResourceDir;

#[derive(Debug, Args)]
pub struct CampaignArgs {
    #[command(flatten)]
    pub file: ResourceFile,
}

/// The budget of the clean-up after an earlier campaign, before the first round.
const CLEANUP: Duration = Duration::from_secs(60);

/// How long one round waits for the key before it stands anew: a day (the wait is a watch).
const ROUND: Duration = Duration::from_secs(86_400);

impl super::Verb for CampaignArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init(&format!("hamaster-campaign({})", self.file.name()));
        // A guard that ran has logged why it ended; a refusal is said here.
        campaign(self).map_err(|e| match e {
            CliError::Guard(_) => Failed::from(e).logged(),
            e => Failed::from(e),
        })
    }
}

fn campaign(a: &CampaignArgs) -> Result<OcfExit, CliError> {
    let (mut config, resource) = a.file.load_cold()?;
    ResourceDir::check(&crate::runfiles::root(), &resource).map_err(CliError::BadName)?;
    let refuse_config = |detail: String| CliError::Config {
        path: a.file.config.clone(),
        detail,
    };
    // Without Pacemaker and corosync there is nothing to prove the cluster whole through an
    // etcd outage: the lease is the only witness.
    match config.etcd.outage {
        EtcdOutage::Hold => {
            return Err(refuse_config(
                "etcd_outage=hold: a campaign has no second witness (no Pacemaker to fence a \
                 holder): an etcd outage fences; set etcd_outage=fence or leave it out"
                    .into(),
            ))
        }
        EtcdOutage::Auto | EtcdOutage::Fence => config.etcd.outage = EtcdOutage::Fence,
    }
    config.check_installed()?;
    let scope = config.etcd.scope().map_err(refuse_config)?;
    // One manager per master: a restart cannot mend this, so it is the configuration's (6).
    if let Some(why) = pacemaker_manages(&resource) {
        return Err(refuse_config(why));
    }
    if cib_on_disk_names(&resource) {
        return Err(refuse_config(format!(
            "the cluster configured on this host ({CIB_ON_DISK}) manages {resource}: a \
             campaign is for hosts where no cluster does (one manager per master)"
        )));
    }
    // Held for the campaign's whole life: agent actions on this node wait for it and then
    // fail with a reason naming it.
    let dir = ResourceDir::new(&crate::runfiles::root(), &resource);
    let _lock = dir
        .lock(Duration::from_secs(2), "hamaster campaign")
        .map_err(|e| CliError::Refused(e.to_string()))?;
    // An earlier campaign here may have died leading (killed, crashed): what it recorded, and
    // the unit the file names, are stopped before this one stands. Something that may still
    // serve keeps it from standing (the lease runs out; systemd tries again).
    let until = std::time::Instant::now() + CLEANUP;
    crate::resource::cleanup::after_guard(&dir, &resource, Some(&config), Vec::new(), until)
        .map_err(|left| {
            CliError::Refused(format!(
                "an earlier guard of {resource} on this node left something running: {}",
                left.join("; ")
            ))
        })?;
    let node = a.file.node();
    eprintln!(
        "hamaster campaign: {resource} as {node}: a candidate for the leader key {}; SIGTERM \
         (systemctl stop) or `hamaster release --resource {resource}` steps down and ends it",
        leader_key(&scope, &resource)
    );
    g::campaign(GuardArgs {
        resource,
        node,
        config,
        acquire_for: ROUND,
        run_dir: crate::runfiles::root(),
        pacemaker_resource: None,
        holder_down: None,
        // It serves within what promote would give it, or steps down.
        campaign: Some(crate::agents::master::DEFAULT_PROMOTE_TIMEOUT),
    })?;
    Ok(OcfExit::Success)
}
