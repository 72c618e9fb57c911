//! Running the service: a child process in its own session that dies with its parent
//! (PR_SET_PDEATHSIG), or a systemd unit driven through systemctl; and the looks at whether
//! anything of it is left, each answering present, absent or cannot tell (crate::presence).
//!
//! A supervised command's exit is seen without reaping it (waitid with WNOWAIT): while its
//! leader is an unreaped zombie, the process group's id cannot be taken by anybody else, so a
//! signal to the group reaches only what the service left behind. The guard reaps the leader
//! only once the group is confirmed empty (`reap`), and never signals it again after that.

use std::ffi::CString;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::{getgrouplist, Gid, Pid, Uid, User};

use super::{ServiceError, ServiceRef, ServiceSpec};
use crate::presence::Presence;

pub enum Running {
    Command {
        pid: u32,
        /// How the leader ended, as its watcher thread tells (never reaped by the watcher).
        exit: ExitWatch,
    },
    Systemd {
        unit: String,
    },
}

/// What is known of a supervised command's leader's end. A receiver that has answered is never
/// polled again (tokio's oneshot panics when it is): its answer, or that none will come, is
/// kept instead.
pub enum ExitWatch {
    Waiting(tokio::sync::oneshot::Receiver<String>),
    /// How it ended.
    Exited(String),
    /// The watcher ended without an answer (it logged why): nothing will be known.
    Lost,
}

/// A user's uid, primary gid and all its groups.
pub type Credentials = (Uid, Gid, Vec<Gid>);

/// A user's ids and groups, for the service (and its health_command) to run as.
pub fn credentials(name: &str) -> Result<Credentials, String> {
    let user = User::from_name(name)
        .map_err(|e| format!("parameter user=\"{name}\" cannot be looked up: {e}"))?
        .ok_or_else(|| format!("parameter user=\"{name}\" is not a user on this node"))?;
    let c =
        CString::new(name).map_err(|_| format!("parameter user=\"{name}\" is not a user name"))?;
    let groups = getgrouplist(&c, user.gid)
        .map_err(|e| format!("parameter user=\"{name}\": its groups cannot be read: {e}"))?;
    Ok((user.uid, user.gid, groups))
}

async fn systemctl(
    args: &[&str],
    limit: Duration,
) -> Result<std::process::ExitStatus, ServiceError> {
    let mut cmd = tokio::process::Command::new("systemctl");
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(limit, cmd.status()).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(ServiceError::NotInstalled(format!("systemctl: {e}"))),
        Err(_) => Err(ServiceError::Failed(format!(
            "systemctl {} did not finish in {} s",
            args.join(" "),
            limit.as_secs()
        ))),
    }
}

/// How long a `systemctl start` may take (a unit's start job, its dependencies included).
const START_LIMIT: Duration = Duration::from_secs(90);

impl ServiceSpec {
    /// Starts the service with `env` added to its environment. A command's output goes to
    /// syslog under the resource's name (service::output; a unit's goes to the journal, as
    /// systemd does it).
    /// `wanted` is asked right before the fork (or `systemctl start`): a start that is no
    /// longer wanted (the guard lost its key meanwhile) is not made.
    pub async fn start(
        &self,
        env: &[(String, String)],
        resource: &str,
        wanted: &(dyn Fn() -> bool + Send + Sync),
    ) -> Result<Running, ServiceError> {
        let unwanted = || ServiceError::Failed("not started: the raise was abandoned".into());
        match self {
            ServiceSpec::Systemd { unit } => {
                if !wanted() {
                    return Err(unwanted());
                }
                let status = systemctl(&["start", "--", unit], START_LIMIT).await?;
                if !status.success() {
                    return Err(ServiceError::Failed(format!(
                        "systemctl start {unit} failed ({status})"
                    )));
                }
                Ok(Running::Systemd { unit: unit.clone() })
            }
            ServiceSpec::Command {
                program,
                args,
                run_as,
            } => {
                // Everything that reads files or allocates happens here, before the fork: the
                // child may only make plain system calls until it execs.
                let ids = run_as.check_installed("the command")?;
                let mut cmd = std::process::Command::new(program);
                cmd.args(args)
                    .current_dir(&run_as.workdir)
                    .envs(env.iter().map(|(k, v)| (k, v)));
                cmd.stdin(std::process::Stdio::null());
                let pipe = || {
                    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| {
                        ServiceError::Failed(format!("cannot make a pipe for the service: {e}"))
                    })
                };
                let (out_r, out_w) = pipe()?;
                let (err_r, err_w) = pipe()?;
                cmd.stdout(out_w).stderr(err_w);
                crate::child::service(&mut cmd, ids);
                if !wanted() {
                    return Err(unwanted());
                }
                // std's Child, never waited for: the leader's exit is watched without reaping.
                let child = cmd.spawn().map_err(|e| {
                    ServiceError::Failed(format!("cannot run {}: {e}", program.display()))
                })?;
                // The write ends go with the Command: the readers see EOF when the service and
                // everything it forked have closed them.
                drop(cmd);
                let pid = child.id();
                let limit = super::output::limiter();
                for read in [out_r, err_r] {
                    let source = std::fs::File::from(read);
                    super::output::forward(source, resource.to_string(), pid, limit.clone());
                }
                Ok(Running::Command {
                    pid,
                    exit: ExitWatch::Waiting(watch_exit(pid)),
                })
            }
        }
    }
}

