//! The service's health while the guard leads: a check every health_interval (every 25 ms
//! until the first success, so promote is quick), and for a systemd unit whether it is still
//! active. The verdict (service::HealthCount: health_failures failed checks in a row, a
//! service no longer running at once) goes to the guard machine, which shows it (status,
//! metrics, monitor) and decides what follows (a push to Pacemaker: machine::observe). A
//! reload (health_url, health_command, health_timeout, health_interval, health_failures) takes
//! effect at the next check, which it brings forward; a new URL, CA or command is a new check,
//! which must pass before its failures are forgiven. New contents of the same health_cacert (a
//! CA renewed in place) are parsed before the next check and, if they hold a CA, used from
//! it on: the same check, its count kept.

use std::time::Duration;

use tokio::sync::watch;

use super::fence::Fence;
use super::machine::{HealthReport, ServiceState};
use crate::presence::Presence;
use crate::resource::config::MasterConfig;
use crate::service::process::{unit_presence, UNIT_LOOK};
use crate::service::{HealthCount, HealthProbe, ServiceSpec};

/// The check before the first success comes this often (promote waits for it).
const FIRST_PASS_INTERVAL: Duration = Duration::from_millis(25);

/// A unit counts as running for its first success only once systemd has had it active this
/// long: a `Type=simple` unit is active from the fork, so one whose process dies at once
/// would otherwise pass the first look and promote, to fail at the next monitor.
const UNIT_SETTLE: Duration = Duration::from_millis(150);

pub async fn watch(
    mut config: watch::Receiver<MasterConfig>,
    fence: Fence,
    metrics: std::sync::Arc<super::metrics::Metrics>,
) {
    let mut cfg = config.borrow_and_update().clone();
    let mut w = Watch {
        probe: None,
        count: HealthCount::default(),
        unit_active: true,
        active_since: None,
        told: None,
        ca_in_use: None,
        ca_refused: None,
    };
    loop {
        if let Err(e) = w.make_probe(&cfg) {
            // At promote this keeps it waiting; after a reload it is a failure.
            fence.handle(super::answers::probe_unusable(
                &e.to_string(),
                w.unit_active,
            ));
            return;
        }
        let report = w.check(&cfg, &fence, &metrics).await;
        if w.told.as_ref() != Some(&report) {
            w.told = Some(report.clone());
            fence.handle(super::answers::health(report));
        }
        let pause = match w.count.passed_once() {
            true => cfg.health.interval,
            false => FIRST_PASS_INTERVAL,
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            changed = config.changed() => {
                if changed.is_err() {
                    // No sender (cannot happen while Shared holds it): no busy loop either.
                    tokio::time::sleep(pause).await;
                }
            }
        }
        let now = config.borrow_and_update().clone();
        if (&now.health.url, &now.health.cacert, &now.health.command)
            != (&cfg.health.url, &cfg.health.cacert, &cfg.health.command)
        {
            w.count.new_check();
        }
        if now.health != cfg.health {
            w.probe = None;
        }
        cfg = now;
    }
}

/// The health watch's own state from one check to the next.
struct Watch {
    /// Made anew after a reload changed the health settings (None inside: no check).
    probe: Option<Option<HealthProbe>>,
    count: HealthCount,
    /// systemd's last word on the unit (started active: the guard's start succeeded).
    unit_active: bool,
    /// Since when systemd has said the unit is active without a break.
    active_since: Option<std::time::Instant>,
    /// The last report the machine was told.
    told: Option<HealthReport>,
    /// health_cacert's contents the probe was made with, and the last new ones found
    /// unusable: a CA renewed in place is taken up at the next check, a bad one said once and
    /// not used.
    ca_in_use: Option<Vec<u8>>,
    ca_refused: Option<Vec<u8>>,
}

fn read_ca(cfg: &MasterConfig) -> Option<Vec<u8>> {
    cfg.health
        .cacert
        .as_ref()
        .map(|path| std::fs::read(path).unwrap_or_default())
}

