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
use crate::params::vip as vp;

pub fn pidfile(run_dir: &Path, ip: IpAddr) -> PathBuf {
    run_dir.join("announce").join(format!("{ip}.pid"))
}

/// What a burst is to do: the arguments of `hamaster announce`. One type both ways: the agent
/// that spawns the detached burst writes them (`args`), the burst parses them (clap), and the
/// defaults are the vip agent's parameter table's.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct BurstRequest {
    /// Interface that holds the address.
    #[arg(long)]
    pub nic: String,
    /// The address to announce; it must be on NIC.
    #[arg(long)]
    pub ip: IpAddr,
    /// Number of frames.
    #[arg(long, default_value = vp::ARP_COUNT.default)]
    pub count: u32,
    /// Milliseconds between frames.
    #[arg(long = "interval-ms", default_value = vp::ARP_INTERVAL.default)]
    pub interval_ms: u64,
    /// ARP frames: both (alternating), request or reply.
    #[arg(long, value_enum, default_value = vp::ARP_MODE.default)]
    pub mode: ArpMode,
    /// Index of the first frame to send (frames before it were sent in the foreground; it
    /// decides where request/reply alternation starts).
    #[arg(long, default_value_t = 0, hide = true)]
    pub first: u32,
    /// Monotonic time (ns) at which frame 0 left: frame `n` is due at `epoch + n·interval`;
    /// none: "frame FIRST is due now".
    #[arg(long = "epoch-ns", hide = true)]
    pub epoch_ns: Option<u64>,
    /// Packet socket inherited from the agent that started the burst.
    #[arg(long = "socket-fd", hide = true)]
    pub socket_fd: Option<i32>,
    /// Pidfile to remove on exit when it names this process.
    #[arg(long, hide = true)]
    pub pidfile: Option<PathBuf>,
}

impl BurstRequest {
    /// The argv (after the program's name) that parses back into this request.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            "announce".into(),
            "--nic".into(),
            self.nic.clone(),
            "--ip".into(),
            self.ip.to_string(),
            "--count".into(),
            self.count.to_string(),
            "--interval-ms".into(),
            self.interval_ms.to_string(),
            "--mode".into(),
            self.mode.name().into(),
            "--first".into(),
            self.first.to_string(),
        ];
        let optional = [
            ("--epoch-ns", self.epoch_ns.map(|e| e.to_string())),
            ("--socket-fd", self.socket_fd.map(|fd| fd.to_string())),
            (
                "--pidfile",
                self.pidfile.as_ref().map(|p| p.display().to_string()),
            ),
        ];
        for (flag, value) in optional {
            if let Some(value) = value {
                args.extend([flag.to_string(), value]);
            }
        }
        args
    }

    pub fn interval(&self) -> Duration {
        vp::ARP_INTERVAL.duration_of(self.interval_ms)
    }

    /// When frame 0 left (or is taken to have left).
    pub fn epoch(&self) -> MonotonicNs {
        self.epoch_ns.map(MonotonicNs).unwrap_or_else(|| {
            let now = MonotonicNs::now().0;
            MonotonicNs(
                now.saturating_sub(self.interval().as_nanos() as u64 * u64::from(self.first)),
            )
        })
    }
}

/// The descriptor number under which the burst receives the packet socket.
pub const INHERITED_SOCKET_FD: RawFd = 3;

/// Starts the burst in a new session with no inherited descriptors but `socket` (as fd 3), so
/// that pacemaker-execd (which waits for the agent's stdout/stderr to close) is not held by it.
/// The request's pidfile and socket are set here.
pub fn spawn(req: &BurstRequest, run_dir: &Path, socket: Option<RawFd>) -> std::io::Result<u32> {
    let pidfile = pidfile(run_dir, req.ip);
    if let Some(dir) = pidfile.parent() {
        crate::runfiles::private_dir(dir)?;
    }
    let req = BurstRequest {
        pidfile: Some(pidfile.clone()),
        socket_fd: socket.map(|_| INHERITED_SOCKET_FD),
        ..req.clone()
    };
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("hamaster").args(req.args());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    crate::child::detached(&mut cmd, socket.map(|fd| (fd, INHERITED_SOCKET_FD)));
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
    // Opened first, then checked: the process proven to be our announcer is the one signalled.
    let Some(burst) = crate::procfs::Process::open(pid as u32).filter(|_| is_burst_for(pid, ip))
    else {
        return false;
    };
    let _ = burst.signal(nix::sys::signal::Signal::SIGTERM);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        verb: Verb,
    }

    #[derive(clap::Subcommand)]
    enum Verb {
        Announce(BurstRequest),
    }

    fn parsed(args: Vec<String>) -> BurstRequest {
        use clap::Parser;
        let Verb::Announce(req) =
            Cli::try_parse_from(std::iter::once("hamaster".to_string()).chain(args))
                .unwrap()
                .verb;
        req
    }

    #[test]
    fn a_request_parses_back_from_the_arguments_it_writes() {
        let full = BurstRequest {
            nic: "lan0".into(),
            ip: "2001:db8::10".parse().unwrap(),
            count: 4,
            interval_ms: 150,
            mode: ArpMode::Reply,
            first: 1,
            epoch_ns: Some(123_456_789),
            socket_fd: Some(INHERITED_SOCKET_FD),
            pidfile: Some(PathBuf::from("/run/hamaster/announce/2001:db8::10.pid")),
        };
        assert_eq!(parsed(full.args()), full);
        let bare = BurstRequest {
            epoch_ns: None,
            socket_fd: None,
            pidfile: None,
            ..full
        };
        assert_eq!(parsed(bare.args()), bare);
    }

    #[test]
    fn the_commands_defaults_are_the_vip_agents() {
        let req = parsed(vec![
            "announce".into(),
            "--nic".into(),
            "lan0".into(),
            "--ip".into(),
            "192.0.2.10".into(),
        ]);
        assert_eq!(req.count.to_string(), vp::ARP_COUNT.default.unwrap());
        assert_eq!(
            req.interval_ms.to_string(),
            vp::ARP_INTERVAL.default.unwrap()
        );
        assert_eq!(req.mode.name(), vp::ARP_MODE.default.unwrap());
        assert_eq!(req.first, 0);
    }
}
