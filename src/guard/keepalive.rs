//! The guard's hold on its etcd lease and key while it leads: renewals every TTL/3 (each one
//! moves the fencing deadline and the VIP's kernel lifetime through guard::fence), a check after
//! each renewal that the key still carries our lease, and a watch on the key that survives
//! broken streams and history compaction. Whatever says the key or lease is gone goes to the
//! lead loop as a reason to fence; none of these awaits can delay the fencing thread.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::time::sleep_until;

use super::fence::Fence;
use super::status::Shared;
use super::unix_ms_at;
use crate::lease::clock::boottime;
use crate::lease::etcd::KeyEvent;
use crate::lease::{Etcd, Grant, LeaseClock, LeaseId};

/// Pause before a broken watch is set up again from a fresh read.
const REWATCH_PAUSE: Duration = Duration::from_millis(500);

/// Renews the lease every TTL/3, counted from when the grant was sent (the time it took to
/// get the key and raise the VIP is no reason to renew late). Ends when etcd says the lease or
/// key is gone (told on `lost`), or when the fence refuses a renewal that came too late.
pub async fn renew(
    etcd: Etcd,
    grant: Grant,
    key: String,
    clock: LeaseClock,
    fence: Fence,
    lost: mpsc::Sender<String>,
    shared: Shared,
) {
    let lease = grant.lease;
    let mut ka = etcd.keepalive(lease);
    let interval = clock.keepalive_interval();
    let attempt = clock.renewal_attempt_timeout();
    let mut next = Instant::now() + (grant.sent + interval).saturating_sub(boottime());
    loop {
        sleep_until(next.into()).await;
        let sent = boottime();
        let sent_mono = Instant::now();
        match ka.renew(attempt).await {
            Ok(ttl) if ttl.is_zero() => {
                let _ = lost
                    .send(format!("etcd says lease {lease} has expired"))
                    .await;
                return;
            }
            Ok(ttl) => {
                if !fence.renewed(sent, ttl) {
                    return;
                }
                shared.update(|s| s.last_renewal_unix_ms = Some(unix_ms_at(sent)));
                // Apart from the renewal, so that a slow answer never delays the next one.
                tokio::spawn(confirm(
                    etcd.clone(),
                    key.clone(),
                    lease,
                    interval,
                    lost.clone(),
                ));
                next = sent_mono + interval;
            }
            Err(e) => {
                log::warn!("keepalive of lease {lease}: {e}");
                // Again at once (racing for a member that answers): the slack before the
                // deadline is for retries.
                next = Instant::now() + Duration::from_millis(20);
            }
        }
    }
}

/// Why the key is no longer ours, given the lease it carries now (None: deleted). Monitor
/// reports it after "fenced: ".
fn not_ours(carries: Option<LeaseId>) -> String {
    match carries {
        Some(other) => format!("leader key now carries another lease ({other})"),
        None => "leader key was deleted in etcd".into(),
    }
}

/// Independent of the watch: the key must still carry our lease. A key deleted or
/// overwritten while the watch stream was broken is found within one renewal interval.
async fn confirm(
    etcd: Etcd,
    key: String,
    lease: LeaseId,
    limit: Duration,
    lost: mpsc::Sender<String>,
) {
    if let Ok(Ok(false)) = tokio::time::timeout(limit, etcd.confirm(&key, lease)).await {
        let now = match tokio::time::timeout(limit, etcd.holder(&key)).await {
            Ok(Ok(Some(h))) => Some(h.lease),
            _ => None,
        };
        let _ = lost.send(not_ours(now)).await;
    }
}

/// Watches the key for deletion or another lease. Each (re)start reads the key first and
/// watches from the revision of that read, so a stream broken by a member's restart or by
/// history compaction is replaced by one that misses nothing that matters.
pub async fn watch_ownership(etcd: Etcd, key: String, lease: LeaseId, lost: mpsc::Sender<String>) {
    loop {
        match etcd.holder(&key).await {
            Ok(None) => {
                let _ = lost.send(not_ours(None)).await;
                return;
            }
            Ok(Some(h)) if h.lease != lease => {
                let _ = lost.send(not_ours(Some(h.lease))).await;
                return;
            }
            Ok(Some(h)) => match etcd.watch(&key, h.revision + 1).await {
                Ok(mut w) => loop {
                    match w.next().await {
                        Ok(KeyEvent::Deleted) => {
                            let _ = lost.send(not_ours(None)).await;
                            return;
                        }
                        Ok(KeyEvent::Put { lease: other }) if other != lease => {
                            let _ = lost.send(not_ours(Some(other))).await;
                            return;
                        }
                        Ok(KeyEvent::Put { .. }) => {}
                        Err(e) => {
                            log::warn!("key watch: {e}; watching again from a fresh read");
                            break;
                        }
                    }
                },
                Err(e) => log::warn!("key watch: {e}"),
            },
            Err(e) => log::warn!("reading the leader key: {e}"),
        }
        tokio::time::sleep(REWATCH_PAUSE).await;
    }
}
