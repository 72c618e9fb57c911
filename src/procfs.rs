//! Recognising our own processes by pid: a pidfile alone is not proof, since pids are reused.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::Signal;

/// One particular process, proven when opened: a pidfd (Linux 5.3 and later) taken while the
/// pid still carried the start time read before it; where the kernel has no pidfd (RHEL 8's
/// 4.18), the pid and that start time, compared again right before each signal. A signal never
/// reaches a process that took the pid later.
#[derive(Debug)]
pub struct Process {
    pid: u32,
    start: u64,
    pidfd: Option<OwnedFd>,
}

impl Process {
    /// The process that has `pid` now; None when there is none.
    pub fn open(pid: u32) -> Option<Process> {
        if pid <= 1 {
            return None;
        }
        let start = start_time(pid)?;
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor, or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        let pidfd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) });
        // Still the same start time: the pidfd (or the pid) names the process read before.
        (start_time(pid) == Some(start)).then_some(Process { pid, start, pidfd })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `sig` to this process only. ESRCH: it is gone (its pid may be another's now).
    pub fn signal(&self, sig: Signal) -> Result<(), Errno> {
        match &self.pidfd {
            Some(fd) => {
                // SAFETY: pidfd_send_signal(2) on our own open pidfd, no siginfo, no flags.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        sig as libc::c_int,
                        std::ptr::null::<libc::siginfo_t>(),
                        0u32,
                    )
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(Errno::last())
                }
            }
            None if same_process(self.pid, self.start) => {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), sig)
            }
            None => Err(Errno::ESRCH),
        }
    }
}

/// Whether `pid` is a live (not zombie) process whose argv contains every one of `args`.
pub fn live_with_args(pid: u32, args: &[&str]) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let matches = args.iter().all(|a| argv.contains(&a.as_bytes()));
    let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true);
    matches && !zombie
}

/// The fields of /proc/PID/stat after the command name (which may hold spaces and ')').
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    fields_of(&format!("/proc/{pid}/stat"))
}

/// The fields of the stat file at `path` after the command name.
fn fields_of(path: &str) -> Option<Vec<String>> {
    let stat = fs::read_to_string(path).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(String::from).collect())
}

/// How long ago this process was forked: its start time (field 22 of /proc/self/stat, in
/// clock ticks of CLOCK_BOOTTIME, which is how the kernel counts it) against CLOCK_BOOTTIME
/// now. It covers what a parent that timed the fork (Pacemaker's executor) counts and the
/// process itself cannot see: the exec, the loading. None where it cannot be read. Rounded up
/// by at most a tick (the start time is in whole ticks).
pub fn own_age() -> Option<std::time::Duration> {
    let ticks = start_in("/proc/self/stat")?;
    // SAFETY: sysconf only reads a constant of the C library.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    if hz == 0 {
        return None;
    }
    let started = std::time::Duration::from_nanos(ticks.checked_mul(1_000_000_000)? / hz);
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    std::time::Duration::from(now).checked_sub(started)
}

/// When `pid` started, in clock ticks since boot (field 22 of /proc/PID/stat): with the pid it
/// names one process for good, since a reused pid starts later.
pub fn start_time(pid: u32) -> Option<u64> {
    start_in(&format!("/proc/{pid}/stat"))
}

/// The start time (field 22) in the stat file at `path`.
fn start_in(path: &str) -> Option<u64> {
    // Fields after the name start at field 3 (state): field 22 is index 19.
    fields_of(path)?.get(19)?.parse().ok()
}

/// The process group of `pid` (field 5).
pub fn process_group(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

/// Whether `pid` has exited and waits to be reaped.
pub fn is_zombie(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s == "Z"))
}

/// The members of a process group as /proc shows them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GroupMembers {
    /// Members that run (not zombies).
    pub live: Vec<u32>,
    /// Members that have exited and wait to be reaped.
    pub zombies: u32,
}

/// Every process in group `pgid`, from a walk over /proc. A process that ends during the walk
/// is skipped; a /proc that cannot be read is an error (never "no members").
pub fn group_members(pgid: u32) -> Result<GroupMembers, String> {
    let dir = fs::read_dir("/proc").map_err(|e| format!("cannot read /proc: {e}"))?;
    let mut members = GroupMembers::default();
    for entry in dir {
        let entry = entry.map_err(|e| format!("cannot read /proc: {e}"))?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(s) => s,
            // Ended between the listing and the read.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) => {
                continue
            }
            Err(e) => return Err(format!("cannot read /proc/{pid}/stat: {e}")),
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return Err(format!("/proc/{pid}/stat cannot be read: {stat:?}"));
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(pgid) {
            continue;
        }
        match fields.first() {
            Some(&"Z") => members.zombies += 1,
            _ => members.live.push(pid),
        }
    }
    Ok(members)
}

/// Whether `pid` is still the very process recorded with `start` (not a reuse of its pid),
/// alive or a zombie.
pub fn same_process(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

#[cfg(test)]
mod tests {
    #[test]
    fn our_own_process_is_recognised_by_its_args_only() {
        let me = std::process::id();
        let argv0 = std::env::args_os()
            .next()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(super::live_with_args(me, &[&argv0]));
        assert!(!super::live_with_args(me, &[&argv0, "no-such-arg"]));
        assert!(!super::live_with_args(u32::MAX, &[]));
    }

    #[test]
    fn a_process_opened_is_signalled_and_a_gone_one_never_again() {
        use nix::sys::signal::Signal;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let p = super::Process::open(child.id()).expect("opened");
        assert_eq!(p.signal(Signal::SIGCONT), Ok(()));
        assert_eq!(p.signal(Signal::SIGKILL), Ok(()));
        let _ = child.wait();
        // Reaped: its pid may be anybody's now; the signal goes nowhere.
        assert_eq!(p.signal(Signal::SIGKILL), Err(nix::errno::Errno::ESRCH));
        assert!(super::Process::open(u32::MAX).is_none());
    }

    #[test]
    fn own_age_grows_with_the_clock_it_is_read_against() {
        let age = super::own_age().expect("our own age");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let later = super::own_age().expect("our own age");
        let grown = later.saturating_sub(age);
        assert!(
            grown >= std::time::Duration::from_millis(290)
                && grown < std::time::Duration::from_secs(5),
            "{age:?} then {later:?}"
        );
    }

    #[test]
    fn a_process_is_named_by_its_pid_and_start_time() {
        let me = std::process::id();
        let start = super::start_time(me).expect("our own start time");
        assert!(super::same_process(me, start));
        assert!(
            !super::same_process(me, start + 1),
            "another start: another process"
        );
        assert_eq!(super::start_time(u32::MAX), None);
        assert!(super::process_group(me).is_some());
    }
}