impl Watch {
    /// The probe for `cfg`: made when there is none (at the start, after a reload changed
    /// the health settings), and again when health_cacert's contents changed and are usable.
    /// Err: no probe can be made.
    fn make_probe(&mut self, cfg: &MasterConfig) -> Result<(), String> {
        if let (Some(Some(_)), Some(now)) = (&self.probe, read_ca(cfg)) {
            if Some(&now) != self.ca_in_use.as_ref() && Some(&now) != self.ca_refused.as_ref() {
                match HealthProbe::new(&cfg.health) {
                    Ok(p) => {
                        log::info!("health_cacert changed: used from this check on");
                        self.probe = Some(p);
                        self.ca_in_use = Some(now);
                        self.ca_refused = None;
                    }
                    Err(e) => {
                        log::warn!(
                            "health_cacert changed but cannot be used, the CA in use is kept: {e}"
                        );
                        self.ca_refused = Some(now);
                    }
                }
            }
        }
        if self.probe.is_none() {
            self.ca_in_use = read_ca(cfg);
            self.probe = Some(HealthProbe::new(&cfg.health).map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    /// One check: whether the service runs (for a unit, systemd's word), then its health
    /// check, counted towards the verdict.
    async fn check(
        &mut self,
        cfg: &MasterConfig,
        fence: &Fence,
        metrics: &super::metrics::Metrics,
    ) -> HealthReport {
        let view = fence.view();
        // Started and not exited, as the machine has it (whether systemd still has the unit
        // active is this watch's own finding, below).
        let mut running =
            matches!(view.service, ServiceState::Running(_)) && view.exit_detail.is_none();
        let mut detail = None;
        if let (true, ServiceSpec::Systemd { unit }) = (running, &cfg.service) {
            (running, detail) = self.look_at_unit(unit).await;
        }
        let check = self.probe.as_ref().and_then(Option::as_ref);
        let passed = match (check, running) {
            (_, false) => false,
            (None, true) => {
                detail = Some("running (no health_url or health_command)".to_string());
                true
            }
            (Some(p), true) => {
                let began = std::time::Instant::now();
                let checked = p.check().await;
                metrics.health_checks.observe(began.elapsed());
                detail = Some(checked.detail);
                checked.passed
            }
        };
        if !passed && running {
            metrics.health_failed();
        }
        let healthy = self.count.checked(passed, running, cfg.health.failures);
        let detail = match (detail, passed, healthy) {
            (Some(d), false, true) => format!(
                "{d} ({} of {} failed checks before unhealthy)",
                self.count.failed_in_a_row(),
                cfg.health.failures
            ),
            (Some(d), _, _) => d,
            (None, ..) => "not running".to_string(),
        };
        HealthReport {
            healthy,
            detail,
            unit_inactive: !self.unit_active,
        }
    }

    /// A unit has no child to wait for: systemd is asked whether it is still active. Only
    /// systemd's own "inactive" or "failed" is a stopped unit; a systemctl that cannot answer
    /// (PID 1 re-executing) leaves the last verdict as it was. Whether it counts as running,
    /// and what to say if not.
    async fn look_at_unit(&mut self, unit: &str) -> (bool, Option<String>) {
        match unit_presence(unit, UNIT_LOOK).await {
            Presence::Present => {
                self.unit_active = true;
                self.active_since
                    .get_or_insert_with(std::time::Instant::now);
            }
            Presence::Absent => {
                self.unit_active = false;
                self.active_since = None;
            }
            Presence::CannotTell(why) => {
                log::warn!("cannot tell whether {unit} is active: {why}");
            }
        }
        if !self.unit_active {
            return (false, Some(format!("{unit} is not active")));
        }
        let settling = self.active_since.is_none_or(|t| t.elapsed() < UNIT_SETTLE);
        if !self.count.passed_once() && settling {
            // Not yet a success, and no failure either: looked at again shortly.
            return (
                false,
                Some(format!("{unit} active for less than {UNIT_SETTLE:?}")),
            );
        }
        (true, None)
    }
}
