//! `hamaster announce`: send a burst of announcements for an address this host holds. Also
//! the detached background half of an agent's start burst (`--first`, `--pidfile`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::vip::announce::{Announcer, ArpMode, MonotonicNs};
use crate::vip::burst;
use crate::vip::netlink::Rtnl;

#[derive(Debug, Args)]
pub struct AnnounceArgs {
    /// Interface that holds the address.
    #[arg(long)]
    pub nic: String,
    /// The address to announce; it must be on NIC.
    #[arg(long)]
    pub ip: IpAddr,
    /// Number of frames.
    #[arg(long, default_value_t = 5)]
    pub count: u32,
    /// Milliseconds between frames.
    #[arg(long = "interval-ms", default_value_t = 200)]
    pub interval_ms: u64,
    /// ARP frames: both (alternating), request or reply.
    #[arg(long, default_value = "both", value_parser = ["both", "request", "reply"])]
    pub mode: String,
    /// Index of the first frame (decides where request/reply alternation starts).
    #[arg(long, default_value_t = 0, hide = true)]
    pub first: u32,
    /// Monotonic time (ns) at which frame 0 left; defaults to "frame FIRST is due now".
    #[arg(long = "epoch-ns", hide = true)]
    pub epoch_ns: Option<u64>,
    /// Packet socket inherited from the agent that started the burst.
    #[arg(long = "socket-fd", hide = true)]
    pub socket_fd: Option<i32>,
    /// Pidfile to remove on exit when it names this process.
    #[arg(long, hide = true)]
    pub pidfile: Option<PathBuf>,
}

impl super::Verb for AnnounceArgs {
    fn exec(&self) -> i32 {
        crate::logging::init("hamaster-announce");
        run(self)
    }
}

fn run(a: &AnnounceArgs) -> i32 {
    let code = match announce(a) {
        Ok(sent) => {
            log::debug!("sent {sent} announcements for {}", a.ip);
            0
        }
        Err(e) => {
            log::error!("announce {}: {e}", a.ip);
            1
        }
    };
    if let Some(p) = &a.pidfile {
        burst::release_pidfile(p);
    }
    code
}

fn announce(a: &AnnounceArgs) -> Result<u32, Box<dyn std::error::Error>> {
    let mode = ArpMode::parse(&a.mode).ok_or("bad --mode")?;
    let mut rtnl = Rtnl::open()?;
    let link = rtnl
        .link_by_name(&a.nic)?
        .ok_or_else(|| format!("no interface {}", a.nic))?;
    let mut announcer = match a.socket_fd {
        Some(fd) => Announcer::open_inherited(&link, a.ip, mode, fd)?,
        None => Announcer::open(&link, a.ip, mode)?,
    };
    // Never announce an address this host does not hold: stop may have removed it meanwhile.
    let mut still_ours = || {
        rtnl.addresses(a.ip.is_ipv6())
            .map(|addrs| addrs.iter().any(|x| x.ip == a.ip && x.index == link.index))
            .unwrap_or(false)
    };
    let interval = Duration::from_millis(a.interval_ms);
    let epoch = a.epoch_ns.map(MonotonicNs).unwrap_or_else(|| {
        let now = MonotonicNs::now().0;
        MonotonicNs(now.saturating_sub(interval.as_nanos() as u64 * u64::from(a.first)))
    });
    let sent = announcer.burst(a.first, a.count, interval, epoch, &mut still_ours)?;
    Ok(sent)
}
