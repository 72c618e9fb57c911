//! While it leads, the guard asks every etcd member's status every 10 s: the alarms they
//! report (NOSPACE, CORRUPT: no node could take the key while one is raised) and the largest
//! database against its quota (etcd 3.6 and later say the quota). Shown in `hamaster status`,
//! the metrics, and the promoted monitor's reason (OCF_DEGRADED_PROMOTED: the master serves,
//! but a failover could not happen); a change is logged once.

use std::time::Duration;

use super::status::Shared;
use crate::lease::etcd::Etcd;
use crate::resource::status::EtcdSpace;

/// How often the members are asked (one status request each, at once).
pub const LOOK_EVERY: Duration = Duration::from_secs(10);

/// Looks now and every LOOK_EVERY until aborted. Members that do not answer leave the last
/// answer as it was: an outage is the lease's business, not this look's.
pub async fn watch(etcd: Etcd, shared: Shared, resource: String) {
    let mut said: Option<String> = None;
    loop {
        if let Some(space) = EtcdSpace::of(&etcd.member_answers().await) {
            let trouble = space.trouble();
            if trouble != said {
                match &trouble {
                    Some(t) => log::warn!("guard {resource}: {t}"),
                    None => log::info!(
                        "guard {resource}: etcd's space is fine again ({})",
                        space.text()
                    ),
                }
                said = trouble;
            }
            shared.update(|s| s.etcd_space = Some(space));
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
