//! The floating address: its typed configuration, interface lookup, adding and removing it
//! through netlink, IPv6 duplicate address detection, and announcing it.
//! It knows nothing of OCF: agents map its results onto exit codes.

pub mod announce;
pub mod burst;
pub mod findif;
pub mod netlink;
pub mod up;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use netlink_packet_route::address::AddressFlags;

use crate::params::vip as p;
use crate::params::{ConfigError, Values};
use announce::{AnnounceError, ArpMode};
use netlink::{Addr, Link, NetlinkError, NewAddr, Rtnl};

/// Longest interface name the kernel accepts (IFNAMSIZ - 1); labels obey it too.
const IFNAMSIZ_MAX: usize = 15;

/// The VIP parameters, parsed and checked without looking at the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipConfig {
    pub ip: IpAddr,
    pub prefix: Option<u8>,
    pub nic: Option<String>,
    pub iflabel: Option<String>,
    pub arp_count: u32,
    pub arp_interval: Duration,
    pub arp_count_refresh: u32,
    pub arp_mode: ArpMode,
    pub run_arping: bool,
    pub nodad: bool,
    pub noprefixroute: bool,
    /// Seconds; None = forever. Applies to IPv6 only, as in IPaddr2.
    pub preferred_lft: Option<u32>,
}

impl VipConfig {
    pub fn from_values(v: &Values) -> Result<VipConfig, ConfigError> {
        let ip_text = v.required(&p::IP)?;
        let ip = parse_ip(ip_text)?;
        let prefix = match v.get(&p::CIDR_NETMASK) {
            None => None,
            Some(m) => Some(parse_prefix(m, ip)?),
        };
        let nic = v.get(&p::NIC).map(|n| check_name(&p::NIC, n)).transpose()?;
        let iflabel = v
            .get(&p::IFLABEL)
            .map(|l| check_name(&p::IFLABEL, l))
            .transpose()?;
        let mode_text = v.required(&p::ARP_MODE)?;
        let arp_mode = ArpMode::parse(mode_text).ok_or_else(|| {
            ConfigError::invalid(&p::ARP_MODE, mode_text, "must be both, request or reply")
        })?;
        Ok(VipConfig {
            ip,
            prefix,
            nic,
            iflabel,
            arp_count: v.integer_in(&p::ARP_COUNT, 0..=1000)?.unwrap_or(5),
            arp_interval: Duration::from_millis(
                v.integer_in(&p::ARP_INTERVAL, 1..=60_000)?.unwrap_or(200),
            ),
            arp_count_refresh: v.integer_in(&p::ARP_COUNT_REFRESH, 0..=1000)?.unwrap_or(0),
            arp_mode,
            run_arping: v.boolean(&p::RUN_ARPING)?,
            nodad: v.boolean(&p::NODAD)?,
            noprefixroute: v.boolean(&p::NOPREFIXROUTE)?,
            preferred_lft: parse_lifetime(v.get(&p::PREFERRED_LFT))?,
        })
    }
}

impl VipConfig {
    /// The least needed to find and remove our address when the rest of the configuration is
    /// unusable: stop must still clean up what an earlier, valid configuration added.
    pub fn for_cleanup(v: &Values) -> Option<VipConfig> {
        let ip = parse_ip(v.get(&p::IP)?).ok()?;
        Some(VipConfig {
            ip,
            prefix: v
                .get(&p::CIDR_NETMASK)
                .and_then(|m| parse_prefix(m, ip).ok()),
            nic: v.get(&p::NIC).and_then(|n| check_name(&p::NIC, n).ok()),
            iflabel: None,
            arp_count: 0,
            arp_interval: Duration::from_millis(200),
            arp_count_refresh: 0,
            arp_mode: ArpMode::Both,
            run_arping: false,
            nodad: false,
            noprefixroute: false,
            preferred_lft: None,
        })
    }
}

fn parse_ip(text: &str) -> Result<IpAddr, ConfigError> {
    let ip: IpAddr = text
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(&p::IP, text, "is not an IPv4 or IPv6 address"))?;
    let unusable = ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_loopback()
        || matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    if unusable {
        return Err(ConfigError::invalid(
            &p::IP,
            text,
            "is not a unicast address a host can hold",
        ));
    }
    Ok(ip)
}

