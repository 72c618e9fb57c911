//! The guard's etcd side while it leads, as the machine's hands: one keepalive per order (the
//! machine decides when, and what an answer or a failure means), the confirm that the key
//! still carries our lease, and a watch on the key that survives broken streams and history
//! compaction. Every answer goes back into the machine through the fence; none of these
//! awaits can delay the fencing thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::answers;
use super::fence::Fence;
use super::metrics::{Metrics, RenewalFailure};
use crate::lease::{Etcd, LeaseClock, LeaseId, RenewError};

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
        match &result {
            Ok(ttl) if ttl.is_zero() => metrics.renewal_failed(RenewalFailure::LeaseGone),
            Ok(_) => metrics.renewals.observe(began.elapsed()),
            Err(RenewError::LeaseNotFound(_)) => metrics.renewal_failed(RenewalFailure::LeaseGone),
            Err(RenewError::TimedOut(_)) => metrics.renewal_failed(RenewalFailure::Timeout),
            Err(RenewError::Failed(_)) => metrics.renewal_failed(RenewalFailure::Error),
        }
        fence.handle(answers::renewal(lease, sent, &result));
    }
}

/// Independent of the watch: the key must still carry our lease. A key deleted or
/// overwritten while the watch stream was broken is found within one renewal interval.
pub async fn confirm(etcd: Etcd, key: String, lease: LeaseId, limit: Duration, fence: Fence) {
    let still_ours = match tokio::time::timeout(limit, etcd.confirm(&key, lease)).await {
        Ok(r) => r,
        Err(_) => return,
    };
    let holder = match still_ours {
        Ok(false) => match tokio::time::timeout(limit, etcd.holder(&key)).await {
            Ok(Ok(Some(h))) => Some(h.lease),
            _ => None,
        },
        _ => None,
    };
    if let Some(input) = answers::confirm(&still_ours, holder) {
        fence.handle(input);
    }
}

/// A warning repeated while etcd is out is said once, then at most this often.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Whether a warning may be said now (once, then every WARN_EVERY).
fn due(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|t| now < t + WARN_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

/// Watches the key for deletion or another lease. Each (re)start reads the key first and
/// watches from the revision of that read, so a stream broken by a member's restart or by
/// history compaction is replaced by one that misses nothing that matters.
pub async fn watch_ownership(etcd: Etcd, key: String, lease: LeaseId, fence: Fence) {
    let mut warned = None;
    loop {
        let read = etcd.holder(&key).await;
        let seen = read.as_ref().map(|h| h.as_ref().map(|h| h.lease));
        if let Some(loss) = answers::read_before_watch(lease, seen) {
            return fence.handle(loss);
        }
        match read {
            Ok(Some(h)) => match etcd.watch(&key, h.revision + 1).await {
                Ok(mut w) => loop {
                    match w.next().await {
                        Ok(event) => {
                            if let Some(loss) = answers::watched(lease, &event) {
                                return fence.handle(loss);
                            }
                        }
                        Err(e) => {
                            if due(&mut warned) {
                                log::warn!("key watch: {e}; watching again from a fresh read");
                            }
                            break;
                        }
                    }
                },
                Err(e) if due(&mut warned) => log::warn!("key watch: {e}"),
                Err(_) => {}
            },
            Ok(None) => {}
            Err(e) if due(&mut warned) => log::warn!("reading the leader key: {e}"),
            Err(_) => {}
        }
        tokio::time::sleep(REWATCH_PAUSE).await;
    }
}