impl Running {
    pub fn pid(&self) -> Option<u32> {
        match self {
            Running::Command { pid, .. } => Some(*pid),
            Running::Systemd { .. } => None,
        }
    }

    /// Resolves when a supervised command's leader exits (never for systemd units), with how
    /// it ended. The leader stays an unreaped zombie (see `reap`).
    /// Cancel-safe: called again after a call was dropped, it goes on waiting.
    pub async fn wait_exit(&mut self) -> String {
        match self {
            Running::Command { exit, .. } => {
                if let ExitWatch::Waiting(rx) = exit {
                    *exit = match rx.await {
                        Ok(text) => ExitWatch::Exited(text),
                        Err(_) => ExitWatch::Lost,
                    };
                }
                match exit {
                    ExitWatch::Exited(text) => text.clone(),
                    // The watcher could not wait (it said so), or the leader was reaped after
                    // its group was seen gone: nothing more will be known from here.
                    _ => std::future::pending().await,
                }
            }
            Running::Systemd { .. } => std::future::pending().await,
        }
    }
}

/// Watches a child's exit on a thread of its own with waitid(WEXITED | WNOWAIT): it learns how
/// the leader ended and leaves it a zombie, so its process group's id stays ours.
fn watch_exit(pid: u32) -> tokio::sync::oneshot::Receiver<String> {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let (tx, rx) = tokio::sync::oneshot::channel();
    let watcher = move || loop {
        match waitid(
            Id::Pid(Pid::from_raw(pid as i32)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::Exited(_, code)) => {
                let _ = tx.send(format!("exited (exit status: {code})"));
                return;
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                let _ = tx.send(format!("exited (signal: {} ({sig}))", sig as i32));
                return;
            }
            Err(Errno::EINTR) | Ok(_) => continue,
            // Reaped already: the fencing thread reaps the leader once it has seen the whole
            // group gone (`reap`), which a woken guard can do before this thread runs again.
            // The machine knows of the end from that look; there is nothing to tell.
            Err(Errno::ECHILD) => return,
            Err(e) => {
                log::warn!("cannot watch the service (pid {pid}): {e}");
                return;
            }
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("service exit".into())
        .spawn(watcher)
    {
        log::warn!("cannot watch the service (pid {pid}): {e}");
    }
    rx
}

/// Reaps a supervised command's leader once nothing of its group is left: from then on its
/// pid (and the group's id) may be anybody's, and it is never signalled again.
pub fn reap(pid: u32) {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    if pid > 1 {
        let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
    }
}

/// How long one look at a unit may take (systemctl show): longer is "cannot tell".
pub const UNIT_LOOK: Duration = Duration::from_secs(5);

/// Whether anything of a service is left: its process group (a member that is not a zombie),
/// or its unit, as systemd says it (`unit_presence`).
pub async fn presence(service: &ServiceRef, limit: Duration) -> Presence {
    match service {
        ServiceRef::Group(pid) => group_presence(*pid),
        ServiceRef::Unit(unit) => unit_presence(unit, limit).await,
    }
}

/// A unit's state as systemd answers it: `systemctl show` of its LoadState and ActiveState,
/// read with the exit status. Within `limit`, else cannot tell.
pub async fn unit_presence(unit: &str, limit: Duration) -> Presence {
    let mut cmd = tokio::process::Command::new("systemctl");
    cmd.args(UNIT_SHOW)
        .arg(unit)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(limit, cmd.output()).await {
        Ok(Ok(out)) => read_unit_show(
            out.status.code(),
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        ),
        Ok(Err(e)) => Presence::CannotTell(format!("systemctl show {unit}: {e}")),
        Err(_) => Presence::CannotTell(format!(
            "systemctl show {unit} did not answer within {} ms",
            limit.as_millis()
        )),
    }
}

/// The arguments of the look at a unit (the unit's name follows).
pub const UNIT_SHOW: [&str; 5] = [
    "show",
    "--property=LoadState",
    "--property=ActiveState",
    "--property=SubState",
    "--",
];

/// What `systemctl show` said of a unit: absent only when systemctl exited 0 and systemd
/// named the unit `inactive` or `failed` (a unit that is not loaded is `inactive`); present
/// for a state in which it may run (`active`, `activating`, `deactivating`, `reloading`,
/// `refreshing`, `maintenance`); anything else — a failed systemctl ("Failed to connect to
/// bus" while PID 1 re-executes prints nothing), a missing property, a state it does not
/// know — cannot tell. The simulation reads its lying systemctl through this same function.
pub fn read_unit_show(code: Option<i32>, stdout: &str, stderr: &str) -> Presence {
    let why = |what: String| {
        let said = stderr.trim();
        Presence::CannotTell(if said.is_empty() {
            what
        } else {
            format!("{what}: {said}")
        })
    };
    match code {
        Some(0) => {}
        Some(c) => return why(format!("systemctl show exited {c}")),
        None => return why("systemctl show was killed".into()),
    }
    let prop = |name: &str| {
        stdout.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix('='))
                .map(str::trim)
        })
    };
    let (Some(load), Some(active)) = (prop("LoadState"), prop("ActiveState")) else {
        return why(format!(
            "systemctl show did not name the unit's states ({:?})",
            stdout.trim()
        ));
    };
    match active {
        "inactive" | "failed" => Presence::Absent,
        "active" | "activating" | "deactivating" | "reloading" | "refreshing" | "maintenance" => {
            Presence::Present
        }
        other => why(format!(
            "systemd named the unit {other:?} (LoadState {load:?}), a state not known here"
        )),
    }
}

