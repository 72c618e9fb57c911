//! Keeps etcd's raft leader off the master's node while it leads (etcd_move_leader). A crash
//! of a node that hosts both the master and the etcd leader costs an etcd election on top of
//! the failover, and the crashed master's lease lives on through that election: the new
//! master waits for both. Moving the leadership away right after promote, and again whenever
//! etcd elects a member here, takes that cost out of the next crash.

use std::net::IpAddr;
use std::time::Duration;

use crate::lease::etcd::{Etcd, LeaseError};
use crate::vip::netlink::Rtnl;

/// How often the placement is checked while leading (one status and one member-list request).
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Every address of this node's network namespace (none where netlink cannot say).
pub(super) fn local_addresses() -> Vec<IpAddr> {
    let Ok(mut rtnl) = Rtnl::open() else {
        return Vec::new();
    };
    [false, true]
        .into_iter()
        .flat_map(|v6| rtnl.addresses(v6).unwrap_or_default())
        .map(|a| a.ip)
        .collect()
}

/// Checks now and every CHECK_EVERY until aborted. Trouble is logged, never fatal: leader
/// placement shortens a failover, it does not decide one. etcd refusing the move to our user
/// (3.4.23 and 3.5.16 let etcd_user make it; another release may keep it to root): said once,
/// and no more tries.
pub async fn keep_leader_elsewhere(etcd: Etcd, resource: String, node: String, prefix: String) {
    loop {
        let local = local_addresses();
        // The nodes of every master under this prefix: never a target (see move_leader_off).
        let masters = match etcd.leading_nodes(&prefix).await {
            Ok(nodes) => nodes,
            Err(e @ LeaseError::Refused { .. }) => {
                // A role narrower than the prefix: the other masters cannot be seen, and a
                // move could pass the leadership back and forth between them.
                log::warn!(
                    "guard {resource}: etcd_move_leader is on, but the masters under {prefix} \
                     cannot be listed ({e}); not moving etcd's leader"
                );
                return;
            }
            Err(e) => {
                log::warn!("guard {resource}: cannot tell where the masters are: {e}");
                tokio::time::sleep(CHECK_EVERY).await;
                continue;
            }
        };
        match etcd.move_leader_off(&node, &local, &masters).await {
            Ok(Some(to)) => log::info!(
                "guard {resource}: etcd's leader was on this node; moved leadership to {to}"
            ),
            Ok(None) => {}
            Err(e @ LeaseError::Refused { .. }) => {
                log::warn!("guard {resource}: etcd_move_leader is on, but {e}; not trying again");
                return;
            }
            Err(e) => log::warn!("guard {resource}: cannot move etcd's leader off this node: {e}"),
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}
