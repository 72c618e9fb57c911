//! The guard's claims on the scheduler and on memory, in one place: its memory locked (a
//! guard paged out under pressure could not fence in time), its threads at a raised priority
//! with SCHED_RESET_ON_FORK (the service and every child start at the normal one), and the
//! fencing thread real-time. nix wraps mlockall; sched_setscheduler and the nice value it
//! does not, so they stay here, each with its SAFETY line.

use nix::sys::mman::{mlockall, MlockAllFlags};

/// mlockall(MCL_CURRENT | MCL_FUTURE).
pub fn lock_memory() -> Result<(), String> {
    mlockall(MlockAllFlags::MCL_CURRENT | MlockAllFlags::MCL_FUTURE)
        .map_err(|e| format!("cannot lock the guard's memory: {e}"))
}

/// The calling thread's policy, with SCHED_RESET_ON_FORK; `priority` is the real-time one
/// (0 for SCHED_OTHER).
fn set_scheduler(policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler(0, …) changes the calling thread only; param is a valid
    // sched_param that lives across the call.
    let rc = unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The calling thread's nice value, never raised above what it is (an administrator's own
/// lower value is kept).
fn nice_at_most(nice: libc::c_int) -> std::io::Result<()> {
    // SAFETY: getpriority and setpriority take plain integers (PRIO_PROCESS 0: the calling
    // thread on Linux).
    let rc = unsafe {
        let now = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, now.min(nice))
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The guard's runtime thread: SCHED_OTHER with SCHED_RESET_ON_FORK, nice −10.
pub fn raise_thread() -> Result<(), String> {
    set_scheduler(libc::SCHED_OTHER, 0)
        .and_then(|()| nice_at_most(-10))
        .map_err(|e| format!("cannot raise the guard's priority: {e}"))
}

/// The fencing thread: SCHED_FIFO 10 so that a busy machine does not make it late (it sleeps
/// but for a few system calls at each wake-up). Without the privilege (or in a cgroup with no
/// real-time budget) nice −10 instead, never less than the shell's; without that either the
/// normal priority (the guard runs as root under Pacemaker, so it has both).
pub fn realtime_thread() {
    if set_scheduler(libc::SCHED_FIFO, 10).is_err() {
        let _ = set_scheduler(libc::SCHED_OTHER, 0);
        let _ = nice_at_most(-10);
    }
}
