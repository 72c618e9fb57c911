//! Running the service: a child process in its own session that dies with its parent
//! (PR_SET_PDEATHSIG), or a systemd unit driven through systemctl. Stopping sends TERM to the
//! whole process group, then KILL after a grace period.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use nix::sys::prctl::set_pdeathsig;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getgrouplist, setgid, setgroups, setsid, setuid, Gid, Pid, Uid, User};

use super::{ServiceError, ServiceSpec};

pub enum Running {
    Command {
        child: tokio::process::Child,
        pid: u32,
        exited: Option<String>,
    },
    Systemd {
        unit: String,
    },
}

/// uid and gid of a user, from the passwd database.
pub fn lookup_user(name: &str) -> Result<(u32, u32), String> {
    let (uid, gid, _) = credentials(name)?;
    Ok((uid.as_raw(), gid.as_raw()))
}

/// A user's uid, primary gid and all its groups, for the service to run as.
fn credentials(name: &str) -> Result<(Uid, Gid, Vec<Gid>), String> {
    let user = User::from_name(name)
        .map_err(|e| format!("parameter user=\"{name}\" cannot be looked up: {e}"))?
        .ok_or_else(|| format!("parameter user=\"{name}\" is not a user on this node"))?;
    let c =
        CString::new(name).map_err(|_| format!("parameter user=\"{name}\" is not a user name"))?;
    let groups = getgrouplist(&c, user.gid)
        .map_err(|e| format!("parameter user=\"{name}\": its groups cannot be read: {e}"))?;
    Ok((user.uid, user.gid, groups))
}

async fn systemctl(args: &[&str]) -> Result<std::process::ExitStatus, ServiceError> {
    let mut cmd = tokio::process::Command::new("systemctl");
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(90), cmd.status()).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(ServiceError::NotInstalled(format!("systemctl: {e}"))),
        Err(_) => Err(ServiceError::Failed(format!(
            "systemctl {} did not finish in 90 s",
            args.join(" ")
        ))),
    }
}

/// `systemctl is-active --quiet UNIT`.
pub async fn unit_active(unit: &str) -> bool {
    systemctl(&["is-active", "--quiet", "--", unit])
        .await
        .is_ok_and(|s| s.success())
}

