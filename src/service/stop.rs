//! The one way a service is stopped, by the guard's fencing side and by the agent's clean-up
//! after a guard that is gone: TERM (for a unit, `systemctl stop --no-block`, which also
//! cancels a start job), KILL at the end of the grace (`systemctl kill --signal=SIGKILL`), and
//! only a proven absence (service::process::presence) counts as stopped. The machine orders
//! the signals from its own clock (Kernel::signal_service); `stop_and_confirm` carries out the
//! same order synchronously, with the same grace, where no machine runs.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::process::{presence, UNIT_LOOK};
use super::ServiceRef;
use crate::presence::Presence;

/// An orderly stop gives the service this long between TERM and KILL, at most.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// What a step-down keeps back from its budget for the release of the key and the answer.
pub const RELEASE_RESERVE: Duration = Duration::from_secs(2);

/// How often a stopping service is looked at.
pub const CHECK_EVERY: Duration = Duration::from_millis(100);

/// TERM → KILL for an orderly stop that has `left` of its budget: the budget less what the
/// release needs, at most STOP_GRACE. The machine's step-down and the agent's clean-up both.
pub fn grace(left: Duration) -> Duration {
    left.saturating_sub(RELEASE_RESERVE).min(STOP_GRACE)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// A signal to the service's process group failed.
    #[error("process group {pid}: {errno}")]
    Group { pid: u32, errno: Errno },
    /// A process group that is never signalled (0 or 1).
    #[error("refusing to signal process group {0}")]
    NoGroup(u32),
    /// systemctl could not be run.
    #[error("systemctl {args}: {why}")]
    Systemctl { args: String, why: String },
}

/// TERM (or KILL) to the service, never waiting: a group that is gone already counts as
/// signalled; a unit's systemctl is reaped by a thread of its own (and, without a thread, left
/// a zombie rather than waited on).
pub fn signal(service: &ServiceRef, kill: bool) -> Result<(), SignalError> {
    match service {
        ServiceRef::Group(pid) if *pid > 1 => {
            let sig = if kill {
                Signal::SIGKILL
            } else {
                Signal::SIGTERM
            };
            match killpg(Pid::from_raw(*pid as i32), sig) {
                Ok(()) | Err(Errno::ESRCH) => Ok(()),
                Err(errno) => Err(SignalError::Group { pid: *pid, errno }),
            }
        }
        ServiceRef::Group(pid) => Err(SignalError::NoGroup(*pid)),
        ServiceRef::Unit(unit) => {
            // systemd stops the unit its own way (ExecStop, TimeoutStopSec); --no-block
            // also cancels a start job under way. The KILL later does not wait for it.
            let args: &[&str] = if kill {
                &["kill", "--signal=SIGKILL", "--", unit]
            } else {
                &["stop", "--no-block", "--", unit]
            };
            let mut child = std::process::Command::new("systemctl")
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| SignalError::Systemctl {
                    args: args.join(" "),
                    why: e.to_string(),
                })?;
            let _ = std::thread::Builder::new()
                .name("systemctl".into())
                .spawn(move || child.wait());
            Ok(())
        }
    }
}

/// What a dead guard or a dead resident standby left of its service, stopped the one way,
/// for both clean-ups (resource::cleanup after a guard, the master agent after a resident): a
/// systemd unit (where systemd's tools are: without them no unit of ours can run), else a
/// command's group only while its recorded leader proves the group ours
/// (process::stop_orphan). None: nothing was recorded; else what it was, and what became of
/// it.
pub async fn stop_left(
    unit: Option<String>,
    recorded: Option<crate::service::process::ServiceRecord>,
    grace: Duration,
    limit: Duration,
) -> Option<(String, Presence)> {
    match (unit, recorded) {
        (Some(unit), _) if crate::service::find_in_path("systemctl").is_none() => {
            log::info!("no systemctl on this node: {unit} cannot be running");
            None
        }
        (Some(unit), _) => {
            let service = ServiceRef::Unit(unit.clone());
            Some((unit, stop_and_confirm(&service, grace, limit).await))
        }
        (None, Some(r)) => {
            let end = crate::service::process::stop_orphan(r.pid, r.start, grace, limit).await;
            Some((format!("the service (pid {})", r.pid), end))
        }
        (None, None) => None,
    }
}

/// The machine's orderly stop where no machine runs: TERM now, KILL after `grace`, looks every
/// CHECK_EVERY until the service is proven absent or `limit` has passed. A failed signal is
/// logged and the looks decide; the answer is the last look's.
pub async fn stop_and_confirm(service: &ServiceRef, grace: Duration, limit: Duration) -> Presence {
    let begun = Instant::now();
    if let Err(e) = signal(service, false) {
        log::warn!("SIGTERM to the service: {e}");
    }
    let mut killed = false;
    loop {
        let left = limit.saturating_sub(begun.elapsed());
        let now = presence(service, UNIT_LOOK.min(left)).await;
        if now.is_absent() || begun.elapsed() >= limit {
            return now;
        }
        if !killed && begun.elapsed() >= grace {
            if let Err(e) = signal(service, true) {
                log::warn!("SIGKILL to the service: {e}");
            }
            killed = true;
        }
        let left = limit.saturating_sub(begun.elapsed());
        tokio::time::sleep(CHECK_EVERY.min(left)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_keeps_the_release_reserve_and_never_exceeds_stop_grace() {
        assert_eq!(grace(Duration::from_secs(60)), STOP_GRACE);
        assert_eq!(grace(Duration::from_secs(5)), Duration::from_secs(3));
        assert_eq!(grace(Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn groups_0_and_1_are_never_signalled() {
        for pid in [0, 1] {
            assert!(matches!(
                signal(&ServiceRef::Group(pid), true),
                Err(SignalError::NoGroup(p)) if p == pid
            ));
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_group_that_ignores_term_is_killed_after_the_grace_and_proven_gone() {
        use std::os::unix::process::CommandExt;
        // A shell that ignores TERM, leading its own group.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 0.05; done"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let service = ServiceRef::Group(pid);
        // Reaped by a thread, as the guard's supervisor would: a zombie leader is absence.
        let reaper = std::thread::spawn(move || child.wait());
        std::thread::sleep(Duration::from_millis(100));
        let begun = Instant::now();
        let end = stop_and_confirm(
            &service,
            Duration::from_millis(300),
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(end, Presence::Absent);
        assert!(
            begun.elapsed() >= Duration::from_millis(300),
            "TERM was ignored: KILL ended it"
        );
        reaper.join().unwrap().unwrap();
    }
}
