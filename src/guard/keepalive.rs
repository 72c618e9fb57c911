//! The guard's etcd side while it leads, as the machine's hands: one keepalive per order (the
//! machine decides when, and what an answer or a failure means), the confirm that the key
//! still carries our lease, and a watch on the key that survives broken streams and history
//! compaction. Every answer goes back into the machine through the fence; none of these
//! awaits can delay the fencing thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::fence::Fence;
use super::machine::Input;
use super::metrics::{Metrics, RenewalFailure};
use crate::lease::etcd::KeyEvent;
use crate::lease::{Etcd, LeaseClock, LeaseId};

/// Pause before a broken watch is set up again from a fresh read.
const REWATCH_PAUSE: Duration = Duration::from_millis(500);

/// Sends one keepalive per send time received, on one stream (moved to another member after
/// a failure), each bounded by the renewal attempt timeout, and answers the machine.
pub async fn renew(
    etcd: Etcd,
    lease: LeaseId,
    clock: LeaseClock,
    fence: Fence,
    mut sends: mpsc::UnboundedReceiver<Duration>,
    metrics: Arc<Metrics>,
) {
    let mut ka = etcd.keepalive(lease);
    let attempt = clock.renewal_attempt_timeout();
    while let Some(sent) = sends.recv().await {
        let began = Instant::now();
        let result = ka.renew(attempt).await;
        let took = began.elapsed();
        let input = match result {
            Ok(ttl) if ttl.is_zero() => {
                metrics.renewal_failed(RenewalFailure::LeaseGone);
                Input::Renewed { sent, ttl }
            }
            Ok(ttl) => {
                metrics.renewals.observe(took);
                Input::Renewed { sent, ttl }
            }
            // etcd-client turns a lease that no longer exists into an error on a fresh
            // stream, not a TTL of 0: it is as final as one.
            Err(e) if e.to_string().contains("lease not found") => {
                metrics.renewal_failed(RenewalFailure::LeaseGone);
                Input::LeaseGone { sent }
            }
            Err(e) => {
                metrics.renewal_failed(if took >= attempt {
                    RenewalFailure::Timeout
                } else {
                    RenewalFailure::Error
                });
                Input::RenewFailed {
                    sent,
                    why: format!("lease {lease}: {e}"),
                }
            }
        };
        fence.handle(input);
    }
}

/// Independent of the watch: the key must still carry our lease. A key deleted or
/// overwritten while the watch stream was broken is found within one renewal interval.
pub async fn confirm(etcd: Etcd, key: String, lease: LeaseId, limit: Duration, fence: Fence) {
    if let Ok(Ok(false)) = tokio::time::timeout(limit, etcd.confirm(&key, lease)).await {
        let now = match tokio::time::timeout(limit, etcd.holder(&key)).await {
            Ok(Ok(Some(h))) => Some(h.lease.0),
            _ => None,
        };
        fence.handle(Input::KeyLost(now));
    }
}

/// Watches the key for deletion or another lease. Each (re)start reads the key first and
/// watches from the revision of that read, so a stream broken by a member's restart or by
/// history compaction is replaced by one that misses nothing that matters.
pub async fn watch_ownership(etcd: Etcd, key: String, lease: LeaseId, fence: Fence) {
    loop {
        match etcd.holder(&key).await {
            Ok(None) => return fence.handle(Input::KeyLost(None)),
            Ok(Some(h)) if h.lease != lease => {
                return fence.handle(Input::KeyLost(Some(h.lease.0)))
            }
            Ok(Some(h)) => match etcd.watch(&key, h.revision + 1).await {
                Ok(mut w) => loop {
                    match w.next().await {
                        Ok(KeyEvent::Deleted) => return fence.handle(Input::KeyLost(None)),
                        Ok(KeyEvent::Put { lease: other }) if other != lease => {
                            return fence.handle(Input::KeyLost(Some(other.0)))
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