/// CIDR length (`24`, `/24`) or, for IPv4, a dotted netmask (`255.255.255.0`).
pub fn parse_prefix(text: &str, ip: IpAddr) -> Result<u8, ConfigError> {
    let max: u8 = if ip.is_ipv4() { 32 } else { 128 };
    let t = text.trim().trim_start_matches('/');
    if let Ok(n) = t.parse::<u8>() {
        if (1..=max).contains(&n) {
            return Ok(n);
        }
        return Err(ConfigError::invalid(
            &p::CIDR_NETMASK,
            text,
            format!("is out of range 1..{max}"),
        ));
    }
    if let (true, Ok(mask)) = (ip.is_ipv4(), t.parse::<std::net::Ipv4Addr>()) {
        let bits = u32::from(mask);
        if bits != 0 && bits.leading_ones() + bits.trailing_zeros() == 32 {
            return Ok(bits.leading_ones() as u8);
        }
    }
    Err(ConfigError::invalid(
        &p::CIDR_NETMASK,
        text,
        format!("is not a prefix length 1..{max} or a contiguous netmask"),
    ))
}

fn check_name(param: &crate::params::Param, name: &str) -> Result<String, ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= IFNAMSIZ_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != ':');
    if ok {
        Ok(name.to_string())
    } else {
        Err(ConfigError::invalid(
            param,
            name,
            "is not a valid interface name (1-15 characters, no '/', ':' or spaces)",
        ))
    }
}

fn parse_lifetime(text: Option<&str>) -> Result<Option<u32>, ConfigError> {
    match text.map(str::trim) {
        None | Some("forever") => Ok(None),
        Some(t) => match t.parse::<u32>() {
            Ok(n) if n < u32::MAX => Ok(Some(n)),
            _ => Err(ConfigError::invalid(
                &p::PREFERRED_LFT,
                t,
                "is not a number of seconds or 'forever'",
            )),
        },
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VipError {
    /// A value that is wrong wherever it runs (OCF_ERR_CONFIGURED).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// What this node lacks for a valid value (no interface of that name, no route for the
    /// address): another node may have it, so Pacemaker must try there (OCF_ERR_GENERIC, as
    /// IPaddr2's findif answers), never stop the resource everywhere.
    #[error(transparent)]
    NotHere(ConfigError),
    #[error("interface {nic} is down (no carrier or administratively down)")]
    LinkDown { nic: String },
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    #[error("{ip} is already configured on {nic} as {ip}/{prefix}, not as ours")]
    Conflict { ip: IpAddr, nic: String, prefix: u8 },
    #[error("{ip} is already in use by {mac} (ARP probe on {nic}); not adding it")]
    Duplicate {
        ip: IpAddr,
        nic: String,
        mac: String,
    },
    #[error("IPv6 duplicate address detection failed for {ip} on {nic} (dadfailed): another host holds it")]
    DadFailed { ip: IpAddr, nic: String },
    #[error(
        "IPv6 duplicate address detection for {ip} on {nic} did not finish within {waited_ms} ms"
    )]
    DadTimeout {
        ip: IpAddr,
        nic: String,
        waited_ms: u128,
    },
    #[error(transparent)]
    Announce(#[from] AnnounceError),
}

/// Where the address goes: the interface and the prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub link: Link,
    pub prefix: u8,
}

/// The floating address of one resource, bound to a netlink connection.
pub struct Vip {
    pub config: VipConfig,
    rtnl: Rtnl,
}

impl Vip {
    pub fn new(config: VipConfig) -> Result<Vip, VipError> {
        Ok(Vip {
            config,
            rtnl: Rtnl::open()?,
        })
    }

