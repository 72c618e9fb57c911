//! Running the service: a child process in its own session that dies with its parent
//! (PR_SET_PDEATHSIG), or a systemd unit driven through systemctl. Stopping sends TERM to the
//! whole process group, then KILL after a grace period.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::time::Duration;

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

/// uid, gid and name of a user, from the passwd database.
pub fn lookup_user(name: &str) -> Result<(u32, u32), String> {
    let c =
        CString::new(name).map_err(|_| format!("parameter user=\"{name}\" is not a user name"))?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we copy what we need at once.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return Err(format!(
            "parameter user=\"{name}\" is not a user on this node"
        ));
    }
    // SAFETY: non-null pointer from getpwnam.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok((uid, gid))
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
    /// Starts the service with `env` added to its environment.
    pub async fn start(&self, env: &[(String, String)]) -> Result<Running, ServiceError> {
        match self {
            ServiceSpec::Systemd { unit } => {
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
                let ids = user
                    .as_deref()
                    .map(lookup_user)
                    .transpose()
                    .map_err(ServiceError::NotInstalled)?;
                let user_name = user
                    .as_deref()
                    .map(|u| CString::new(u).expect("checked by lookup_user"));
                let mut cmd = std::process::Command::new(program);
                cmd.args(args)
                    .current_dir(workdir)
                    .envs(env.iter().map(|(k, v)| (k, v)));
                cmd.stdin(std::process::Stdio::null());
                // SAFETY: only async-signal-safe calls between fork and exec.
                unsafe {
                    cmd.pre_exec(move || {
                        libc::setsid();
                        if let (Some((uid, gid)), Some(name)) = (ids, &user_name) {
                            if libc::setgid(gid) != 0
                                || libc::initgroups(name.as_ptr(), gid) != 0
                                || libc::setuid(uid) != 0
                            {
                                return Err(std::io::Error::last_os_error());
                            }
                        }
                        // After any credential change, which would clear it.
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
                let child = tokio::process::Command::from(cmd)
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| {
                        ServiceError::Failed(format!("cannot run {}: {e}", program.display()))
                    })?;
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
                signal_group(*pid, libc::SIGTERM);
                let result = match tokio::time::timeout(grace, child.wait()).await {
                    Ok(r) => r,
                    Err(_) => {
                        signal_group(*pid, libc::SIGKILL);
                        child.wait().await
                    }
                };
                // The group may hold children that outlived the leader.
                signal_group(*pid, libc::SIGKILL);
                *exited = Some(match result {
                    Ok(s) => format!("stopped ({s})"),
                    Err(e) => format!("lost ({e})"),
                });
                Ok(())
            }
        }
    }
}

/// Sends `sig` to the process group led by `pid` (the service runs in its own session).
pub fn signal_group(pid: u32, sig: i32) {
    if pid > 1 {
        // SAFETY: kill(2) with a negative pid addresses the process group.
        unsafe { libc::kill(-(pid as i32), sig) };
    }
}

/// Stops a service whose supervisor is gone, by pid: TERM, wait up to `grace`, KILL.
/// Used by demote when the guard can no longer do it.
pub fn stop_orphan(pid: u32, grace: Duration) {
    if pid <= 1 {
        return;
    }
    signal_group(pid, libc::SIGTERM);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline && group_alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_group(pid, libc::SIGKILL);
}

fn group_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-(pid as i32), 0) == 0 }
}
