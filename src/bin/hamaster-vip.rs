//! ocf:hamaster:vip as a program of its own, installed as /usr/lib/ocf/resource.d/hamaster/vip.
//!
//! Pacemaker executes the agent for every monitor (every 10 s by default, for every VIP), so
//! what it costs is mostly what it costs to start (docs/benchmarks.md, "Where a monitor's time
//! goes"). In hamaster's binary the agent paid for the guard beside it — 7.6 MB, 6,000
//! relocations applied at every start — and for std's start-up (its stack guard read from
//! /proc/self/maps, its signal stack). This program links only the agent's code and starts at
//! the C runtime's `main`: the same library code (one VIP writer, one set of parameters), at
//! 1.34× /bin/true's start-up where hamaster's binary was at 2.05×.
//!
//! Of std's start-up it keeps what an agent relies on: descriptors 0–2 open (a closed one is
//! pointed at /dev/null, so that no socket or file the agent opens takes its number) and
//! SIGPIPE ignored (a write to a closed pipe is an error to report, not a death by signal).
//! It gives up the message std prints on a stack overflow: the process still dies by SIGSEGV.

#![no_main]

use std::ffi::{c_char, c_int};
use std::io::Write;
use std::os::fd::IntoRawFd;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::sys::signal::{signal, SigHandler, Signal};

// GCC's unwinder linked in statically (libgcc_eh.a, what `gcc -static-libgcc` links; part of
// the gcc package on RHEL), ahead of std's `-lgcc_s`: the linker then finds every _Unwind_*
// symbol here and, with --as-needed, drops libgcc_s.so.1, so the loader maps and binds one
// library (libc) instead of two at every monitor. panic=abort never unwinds; std still
// references the unwinder for backtraces. docs/benchmarks.md, "Where a monitor's time goes".
// SAFETY: the block declares no function; it only names a library to link.
#[link(name = "gcc_eh", kind = "static")]
unsafe extern "C" {}

// SAFETY: the C runtime calls `main` once, before any other code of this program runs, with
// the process's argc/argv; std's own `main` is not built (no_main), so nothing else defines
// the symbol. std reads argv itself (its init_array hook on glibc): the arguments go unused.
#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    standard_descriptors();
    // SAFETY: SIG_IGN installs no handler: no code of ours runs on the signal.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigIgn) };
    // std::env::args() panics on an argument that is not UTF-8: such bytes become U+FFFD,
    // and the action or value they spell is refused with a reason like any other unknown one.
    let args = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let exit = hamaster::vip_agent_main(args);
    // std's exit path would flush its buffered stdout (meta-data) and the logger: ours does.
    let _ = std::io::stdout().flush();
    log::logger().flush();
    exit.code()
}

/// Descriptors 0, 1 and 2 open: a closed one gets /dev/null (open takes the lowest free
/// number, which is the closed one), as std's start-up does.
fn standard_descriptors() {
    for fd in 0..=2 {
        if fcntl(fd, FcntlArg::F_GETFD) == Err(Errno::EBADF) {
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null");
            // Kept open for the process's life: it is the descriptor now.
            let _ = null.map(IntoRawFd::into_raw_fd);
        }
    }
}