    /// Interface and prefix, from `nic`/`cidr_netmask` or the matching route.
    pub fn resolve(&mut self) -> Result<Target, VipError> {
        let c = &self.config;
        let routes = if c.nic.is_none() || c.prefix.is_none() {
            self.rtnl.routes(c.ip.is_ipv6())?
        } else {
            Vec::new()
        };
        let target = match &c.nic {
            Some(nic) => {
                let link = self.rtnl.link_by_name(nic)?.ok_or_else(|| {
                    VipError::NotHere(ConfigError::invalid(
                        &p::NIC,
                        nic,
                        "is not an interface on this host",
                    ))
                })?;
                let prefix = match c.prefix {
                    Some(prefix) => prefix,
                    None => findif::matching_route(
                        &routes
                            .iter()
                            .filter(|r| r.oif == Some(link.index))
                            .cloned()
                            .collect::<Vec<_>>(),
                        c.ip,
                    )
                    .map(|r| r.prefix)
                    .ok_or_else(|| {
                        VipError::NotHere(ConfigError::invalid(
                            &p::IP,
                            &c.ip.to_string(),
                            format!("matches no route on {nic}; set cidr_netmask"),
                        ))
                    })?,
                };
                Target { link, prefix }
            }
            None => {
                let route = findif::matching_route(&routes, c.ip).ok_or_else(|| {
                    VipError::NotHere(ConfigError::invalid(
                        &p::IP,
                        &c.ip.to_string(),
                        "matches no route on this host to find its interface by; set nic",
                    ))
                })?;
                let index = route.oif.unwrap_or_default();
                let prefix = c.prefix.unwrap_or(route.prefix);
                let link = self.rtnl.link_by_index(index)?.ok_or_else(|| {
                    VipError::NotHere(ConfigError::invalid(
                        &p::IP,
                        &c.ip.to_string(),
                        format!("routes via interface index {index}, which is gone"),
                    ))
                })?;
                Target { link, prefix }
            }
        };
        if let (Some(label), IpAddr::V4(_)) = (&c.iflabel, c.ip) {
            if target.link.name.len() + 1 + label.len() > IFNAMSIZ_MAX {
                let full = format!("{}:{label}", target.link.name);
                return Err(ConfigError::invalid(
                    &p::IFLABEL,
                    label,
                    format!("makes the label {full} longer than 15 characters"),
                )
                .into());
            }
        }
        Ok(target)
    }

    /// Our address as it is on the host now: the VIP, on `nic` when given, with
    /// `cidr_netmask` when given.
    pub fn find(&mut self) -> Result<Option<Addr>, VipError> {
        let nic_index = match &self.config.nic {
            Some(nic) => match self.rtnl.link_by_name(nic)? {
                Some(link) => Some(link.index),
                None => return Ok(None),
            },
            None => None,
        };
        let ip = self.config.ip;
        let prefix = self.config.prefix;
        Ok(self.rtnl.addresses(ip.is_ipv6())?.into_iter().find(|a| {
            a.ip == ip
                && nic_index.is_none_or(|i| a.index == i)
                && prefix.is_none_or(|p| a.prefix == p)
        }))
    }

    /// The VIP on any interface with any prefix: to tell "not ours" from "absent".
    pub fn find_any(&mut self) -> Result<Option<Addr>, VipError> {
        let ip = self.config.ip;
        Ok(self
            .rtnl
            .addresses(ip.is_ipv6())?
            .into_iter()
            .find(|a| a.ip == ip))
    }

    pub fn link(&mut self, index: u32) -> Result<Option<Link>, VipError> {
        Ok(self.rtnl.link_by_index(index)?)
    }

    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>, VipError> {
        Ok(self.rtnl.link_by_name(name)?)
    }

    /// The address to add on the target, as IPaddr2's parameters say (no valid lifetime).
    pub fn new_addr(&self, target: &Target) -> NewAddr {
        let c = &self.config;
        NewAddr {
            index: target.link.index,
            ip: c.ip,
            prefix: target.prefix,
            label: c
                .iflabel
                .as_ref()
                .map(|l| format!("{}:{l}", target.link.name)),
            nodad: c.nodad && c.ip.is_ipv6(),
            noprefixroute: c.noprefixroute,
            preferred_lft: if c.ip.is_ipv6() {
                c.preferred_lft
            } else {
                None
            },
            valid_lft: None,
        }
    }

    /// Adds the VIP to the target; an address that appeared meanwhile (`EEXIST`) is fine.
    pub fn add(&mut self, target: &Target) -> Result<(), VipError> {
        let new = self.new_addr(target);
        match self.rtnl.add_address(&new) {
            Err(e) if e.errno() == Some(libc::EEXIST) => Ok(()),
            other => Ok(other?),
        }
    }

    /// Removes every copy of our exact address; returns how many were removed.
    pub fn remove(&mut self) -> Result<usize, VipError> {
        let mut removed = 0;
        while let Some(addr) = self.find()? {
            match self.rtnl.del_address(&addr) {
                Ok(()) => removed += 1,
                // Gone between our look and our delete: someone else removed it.
                Err(e) if e.errno() == Some(libc::EADDRNOTAVAIL) => {}
                Err(e) => return Err(e.into()),
            }
            if removed > 16 {
                break;
            }
        }
        Ok(removed)
    }

