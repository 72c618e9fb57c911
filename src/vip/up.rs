//! Bringing a floating address up and taking it down, as both agents (and the guard) do it:
//! the sequence of netlink, probe, DAD and announcement steps, in one place.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use super::announce::{Announcer, ArpMode, MonotonicNs};
use super::burst::{self, BurstRequest};
use super::{Target, Vip, VipConfig, VipError};

/// How long IPv6 DAD is waited for where no action budget says less. The kernel's DAD takes
/// up to about 2 s at its defaults (a random delay of up to rtr_solicit_delay, 1 s, then
/// dad_transmits probes of retrans_time, 1 s each), more where those are raised.
pub const DAD_WAIT: Duration = Duration::from_secs(10);

/// Brings the address up on this host, as IPaddr2's start does: resolve the interface (findif),
/// keep an address that is already there, refuse a foreign copy, probe for duplicates
/// (`run_arping`), add it (with its broadcast address, label and flags), bring the interface
/// up, wait out IPv6 DAD (up to `dad_wait`), announce. A missing carrier does not stop it: the
/// address is ready when the link comes back. On failure nothing of ours is left behind.
pub fn bring_up(config: VipConfig, dad_wait: Duration, run_dir: &Path) -> Result<Target, VipError> {
    burst::cancel(run_dir, config.ip);
    let mut ready = prepare(config)?;
    if !ready.present {
        if ready.vip.config.lvs_support {
            lvs::take_from_loopback(&mut ready.vip, run_dir)?;
        }
        if let (IpAddr::V6(v6), Some(label)) = (ready.vip.config.ip, ready.vip.config.addrlabel) {
            // As IPaddr2: a label that cannot be added is worth a warning, not a failure.
            if let Err(e) = ready.vip.rtnl().addrlabel(true, v6, label) {
                log::warn!("address label {label} for {v6}: {e}");
            }
        }
        ready.vip.add(&ready.target)?;
        let c = &ready.vip.config;
        log::info!(
            "added {}/{} to {}",
            c.ip,
            ready.target.prefix,
            ready.target.link.name
        );
    }
    if let Err(e) = settle(&mut ready, dad_wait, run_dir, &|| true) {
        // Leave nothing half-done: a tentative or duplicate address is not ours to keep.
        if matches!(e, VipError::DadFailed { .. } | VipError::DadTimeout { .. }) {
            let _ = ready.vip.remove();
        }
        return Err(e);
    }
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

/// Everything before the add: the interface, a foreign copy, duplicates. The state of the link
/// (down, no carrier) is no reason to refuse, as in IPaddr2: settle brings it up.
pub fn prepare(config: VipConfig) -> Result<Ready, VipError> {
    let mut vip = Vip::new(config)?;
    let target = vip.target()?;
    let c = vip.config.clone();
    let mut present = false;
    for a in vip.copies()? {
        if a.index == target.link.index && a.prefix == target.prefix {
            log::info!(
                "{}/{} is already on {}",
                c.ip,
                target.prefix,
                target.link.name
            );
            present = true;
            continue;
        }
        let nic = vip
            .link(a.index)?
            .map_or_else(|| a.index.to_string(), |l| l.name);
        if c.lvs_support && nic.starts_with("lo") && a.prefix == 32 {
            continue; // LVS direct routing: taken over from lo by bring_up
        }
        return Err(VipError::Conflict {
            ip: c.ip,
            nic,
            prefix: a.prefix,
        });
    }
    if !present && c.run_arping && c.ip.is_ipv4() {
        check_no_duplicate(&target, c.ip)?;
    }
    Ok(Ready {
        vip,
        target,
        present,
    })
}

/// Everything after the add: the interface up (IPaddr2's `ip link set NIC up`), IPv6 DAD
/// (without carrier there is none to wait for yet), the announcements. `keep` is asked between
/// steps and frames: once it says no (the guard lost its key meanwhile), nothing more is
/// waited for or sent. It never removes the address: on failure its owner does (bring_up, or
/// the guard machine, the one writer of the guard's VIP).
pub fn settle(
    ready: &mut Ready,
    dad_wait: Duration,
    run_dir: &Path,
    keep: &dyn Fn() -> bool,
) -> Result<(), VipError> {
    let c = ready.vip.config.clone();
    let index = ready.target.link.index;
    if !ready.present && !ready.target.link.admin_up {
        ready.vip.set_link_up(index)?;
        log::info!("brought {} up", ready.target.link.name);
    }
    if c.ip.is_ipv6() && !c.nodad {
        let carrier = ready.vip.link(index)?.is_some_and(|l| l.carrier);
        if !carrier {
            log::warn!(
                "{} has no carrier: {} stays tentative until the link is back",
                ready.target.link.name,
                c.ip
            );
        } else {
            ready.vip.wait_dad(&ready.target, dad_wait, keep)?;
        }
    }
    if !keep() {
        return Err(VipError::Abandoned { ip: c.ip });
    }
    announce(&ready.target, &c, c.arp_count, run_dir, keep);
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

/// Sends the first frame now and hands the rest to a detached burst (or, with arp_bg=false,
/// sends them all before returning). Announcement trouble never fails the action: the address
/// is up, and peers will resolve it when caches expire. Nothing is announced on lo.
pub fn announce(
    target: &Target,
    c: &VipConfig,
    count: u32,
    run_dir: &Path,
    keep: &dyn Fn() -> bool,
) {
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
    let epoch = MonotonicNs::now();
    if !c.arp_bg {
        if let Err(e) = announcer.burst(0, count, c.arp_interval, epoch, keep) {
            log::warn!("announcing {}: {e}", c.ip);
        }
        return;
    }
    if let Err(e) = announcer.send(0) {
        return log::warn!("announcing {}: {e}", c.ip);
    }
    if count > 1 {
        let req = BurstRequest {
            nic: target.link.name.clone(),
            ip: c.ip,
            first: 1,
            count: count - 1,
            interval_ms: c.arp_interval.as_millis() as u64,
            mode: c.arp_mode,
            epoch_ns: Some(epoch.0),
            socket_fd: None,
            pidfile: None,
        };
        if let Err(e) = burst::spawn(&req, run_dir, Some(announcer.raw_fd())) {
            log::warn!("cannot start the announcement burst for {}: {e}", c.ip);
        }
        // The VIP may have been taken down while the burst was being spawned: a burst for an
        // address we no longer hold must not go on.
        if !keep() {
            burst::cancel(run_dir, c.ip);
        }
    }
}

/// Takes the address down, as IPaddr2's stop does: cancels a running burst, removes the address
/// where findif puts it (a copy elsewhere is not ours: start refused because of it), drops the
/// IPv6 address label, gives an LVS loopback copy back, flushes the routing cache if asked.
/// When findif cannot place it any more, removes it wherever nic and cidr_netmask allow.
/// Returns how many copies went.
pub fn take_down(config: VipConfig, run_dir: &Path) -> Result<usize, VipError> {
    burst::cancel(run_dir, config.ip);
    let mut vip = Vip::new(config)?;
    let removed = match vip.resolve() {
        Ok(r) => match vip.served(&r)? {
            Some(addr) => vip.delete(&addr)?,
            None => 0,
        },
        // findif no longer places it (route or interface gone): IPaddr2 would leave the
        // address up; remove it where the parameters allow it to be.
        Err(_) => vip.remove()?,
    };
    let c = vip.config.clone();
    if removed > 0 {
        log::info!("removed {}", c.ip);
        if c.flush_routes {
            flush_route_cache(c.ip);
        }
    }
    if let (IpAddr::V6(v6), Some(label)) = (c.ip, c.addrlabel) {
        let _ = vip.rtnl().addrlabel(false, v6, label);
    }
    if c.lvs_support {
        lvs::give_back_to_loopback(&mut vip, run_dir)?;
    }
    Ok(removed)
}

/// `ip route flush cache` for the address's family (IPaddr2 flushes IPv4's only).
fn flush_route_cache(ip: IpAddr) {
    let family = if ip.is_ipv6() { "ipv6" } else { "ipv4" };
    let path = format!("/proc/sys/net/{family}/route/flush");
    if let Err(e) = std::fs::write(&path, "1") {
        log::warn!("flushing the routing cache ({path}): {e}");
    }
}

/// LVS direct routing (lvs_support): a real server holds the VIP on lo as /32 so that it
/// accepts the director's packets. While the resource runs here the address moves to the
/// interface; stop puts the loopback copy back. What was taken is remembered in the run
/// directory, as IPaddr2 keeps it in $HA_RSCTMP.
mod lvs {
    use std::path::{Path, PathBuf};

    use crate::vip::{Target, Vip, VipError};

    fn saved(run_dir: &Path, vip: &Vip) -> PathBuf {
        run_dir.join(format!("lvs-loopback-{}", vip.config.ip))
    }

    pub fn take_from_loopback(vip: &mut Vip, run_dir: &Path) -> Result<(), VipError> {
        for a in vip.copies()? {
            let Some(link) = vip.link(a.index)? else {
                continue;
            };
            if !(link.name.starts_with("lo") && a.prefix == 32) {
                continue;
            }
            let _ = crate::runfiles::private_dir(run_dir);
            let file = saved(run_dir, vip);
            if let Err(e) = crate::runfiles::write_private(&file, link.name.as_bytes()) {
                log::error!(
                    "cannot save the loopback copy of {} ({e}): it will not be restored",
                    a.ip
                );
            }
            log::info!("LVS: taking {}/32 over from {}", a.ip, link.name);
            vip.delete(&a)?;
        }
        Ok(())
    }

    pub fn give_back_to_loopback(vip: &mut Vip, run_dir: &Path) -> Result<(), VipError> {
        let file = saved(run_dir, vip);
        let Ok(name) = std::fs::read_to_string(&file) else {
            return Ok(());
        };
        if let Some(link) = vip.link_by_name(name.trim())? {
            let ip = vip.config.ip;
            log::info!("LVS: giving {ip}/32 back to {}", link.name);
            let target = Target {
                link,
                prefix: 32,
                broadcast: Some(std::net::Ipv4Addr::BROADCAST),
            };
            let mut new = vip.new_addr(&target);
            new.label = None;
            vip.rtnl().add_address(&new)?;
        }
        let _ = std::fs::remove_file(file);
        Ok(())
    }
}
