//! The floating address: its typed configuration, interface lookup, adding and removing it
//! through netlink, IPv6 duplicate address detection, and announcing it.
//! It knows nothing of OCF beyond mapping its own errors to exit codes (ocf::failure).

pub mod announce;
pub mod burst;
pub mod findif;
pub mod frames;
pub mod netlink;
pub mod sessions;
pub mod tickle;
pub mod up;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use netlink_packet_route::address::AddressFlags;

use crate::params::vip as p;
use crate::params::{ConfigError, Values};
use crate::presence::Presence;
use announce::{AnnounceError, ArpMode};
use netlink::{Addr, AddrMatch, Link, NetlinkError, NewAddr, Rtnl};

/// Longest interface name the kernel accepts (IFNAMSIZ - 1); labels obey it too.
const IFNAMSIZ_MAX: usize = 15;

/// The VIP parameters, parsed and checked without looking at the system.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VipConfig {
    pub ip: IpAddr,
    pub prefix: Option<u8>,
    pub nic: Option<String>,
    /// From iflabel, or from nic=NIC:LABEL (which wins, as in IPaddr2). IPv4 only.
    pub iflabel: Option<String>,
    /// IPv4 only: None derives it from the base address, as IPaddr2's findif does.
    pub broadcast: Option<Broadcast>,
    pub arp_count: u32,
    pub arp_interval: Duration,
    pub arp_count_refresh: u32,
    pub arp_mode: ArpMode,
    /// false: every announcement before start returns (IPaddr2's arp_bg=false).
    pub arp_bg: bool,
    pub run_arping: bool,
    pub nodad: bool,
    pub noprefixroute: bool,
    /// Seconds; None = forever. Applies to IPv6 only, as in IPaddr2.
    pub preferred_lft: Option<u32>,
    pub flush_routes: bool,
    /// LVS direct routing: take the address over from lo, give it back on stop (IPv4).
    pub lvs_support: bool,
    /// The IPv6 address label to hold while up (lvs_ipv6_addrlabel).
    pub addrlabel: Option<u32>,
    pub network_namespace: Option<String>,
}

/// The broadcast parameter: an address, or `+`/`-` (host bits set/clear), as `ip addr add brd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Broadcast {
    Addr(Ipv4Addr),
    HostBitsSet,
    HostBitsClear,
}

impl Broadcast {
    fn parse(text: &str) -> Option<Broadcast> {
        match text.trim() {
            "+" => Some(Broadcast::HostBitsSet),
            "-" => Some(Broadcast::HostBitsClear),
            t => t.parse().ok().map(Broadcast::Addr),
        }
    }

    /// The address this asks for, for `ip/prefix`.
    pub fn address(self, ip: Ipv4Addr, prefix: u8) -> Ipv4Addr {
        let host = if prefix >= 32 { 0 } else { u32::MAX >> prefix };
        match self {
            Broadcast::Addr(a) => a,
            Broadcast::HostBitsSet => Ipv4Addr::from(u32::from(ip) | host),
            Broadcast::HostBitsClear => Ipv4Addr::from(u32::from(ip) & !host),
        }
    }
}

/// IPaddr2's arp_sender values for Ethernet; all of them map onto the in-process sender.
const ARP_SENDERS: [&str; 3] = ["send_arp", "iputils_arping", "libnet_arping"];

impl VipConfig {
    /// Takes `other`'s announcement settings (the reloadable ones, src/params/vip.rs).
    pub fn take_announcements_of(&mut self, other: &VipConfig) {
        self.arp_count = other.arp_count;
        self.arp_interval = other.arp_interval;
        self.arp_count_refresh = other.arp_count_refresh;
        self.arp_mode = other.arp_mode;
        self.arp_bg = other.arp_bg;
        self.run_arping = other.run_arping;
    }