/// Whether anything of the process group `pgid` still lives: a member that is not a zombie
/// (the guard keeps its exited leader an unreaped zombie). The kernel's ESRCH is absence;
/// EPERM (an LSM's or seccomp's refusal, an unprivileged look) says the group exists; a group
/// that exists but whose members cannot be seen in /proc cannot be told.
pub fn group_presence(pgid: u32) -> Presence {
    if pgid <= 1 {
        return Presence::CannotTell(format!("process group {pgid} is never looked at"));
    }
    match killpg(Pid::from_raw(pgid as i32), None) {
        Err(Errno::ESRCH) => return Presence::Absent,
        Ok(()) | Err(Errno::EPERM) => {}
        Err(e) => return Presence::CannotTell(format!("kill(-{pgid}, 0): {e}")),
    }
    match crate::procfs::group_members(pgid) {
        Ok(m) if !m.live.is_empty() => Presence::Present,
        Ok(m) if m.zombies > 0 => Presence::Absent,
        // The kernel has the group, /proc shows nobody of it (it may have just ended).
        Ok(_) => Presence::CannotTell(format!(
            "process group {pgid} exists, but none of its members shows in /proc"
        )),
        Err(e) => Presence::CannotTell(format!("process group {pgid}: {e}")),
    }
}

/// Stops a service whose supervisor is gone, the recorded one only: its group is stopped (the
/// one way, service::stop) only while the recorded leader (same pid and start time, leading
/// its own group) is alive when the stop begins — a group whose leader is gone may be
/// anybody's (a double-forked daemon that took the group id after ours was gone) and is never
/// signalled. Absent: nothing of it is left (or nothing was ever ours); Present: still there at
/// the end; CannotTell: a group lives on under the recorded id, not proven ours, or a look
/// failed.
pub async fn stop_orphan(
    pid: u32,
    start: Option<u64>,
    grace: Duration,
    limit: Duration,
) -> Presence {
    if pid <= 1 {
        return Presence::Absent;
    }
    if !is_recorded_leader(pid, start) {
        // A live process that holds the pid with another start time: ours ended, its group
        // emptied (an id is not reused before), and nothing of it can be left.
        let reused = start.is_some() && crate::procfs::start_time(pid).is_some();
        return match group_presence(pid) {
            Presence::Absent => Presence::Absent,
            _ if reused => Presence::Absent,
            Presence::Present if start.is_none() => Presence::CannotTell(format!(
                "process group {pid} lives, and no start time was recorded to prove it the \
                 service's: not signalled"
            )),
            Presence::Present => Presence::CannotTell(format!(
                "process group {pid} lives on without its recorded leader: not proven ours, \
                 not signalled"
            )),
            doubt => doubt,
        };
    }
    super::stop::stop_and_confirm(&ServiceRef::Group(pid), grace, limit).await
}

