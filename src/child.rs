//! How hamaster's children are made: what a freshly forked child does before it execs, in one
//! place — plain system calls only (no allocation, no locks), on values computed in the parent
//! before the fork. The detached children (the guard, an announcement burst) start a session
//! of their own and inherit no descriptor past stderr but the one they are handed; the
//! service starts a session of its own, under its user, and dies with its guard.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sys::prctl::set_pdeathsig;
use nix::sys::signal::Signal;
use nix::unistd::{dup2, setgid, setgroups, setsid, setuid, Gid, Uid};

/// The highest descriptor number a child could have inherited, read before the fork.
pub fn fd_limit() -> i32 {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft.min(1 << 20) as i32)
        .unwrap_or(1024)
}

/// Closes every descriptor from `first` on: close_range(2) where the kernel has it (5.9+),
/// else one close(2) per number below `limit` (RHEL 8's kernel 4.18 has no close_range).
/// Async-signal-safe.
pub fn close_from(first: i32, limit: i32) {
    // SAFETY: close_range takes plain integers and touches only this process's descriptors
    // (nix has no wrapper for it).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) };
    if rc != 0 {
        for fd in first..limit {
            let _ = nix::unistd::close(fd);
        }
    }
}

/// The child starts a session of its own (no terminal, no signal of the agent's group reaches
/// it) and keeps no descriptor past stderr, but `keep`: (the parent's descriptor, the number
/// the child receives it as). So pacemaker-execd, which waits for the agent's stdout and
/// stderr to close, is never held by it.
pub fn detached(cmd: &mut Command, keep: Option<(RawFd, RawFd)>) {
    let limit = fd_limit();
    // SAFETY: between fork and exec only setsid(2), fcntl(2)/dup2(2) and close(2)/
    // close_range(2), on values computed before the fork.
    unsafe {
        cmd.pre_exec(move || {
            setsid()?;
            let first_closed = match keep {
                // dup2 onto itself would keep close-on-exec set.
                Some((fd, as_fd)) if fd == as_fd => {
                    let kept = fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty())).is_ok();
                    if kept {
                        as_fd + 1
                    } else {
                        as_fd
                    }
                }
                Some((fd, as_fd)) => match dup2(fd, as_fd) {
                    Ok(_) => as_fd + 1,
                    Err(_) => as_fd,
                },
                None => 3,
            };
            close_from(first_closed, limit);
            Ok(())
        });
    }
}

/// The service's process: a session (and process group) of its own, the user's groups and
/// ids when `ids` names them, and SIGKILL when its parent, the guard, dies.
pub fn service(cmd: &mut Command, ids: Option<(Uid, Gid, Vec<Gid>)>) {
    // SAFETY: between fork and exec only system calls (setsid, setgroups, setgid, setuid,
    // prctl), on values computed before the fork; nothing allocates.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_child_leads_its_session_and_keeps_only_the_descriptor_it_is_handed() {
        use std::os::fd::AsRawFd;
        // Descriptors the child must not see (numbers above 4), and one it is handed as 3.
        let pipes: Vec<_> = (0..3).map(|_| nix::unistd::pipe().unwrap()).collect();
        let kept = pipes[0].0.as_raw_fd();
        assert!(pipes[2].1.as_raw_fd() > 4);
        let mut cmd = Command::new("sh");
        // ls's own directory descriptor shows too: at most one number above 3.
        cmd.args([
            "-c",
            "echo $(ls /proc/self/fd); cut -d' ' -f6 /proc/$$/stat; echo $$",
        ])
        .stdout(std::process::Stdio::piped());
        detached(&mut cmd, Some((kept, 3)));
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let lines: Vec<&str> = text.lines().collect();
        let fds: Vec<i32> = lines[0]
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        assert!(fds.contains(&3), "{text}");
        assert!(fds.iter().filter(|fd| **fd > 3).count() <= 1, "{text}");
        assert_eq!(
            lines[1], lines[2],
            "the child leads its own session: {text}"
        );
    }
}
