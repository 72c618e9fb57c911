//! Leading: with the key taken, start the fencing thread at the grant's deadline, raise the
//! VIP (through the fence, with its kernel lifetime) and the service, then wait for what ends
//! the leadership — fencing, a lost key, a step-down or a signal. Every step-down removes the
//! VIP first, then stops the service; an orderly one keeps renewing the lease until the key
//! is released. Nothing here can delay fencing: the deadline belongs to the fencing thread.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::sleep_until;

use super::core::{Cause, Leadership, Raise, ServiceRef};
use super::fence::{Fence, Kernel};
use super::status::{Role, StepDown};
use super::{health, keepalive, unix_ms, unix_ms_at, Acquired, Guard, StopSignals};
use crate::lease::clock::boottime;
use crate::lease::{Etcd, LeaseId};
use crate::runfiles::write_private;
use crate::service::ServiceSpec;
use crate::vip::{burst, up};

/// How long an orderly step-down gives the service between TERM and KILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The tasks that run beside the lead loop while the guard leads: renewals, the ownership
/// watch, health checks.
struct Helpers {
    renewals: JoinHandle<()>,
    ownership: Option<JoinHandle<()>>,
    health: Option<JoinHandle<()>>,
    placement: Option<JoinHandle<()>>,
}

impl Helpers {
    fn stop_health(&self) {
        if let Some(h) = &self.health {
            h.abort();
        }
    }

    /// Ends them all (after fencing, or once an orderly step-down has released the key).
    fn stop(&self) {
        self.renewals.abort();
        if let Some(o) = &self.ownership {
            o.abort();
        }
        self.stop_health();
        if let Some(p) = &self.placement {
            p.abort();
        }
    }
}

enum Event {
    Fenced,
    Lost(String),
    ServiceExited(String),
    StepDown(StepDown),
    Signal,
    RetryRelease,
}

impl Guard {
    /// Raises VIP and service under the key, then guards them until told to stop.
    pub(super) async fn lead(
        &mut self,
        a: Acquired,
        stepdown: &mut mpsc::Receiver<StepDown>,
        sigterm: &mut StopSignals,
    ) -> i32 {
        let lease = a.grant.lease;
        // Resolved and checked before the fence exists: route dumps and an ARP probe are no
        // work for the fencing lock.
        let ready = match self.args.config.vip.clone().map(up::prepare).transpose() {
            Ok(r) => r,
            Err(e) => {
                let _ = a.etcd.release(&self.key, lease).await;
                return self.give_up(format!("VIP: {e}"), stepdown).await;
            }
        };
        let kernel = Kernel::new(ready.as_ref().map(|r| r.vip.new_addr(&r.target)));
        let lead = Leadership::new(self.clock, a.grant.sent, a.grant.ttl);
        let fence = match kernel.and_then(|k| Fence::start(lead, k).map_err(|e| e.to_string())) {
            Ok(f) => f,
            Err(e) => {
                let _ = a.etcd.release(&self.key, lease).await;
                return self
                    .give_up(format!("cannot start fencing: {e}"), stepdown)
                    .await;
            }
        };
        let _ = self.fence.set(fence.clone());
        self.record_leadership(&a);
        let (lost_tx, mut lost_rx) = mpsc::channel::<String>(4);
        // HAMASTER_TEST_NO_KEY_WATCH: for tests only, so they can show that the renewal's own
        // check of the key suffices when no watch event ever comes.
        let watched = std::env::var_os("HAMASTER_TEST_NO_KEY_WATCH").is_none();
        let mut helpers = Helpers {
            renewals: tokio::spawn(keepalive::renew(
                a.etcd.clone(),
                a.grant,
                self.key.clone(),
                self.clock,
                fence.clone(),
                lost_tx.clone(),
                self.shared.clone(),
            )),
            ownership: watched.then(|| {
                tokio::spawn(keepalive::watch_ownership(
                    a.etcd.clone(),
                    self.key.clone(),
                    lease,
                    lost_tx,
                ))
            }),
            health: None,
            placement: None,
        };

        if let Err(why) = self.raise(&fence, ready, a.token).await {
            self.step_down_steps(&fence, &a.etcd, lease).await;
            helpers.stop();
            fence.stop();
            return self.give_up(why, stepdown).await;
        }
        let reporter = match (
            &self.args.pacemaker_resource,
            self.args.config.push_failures,
        ) {
            (Some(rsc), true) => Some(super::push::Reporter::new(
                rsc.clone(),
                self.args.node.clone(),
                self.args.resource.clone(),
            )),
            _ => None,
        };
        helpers.health = Some(tokio::spawn(health::watch(
            self.args.config.clone(),
            self.shared.clone(),
            reporter.clone(),
        )));
        if self.args.config.etcd.move_leader {
            helpers.placement = Some(tokio::spawn(super::placement::keep_leader_elsewhere(
                a.etcd.clone(),
                self.args.resource.clone(),
                self.args.node.clone(),
            )));
        }
        self.shared.update(|s| s.problem = None);

        let mut fenced = false;
        // Once the service has exited, its exit is old news: waiting on it again would return
        // at once, over and over (the guard spun, logging the exit, until demote).
        let mut service_exited = false;
        let mut released = false;
        let mut next_release = Instant::now();
        loop {
            let service = self.service.as_mut();
            let event = tokio::select! {
                _ = fence.wait_fenced(), if !fenced => Event::Fenced,
                Some(why) = lost_rx.recv(), if !fenced => Event::Lost(why),
                detail = async { match service { Some(s) => s.wait_exit().await, None => std::future::pending().await } }, if !fenced && !service_exited => Event::ServiceExited(detail),
                Some(reply) = stepdown.recv() => Event::StepDown(reply),
                _ = sigterm.recv() => Event::Signal,
                _ = sleep_until(next_release.into()), if fenced && !released => Event::RetryRelease,
            };
            match event {
                Event::Lost(why) => {
                    fence.fence(why);
                    self.after_fencing(&fence).await;
                    fenced = true;
                }
                Event::Fenced => {
                    self.after_fencing(&fence).await;
                    fenced = true;
                }
                Event::ServiceExited(detail) => {
                    service_exited = true;
                    log::error!("guard {}: service {detail}", self.args.resource);
                    if let Some(r) = &reporter {
                        r.report(&format!("service {detail}"));
                    }
                    self.shared.update(|s| {
                        s.service_running = false;
                        s.service_healthy = false;
                        s.service_detail = detail;
                    });
                }
                Event::RetryRelease => {
                    // After fencing, give the key back as soon as etcd answers again.
                    released = a.etcd.release(&self.key, lease).await.is_ok();
                    next_release = Instant::now() + Duration::from_secs(1);
                }
                Event::StepDown(_) | Event::Signal => {
                    // Renewals go on until the key is released.
                    helpers.stop_health();
                    self.step_down_steps(&fence, &a.etcd, lease).await;
                    helpers.stop();
                    fence.stop();
                    if let Event::StepDown(reply) = event {
                        let _ = reply.send(self.shared.snapshot());
                    }
                    return 0;
                }
            }
            if fenced {
                helpers.stop();
            }
        }
    }

