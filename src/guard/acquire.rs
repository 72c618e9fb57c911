//! Taking the leader key: a lease, one transaction, a check of key and lease before anything
//! is raised; while another node holds the key, a watch for its deletion (never a timer).
//! A failsafe record naming another node (a master that may be holding through an etcd
//! outage) is honoured by the takeover rule (failsafe::clearance) before the key is taken;
//! the transaction that takes the key writes this node's own record (etcd_outage=hold, with
//! a corosync to prove the cluster whole) or deletes the old one, only while the record is
//! still as read.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::time::sleep_until;

use super::machine::HoldPlan;
use super::machine::Rules;
use super::status::StepDown;
use super::{Acquired, Guard, GuardError, Interrupt, StopSignals};
use crate::failsafe::clearance::{self, Clearance, Facts, Fencing, Outside};
use crate::failsafe::{self as fs, witness, Home, Record};
use crate::lease::clock::{boottime, unix_ms};
use crate::lease::config::EtcdOutage;
use crate::lease::etcd::KeyEvent;
use crate::lease::{Acquire, Etcd, Grant, RecordTake};
use crate::resource::status::Role;

/// How often the takeover rule is looked at again while it says wait or blocked.
const CLEARANCE_POLL: Duration = Duration::from_millis(500);

/// The failsafe record as this guard found it, and what the takeover rule made of it.
struct Found {
    /// The record's mod revision (0: absent), for the transaction's compare.
    seen: i64,
    record: Option<Record>,
    /// This node's corosync (for our own record's nodelist).
    cluster: Result<witness::Cluster, String>,
    /// Whether this guard may hold through an etcd outage (etcd_outage, corosync, fencing),
    /// and on proofs of what.
    may_hold: Option<HoldPlan>,
    clearance: Clearance,
}

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
        if let Ok(mut slot) = self.shared.etcd.lock() {
            *slot = Some(etcd.clone());
        }
        let mut last = String::from("no answer from etcd yet");
        let pause = Duration::from_millis(300);
        let mut outside = Outside::default();
        loop {
            if Instant::now() >= until {
                return Err(Interrupt::Failed(GuardError::NotLeader {
                    secs: self.args.acquire_for.as_secs(),
                    last,
                }));
            }
            let attempt = tokio::select! {
                r = self.try_once(&etcd, &mut outside) => r,
                Some(reply) = stepdown.recv() => return Err(Interrupt::StepDown(reply)),
                _ = sigterm.recv() => return Err(Interrupt::Signal),
            };
            // What to wait for before the next attempt: the holder's key to go (a watch), or
            // the takeover rule to look again, or a pause after etcd trouble.
            let (watch_from, poll) = match attempt {
                Ok(Ok((grant, token, record))) => {
                    return Ok(Acquired {
                        etcd,
                        token,
                        grant,
                        record,
                    })
                }
                Ok(Err(Busy::Held(holder, record_names_other))) => {
                    last = holder.to_string();
                    self.shared.update(|s| s.holder = Some(holder.node.clone()));
                    self.problem(Role::Waiting, last.clone());
                    // While a record names another node, its membership is watched meanwhile:
                    // the time it has been out counts from the first look.
                    (
                        Some(holder.revision + 1),
                        record_names_other.then_some(CLEARANCE_POLL),
                    )
                }
                Ok(Err(Busy::NotClear(why, wait))) => {
                    last = why;
                    self.problem(Role::Waiting, last.clone());
                    (None, Some(wait))
                }
                Ok(Err(Busy::RecordChanged)) => (None, Some(Duration::ZERO)),
                Err(e) => {
                    last = e;
                    self.problem(Role::Acquiring, last.clone());
                    (None, None)
                }
            };
            let mut watch = match watch_from {
                Some(rev) => etcd.watch(&self.key, rev).await.ok(),
                None => None,
            };
            let wait = async {
                let polled = async {
                    match poll {
                        Some(p) => tokio::time::sleep(p).await,
                        None => std::future::pending().await,
                    }
                };
                match watch.as_mut() {
                    Some(w) => {
                        let deleted = async {
                            loop {
                                match w.next().await {
                                    Ok(KeyEvent::Deleted) | Err(_) => break,
                                    Ok(KeyEvent::Put { .. }) => {}
                                }
                            }
                        };
                        tokio::select! { _ = deleted => {}, _ = polled => {} }
                    }
                    None if poll.is_some() => polled.await,
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

    /// The failsafe record, this node's corosync and Pacemaker's word on the record's node:
    /// what the takeover rule says now.
    async fn look_at_record(&self, etcd: &Etcd, outside: &mut Outside) -> Result<Found, String> {
        let key = fs::record_key(&self.scope, &self.args.resource);
        let outage = self.args.config.etcd.outage;
        // The record, this node's corosync and the cluster's fencing (whatever the policy: the
        // takeover rule weighs it too), side by side.
        let fencing = async {
            tokio::task::spawn_blocking(fs::pacemaker::fencing)
                .await
                .ok()
                .flatten()
        };
        let (read, cluster, fencing) =
            tokio::join!(etcd.read_record(&key), witness::ask(fs::ASK_LIMIT), fencing);
        let read = read.map_err(|e| format!("etcd: {e}"))?;
        // auto holds only where a fence ends the node's processes: a fabric device's fence
        // leaves a holder running, its corosync still whole.
        let power = fencing.as_ref().is_some_and(Fencing::ends_processes);
        let may_hold = match (&cluster, outage) {
            (Ok(c), EtcdOutage::Hold) => Some(c),
            (Ok(c), EtcdOutage::Auto) if power => Some(c),
            _ => None,
        }
        .map(|c| HoldPlan {
            nodelist: c.ids(),
            power_fencing: outage == EtcdOutage::Auto,
            pacemaker: self.args.pacemaker_resource.is_some(),
        });
        let record = read.value.as_deref().and_then(Record::from_json);
        if read.value.is_some() && record.is_none() {
            log::warn!(
                "guard {}: {key} holds no failsafe record: taken as none",
                self.args.resource
            );
        }
        let names_other = record.as_ref().is_some_and(|r| r.node != self.args.node);
        let now = boottime();
        let (seen, outside_since) = match (&record, names_other) {
            (Some(r), true) => {
                let holder = r.node.clone();
                let resource = self
                    .args
                    .pacemaker_resource
                    .as_deref()
                    .map(|r| r.split(':').next().unwrap_or(r).to_string());
                let seen = tokio::task::spawn_blocking(move || {
                    fs::pacemaker::node_seen(resource.as_deref(), &holder)
                });
                let out = cluster.as_ref().ok().and_then(|c| {
                    let member = clearance::whereabouts(r, c, &Rules::all()).ok()?;
                    outside.look(c, member, now)
                });
                (seen.await.unwrap_or_default(), out)
            }
            _ => (Default::default(), None),
        };
        let membership_time = cluster
            .as_ref()
            .ok()
            .and_then(|c| c.membership_time)
            .unwrap_or(crate::lease::cluster::FALLBACK_MEMBERSHIP_TIME);
        let facts = Facts {
            me: &self.args.node,
            record: record.as_ref(),
            cluster: cluster.as_ref().map_err(String::as_str),
            holder: seen,
            fencing: fencing.as_ref(),
            outside_since,
            now,
            membership_time,
            confirmed_down: self.args.holder_down.as_deref(),
        };
        let clearance = clearance::clearance(&facts, &Rules::all());
        Ok(Found {
            seen: read.revision,
            record,
            cluster,
            may_hold,
            clearance,
        })
    }

    /// The takeover rule's word on a failsafe record (`names_other`: it names another node):
    /// Ok(Ok) when this guard may try for the key; Ok(Err) not now; Err etcd trouble.
    async fn cleared(
        &self,
        etcd: &Etcd,
        found: &Found,
        names_other: bool,
    ) -> Result<Result<(), Busy>, String> {
        if names_other && !matches!(found.clearance, Clearance::Clear(_)) {
            // A key still held says more than the record: its holder, as always.
            if let Some(h) = etcd
                .holder(&self.key)
                .await
                .map_err(|e| format!("etcd: {e}"))?
            {
                return Ok(Err(Busy::Held(h, true)));
            }
        }
        match &found.clearance {
            Clearance::Clear(why) if names_other => {
                log::info!(
                    "guard {}: failsafe record of {}: {why}",
                    self.args.resource,
                    found.record.as_ref().map_or("", |r| r.node.as_str())
                );
            }
            Clearance::Clear(_) => {}
            Clearance::Wait { until, why } => {
                let left = until.saturating_sub(boottime());
                return Ok(Err(Busy::NotClear(why.clone(), left.min(CLEARANCE_POLL))));
            }
            Clearance::Blocked(why) => {
                return Ok(Err(Busy::NotClear(why.clone(), CLEARANCE_POLL)));
            }
        }
        Ok(Ok(()))
    }

    /// What the key's transaction does with the failsafe records: our own where this guard
    /// may hold (else the old one goes), and the mark of who took the key last.
    fn record_take(&self, found: &Found, lease: crate::lease::LeaseId) -> RecordTake {
        let node = &self.args.node;
        // Our own record where this guard may hold; else the old one goes.
        let ours = match (&found.may_hold, &found.cluster) {
            (Some(_), Ok(c)) => Some(
                Record {
                    node: node.clone(),
                    lease: lease.to_string(),
                    nodes: c.nodelist.iter().map(|n| n.name.clone()).collect(),
                    written_unix_ms: unix_ms(),
                    home: Some(Home::of(c)),
                }
                .to_json(),
            ),
            _ => None,
        };
        let mark = crate::lease::Seen {
            node: node.clone(),
            at_unix_ms: unix_ms(),
            by: match (&self.args.pacemaker_resource, self.args.campaign.is_some()) {
                (Some(_), _) => "pacemaker",
                (None, true) => "campaign",
                (None, false) => "takeover",
            }
            .into(),
        };
        RecordTake {
            key: fs::record_key(&self.scope, &self.args.resource),
            seen: found.seen,
            ours,
            mark: (
                crate::lease::seen_key(&self.scope, &self.args.resource),
                mark.to_json(),
            ),
        }
    }

    /// One attempt: the takeover rule, then a lease, the key and our failsafe record in one
    /// transaction, and a check. Ok(Ok) = ours (with our record's revision, when written);
    /// Ok(Err) = not now; Err = etcd trouble.
    async fn try_once(
        &self,
        etcd: &Etcd,
        outside: &mut Outside,
    ) -> Result<Result<(Grant, i64, Option<(i64, HoldPlan)>), Busy>, String> {
        let found = self.look_at_record(etcd, outside).await?;
        let names_other = found
            .record
            .as_ref()
            .is_some_and(|r| r.node != self.args.node);
        if let Err(busy) = self.cleared(etcd, &found, names_other).await? {
            return Ok(Err(busy));
        }
        let (key, node, ttl) = (&self.key, &self.args.node, self.clock.ttl);
        let grant = etcd
            .grant(ttl)
            .await
            .map_err(|e| format!("etcd unreachable: {e}"))?;
        let lease = grant.lease;
        let hold = found.may_hold.clone();
        let take = self.record_take(&found, lease);
        let legacy = self.legacy_key();
        let outcome = etcd.try_acquire(key, &legacy, node, lease, &take).await;
        match outcome {
            Ok(Acquire::Won { token }) => {
                // Re-check key and lease before acting on them.
                let holder = etcd.holder(key).await.map_err(|e| e.to_string());
                let alive = etcd.ttl_left(lease).await.map_err(|e| e.to_string());
                match (holder, alive) {
                    (Ok(Some(h)), Ok(Some(_)))
                        if &h.node == node && h.lease == lease && h.token == token =>
                    {
                        Ok(Ok((grant, token, hold.map(|h| (token, h)))))
                    }
                    (h, a) => {
                        let _ = etcd.release(key, lease, None).await;
                        Err(format!(
                            "leader key changed right after it was taken ({h:?}, lease {a:?})"
                        ))
                    }
                }
            }
            Ok(Acquire::Held(h)) => {
                let _ = etcd.revoke(lease).await;
                Ok(Err(Busy::Held(h, names_other)))
            }
            Ok(Acquire::LegacyHeld(h)) => {
                let _ = etcd.revoke(lease).await;
                // Not watched (the watch is on our key): looked at again after a pause.
                Ok(Err(Busy::NotClear(
                    format!(
                        "{legacy} is held by {} (lease {}): a master of a hamaster from before \
                         the cluster's name was in the leader key; waiting for it to go",
                        h.node, h.lease
                    ),
                    LEGACY_POLL,
                )))
            }
            Ok(Acquire::RecordChanged) => {
                let _ = etcd.revoke(lease).await;
                Ok(Err(Busy::RecordChanged))
            }
            Err(e) => {
                let _ = etcd.revoke(lease).await;
                Err(format!("etcd: {e}"))
            }
        }
    }
}

/// How often a key of the legacy layout held by an older master is looked at again.
const LEGACY_POLL: Duration = Duration::from_secs(1);

/// Why an attempt did not take the key.
enum Busy {
    /// Another node's key; whether a failsafe record names another node.
    Held(crate::lease::Holder, bool),
    /// The takeover rule says not yet (why), looked at again after the pause given.
    NotClear(String, Duration),
    /// The record changed between its read and the transaction.
    RecordChanged,
}