    pub fn from_values(v: &Values) -> Result<VipConfig, ConfigError> {
        let ip_text = v.required(&p::IP)?;
        let ip = parse_ip(ip_text)?;
        let prefix = match v.get(&p::CIDR_NETMASK) {
            None => None,
            Some(m) => Some(parse_prefix(m, ip)?),
        };
        let (nic, nic_label) = match v.get(&p::NIC) {
            None => (None, None),
            Some(n) => {
                let (name, label) = match n.split_once(':') {
                    Some((name, label)) => (name, Some(label)),
                    None => (n, None),
                };
                let name = check_name(&p::NIC, n, name)?;
                let label = label.map(|l| check_name(&p::NIC, n, l)).transpose()?;
                (Some(name), label)
            }
        };
        let iflabel = match nic_label {
            Some(l) => Some(l),
            None => v
                .get(&p::IFLABEL)
                .map(|l| check_name(&p::IFLABEL, l, l))
                .transpose()?,
        };
        if let (IpAddr::V6(v6), None) = (ip, &nic) {
            if v6.is_unicast_link_local() {
                return Err(ConfigError::invalid(
                    &p::IP,
                    ip_text,
                    "is an IPv6 link-local address: nic is required with it",
                ));
            }
        }
        let broadcast = match (ip, v.get(&p::BROADCAST)) {
            (IpAddr::V4(_), Some(b)) => Some(Broadcast::parse(b).ok_or_else(|| {
                ConfigError::invalid(&p::BROADCAST, b, "is not an IPv4 address, '+' or '-'")
            })?),
            (IpAddr::V6(_), Some(b)) => {
                return Err(ConfigError::invalid(
                    &p::BROADCAST,
                    b,
                    "is for IPv4 only: IPv6 has no broadcast address",
                ))
            }
            _ => None,
        };
        let mode_text = v.required(&p::ARP_MODE)?;
        let arp_mode = ArpMode::parse(mode_text).ok_or_else(|| {
            ConfigError::invalid(&p::ARP_MODE, mode_text, "must be both, request or reply")
        })?;
        if let Some(sender) = v.get(&p::ARP_SENDER) {
            if sender.trim() == "ipoibarping" {
                // IPaddr2's choice for InfiniBand: only Ethernet frames are built here.
                return Err(ConfigError::invalid(
                    &p::ARP_SENDER,
                    sender,
                    "is for IP over InfiniBand, whose announcements are not supported: only \
                     Ethernet frames are sent",
                ));
            }
            if !ARP_SENDERS.contains(&sender.trim()) {
                return Err(ConfigError::invalid(
                    &p::ARP_SENDER,
                    sender,
                    format!("is not one of {}", ARP_SENDERS.join(", ")),
                ));
            }
        }
        if let Some(opts) = v.get(&p::SEND_ARP_OPTS).filter(|o| !o.trim().is_empty()) {
            return Err(ConfigError::invalid(
                &p::SEND_ARP_OPTS,
                opts,
                "has no meaning here: announcements are sent in-process (use arp_mode, \
                 arp_count and arp_interval)",
            ));
        }
        let (lvs_support, addrlabel, network_namespace) = ipaddr2_only(v, ip)?;
        Ok(VipConfig {
            ip,
            prefix,
            nic,
            iflabel,
            broadcast,
            arp_count: v.number(&p::ARP_COUNT)?,
            arp_interval: v.duration(&p::ARP_INTERVAL)?,
            arp_count_refresh: v.number(&p::ARP_COUNT_REFRESH)?,
            arp_mode,
            arp_bg: match v.get(&p::ARP_BG) {
                None => true,
                Some(_) => v.boolean(&p::ARP_BG)?,
            },
            run_arping: v.boolean(&p::RUN_ARPING)?,
            nodad: v.boolean(&p::NODAD)?,
            noprefixroute: v.boolean(&p::NOPREFIXROUTE)?,
            preferred_lft: parse_lifetime(v.get(&p::PREFERRED_LFT), ip)?,
            flush_routes: v.boolean(&p::FLUSH_ROUTES)?,
            lvs_support,
            addrlabel,
            network_namespace,
        })
    }
}

/// The parameters an entry of a list of further VIPs may set: the VIP's own (src/params/vip.rs).
static ENTRY_PARAMS: [crate::params::Param; p::ALL.len()] = p::ALL;

impl VipConfig {
    /// Further VIPs given in one parameter (`list`, the master's extra_vips): entries
    /// separated by ';', each the VIP's parameters as `name=value` separated by white space,
    /// parsed and checked as the VIP's own parameters are. Every error names `list`, the
    /// entry, and what is wrong with it. An empty text is no VIP.
    pub fn list_from(
        list: &crate::params::Param,
        text: &str,
        max: usize,
    ) -> Result<Vec<VipConfig>, ConfigError> {
        let entries: Vec<&str> = text
            .split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.len() > max {
            return Err(ConfigError::invalid(
                list,
                &brief(text),
                format!("names {} addresses: at most {max}", entries.len()),
            ));
        }
        let mut vips = Vec::new();
        for entry in entries {
            let bad = |problem: String| ConfigError::invalid(list, &brief(entry), problem);
            let values =
                entry_values(entry).map_err(|(at, why)| ConfigError::invalid(list, &at, why))?;
            // The entry's own setting named (Pacemaker keeps 128 characters of a reason).
            let config = VipConfig::from_values(&values).map_err(|e| match e {
                ConfigError::Invalid {
                    param,
                    value,
                    problem,
                } => ConfigError::invalid(list, &format!("{param}={value}"), problem),
                other => bad(format!("is wrong: {other}")),
            })?;
            vips.push(config);
        }
        Ok(vips)
    }

