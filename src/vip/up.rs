//! Bringing a floating address up and taking it down, as both agents (and the guard) do it:
//! the sequence of netlink, probe, DAD and announcement steps, in one place.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use super::announce::{Announcer, ArpMode, MonotonicNs};
use super::burst::{self, BurstRequest};
use super::{Target, Vip, VipConfig, VipError};

/// Brings the address up on this host: resolve the interface, refuse a foreign copy, probe for
/// duplicates (`run_arping`), add it, wait out IPv6 DAD (up to `dad_wait`), announce. An
/// address already present with our prefix on our interface is kept. On failure nothing of
/// ours is left behind.
pub fn bring_up(config: VipConfig, dad_wait: Duration, run_dir: &Path) -> Result<Target, VipError> {
    burst::cancel(run_dir, config.ip);
    let mut ready = prepare(config)?;
    if !ready.present {
        ready.vip.add(&ready.target)?;
        let c = &ready.vip.config;
        log::info!(
            "added {}/{} to {}",
            c.ip,
            ready.target.prefix,
            ready.target.link.name
        );
    }
    settle(&mut ready, dad_wait, run_dir)?;
    Ok(ready.target)
}

/// The VIP resolved and checked, ready to be added (by `bring_up`, or by the guard's fencing
/// side, which adds it with a kernel lifetime).
pub struct Ready {
    pub vip: Vip,
    pub target: Target,
    /// Already on the target with our prefix: kept as it is.
    pub present: bool,
}

/// Everything before the add: the interface, carrier, a foreign copy, duplicates.
pub fn prepare(config: VipConfig) -> Result<Ready, VipError> {
    let mut vip = Vip::new(config)?;
    let target = vip.resolve()?;
    if !target.link.is_up() {
        return Err(VipError::LinkDown {
            nic: target.link.name.clone(),
        });
    }
    let c = vip.config.clone();
    let present = match vip.find_any()? {
        Some(a) if a.index == target.link.index && a.prefix == target.prefix => {
            log::info!(
                "{}/{} is already on {}",
                c.ip,
                target.prefix,
                target.link.name
            );
            true
        }
        Some(a) => {
            let nic = vip
                .link(a.index)?
                .map_or_else(|| a.index.to_string(), |l| l.name);
            return Err(VipError::Conflict {
                ip: c.ip,
                nic,
                prefix: a.prefix,
            });
        }
        None => {
            if c.run_arping && c.ip.is_ipv4() {
                check_no_duplicate(&target, c.ip)?;
            }
            false
        }
    };
    Ok(Ready {
        vip,
        target,
        present,
    })
}

/// Everything after the add: IPv6 DAD (a failed one removes the address), announcements.
pub fn settle(ready: &mut Ready, dad_wait: Duration, run_dir: &Path) -> Result<(), VipError> {
    let c = ready.vip.config.clone();
    if c.ip.is_ipv6() && !c.nodad {
        if let Err(e) = ready.vip.wait_dad(&ready.target, dad_wait) {
            // Leave nothing half-done: a tentative or duplicate address is not ours to keep.
            let _ = ready.vip.remove();
            return Err(e);
        }
    }
    announce(&ready.target, &c, c.arp_count, run_dir);
    Ok(())
}

/// Refuses an IPv4 address that another host already answers for (`run_arping`).
fn check_no_duplicate(target: &Target, ip: IpAddr) -> Result<(), VipError> {
    if target.link.mac.is_none() {
        return Ok(());
    }
    let mut announcer = Announcer::open(&target.link, ip, ArpMode::Request)?;
    match announcer.probe_duplicate(2, Duration::from_millis(200), Duration::from_millis(400))? {
        Some(mac) => Err(VipError::Duplicate {
            ip,
            nic: target.link.name.clone(),
            mac: mac.to_string(),
        }),
        None => Ok(()),
    }
}

/// Sends the first frame now and hands the rest to a detached burst. Announcement trouble
/// never fails the action: the address is up, and peers will resolve it when caches expire.
pub fn announce(target: &Target, c: &VipConfig, count: u32, run_dir: &Path) {
    if count == 0 {
        return;
    }
    if target.link.mac.is_none() {
        log::info!(
            "{} has no link-layer address: nothing to announce",
            target.link.name
        );
        return;
    }
    let mut announcer = match Announcer::open(&target.link, c.ip, c.arp_mode) {
        Ok(a) => a,
        Err(e) => return log::warn!("announcing {}: {e}", c.ip),
    };
    if let Err(e) = announcer.send(0) {
        return log::warn!("announcing {}: {e}", c.ip);
    }
    let epoch = MonotonicNs::now();
    if count > 1 {
        let req = BurstRequest {
            nic: target.link.name.clone(),
            ip: c.ip,
            first: 1,
            count: count - 1,
            interval: c.arp_interval,
            mode: c.arp_mode,
            epoch,
        };
        if let Err(e) = burst::spawn(&req, run_dir, Some(announcer.raw_fd())) {
            log::warn!("cannot start the announcement burst for {}: {e}", c.ip);
        }
    }
}

/// Cancels a running burst and removes our exact address; returns how many copies went.
pub fn take_down(config: VipConfig, run_dir: &Path) -> Result<usize, VipError> {
    burst::cancel(run_dir, config.ip);
    let mut vip = Vip::new(config)?;
    let removed = vip.remove()?;
    if removed > 0 {
        log::info!("removed {}", vip.config.ip);
    }
    Ok(removed)
}