/// The recorded service: the process with this pid and start time (alive, or a zombie not yet
/// reaped: either way it still holds the id) leading its own process group, which is then
/// ours. Without a recorded start time nothing proves it ours, and nothing is signalled: a
/// command dies with its guard anyway (PR_SET_PDEATHSIG).
fn is_recorded_leader(pid: u32, start: Option<u64>) -> bool {
    start.is_some_and(|s| crate::procfs::same_process(pid, s))
        && crate::procfs::process_group(pid) == Some(pid)
}

/// A supervised command's leader as recorded for a stop after its supervisor died: its pid and
/// its start time (/proc/PID/stat), so that a reused pid is never signalled. One format
/// wherever it is kept: state.json's `service_pid` and `service_start`, and a resident
/// standby's record (`ResourceDir::standby_record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServiceRecord {
    #[serde(rename = "service_pid")]
    pub pid: u32,
    #[serde(rename = "service_start", default)]
    pub start: Option<u64>,
}

impl ServiceRecord {
    /// The process `pid` as it is now.
    pub fn of(pid: u32) -> ServiceRecord {
        ServiceRecord {
            pid,
            start: crate::procfs::start_time(pid),
        }
    }

    /// A resident standby's record: this format, or the "PID START" line the previous
    /// release's resident wrote (read during an upgrade). None: none, or unreadable.
    pub fn load(path: &std::path::Path) -> Option<ServiceRecord> {
        let text = std::fs::read_to_string(path).ok()?;
        if let Ok(r) = serde_json::from_str(&text) {
            return Some(r);
        }
        let mut words = text.split_whitespace().map(|w| w.parse::<u64>().ok());
        let pid = u32::try_from(words.next()??).ok()?;
        let start = words.next()??;
        Some(ServiceRecord {
            pid,
            start: (start > 0).then_some(start),
        })
    }

