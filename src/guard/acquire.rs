//! Taking the leader key: a lease, one transaction, a check of key and lease before anything
//! is raised; while another node holds the key, a watch for its deletion (never a timer).

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::time::sleep_until;

use super::status::StepDown;
use super::{Acquired, Guard, GuardError, Interrupt, StopSignals};
use crate::lease::etcd::KeyEvent;
use crate::lease::{Acquire, Etcd, Grant};
use crate::resource::status::Role;

impl Guard {
    /// Takes the leader key, or waits for it to be deleted, until `acquire_for` runs out.
    pub(super) async fn acquire(
        &mut self,
        stepdown: &mut mpsc::Receiver<StepDown>,
        sigterm: &mut StopSignals,
    ) -> Result<Acquired, Interrupt> {
        // checked: a caller's wait must never make the guard panic (and leave its files).
        let until = Instant::now()
            .checked_add(self.args.acquire_for)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        let etcd = Etcd::connect(&self.args.config.etcd, self.op_timeout())
            .await
            .map_err(|e| Interrupt::Failed(e.into()))?;
        let mut last = String::from("no answer from etcd yet");
        let pause = Duration::from_millis(300);
        loop {
            if Instant::now() >= until {
                return Err(Interrupt::Failed(GuardError::NotLeader {
                    secs: self.args.acquire_for.as_secs(),
                    last,
                }));
            }
            let attempt = tokio::select! {
                r = Self::try_once(&etcd, &self.key, &self.args.node, self.clock.ttl) => r,
                Some(reply) = stepdown.recv() => return Err(Interrupt::StepDown(reply)),
                _ = sigterm.recv() => return Err(Interrupt::Signal),
            };
            let watch_from = match attempt {
                Ok(Ok((grant, token))) => return Ok(Acquired { etcd, token, grant }),
                Ok(Err(holder)) => {
                    last = holder.to_string();
                    self.shared.update(|s| s.holder = Some(holder.node.clone()));
                    self.problem(Role::Waiting, last.clone());
                    Some(holder.revision + 1)
                }
                Err(e) => {
                    last = e;
                    self.problem(Role::Acquiring, last.clone());
                    None
                }
            };
            // Wait for the holder's key to go (a watch, never a timer), or retry after a pause.
            let mut watch = match watch_from {
                Some(rev) => etcd.watch(&self.key, rev).await.ok(),
                None => None,
            };
            let wait = async {
                match watch.as_mut() {
                    Some(w) => loop {
                        match w.next().await {
                            Ok(KeyEvent::Deleted) | Err(_) => break,
                            Ok(KeyEvent::Put { .. }) => {}
                        }
                    },
                    None => tokio::time::sleep(pause).await,
                }
            };
            tokio::select! {
                _ = wait => {}
                _ = sleep_until(until.into()) => {}
                Some(reply) = stepdown.recv() => return Err(Interrupt::StepDown(reply)),
                _ = sigterm.recv() => return Err(Interrupt::Signal),
            }
        }
    }

    /// One attempt: grant a lease, try the key in one transaction, verify. Ok(Ok) = ours;
    /// Ok(Err(holder)) = someone else's; Err = etcd trouble.
    async fn try_once(
        etcd: &Etcd,
        key: &str,
        node: &str,
        ttl: Duration,
    ) -> Result<Result<(Grant, i64), crate::lease::Holder>, String> {
        let grant = etcd
            .grant(ttl)
            .await
            .map_err(|e| format!("etcd unreachable: {e}"))?;
        let lease = grant.lease;
        let outcome = etcd.try_acquire(key, node, lease).await;
        match outcome {
            Ok(Acquire::Won { token }) => {
                // Re-check key and lease before acting on them.
                let holder = etcd.holder(key).await.map_err(|e| e.to_string());
                let alive = etcd.ttl_left(lease).await.map_err(|e| e.to_string());
                match (holder, alive) {
                    (Ok(Some(h)), Ok(Some(_)))
                        if h.node == node && h.lease == lease && h.token == token =>
                    {
                        Ok(Ok((grant, token)))
                    }
                    (h, a) => {
                        let _ = etcd.release(key, lease).await;
                        Err(format!(
                            "leader key changed right after it was taken ({h:?}, lease {a:?})"
                        ))
                    }
                }
            }
            Ok(Acquire::Held(h)) => {
                let _ = etcd.revoke(lease).await;
                Ok(Err(h))
            }
            Err(e) => {
                let _ = etcd.revoke(lease).await;
                Err(format!("etcd: {e}"))
            }
        }
    }
}
