//! The service's health while the guard leads: a check every health_interval (every 25 ms
//! until the first success, so promote is quick), and for a systemd unit whether it is still
//! active. Once healthy, the service counts as unhealthy only after health_failures failed
//! checks in a row; a service that is no longer running counts at once. It reports into the
//! guard's status (monitor decides what that means) and, with push_failures, to Pacemaker at
//! once when a healthy service turns unhealthy. A reload (health_url, health_timeout,
//! health_interval, health_failures) takes effect at the next check, which it brings forward;
//! a new URL (or CA) is a new check, which must pass before its failures are forgiven.

use std::time::Duration;

use tokio::sync::watch;

use super::push::Reporter;
use super::status::Shared;
use crate::resource::config::MasterConfig;
use crate::service::{HealthProbe, ServiceSpec};

/// `push`: told once when the service, healthy before, stops being so (push_failures), while
/// `leading` says the machine leads (a service the guard stops itself is no failure).
/// `running`: whether the guard machine has the service running.
pub async fn watch(
    mut config: watch::Receiver<MasterConfig>,
    shared: Shared,
    push: Option<Reporter>,
    metrics: std::sync::Arc<super::metrics::Metrics>,
    running: impl Fn() -> bool,
    leading: impl Fn() -> bool,
) {
    let mut cfg = config.borrow_and_update().clone();
    // Made anew after a reload changed the health settings (None inside: no health_url).
    let mut probe: Option<Option<HealthProbe>> = None;
    let mut healthy_once = false;
    let mut failed_in_a_row = 0u32;
    // systemd's last word on the unit (started active: the guard's start succeeded).
    let mut unit_active = true;
    loop {
        if probe.is_none() {
            probe = match HealthProbe::new(&cfg.health) {
                Ok(p) => Some(p),
                Err(e) => {
                    // At promote this keeps it waiting; after a reload it is a failure.
                    shared.update(|s| {
                        s.service_healthy = false;
                        s.service_detail = format!("health probe unusable: {e}");
                    });
                    return;
                }
            };
        }
        let check = probe.as_ref().and_then(Option::as_ref);
        let mut running = running();
        if let (true, ServiceSpec::Systemd { unit }) = (running, &cfg.service) {
            // A unit has no child to wait for: ask systemd whether it is still active. Only
            // systemd's own "inactive" or "failed" is a stopped unit; a systemctl that cannot
            // answer (PID 1 re-executing) leaves the last verdict as it was.
            use crate::presence::Presence;
            use crate::service::process::{unit_presence, UNIT_LOOK};
            match unit_presence(unit, UNIT_LOOK).await {
                Presence::Present => unit_active = true,
                Presence::Absent => unit_active = false,
                Presence::CannotTell(why) => {
                    log::warn!("cannot tell whether {unit} is active: {why}");
                }
            }
            running = unit_active;
            shared.update(|s| {
                s.unit_inactive = !unit_active;
                if !unit_active {
                    s.service_detail = format!("{unit} is not active");
                }
            });
        }
        let (passed, detail) = match (check, running) {
            (_, false) => (false, None),
            (None, true) => (true, Some("running (no health_url)".to_string())),
            (Some(p), true) => {
                let began = std::time::Instant::now();
                let outcome = p.check().await;
                metrics.health_checks.observe(began.elapsed());
                match outcome {
                    Ok(code) => (
                        (200..300).contains(&code),
                        Some(format!("{} answered {code}", p.url())),
                    ),
                    Err(e) => (false, Some(format!("{}: {e}", p.url()))),
                }
            }
        };
        if !passed && running {
            metrics.health_failed();
        }
        failed_in_a_row = if passed { 0 } else { failed_in_a_row + 1 };
        // Before the first success (promote waits for it) and for a dead service: at once.
        let healthy = passed || (running && healthy_once && failed_in_a_row < cfg.health.failures);
        let detail = detail.map(|d| match (passed, healthy) {
            (false, true) => format!(
                "{d} ({failed_in_a_row} of {} failed checks before unhealthy)",
                cfg.health.failures
            ),
            _ => d,
        });
        shared.update(|s| {
            s.service_healthy = healthy && running;
            if let (true, Some(d)) = (running, detail) {
                s.service_detail = d;
            }
        });
        if let (Some(r), true, false, true) = (&push, healthy_once, healthy, leading()) {
            let why = shared
                .status
                .lock()
                .map(|s| s.service_detail.clone())
                .unwrap_or_default();
            r.report(&format!("service unhealthy: {why}"));
        }
        healthy_once |= passed;
        let pause = if healthy_once {
            cfg.health.interval
        } else {
            Duration::from_millis(25)
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
        if (&now.health.url, &now.health.cacert) != (&cfg.health.url, &cfg.health.cacert) {
            // Another check: its failures count afresh, and like the first check of all it
            // must pass once before a failure is forgiven (no healthy verdict without a pass).
            failed_in_a_row = 0;
            healthy_once = false;
        }
        if now.health != cfg.health {
            probe = None;
        }
        cfg = now;
    }
}