    /// The least of each entry of a list of further VIPs needed to find and remove it (see
    /// `for_cleanup`): entries that do not say even that are left out.
    pub fn list_for_cleanup(text: &str) -> Vec<VipConfig> {
        text.split(';')
            .filter_map(|e| entry_values(e.trim()).ok())
            .filter_map(|v| VipConfig::for_cleanup(&v))
            .collect()
    }
}

/// A long value cut for a reason line (Pacemaker keeps 128 characters of it).
pub fn brief(text: &str) -> String {
    match text.char_indices().nth(32) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// One entry of a list of further VIPs as the VIP's parameters, or what is wrong with it: the
/// words at fault and why.
fn entry_values(entry: &str) -> Result<Values, (String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for word in entry.split_whitespace() {
        let Some((name, value)) = word.split_once('=') else {
            return Err((word.into(), "is not name=value".into()));
        };
        if !ENTRY_PARAMS.iter().any(|q| q.name == name) {
            return Err((
                word.into(),
                "is not one of the VIP's parameters (ocf:hamaster:vip's, without LVS)".into(),
            ));
        }
        if pairs.iter().any(|(n, _)| n == name) {
            return Err((word.into(), format!("sets {name} twice in one entry")));
        }
        pairs.push((name.to_string(), value.to_string()));
    }
    if !pairs.iter().any(|(n, _)| n == p::IP.name) {
        return Err((brief(entry), "has no ip=".into()));
    }
    Ok(Values::from_cib(&ENTRY_PARAMS, pairs))
}

/// The parameters only `ocf:hamaster:vip` has (LVS, CLUSTERIP, namespace): what it does with
/// them, and a clear refusal of IPaddr2's CLUSTERIP mode.
fn ipaddr2_only(
    v: &Values,
    ip: IpAddr,
) -> Result<(bool, Option<u32>, Option<String>), ConfigError> {
    if !v.knows(&p::LVS_SUPPORT) {
        return Ok((false, None, None));
    }
    let clusterip = "IPaddr2's iptables CLUSTERIP mode is not supported by vip (CLUSTERIP is \
        deprecated and gone from current kernels)";
    if let Some(mac) = v.get(&p::MAC).filter(|m| !m.trim().is_empty()) {
        return Err(ConfigError::invalid(&p::MAC, mac, clusterip));
    }
    let hash = v.get(&p::CLUSTERIP_HASH).unwrap_or_default();
    if Some(hash) != p::CLUSTERIP_HASH.default {
        return Err(ConfigError::invalid(&p::CLUSTERIP_HASH, hash, clusterip));
    }
    if v.boolean(&p::UNIQUE_CLONE_ADDRESS)? {
        return Err(ConfigError::invalid(
            &p::UNIQUE_CLONE_ADDRESS,
            v.get(&p::UNIQUE_CLONE_ADDRESS).unwrap_or_default(),
            clusterip,
        ));
    }
    let lvs = v.boolean(&p::LVS_SUPPORT)?;
    if lvs && ip.is_ipv6() {
        return Err(ConfigError::invalid(
            &p::LVS_SUPPORT,
            v.get(&p::LVS_SUPPORT).unwrap_or_default(),
            "is for IPv4 only (IPv6: lvs_ipv6_addrlabel)",
        ));
    }
    let addrlabel = if v.boolean(&p::LVS_IPV6_ADDRLABEL)? {
        if ip.is_ipv4() {
            return Err(ConfigError::invalid(
                &p::LVS_IPV6_ADDRLABEL,
                v.get(&p::LVS_IPV6_ADDRLABEL).unwrap_or_default(),
                "is for IPv6 only",
            ));
        }
        v.integer::<u32>(&p::LVS_IPV6_ADDRLABEL_VALUE)?
    } else {
        None
    };
    let netns = match v.get(&p::NETWORK_NAMESPACE).map(str::trim) {
        None | Some("") => None,
        Some(n) if n.len() <= 255 && !n.contains('/') && n != "." && n != ".." => {
            Some(n.to_string())
        }
        Some(n) => {
            return Err(ConfigError::invalid(
                &p::NETWORK_NAMESPACE,
                n,
                "is not a namespace name (a file name under /run/netns)",
            ))
        }
    };
    Ok((lvs, addrlabel, netns))
}

impl VipConfig {
    /// The least needed to find and remove our address when the rest of the configuration is
    /// unusable: stop must still clean up what an earlier, valid configuration added.
    pub fn for_cleanup(v: &Values) -> Option<VipConfig> {
        let ip = parse_ip(v.get(&p::IP)?).ok()?;
        let nic = v.get(&p::NIC).map(|n| n.split(':').next().unwrap_or(n));
        Some(VipConfig {
            ip,
            prefix: v
                .get(&p::CIDR_NETMASK)
                .and_then(|m| parse_prefix(m, ip).ok()),
            nic: nic.and_then(|n| check_name(&p::NIC, n, n).ok()),
            iflabel: None,
            broadcast: None,
            // Nothing is announced on the way down: the announcement settings go unused.
            arp_count: 0,
            arp_interval: Duration::ZERO,
            arp_count_refresh: 0,
            arp_mode: ArpMode::Both,
            arp_bg: true,
            run_arping: false,
            nodad: false,
            noprefixroute: false,
            preferred_lft: None,
            flush_routes: false,
            lvs_support: false,
            addrlabel: None,
            network_namespace: v
                .get_if_known(&p::NETWORK_NAMESPACE)
                .filter(|n| !n.trim().is_empty() && !n.contains('/'))
                .map(|n| n.trim().to_string()),
        })
    }
}

fn parse_ip(text: &str) -> Result<IpAddr, ConfigError> {
    let ip: IpAddr = text
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(&p::IP, text, "is not an IPv4 or IPv6 address"))?;
    // 127.0.0.0/8 is held on lo by LVS direct-routing real servers, as IPaddr2 allows; ::1 and
    // the rest cannot be a floating address anywhere.
    let unusable = ip.is_unspecified()
        || ip.is_multicast()
        || ip == IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        || matches!(ip, IpAddr::V4(v4) if v4.is_broadcast() || v4.octets()[0] == 0);
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

/// An interface name or label part (`part`) of the value `whole` given for `param`.
fn check_name(
    param: &crate::params::Param,
    whole: &str,
    part: &str,
) -> Result<String, ConfigError> {
    let ok = !part.is_empty()
        && part.len() <= IFNAMSIZ_MAX
        && part
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != ':');
    if ok {
        Ok(part.to_string())
    } else {
        Err(ConfigError::invalid(
            param,
            whole,
            "is not a valid interface name (1-15 characters, no '/' or spaces; nic:label \
             for a label)",
        ))
    }
}