    fn record_leadership(&mut self, a: &Acquired) {
        let lease = a.grant.lease;
        self.persisted.lease_id = Some(lease.0);
        self.persisted.fencing_token = Some(a.token);
        self.persist();
        log::info!(
            "guard {}: leader key {} taken, lease {}, fencing token {}",
            self.args.resource,
            self.key,
            lease,
            a.token
        );
        self.shared.update(|s| {
            s.role = Role::Leader;
            s.holder = Some(self.args.node.clone());
            s.lease_id = Some(lease.to_string());
            s.fencing_token = Some(a.token);
            // The grant counts as the first renewal, from when it was sent.
            s.last_renewal_unix_ms = Some(unix_ms_at(a.grant.sent));
            s.leader_since_unix_ms = Some(unix_ms());
            s.problem = Some("raising VIP and service".into());
        });
    }

    /// VIP (with announcements), fencing token, service: in this order, each only while the
    /// deadline is ahead (the fence refuses otherwise, and undoes what went up meanwhile).
    async fn raise(
        &mut self,
        fence: &Fence,
        ready: Option<up::Ready>,
        token: i64,
    ) -> Result<(), String> {
        if let Some(mut ready) = ready {
            let run_dir = burst::run_dir();
            burst::cancel(&run_dir, ready.vip.config.ip);
            match fence.add_vip() {
                Ok(Raise::Done) => {}
                Ok(Raise::TooLate) => {
                    return Err("the lease's deadline passed before the VIP went up".into())
                }
                Err(e) => return Err(format!("VIP: {e}")),
            }
            self.persisted.vip_added = true;
            self.persist();
            let dad_wait = fence
                .deadline()
                .saturating_sub(boottime())
                .min(Duration::from_secs(10));
            let settled = tokio::task::spawn_blocking(move || {
                up::settle(&mut ready, dad_wait, &run_dir).map(|()| ready)
            })
            .await;
            match settled {
                Ok(Ok(ready)) => log::info!(
                    "guard {}: VIP {} up on {}",
                    self.args.resource,
                    ready.vip.config.ip,
                    ready.target.link.name
                ),
                Ok(Err(e)) => return Err(format!("VIP: {e}")),
                Err(e) => return Err(format!("VIP: {e}")),
            }
        }
        self.write_token(token)?;
        let env = vec![
            ("HAMASTER_FENCING_TOKEN".to_string(), token.to_string()),
            ("HAMASTER_RESOURCE".to_string(), self.args.resource.clone()),
        ];
        let late = || "the lease's deadline passed while the service was starting".to_string();
        // A unit is known to the fence before it starts, so fencing can stop it mid-start.
        if let ServiceSpec::Systemd { unit } = &self.args.config.service {
            if fence.service_started(ServiceRef::Unit(unit.clone())) == Raise::TooLate {
                return Err(late());
            }
        }
        let running = self
            .args
            .config
            .service
            .start(&env, &format!("{} service", self.args.resource))
            .await
            .map_err(|e| format!("service: {e}"))?;
        let pid = running.pid();
        self.persisted.service_pid = pid;
        self.persist();
        self.service = Some(running);
        // A command is known to the fence right after its spawn.
        if let Some(pid) = pid {
            if fence.service_started(ServiceRef::Group(pid)) == Raise::TooLate {
                return Err(late());
            }
        }
        self.shared.update(|s| {
            s.service_running = true;
            s.service_detail = "started".into();
        });
        Ok(())
    }