    /// Waits until the kernel's duplicate address detection for the VIP on `target` is done.
    pub fn wait_dad(&mut self, target: &Target, limit: Duration) -> Result<(), VipError> {
        let started = Instant::now();
        let nic = target.link.name.clone();
        loop {
            let addr = self.find()?;
            match addr {
                Some(a) if a.flags.contains(AddressFlags::Dadfailed) => {
                    return Err(VipError::DadFailed {
                        ip: self.config.ip,
                        nic,
                    });
                }
                Some(a) if !a.flags.contains(AddressFlags::Tentative) => return Ok(()),
                _ => {}
            }
            if started.elapsed() >= limit {
                return Err(VipError::DadTimeout {
                    ip: self.config.ip,
                    nic,
                    waited_ms: started.elapsed().as_millis(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocf::OcfEnv;
    use crate::params::vip::VIP_AGENT;

    fn config(vars: &[(&str, &str)]) -> Result<VipConfig, ConfigError> {
        let env = OcfEnv::from_vars(
            vars.iter()
                .map(|(k, v)| (format!("OCF_RESKEY_{k}"), v.to_string())),
        );
        VipConfig::from_values(&Values::from_ocf(&VIP_AGENT, &env))
    }

    #[test]
    fn defaults_match_ipaddr2() {
        let c = config(&[("ip", "192.0.2.10")]).unwrap();
        assert_eq!(c.arp_count, 5);
        assert_eq!(c.arp_interval, Duration::from_millis(200));
        assert_eq!(c.arp_mode, ArpMode::Both);
        assert_eq!((c.prefix, c.nic, c.preferred_lft), (None, None, None));
        assert!(!c.run_arping && !c.nodad && !c.noprefixroute);
    }

    #[test]
    fn any_valid_ipv6_spelling_is_accepted_and_normalised() {
        let a = config(&[("ip", "2001:0DB8:0000::0010")]).unwrap();
        let b = config(&[("ip", "2001:db8::10")]).unwrap();
        assert_eq!(a.ip, b.ip);
    }

    #[test]
    fn netmask_accepts_cidr_and_dotted_and_rejects_out_of_range() {
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(parse_prefix("24", v4), Ok(24));
        assert_eq!(parse_prefix("/25", v4), Ok(25));
        assert_eq!(parse_prefix("255.255.255.0", v4), Ok(24));
        assert_eq!(parse_prefix("64", v6), Ok(64));
        assert!(parse_prefix("33", v4)
            .unwrap_err()
            .to_string()
            .contains("cidr_netmask=\"33\" is out of range 1..32"));
        assert!(parse_prefix("129", v6).is_err());
        assert!(parse_prefix("0", v4).is_err());
        assert!(parse_prefix("255.0.255.0", v4).is_err());
    }

    #[test]
    fn bad_values_name_parameter_and_value() {
        let cases = [
            (vec![], "required parameter ip is not set"),
            (
                vec![("ip", "300.1.1.1")],
                "parameter ip=\"300.1.1.1\" is not an IPv4 or IPv6 address",
            ),
            (
                vec![("ip", "224.0.0.1")],
                "parameter ip=\"224.0.0.1\" is not a unicast address",
            ),
            (
                vec![("ip", "192.0.2.1"), ("arp_count", "many")],
                "parameter arp_count=\"many\" is not a non-negative integer",
            ),
            (
                vec![("ip", "192.0.2.1"), ("arp_interval", "-5")],
                "parameter arp_interval=\"-5\"",
            ),
            (
                vec![("ip", "192.0.2.1"), ("arp_mode", "gratuitous")],
                "parameter arp_mode=\"gratuitous\" must be both, request or reply",
            ),
            (
                vec![("ip", "192.0.2.1"), ("nic", "eth0:1")],
                "parameter nic=\"eth0:1\" is not a valid interface name",
            ),
            (
                vec![("ip", "192.0.2.1"), ("nodad", "perhaps")],
                "parameter nodad=\"perhaps\" is not a boolean",
            ),
            (
                vec![("ip", "2001:db8::1"), ("preferred_lft", "soon")],
                "parameter preferred_lft=\"soon\"",
            ),
        ];
        for (vars, expected) in cases {
            let err = config(&vars).unwrap_err().to_string();
            assert!(
                err.starts_with(expected),
                "{vars:?}: got {err:?}, want {expected:?}"
            );
        }
    }
}
