//! `hamaster announce`: send a burst of announcements for an address this host holds. Also
//! the detached background half of an agent's start burst (`--first`, `--pidfile`).

use super::CliError;
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::presence::Presence;
use crate::vip::announce::Announcer;
use crate::vip::burst;
use crate::vip::netlink::{AddrMatch, Rtnl};

pub use crate::vip::burst::BurstRequest as AnnounceArgs;

impl super::Verb for AnnounceArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init("hamaster-announce");
        run(self).map_err(|e| Failed::from(e).logged())?;
        Ok(OcfExit::Success)
    }
}

fn run(a: &AnnounceArgs) -> Result<(), CliError> {
    let sent = announce(a).map_err(|e| CliError::Announce {
        ip: a.ip,
        detail: e.to_string(),
    });
    match &sent {
        Ok(n) => log::debug!("sent {n} announcements for {}", a.ip),
        Err(e) => log::error!("{e}"),
    }
    if let Some(p) = &a.pidfile {
        burst::release_pidfile(p);
    }
    sent.map(drop)
}

fn announce(a: &AnnounceArgs) -> Result<u32, Box<dyn std::error::Error>> {
    let mut rtnl = Rtnl::open()?;
    let link = rtnl
        .link_by_name(&a.nic)?
        .ok_or_else(|| format!("no interface {}", a.nic))?;
    let mut announcer = match a.socket_fd {
        Some(fd) => Announcer::open_inherited(&link, a.ip, a.mode, fd)?,
        None => Announcer::open(&link, a.ip, a.mode)?,
    };
    // Never announce an address this host does not hold: stop may have removed it meanwhile.
    // A look that cannot tell stops the burst too: a frame for an address we may not hold
    // would take it from its holder.
    let ours = AddrMatch::on(a.ip, link.index);
    let mut still_ours = || rtnl.presence(&ours) == Presence::Present;
    let sent = announcer.burst(a.first, a.count, a.interval(), a.epoch(), &mut still_ours)?;
    Ok(sent)
}