    fn write_token(&self, token: i64) -> Result<(), String> {
        let env_text = format!(
            "HAMASTER_FENCING_TOKEN={token}\nHAMASTER_RESOURCE={}\n",
            self.args.resource
        );
        write_private(&self.dir.fencing_token(), format!("{token}\n"))
            .and_then(|_| write_private(&self.dir.service_env(), env_text))
            .map_err(|e| format!("cannot write the fencing token: {e}"))
    }

    /// After the fence acted (VIP down, service signalled): log, reap the service, record.
    async fn after_fencing(&mut self, fence: &Fence) {
        let Some((at, cause)) = fence.fenced() else {
            return;
        };
        // The fencing thread does not log; this is the first word of it.
        let late = match cause {
            Cause::Deadline => format!(
                ", {} ms after the deadline",
                at.saturating_sub(fence.deadline()).as_millis()
            ),
            Cause::Lost(_) => String::new(),
        };
        log::error!(
            "guard {}: self-fenced: {cause}: VIP removed and service signalled{late}",
            self.args.resource
        );
        if let Some(vip) = &self.args.config.vip {
            burst::cancel(&burst::run_dir(), vip.ip);
        }
        if let Some(s) = self.service.as_mut() {
            // Already signalled by the fence (KILL half a margin after the deadline); this
            // only waits for it to go, within the same bound.
            let _ = s.stop(self.clock.margin / 2).await;
        }
        fence.service_gone();
        let detail = self
            .service
            .as_ref()
            .and_then(|s| s.exit_detail().map(String::from))
            .unwrap_or_else(|| "stopped".into());
        self.persisted.vip_added = false;
        self.persisted.fenced = Some(cause.to_string());
        self.persist();
        self.shared.update(|s| {
            s.role = Role::Fenced;
            s.problem = Some(format!("fenced: {cause}"));
            s.fenced_at_unix_ms = Some(unix_ms_at(at));
            s.service_running = false;
            s.service_healthy = false;
            s.service_detail = detail;
            s.lease_ttl_left_ms = Some(0);
        });
    }

    /// Orderly step-down: VIP removed, service stopped (the deadline stays armed: renewals go
    /// on, and if they fail the fence still acts), key deleted if it still carries our lease,
    /// lease revoked. Each step runs even when an earlier one failed.
    async fn step_down_steps(&mut self, fence: &Fence, etcd: &Etcd, lease: LeaseId) {
        self.shared.update(|s| s.role = Role::SteppingDown);
        fence.begin_step_down();
        if let Some(vip) = &self.args.config.vip {
            burst::cancel(&burst::run_dir(), vip.ip);
        }
        self.persisted.vip_added = false;
        self.persist();
        if let Some(s) = self.service.as_mut() {
            if let Err(e) = s.stop(STOP_GRACE).await {
                log::error!("guard {}: stopping service: {e}", self.args.resource);
            }
        }
        fence.service_gone();
        self.service = None;
        match etcd.release(&self.key, lease).await {
            Ok(true) => log::info!("guard {}: leader key released", self.args.resource),
            Ok(false) => log::info!(
                "guard {}: leader key was no longer ours",
                self.args.resource
            ),
            Err(e) => log::warn!(
                "guard {}: releasing leader key: {e} (it expires with the lease)",
                self.args.resource
            ),
        }
        self.shared.update(|s| {
            s.service_running = false;
            s.service_healthy = false;
            s.service_detail = "stopped".into();
            s.problem = None;
        });
    }
}