impl ServiceSpec {
    /// Starts the service with `env` added to its environment. A command's output goes to
    /// the log, each line tagged `{tag}` (a unit's goes to the journal, as systemd does it).
    /// `wanted` is asked right before the fork (or `systemctl start`): a start that is no
    /// longer wanted (the guard lost its key meanwhile) is not made.
    pub async fn start(
        &self,
        env: &[(String, String)],
        tag: &str,
        wanted: &(dyn Fn() -> bool + Send + Sync),
    ) -> Result<Running, ServiceError> {
        let unwanted = || ServiceError::Failed("not started: the raise was abandoned".into());
        match self {
            ServiceSpec::Systemd { unit } => {
                if !wanted() {
                    return Err(unwanted());
                }
                let status = systemctl(&["start", "--", unit]).await?;
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
                workdir,
                user,
            } => {
                // Everything that reads files or allocates happens here, before the fork: the
                // child may only make plain system calls until it execs.
                let ids = user
                    .as_deref()
                    .map(credentials)
                    .transpose()
                    .map_err(ServiceError::NotInstalled)?;
                let mut cmd = std::process::Command::new(program);
                cmd.args(args)
                    .current_dir(workdir)
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
                // SAFETY: between fork and exec only system calls (setsid, setgroups, setgid,
                // setuid, prctl), on values computed before the fork; nothing allocates.
                unsafe {
                    cmd.pre_exec(move || {
                        setsid()?;
                        if let Some((uid, gid, groups)) = &ids {
                            setgroups(groups)?;
                            setgid(*gid)?;
                            setuid(*uid)?;
                        }
                        // After any credential change, which would clear it.
                        set_pdeathsig(Signal::SIGKILL)?;
                        Ok(())
                    });
                }
                if !wanted() {
                    return Err(unwanted());
                }
                let child = tokio::process::Command::from(cmd)
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| {
                        ServiceError::Failed(format!("cannot run {}: {e}", program.display()))
                    })?;
                // The write ends went with the (dropped) Command: the readers see EOF when the
                // service and everything it forked have closed them.
                super::output::forward(std::fs::File::from(out_r), tag.to_string());
                super::output::forward(std::fs::File::from(err_r), tag.to_string());
                let pid = child.id().unwrap_or(0);
                Ok(Running::Command {
                    child,
                    pid,
                    exited: None,
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

    /// Resolves when a supervised command exits (never for systemd units), with how it ended.
    pub async fn wait_exit(&mut self) -> String {
        match self {
            Running::Command { child, exited, .. } => {
                if let Some(e) = exited {
                    return e.clone();
                }
                let text = match child.wait().await {
                    Ok(s) => format!("exited ({s})"),
                    Err(e) => format!("lost ({e})"),
                };
                *exited = Some(text.clone());
                text
            }
            Running::Systemd { .. } => std::future::pending().await,
        }
    }

    /// Whether the service is still up: the child has not exited / the unit is active.
    pub async fn is_running(&mut self) -> bool {
        match self {
            Running::Command { child, exited, .. } => {
                if exited.is_some() {
                    return false;
                }
                match child.try_wait() {
                    Ok(None) => true,
                    Ok(Some(s)) => {
                        *exited = Some(format!("exited ({s})"));
                        false
                    }
                    Err(_) => false,
                }
            }
            Running::Systemd { unit } => systemctl(&["is-active", "--quiet", "--", unit])
                .await
                .is_ok_and(|s| s.success()),
        }
    }

    pub fn exit_detail(&self) -> Option<&str> {
        match self {
            Running::Command { exited, .. } => exited.as_deref(),
            Running::Systemd { .. } => None,
        }
    }

    /// TERM to the process group, KILL after `grace`; returns once the child is gone.
    pub async fn stop(&mut self, grace: Duration) -> Result<(), ServiceError> {
        match self {
            Running::Systemd { unit } => {
                let status = systemctl(&["stop", "--", unit]).await?;
                if status.success() {
                    Ok(())
                } else {
                    Err(ServiceError::Failed(format!(
                        "systemctl stop {unit} failed ({status})"
                    )))
                }
            }
            Running::Command { child, pid, exited } => {
                if exited.is_some() {
                    return Ok(());
                }
                signal_group(*pid, Signal::SIGTERM);
                let result = match tokio::time::timeout(grace, child.wait()).await {
                    Ok(r) => r,
                    Err(_) => {
                        signal_group(*pid, Signal::SIGKILL);
                        child.wait().await
                    }
                };
                // The group may hold children that outlived the leader.
                signal_group(*pid, Signal::SIGKILL);
                *exited = Some(match result {
                    Ok(s) => format!("stopped ({s})"),
                    Err(e) => format!("lost ({e})"),
                });
                Ok(())
            }
        }
    }
}

/// Whether anything of a service is left: its process group (the supervised command leads
/// its own), or the unit in any state but inactive or failed (a unit that is not loaded is
/// "inactive"). Err: systemctl could not say.
pub async fn anything_left(service: &super::ServiceRef) -> Result<bool, String> {
    use super::ServiceRef;
    match service {
        ServiceRef::Group(pid) if *pid > 1 => Ok(group_alive(*pid)),
        ServiceRef::Group(_) => Ok(false),
        ServiceRef::Unit(unit) => unit_state(unit).await.map(|s| unit_may_run(&s)),
    }
}

/// `systemctl is-active UNIT` as text (its exit code is 0 for "active" only, so "activating"
/// and "deactivating" need the text), within 5 s.
pub async fn unit_state(unit: &str) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new("systemctl");
    cmd.args(["is-active", "--", unit])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(5), cmd.output()).await {
        Ok(Ok(out)) => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Ok(Err(e)) => Err(format!("systemctl is-active {unit}: {e}")),
        Err(_) => Err(format!(
            "systemctl is-active {unit} did not answer within 5 s"
        )),
    }
}

/// Whether a unit in this state may still run something.
pub fn unit_may_run(state: &str) -> bool {
    !matches!(state, "inactive" | "failed" | "")
}

/// Sends `sig` to the process group led by `pid` (the service runs in its own session).
pub fn signal_group(pid: u32, sig: Signal) {
    if pid > 1 {
        let _ = killpg(Pid::from_raw(pid as i32), sig);
    }
}

/// Stops a service whose supervisor is gone: TERM to its group, KILL after `grace`, then
/// waits (to `limit` in all) for the group to be empty. The group is ours when its leader is
/// the process recorded (same pid and start time), or when the leader is gone and members
/// live on (its children: a group's id is not reused while the group lives). A live process
/// under that pid that is not the one recorded is somebody else's: nothing is signalled.
/// Returns whether nothing of it is left.
pub fn stop_orphan(pid: u32, start: Option<u64>, grace: Duration, limit: Duration) -> bool {
    if pid <= 1 {
        return true;
    }
    let ours = match crate::procfs::start_time(pid) {
        Some(_) => is_recorded_leader(pid, start),
        None => group_alive(pid),
    };
    if !ours {
        return true;
    }
    signal_group(pid, Signal::SIGTERM);
    let begun = std::time::Instant::now();
    let mut killed = false;
    while group_alive(pid) {
        let spent = begun.elapsed();
        if spent >= limit {
            return false;
        }
        if !killed && spent >= grace {
            signal_group(pid, Signal::SIGKILL);
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The recorded service: a live process with this pid and start time that leads its own
/// process group. Without a recorded start time nothing proves it ours, and nothing is
/// signalled: a command dies with its guard anyway (PR_SET_PDEATHSIG).
fn is_recorded_leader(pid: u32, start: Option<u64>) -> bool {
    start.is_some_and(|s| crate::procfs::same_process(pid, s))
        && crate::procfs::process_group(pid) == Some(pid)
}

fn group_alive(pid: u32) -> bool {
    // No signal: only whether the group still exists.
    killpg(Pid::from_raw(pid as i32), None).is_ok()
}