    /// Written as a private file (mode 0600).
    pub fn save(&self, path: &std::path::Path) -> std::io::Result<()> {
        let text = serde_json::to_string(self).map_err(std::io::Error::other)?;
        crate::runfiles::write_private(path, text + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(pid: u32) -> Running {
        Running::Command {
            pid,
            exit: ExitWatch::Waiting(watch_exit(pid)),
        }
    }

    /// The guard's loop makes a new wait_exit future on every turn and drops the ones that did
    /// not finish: a watch that ended without an answer (the leader reaped first, as a guard
    /// woken from SIGSTOP does) stays pending, turn after turn, instead of polling a spent
    /// receiver (tokio panics: "called after complete", which ended a CI run's guard).
    #[tokio::test(flavor = "current_thread")]
    async fn a_leader_reaped_before_its_watcher_waits_leaves_the_wait_pending_on_every_turn() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let mut running = command(child.id());
        for _ in 0..3 {
            let turn = tokio::time::timeout(Duration::from_millis(200), running.wait_exit());
            assert!(turn.await.is_err(), "nothing is known of a reaped leader");
        }
        assert!(matches!(
            running,
            Running::Command {
                exit: ExitWatch::Lost,
                ..
            }
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_exit_told_once_is_told_again_on_every_turn() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let mut running = command(child.id());
        for _ in 0..3 {
            let turn = tokio::time::timeout(Duration::from_secs(5), running.wait_exit());
            assert_eq!(turn.await.unwrap(), "exited (exit status: 3)");
        }
        // The watcher leaves it a zombie: reaped here.
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }

    #[test]
    fn only_systemds_own_inactive_or_failed_is_absence() {
        let show = |active: &str| format!("LoadState=loaded\nActiveState={active}\nSubState=x\n");
        assert_eq!(
            read_unit_show(Some(0), &show("inactive"), ""),
            Presence::Absent
        );
        assert_eq!(
            read_unit_show(Some(0), &show("failed"), ""),
            Presence::Absent
        );
        let missing = "LoadState=not-found\nActiveState=inactive\nSubState=dead\n";
        assert_eq!(read_unit_show(Some(0), missing, ""), Presence::Absent);
        for up in [
            "active",
            "activating",
            "deactivating",
            "reloading",
            "maintenance",
        ] {
            assert_eq!(
                read_unit_show(Some(0), &show(up), ""),
                Presence::Present,
                "{up}"
            );
        }
        // PID 1 re-executing: nothing on stdout, the bus error on stderr, exit 1.
        let reexec = read_unit_show(
            Some(1),
            "",
            "Failed to connect to bus: Connection refused\n",
        );
        assert_eq!(
            reexec.doubt(),
            Some("systemctl show exited 1: Failed to connect to bus: Connection refused")
        );
        // Exit 0 with nothing said, a state nobody knows, a killed systemctl: cannot tell.
        assert!(read_unit_show(Some(0), "", "").doubt().is_some());
        assert!(read_unit_show(Some(0), "ActiveState=inactive\n", "")
            .doubt()
            .is_some());
        assert!(read_unit_show(Some(0), &show("exploded"), "")
            .doubt()
            .is_some());
        assert!(read_unit_show(None, &show("inactive"), "")
            .doubt()
            .is_some());
    }

    #[test]
    fn a_group_is_absent_only_by_the_kernels_word_and_eperm_is_not_gone() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep");
        child.arg("30");
        // SAFETY: setsid only, between fork and exec.
        unsafe {
            child.pre_exec(|| nix::unistd::setsid().map(drop).map_err(Into::into));
        }
        let mut child = child.spawn().unwrap();
        let pgid = child.id();
        assert_eq!(group_presence(pgid), Presence::Present);
        // An unprivileged look (kill(-pgid, 0) refused with EPERM): the group is there.
        // SAFETY: the child makes system calls only (setuid, kill, reads of /proc) and ends
        // with _exit, never returning into the test harness's threads.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let code = match nix::unistd::setuid(Uid::from_raw(65534)) {
                    Ok(()) => match (
                        killpg(Pid::from_raw(pgid as i32), None),
                        group_presence(pgid),
                    ) {
                        (Err(Errno::EPERM), Presence::Present) => 0,
                        (Err(Errno::EPERM), _) => 2,
                        _ => 3,
                    },
                    Err(_) => 4,
                };
                // SAFETY: the forked child ends without running the parent's destructors.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child: looker } => {
                let status = nix::sys::wait::waitpid(looker, None).unwrap();
                assert_eq!(
                    status,
                    nix::sys::wait::WaitStatus::Exited(looker, 0),
                    "EPERM read as gone (2), or no EPERM (3), or setuid failed (4)"
                );
            }
        }
        // Exited and unreaped: the zombie alone is nothing left, and its id stays reserved.
        let _ = child.kill();
        let t = std::time::Instant::now();
        while !crate::procfs::is_zombie(pgid) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(group_presence(pgid), Presence::Absent);
        let _ = child.wait();
        assert_eq!(group_presence(pgid), Presence::Absent);
    }
}