/// preferred_lft: seconds or 'forever'; IPv6 only (IPaddr2 ignores it for IPv4), never empty.
fn parse_lifetime(text: Option<&str>, ip: IpAddr) -> Result<Option<u32>, ConfigError> {
    let invalid = |t: &str, why: &str| Err(ConfigError::invalid(&p::PREFERRED_LFT, t, why));
    match text.map(str::trim) {
        None | Some("forever") => Ok(None),
        Some("") => invalid("", "is empty: give seconds or 'forever'"),
        Some(_) if ip.is_ipv4() => Ok(None),
        Some(t) => match t.parse::<u32>() {
            Ok(n) if n < u32::MAX => Ok(Some(n)),
            _ => invalid(t, "is not a number of seconds or 'forever'"),
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
    /// The guard lost its key while the address was settling: nothing more was done for it.
    #[error("raising {ip} abandoned: the leader key was lost meanwhile")]
    Abandoned { ip: IpAddr },
    #[error(transparent)]
    Announce(#[from] AnnounceError),
    /// network_namespace names a namespace this node cannot enter.
    #[error("parameter network_namespace=\"{name}\": cannot enter {}: {source}", path.display())]
    Namespace {
        name: String,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Where the address belongs, as IPaddr2's findif answers: the interface (which need not
/// exist when nic and cidr_netmask are both given), the prefix length, and the base address
/// the matching route names as its source (for the broadcast address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub nic: String,
    pub link: Option<Link>,
    pub prefix: u8,
    pub base: Option<IpAddr>,
}

/// Where the address goes: an interface that exists, the prefix length, the broadcast address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub link: Link,
    pub prefix: u8,
    pub broadcast: Option<Ipv4Addr>,
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

    /// Interface and prefix, from the parameters and the matching route (findif). Without a
    /// route, nic and cidr_netmask must both be given. Trouble of this node (no route, the
    /// route's interface gone) is `NotHere`.
    pub fn resolve(&mut self) -> Result<Resolved, VipError> {
        self.resolve_for(false)
    }

    /// `for_start`: the base address is wanted too (for the broadcast address), so the routes
    /// are read even when nic and cidr_netmask are both given. A monitor with both reads none.
    fn resolve_for(&mut self, for_start: bool) -> Result<Resolved, VipError> {
        let c = self.config.clone();
        let link = match &c.nic {
            Some(nic) => self.rtnl.link_by_name(nic)?,
            None => None,
        };
        let wants_base = for_start && c.ip.is_ipv4() && c.broadcast.is_none();
        let routes = if c.nic.is_none() || c.prefix.is_none() || wants_base {
            self.rtnl.routes(c.ip.is_ipv6())?
        } else {
            Vec::new()
        };
        let lookup = findif::Lookup {
            // A nic that is not here has no routes: the lookup must find none.
            oif: c.nic.as_ref().map(|_| link.as_ref().map_or(0, |l| l.index)),
            netmask: c.prefix,
        };
        let route = findif::matching_route(&routes, c.ip, lookup).cloned();
        let (nic, link, prefix) = match (&c.nic, c.prefix, &route) {
            (Some(nic), Some(prefix), _) => (nic.clone(), link, prefix),
            (Some(nic), _, None) if link.is_none() => {
                return Err(VipError::NotHere(ConfigError::invalid(
                    &p::NIC,
                    nic,
                    "is not an interface on this host",
                )));
            }
            (_, _, None) => {
                let why = match &c.nic {
                    Some(nic) => format!("matches no route on {nic}; set cidr_netmask"),
                    None if c.prefix.is_some() => "matches no route here that contains the \
                        whole network of cidr_netmask (findif); set nic, or a narrower \
                        cidr_netmask"
                        .to_string(),
                    None => "matches no route on this host to find its interface by; set nic \
                        and cidr_netmask"
                        .to_string(),
                };
                return Err(VipError::NotHere(ConfigError::invalid(
                    &p::IP,
                    &c.ip.to_string(),
                    why,
                )));
            }
            // nic names the interface, even if it is not here (the 127/8 fallback route
            // ignores nic, as findif's does).
            (Some(nic), None, Some(r)) => (nic.clone(), link, r.prefix),
            (None, prefix, Some(r)) => {
                let index = r.oif.unwrap_or_default();
                let Some(link) = self.rtnl.link_by_index(index)? else {
                    return Err(VipError::NotHere(ConfigError::invalid(
                        &p::IP,
                        &c.ip.to_string(),
                        format!("routes via interface index {index}, which is gone"),
                    )));
                };
                (link.name.clone(), Some(link), prefix.unwrap_or(r.prefix))
            }
        };
        if let (Some(label), IpAddr::V4(_)) = (&c.iflabel, c.ip) {
            if nic.len() + 1 + label.len() > IFNAMSIZ_MAX {
                let full = format!("{nic}:{label}");
                return Err(ConfigError::invalid(
                    &p::IFLABEL,
                    label,
                    format!("makes the label {full} longer than 15 characters"),
                )
                .into());
            }
        }
        Ok(Resolved {
            nic,
            link,
            prefix,
            base: route.and_then(|r| r.prefsrc),
        })
    }

    /// The resolved place, which must be an interface of this host (start, validate-all).
    /// The broadcast address is the parameter's, or findif's: that of the base address.
    pub fn target(&mut self) -> Result<Target, VipError> {
        let r = self.resolve_for(true)?;
        let Some(link) = r.link else {
            return Err(VipError::NotHere(ConfigError::invalid(
                &p::NIC,
                &r.nic,
                "is not an interface on this host",
            )));
        };
        let broadcast = match (self.config.ip, self.config.broadcast, r.base) {
            (IpAddr::V4(v4), Some(b), _) => Some(b.address(v4, r.prefix)),
            (IpAddr::V4(_), None, Some(base)) => self
                .rtnl
                .addresses(false)?
                .into_iter()
                .find(|a| a.ip == base)
                .and_then(|a| a.broadcast),
            _ => None,
        };
        Ok(Target {
            link,
            prefix: r.prefix,
            broadcast,
        })
    }

    /// Our address where findif puts it: the VIP with the resolved prefix on the resolved
    /// interface (IPaddr2's "served"), whatever the state of the link.
    pub fn served(&mut self, r: &Resolved) -> Result<Option<Addr>, VipError> {
        let Some(link) = &r.link else {
            return Ok(None);
        };
        let m = AddrMatch {
            prefix: Some(r.prefix),
            ..AddrMatch::on(self.config.ip, link.index)
        };
        Ok(self.rtnl.find(&m)?)
    }

    pub fn set_link_up(&mut self, index: u32) -> Result<(), VipError> {
        Ok(self.rtnl.set_link_up(index)?)
    }

    pub fn rtnl(&mut self) -> &mut Rtnl {
        &mut self.rtnl
    }

    /// What counts as our address on the host now: the VIP, on `nic` when given, with
    /// `cidr_netmask` when given. None when `nic` names no interface here.
    pub fn matcher(&mut self) -> Result<Option<AddrMatch>, VipError> {
        let index = match &self.config.nic {
            Some(nic) => match self.rtnl.link_by_name(nic)? {
                Some(link) => Some(link.index),
                None => return Ok(None),
            },
            None => None,
        };
        Ok(Some(AddrMatch {
            ip: self.config.ip,
            index,
            prefix: self.config.prefix,
        }))
    }

    /// Our address as it is on the host now (see `matcher`).
    pub fn find(&mut self) -> Result<Option<Addr>, VipError> {
        match self.matcher()? {
            Some(m) => Ok(self.rtnl.find(&m)?),
            None => Ok(None),
        }
    }

    /// Every copy of the VIP, on any interface with any prefix.
    pub fn copies(&mut self) -> Result<Vec<Addr>, VipError> {
        Ok(self.rtnl.matching(&AddrMatch::anywhere(self.config.ip))?)
    }

    /// Deletes one address; 1 if it went, 0 if someone else removed it first.
    pub fn delete(&mut self, addr: &Addr) -> Result<usize, VipError> {
        Ok(usize::from(self.rtnl.del_address(addr)?))
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
            broadcast: target.broadcast,
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
        self.rtnl.add_address(&new)?;
        Ok(())
    }

    /// Removes every copy of our exact address; returns how many were removed.
    pub fn remove(&mut self) -> Result<usize, VipError> {
        let mut removed = 0;
        while let Some(addr) = self.find()? {
            // Gone between our look and our delete: someone else removed it.
            removed += usize::from(self.rtnl.del_address(&addr)?);
            if removed > 16 {
                break;
            }
        }
        Ok(removed)
    }

    /// Waits until the kernel's duplicate address detection for the VIP on `target` is done.
    pub fn wait_dad(
        &mut self,
        target: &Target,
        limit: Duration,
        keep: &dyn Fn() -> bool,
    ) -> Result<(), VipError> {
        let started = Instant::now();
        let nic = target.link.name.clone();
        loop {
            if !keep() {
                return Err(VipError::Abandoned { ip: self.config.ip });
            }
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

impl crate::ocf::failure::Failure for VipError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            VipError::Config(_) => crate::ocf::OcfExit::ErrConfigured,
            VipError::Netlink(n) if n.is_permission() => crate::ocf::OcfExit::ErrPerm,
            VipError::Announce(a) if a.is_permission() => crate::ocf::OcfExit::ErrPerm,
            VipError::Namespace { source, .. }
                if matches!(source.raw_os_error(), Some(libc::EPERM | libc::EACCES)) =>
            {
                crate::ocf::OcfExit::ErrPerm
            }
            VipError::NotHere(_)
            | VipError::Netlink(_)
            | VipError::Announce(_)
            | VipError::Namespace { .. }
            | VipError::Conflict { .. }
            | VipError::Duplicate { .. }
            | VipError::DadFailed { .. }
            | VipError::DadTimeout { .. }
            | VipError::Abandoned { .. } => crate::ocf::OcfExit::ErrGeneric,
        }
    }

    fn reason(&self) -> String {
        match self {
            VipError::Netlink(_) | VipError::Announce(_)
                if self.exit() == crate::ocf::OcfExit::ErrPerm =>
            {
                format!("insufficient privileges (needs root): {self}")
            }
            _ => self.to_string(),
        }
    }
}

/// Whether each of these VIPs is here and usable (`Vip::usable`'s rule), from one look at the
/// host: one netlink socket and at most one dump of addresses per family, however many VIPs
/// (the guard's status answers this for every VIP on every request).
pub fn usable_all(configs: &[VipConfig]) -> Vec<Presence> {
    match Rtnl::open() {
        Ok(mut rtnl) => {
            let mut dumps = Dumps::default();
            configs
                .iter()
                .map(|c| usable_in(&mut rtnl, &mut dumps, c))
                .collect()
        }
        Err(e) => vec![Presence::CannotTell(e.to_string()); configs.len()],
    }
}

/// The addresses of each family, dumped once per look.
#[derive(Default)]
struct Dumps {
    v4: Option<Result<Vec<Addr>, String>>,
    v6: Option<Result<Vec<Addr>, String>>,
}

impl Dumps {
    fn of(&mut self, rtnl: &mut Rtnl, ipv6: bool) -> &Result<Vec<Addr>, String> {
        let slot = if ipv6 { &mut self.v6 } else { &mut self.v4 };
        slot.get_or_insert_with(|| rtnl.addresses(ipv6).map_err(|e| e.to_string()))
    }
}

/// The one rule of "usable": the address as `config` names it (on `nic` when given, with
/// `cidr_netmask` when given), on a link that is administratively up.
fn usable_in(rtnl: &mut Rtnl, dumps: &mut Dumps, config: &VipConfig) -> Presence {
    let index = match &config.nic {
        Some(nic) => match rtnl.link_by_name(nic) {
            Ok(Some(link)) => Some(link.index),
            Ok(None) => return Presence::Absent,
            Err(e) => return Presence::CannotTell(e.to_string()),
        },
        None => None,
    };
    let m = AddrMatch {
        ip: config.ip,
        index,
        prefix: config.prefix,
    };
    let found = match dumps.of(rtnl, config.ip.is_ipv6()) {
        Ok(all) => all.iter().find(|a| m.matches(a)).map(|a| a.index),
        Err(e) => return Presence::CannotTell(e.clone()),
    };
    match found.map(|i| rtnl.link_by_index(i)) {
        None => Presence::Absent,
        Some(Ok(link)) if link.as_ref().is_some_and(|l| l.admin_up) => Presence::Present,
        Some(Ok(_)) => Presence::Absent,
        Some(Err(e)) => Presence::CannotTell(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocf::failure::{Failed, Failure};
    use crate::ocf::OcfExit;

    #[test]
    fn permission_errors_map_to_err_perm() {
        let e = VipError::Netlink(crate::vip::netlink::NetlinkError::Io {
            op: "add address",
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        });
        let f = Failed::from(e);
        assert_eq!(f.exit, OcfExit::ErrPerm);
        assert!(f.reason.starts_with("insufficient privileges"));
    }

    #[test]
    fn a_namespace_not_entered_is_this_nodes_trouble_or_privileges() {
        let at = |errno| VipError::Namespace {
            name: "blue".into(),
            path: "/run/netns/blue".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        assert_eq!(at(libc::ENOENT).exit(), OcfExit::ErrGeneric);
        assert_eq!(at(libc::EPERM).exit(), OcfExit::ErrPerm);
        assert_eq!(
            at(libc::EPERM).reason(),
            at(libc::EPERM).to_string(),
            "the namespace's own words, naming the parameter"
        );
        assert!(at(libc::EPERM)
            .reason()
            .starts_with("parameter network_namespace=\"blue\": cannot enter /run/netns/blue"));
    }
    use crate::params::vip::VIP_AGENT;

    fn config(vars: &[(&str, &str)]) -> Result<VipConfig, ConfigError> {
        VipConfig::from_values(&Values::from_reskeys(&VIP_AGENT, vars))
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
    fn ipaddr2_spellings_are_taken_as_ipaddr2_takes_them() {
        let c = config(&[("ip", "192.0.2.10"), ("nic", "vip0:vip"), ("iflabel", "x")]).unwrap();
        assert_eq!(
            (c.nic.as_deref(), c.iflabel.as_deref()),
            (Some("vip0"), Some("vip"))
        );
        let c = config(&[("ip", "127.0.0.3")]).unwrap();
        assert!(c.ip.is_loopback());
        let c = config(&[("ip", "fe80::10"), ("nic", "vip0")]).unwrap();
        assert_eq!(c.nic.as_deref(), Some("vip0"));
        // preferred_lft means nothing for IPv4, as in IPaddr2.
        assert_eq!(
            config(&[("ip", "192.0.2.1"), ("preferred_lft", "x")])
                .unwrap()
                .preferred_lft,
            None
        );
        let c = config(&[("ip", "2001:db8::1"), ("lvs_ipv6_addrlabel", "1")]).unwrap();
        assert_eq!(c.addrlabel, Some(99));
        for sender in ARP_SENDERS {
            assert!(config(&[("ip", "192.0.2.1"), ("arp_sender", sender)]).is_ok());
        }
        let c = config(&[("ip", "192.0.2.1"), ("arp_bg", "no")]).unwrap();
        assert!(!c.arp_bg);
        assert!(config(&[("ip", "192.0.2.1")]).unwrap().arp_bg);
    }

    #[test]
    fn broadcast_plus_and_minus_set_and_clear_the_host_bits() {
        let ip: Ipv4Addr = "192.0.2.77".parse().unwrap();
        assert_eq!(
            Broadcast::HostBitsSet.address(ip, 24),
            Ipv4Addr::new(192, 0, 2, 255)
        );
        assert_eq!(
            Broadcast::HostBitsClear.address(ip, 24),
            Ipv4Addr::new(192, 0, 2, 0)
        );
        assert_eq!(
            Broadcast::HostBitsSet.address(ip, 26),
            Ipv4Addr::new(192, 0, 2, 127)
        );
        assert_eq!(Broadcast::HostBitsSet.address(ip, 32), ip);
        let fixed = Broadcast::parse("192.0.2.127").unwrap();
        assert_eq!(fixed.address(ip, 24), Ipv4Addr::new(192, 0, 2, 127));
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
                vec![("ip", "192.0.2.1"), ("nic", "vip0/1")],
                "parameter nic=\"vip0/1\" is not a valid interface name",
            ),
            (
                vec![("ip", "192.0.2.1"), ("nic", "vip0:")],
                "parameter nic=\"vip0:\" is not a valid interface name",
            ),
            (
                vec![("ip", "fe80::10")],
                "parameter ip=\"fe80::10\" is an IPv6 link-local address: nic is required",
            ),
            (
                vec![("ip", "192.0.2.1"), ("broadcast", "192.0.2")],
                "parameter broadcast=\"192.0.2\" is not an IPv4 address, '+' or '-'",
            ),
            (
                vec![("ip", "2001:db8::1"), ("broadcast", "+")],
                "parameter broadcast=\"+\" is for IPv4 only",
            ),
            (
                vec![("ip", "192.0.2.1"), ("mac", "01:00:5e:00:00:01")],
                "parameter mac=\"01:00:5e:00:00:01\" IPaddr2's iptables CLUSTERIP mode",
            ),
            (
                vec![("ip", "192.0.2.1"), ("clusterip_hash", "sourceip")],
                "parameter clusterip_hash=\"sourceip\" IPaddr2's iptables CLUSTERIP",
            ),
            (
                vec![("ip", "192.0.2.1"), ("unique_clone_address", "yes")],
                "parameter unique_clone_address=\"yes\" IPaddr2's iptables CLUSTERIP",
            ),
            (
                vec![("ip", "192.0.2.1"), ("send_arp_opts", "-A")],
                "parameter send_arp_opts=\"-A\" has no meaning here",
            ),
            (
                vec![("ip", "192.0.2.1"), ("arp_sender", "ipoibarping")],
                "parameter arp_sender=\"ipoibarping\" is for IP over InfiniBand",
            ),
            (
                vec![("ip", "192.0.2.1"), ("arp_sender", "arping")],
                "parameter arp_sender=\"arping\" is not one of send_arp, iputils_arping",
            ),
            (
                vec![("ip", "2001:db8::1"), ("lvs_support", "true")],
                "parameter lvs_support=\"true\" is for IPv4 only",
            ),
            (
                vec![("ip", "192.0.2.1"), ("lvs_ipv6_addrlabel", "true")],
                "parameter lvs_ipv6_addrlabel=\"true\" is for IPv6 only",
            ),
            (
                vec![("ip", "192.0.2.1"), ("network_namespace", "../x")],
                "parameter network_namespace=\"../x\" is not a namespace name",
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
