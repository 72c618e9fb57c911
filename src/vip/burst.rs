//! The background part of an announcement burst: a detached `hamaster announce` process
//! that sends the frames after the first, so `start` need not wait for them. One per
//! address, found again through a pidfile so that a later stop or start can cancel it.

use std::fs;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::announce::{ArpMode, MonotonicNs};

pub fn pidfile(run_dir: &Path, ip: IpAddr) -> PathBuf {
    run_dir.join("announce").join(format!("{ip}.pid"))
}

/// What the detached process is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BurstRequest {
    pub nic: String,
    pub ip: IpAddr,
    /// Index of the first frame to send (frames before it were sent in the foreground).
    pub first: u32,
    pub count: u32,
    pub interval: Duration,
    pub mode: ArpMode,
    /// When frame 0 left: frame `n` is due at `epoch + n·interval`.
    pub epoch: MonotonicNs,
}

impl BurstRequest {
    pub fn args(&self) -> Vec<String> {
        vec![
            "announce".into(),
            "--nic".into(),
            self.nic.clone(),
            "--ip".into(),
            self.ip.to_string(),
            "--count".into(),
            self.count.to_string(),
            "--interval-ms".into(),
            self.interval.as_millis().to_string(),
            "--mode".into(),
            self.mode.name().into(),
            "--first".into(),
            self.first.to_string(),
            "--epoch-ns".into(),
            self.epoch.0.to_string(),
            "--pidfile".into(),
        ]
    }
}

/// The descriptor number under which the burst receives the packet socket.
pub const INHERITED_SOCKET_FD: RawFd = 3;

/// Starts the burst in a new session with no inherited descriptors but `socket` (as fd 3), so
/// that pacemaker-execd (which waits for the agent's stdout/stderr to close) is not held by it.
pub fn spawn(req: &BurstRequest, run_dir: &Path, socket: Option<RawFd>) -> std::io::Result<u32> {
    let pidfile = pidfile(run_dir, req.ip);
    if let Some(dir) = pidfile.parent() {
        crate::runfiles::private_dir(dir)?;
    }
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("hamaster").args(req.args()).arg(&pidfile);
    if socket.is_some() {
        cmd.args(["--socket-fd", &INHERITED_SOCKET_FD.to_string()]);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let limit = crate::child::fd_limit();
    // SAFETY: between fork and exec only setsid(2), fcntl(2)/dup2(2) and close(2)/
    // close_range(2), on values computed before the fork.
    unsafe {
        cmd.pre_exec(move || {
            use nix::fcntl::{fcntl, FcntlArg, FdFlag};
            nix::unistd::setsid()?;
            let keep = match socket {
                // dup2 onto itself would keep close-on-exec set.
                Some(fd) if fd == INHERITED_SOCKET_FD => {
                    fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty())).is_ok()
                }
                Some(fd) => nix::unistd::dup2(fd, INHERITED_SOCKET_FD).is_ok(),
                None => false,
            };
            let first_closed = if keep {
                INHERITED_SOCKET_FD + 1
            } else {
                INHERITED_SOCKET_FD
            };
            crate::child::close_from(first_closed, limit);
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id();
    // Reaped by a thread of its own: a long-lived guard would otherwise keep one zombie per
    // burst (and `cancel` would wait on a pid that never goes). In a short-lived agent the
    // thread ends with the process and init reaps the burst.
    std::thread::spawn(move || child.wait());
    crate::runfiles::write_private(&pidfile, format!("{pid}\n"))?;
    Ok(pid)
}

/// Stops a running burst for `ip`, if any, and waits (bounded) until it is gone. Returns
/// whether one was running.
pub fn cancel(run_dir: &Path, ip: IpAddr) -> bool {
    let path = pidfile(run_dir, ip);
    let Some(pid) = fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    else {
        return false;
    };
    let _ = fs::remove_file(&path);
    if !is_burst_for(pid, ip) {
        return false;
    }
    // A pid we just verified to be our announcer.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    let deadline = Instant::now() + Duration::from_millis(500);
    while is_burst_for(pid, ip) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Removes the pidfile when it still names this process (called by the burst on exit).
pub fn release_pidfile(path: &Path) {
    let me = std::process::id().to_string();
    if fs::read_to_string(path).is_ok_and(|s| s.trim() == me) {
        let _ = fs::remove_file(path);
    }
}

/// A live `hamaster announce` process for this address: guards against pid reuse.
fn is_burst_for(pid: i32, ip: IpAddr) -> bool {
    pid > 0 && crate::procfs::live_with_args(pid as u32, &["announce", &ip.to_string()])
}
