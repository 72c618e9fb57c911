//! The guard's step-down done by someone else, after the guard is gone (killed, crashed): the
//! master agent's demote and stop, and a campaign that starts where an earlier one died. What
//! the guard recorded in the resource directory (state.json) says what may still run.

use std::time::{Duration, Instant};

use crate::lease::{Etcd, LeaseId};
use crate::presence::Presence;
use crate::resource::config::MasterConfig;
use crate::resource::dir::ResourceDir;
use crate::resource::status;
use crate::service::stop::stop_left;
use crate::service::ServiceSpec;
use crate::vip::{up, VipConfig};

fn left(until: Instant) -> Duration {
    until.saturating_duration_since(Instant::now())
}

/// The guard's step-down done by another process (the agent, a campaign starting), within the
/// budget: VIP, service, then — only when both are confirmed down — key and lease. Every step is tried; only what is proven still up
/// at the end is a failure. Nothing running (no state, a unit that is not loaded) is success.
pub fn after_guard(
    dir: &ResourceDir,
    resource: &str,
    cfg: Option<&MasterConfig>,
    fallback_vips: Vec<VipConfig>,
    until: Instant,
) -> Result<(), Vec<String>> {
    let state = dir.load();
    log::info!(
        "cleaning up after the guard of {} (recorded state: {state:?})",
        resource
    );
    let mut failures = Vec::new();
    // The VIPs first, as the guard does it: every one tried, those the parameters name and
    // those the guard recorded as it added them (the parameters may have changed since).
    let vips: Vec<VipConfig> = match cfg {
        Some(c) => c.vips().cloned().collect(),
        None => fallback_vips,
    };
    let recorded = match &state {
        Some(s) if s.vip_added => s.vips.clone(),
        _ => Vec::new(),
    };
    for v in vips {
        let ip = v.ip;
        if let Err(e) = up::take_down(v, &crate::runfiles::root()) {
            failures.push(format!("removing the VIP {ip}: {e}"));
        }
    }
    if !recorded.is_empty() {
        match crate::vip::netlink::Rtnl::open() {
            Ok(mut rtnl) => {
                for r in recorded {
                    let addr = crate::vip::netlink::Addr::on(r.index, r.ip, r.prefix);
                    // Gone already (removed above, or by its lifetime) counts as removed.
                    if let Err(e) = rtnl.del_address(&addr) {
                        failures.push(format!("removing the VIP {}: {e}", r.ip));
                    }
                }
            }
            Err(e) => failures.push(format!("removing the recorded VIPs: {e}")),
        }
    }
    // The unit the configuration names, or (no usable configuration) the one the guard
    // recorded: a unit that may run is never left behind for want of parameters.
    let unit = match cfg.map(|c| &c.service) {
        Some(ServiceSpec::Systemd { unit }) => Some(unit.clone()),
        Some(ServiceSpec::Command { .. }) => None,
        None => state.as_ref().and_then(|s| s.unit.clone()),
    };
    // The one way to stop a service, by the machine's grace; a command only when its
    // recorded leader proves the group ours (stop_orphan).
    let left_now = left(until);
    let grace = crate::service::stop::grace(left_now);
    let limit = left_now.saturating_sub(Duration::from_millis(500));
    let recorded = state.as_ref().and_then(|s| s.service);
    let stopped = status::block_on(stop_left(unit, recorded, grace, limit));
    match stopped {
        Some((what, Presence::Present)) => failures.push(format!("{what} is still running")),
        Some((what, Presence::CannotTell(why))) => {
            failures.push(format!("cannot tell whether {what} stopped: {why}"))
        }
        Some((_, Presence::Absent)) | None => {}
    }
    if !failures.is_empty() {
        // Something may still serve: the lease is not shortened, it runs out by itself.
        return Err(failures);
    }
    if let (Some(c), Some((lease, s))) = (cfg, state.as_ref().and_then(|s| Some((s.lease_id?, s))))
    {
        // The key and record the guard took, as it recorded them.
        let key = s.key.clone();
        let record_key = crate::lease::scope_of(&key, resource)
            .map(|scope| crate::failsafe::record_key(scope, resource))
            .unwrap_or_default();
        let record = s.record_revision.map(|rev| (record_key.as_str(), rev));
        let limit = left(until).min(Duration::from_secs(4));
        let released = status::block_on(async {
            tokio::time::timeout(limit, async {
                let etcd = Etcd::connect(&c.etcd, Duration::from_secs(2).min(limit)).await?;
                etcd.release(&key, LeaseId(lease), record).await
            })
            .await
        });
        if !matches!(released, Ok(Ok(_))) {
            // VIP and service are down: an unreleased key only delays the next leader until
            // the lease expires.
            log::warn!(
                "could not release {key} ({released:?}); it expires with lease {}",
                LeaseId(lease)
            );
        }
    }
    dir.remove_guard_files();
    Ok(())
}
