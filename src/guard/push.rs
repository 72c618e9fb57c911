//! Push detection (push_failures): the guard is the service's parent and watches its health,
//! so it knows at once when the service exits or turns unhealthy. Under Pacemaker it says so
//! right away with `crm_resource --fail` for this resource on this node, which Pacemaker takes
//! as a failed monitor: recovery starts within milliseconds instead of at the next monitor.
//! Outside Pacemaker (`hamaster takeover`) there is nobody to tell.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::resource::config::MasterConfig;

/// crm_resource asks the controller over IPC; it answers at once unless the node is in trouble.
const REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Tells Pacemaker, once per leadership, that the resource failed on this node — while the
/// configuration in force says push_failures.
#[derive(Clone)]
pub struct Reporter {
    /// Pacemaker's name of the resource (OCF_RESOURCE_INSTANCE, as execd gave it).
    rsc: String,
    node: String,
    log_name: String,
    sent: Arc<AtomicBool>,
    config: watch::Receiver<MasterConfig>,
}

impl Reporter {
    pub fn new(
        rsc: String,
        node: String,
        log_name: String,
        config: watch::Receiver<MasterConfig>,
    ) -> Reporter {
        Reporter {
            rsc,
            node,
            log_name,
            sent: Arc::new(AtomicBool::new(false)),
            config,
        }
    }

    /// Reports `why` in the background; later calls do nothing. With push_failures off,
    /// nothing is sent (Pacemaker finds out at the next monitor).
    pub fn report(&self, why: &str) {
        if self.config.borrow().push_failures {
            self.report_regardless(why);
        }
    }

    /// Reports `why` in the background whatever push_failures says (conflict_action=push asks
    /// for it by itself); once per leadership (one told failure makes Pacemaker recover the
    /// whole resource), shared with `report`; a report that could not be made leaves the next
    /// one free to try.
    pub fn report_regardless(&self, why: &str) {
        if self.sent.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        let why = why.to_string();
        tokio::spawn(async move { me.send(&why).await });
    }

    async fn send(&self, why: &str) {
        log::error!(
            "guard {}: {why}: telling Pacemaker now (crm_resource --fail --resource {} --node {})",
            self.log_name,
            self.rsc,
            self.node
        );
        let mut cmd = tokio::process::Command::new("crm_resource");
        cmd.args(["--fail", "--resource", &self.rsc, "--node", &self.node])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let outcome = match cmd.spawn() {
            Ok(child) => tokio::time::timeout(REPORT_TIMEOUT, child.wait_with_output()).await,
            Err(e) => {
                self.sent.store(false, Ordering::SeqCst);
                return log::warn!(
                "guard {}: cannot run crm_resource ({e}): Pacemaker finds out at the next monitor",
                self.log_name
            );
            }
        };
        match outcome {
            Ok(Ok(out)) if out.status.success() => return,
            Ok(Ok(out)) => log::warn!(
                "guard {}: crm_resource --fail failed ({}): {}; Pacemaker finds out at the next monitor",
                self.log_name,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Ok(Err(e)) => log::warn!("guard {}: crm_resource --fail: {e}", self.log_name),
            Err(_) => log::warn!(
                "guard {}: crm_resource --fail did not finish within {} s",
                self.log_name,
                REPORT_TIMEOUT.as_secs()
            ),
        }
        // Not told: a later failure of this leadership may try again.
        self.sent.store(false, Ordering::SeqCst);
    }
}
