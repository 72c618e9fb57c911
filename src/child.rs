//! What a freshly forked child may do before it execs: plain system calls only (no
//! allocation, no locks), on values computed in the parent before the fork.

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
    // SAFETY: close_range takes plain integers and touches only this process's descriptors.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) };
    if rc != 0 {
        for fd in first..limit {
            let _ = nix::unistd::close(fd);
        }
    }
}
