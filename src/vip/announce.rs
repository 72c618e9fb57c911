//! Announcements of a floating address: gratuitous ARP for IPv4, unsolicited Neighbor
//! Advertisements for IPv6, built with pnet_packet and sent on an AF_PACKET socket bound to
//! the VIP's interface. Also the ARP duplicate probe of `run_arping`.
//! It never decides which interface to use: callers hand it the resolved link.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use pnet_datalink::{Channel, Config, DataLinkReceiver, DataLinkSender, MacAddr, NetworkInterface};
use pnet_packet::arp::{
    ArpHardwareTypes, ArpOperation, ArpOperations, ArpPacket, MutableArpPacket,
};
use pnet_packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};
use pnet_packet::icmpv6::ndp::{MutableNeighborAdvertPacket, NdpOption, NdpOptionTypes};
use pnet_packet::icmpv6::{self, Icmpv6Packet, Icmpv6Types};
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv6::MutableIpv6Packet;
use pnet_packet::Packet;

use super::netlink::Link;

pub const ETH_HEADER_LEN: usize = 14;
pub const ARP_FRAME_LEN: usize = ETH_HEADER_LEN + 28;
pub const NA_FRAME_LEN: usize = ETH_HEADER_LEN + 40 + 24 + 8;
/// Neighbor Advertisement flags (RFC 4861 4.4): we set Override only.
pub const NA_FLAG_OVERRIDE: u8 = 0x20;
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const ALL_NODES_MAC: MacAddr = MacAddr(0x33, 0x33, 0, 0, 0, 1);

/// CLOCK_MONOTONIC in nanoseconds: shared by all processes of the host, so a burst started
/// by one process can be continued on schedule by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MonotonicNs(pub u64);

impl MonotonicNs {
    pub fn now() -> MonotonicNs {
        // CLOCK_MONOTONIC always exists on Linux; the zero fallback is never reached.
        let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(std::time::Duration::from)
            .unwrap_or_default();
        MonotonicNs(ts.as_nanos() as u64)
    }
}

/// Which gratuitous ARP frames to send (`arp_mode`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
pub enum ArpMode {
    Both,
    Request,
    Reply,
}

impl ArpMode {
    pub fn parse(s: &str) -> Option<ArpMode> {
        match s {
            "both" => Some(ArpMode::Both),
            "request" => Some(ArpMode::Request),
            "reply" => Some(ArpMode::Reply),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            ArpMode::Both => "both",
            ArpMode::Request => "request",
            ArpMode::Reply => "reply",
        }
    }

    /// The ARP operation of the `n`th frame of a burst (counted from 0).
    pub fn operation(self, n: u32) -> ArpOperation {
        match self {
            ArpMode::Request => ArpOperations::Request,
            ArpMode::Reply => ArpOperations::Reply,
            ArpMode::Both if n.is_multiple_of(2) => ArpOperations::Request,
            ArpMode::Both => ArpOperations::Reply,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AnnounceError {
    #[error("interface {nic} has no Ethernet address to announce from")]
    NoMac { nic: String },
    #[error("cannot open a packet socket on {nic}: {source}")]
    Open { nic: String, source: std::io::Error },
    #[error("cannot send on {nic}: {source}")]
    Send { nic: String, source: std::io::Error },
}

impl AnnounceError {
    pub fn is_permission(&self) -> bool {
        let source = match self {
            AnnounceError::Open { source, .. } | AnnounceError::Send { source, .. } => source,
            AnnounceError::NoMac { .. } => return false,
        };
        matches!(
            source.raw_os_error(),
            Some(libc::EPERM) | Some(libc::EACCES)
        )
    }
}

/// A gratuitous ARP frame: sender IP = target IP = the VIP, broadcast destination. Requests
/// carry a zero target MAC (RFC 5227 announcement), replies the broadcast MAC.
pub fn gratuitous_arp(mac: MacAddr, ip: Ipv4Addr, op: ArpOperation) -> [u8; ARP_FRAME_LEN] {
    let target_mac = if op == ArpOperations::Reply {
        MacAddr::broadcast()
    } else {
        MacAddr::zero()
    };
    arp_frame(mac, ip, ip, target_mac, op)
}

/// An ARP probe (RFC 5227): sender IP 0.0.0.0, asking who has `ip`.
pub fn arp_probe(mac: MacAddr, ip: Ipv4Addr) -> [u8; ARP_FRAME_LEN] {
    arp_frame(
        mac,
        Ipv4Addr::UNSPECIFIED,
        ip,
        MacAddr::zero(),
        ArpOperations::Request,
    )
}

fn arp_frame(
    mac: MacAddr,
    sender: Ipv4Addr,
    target: Ipv4Addr,
    target_mac: MacAddr,
    op: ArpOperation,
) -> [u8; ARP_FRAME_LEN] {
    let mut buf = [0u8; ARP_FRAME_LEN];
    {
        let mut eth =
            MutableEthernetPacket::new(&mut buf).expect("buffer holds an Ethernet header");
        eth.set_destination(MacAddr::broadcast());
        eth.set_source(mac);
        eth.set_ethertype(EtherTypes::Arp);
    }
    let mut arp =
        MutableArpPacket::new(&mut buf[ETH_HEADER_LEN..]).expect("buffer holds an ARP packet");
    arp.set_hardware_type(ArpHardwareTypes::Ethernet);
    arp.set_protocol_type(EtherTypes::Ipv4);
    arp.set_hw_addr_len(6);
    arp.set_proto_addr_len(4);
    arp.set_operation(op);
    arp.set_sender_hw_addr(mac);
    arp.set_sender_proto_addr(sender);
    arp.set_target_hw_addr(target_mac);
    arp.set_target_proto_addr(target);
    buf
}

/// An unsolicited Neighbor Advertisement (RFC 4861 7.2.6) for `ip` from `mac`: to ff02::1,
/// hop limit 255, Override set, with the Target Link-Layer Address option.
pub fn unsolicited_na(mac: MacAddr, ip: Ipv6Addr) -> [u8; NA_FRAME_LEN] {
    let mut buf = [0u8; NA_FRAME_LEN];
    {
        let mut eth =
            MutableEthernetPacket::new(&mut buf).expect("buffer holds an Ethernet header");
        eth.set_destination(ALL_NODES_MAC);
        eth.set_source(mac);
        eth.set_ethertype(EtherTypes::Ipv6);
    }
    {
        let mut ip6 = MutableIpv6Packet::new(&mut buf[ETH_HEADER_LEN..])
            .expect("buffer holds an IPv6 header");
        ip6.set_version(6);
        ip6.set_payload_length(32);
        ip6.set_next_header(IpNextHeaderProtocols::Icmpv6);
        ip6.set_hop_limit(255);
        ip6.set_source(ip);
        ip6.set_destination(ALL_NODES);
    }
    let icmp = &mut buf[ETH_HEADER_LEN + 40..];
    {
        let mut na =
            MutableNeighborAdvertPacket::new(icmp).expect("buffer holds a Neighbor Advertisement");
        na.set_icmpv6_type(Icmpv6Types::NeighborAdvert);
        na.set_flags(NA_FLAG_OVERRIDE);
        na.set_target_addr(ip);
        na.set_options(&[NdpOption {
            option_type: NdpOptionTypes::TargetLLAddr,
            length: 1,
            data: mac.octets().to_vec(),
        }]);
    }
    let sum = icmpv6::checksum(
        &Icmpv6Packet::new(icmp).expect("buffer holds ICMPv6"),
        &ip,
        &ALL_NODES,
    );
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    buf
}

/// An open packet socket on the VIP's interface and the frames to send for one address.
pub struct Announcer {
    nic: String,
    mac: MacAddr,
    ip: IpAddr,
    mode: ArpMode,
    fd: RawFd,
    tx: Box<dyn DataLinkSender>,
    rx: Box<dyn DataLinkReceiver>,
}

impl Announcer {
    pub fn open(link: &Link, ip: IpAddr, mode: ArpMode) -> Result<Announcer, AnnounceError> {
        Announcer::open_on(link, ip, mode, None)
    }

    /// On a packet socket inherited from the process that started the burst.
    pub fn open_inherited(
        link: &Link,
        ip: IpAddr,
        mode: ArpMode,
        fd: RawFd,
    ) -> Result<Announcer, AnnounceError> {
        Announcer::open_on(link, ip, mode, Some(fd))
    }

    fn open_on(
        link: &Link,
        ip: IpAddr,
        mode: ArpMode,
        inherited: Option<RawFd>,
    ) -> Result<Announcer, AnnounceError> {
        let mac = link.mac.ok_or_else(|| AnnounceError::NoMac {
            nic: link.name.clone(),
        })?;
        let mac = MacAddr::from(mac);
        let open_err = |source| AnnounceError::Open {
            nic: link.name.clone(),
            source,
        };
        let fd = match inherited {
            Some(fd) => fd,
            None => {
                // Protocol 0: the socket receives nothing until pnet binds it. Created with a
                // protocol, the bind would first unhook it and wait an RCU grace period.
                use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
                use std::os::fd::IntoRawFd;
                // The fd is handed to pnet, which closes it.
                socket(
                    AddressFamily::Packet,
                    SockType::Raw,
                    SockFlag::SOCK_CLOEXEC,
                    None,
                )
                .map_err(|e| open_err(e.into()))?
                .into_raw_fd()
            }
        };
        let iface = NetworkInterface {
            name: link.name.clone(),
            description: String::new(),
            index: link.index,
            mac: Some(mac),
            ips: Vec::new(),
            flags: 0,
        };
        let config = Config {
            promiscuous: false,
            read_timeout: Some(Duration::from_millis(20)),
            write_timeout: Some(Duration::from_millis(500)),
            socket_fd: Some(fd),
            ..Config::default()
        };
        match pnet_datalink::channel(&iface, config) {
            Ok(Channel::Ethernet(tx, rx)) => Ok(Announcer {
                nic: link.name.clone(),
                mac,
                ip,
                mode,
                fd,
                tx,
                rx,
            }),
            Ok(_) => Err(open_err(std::io::Error::other("not an Ethernet channel"))),
            Err(e) => Err(open_err(e)),
        }
    }

    /// The packet socket, for a detached burst to inherit. Closing the last reference to an
    /// AF_PACKET socket waits for an RCU grace period (tens of ms): handing it on keeps that
    /// wait out of `start`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd
    }

    /// The `n`th frame of a burst (counted from 0).
    pub fn frame(&self, n: u32) -> Vec<u8> {
        match self.ip {
            IpAddr::V4(v4) => gratuitous_arp(self.mac, v4, self.mode.operation(n)).to_vec(),
            IpAddr::V6(v6) => unsolicited_na(self.mac, v6).to_vec(),
        }
    }

    pub fn send(&mut self, n: u32) -> Result<(), AnnounceError> {
        let frame = self.frame(n);
        self.send_raw(&frame)
    }

    fn send_raw(&mut self, frame: &[u8]) -> Result<(), AnnounceError> {
        let send_err = |source| AnnounceError::Send {
            nic: self.nic.clone(),
            source,
        };
        match self.tx.send_to(frame, None) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(send_err(e)),
            None => Err(send_err(std::io::Error::other("send buffer unavailable"))),
        }
    }

    /// Sends frames `first..first+count` while `still_ours()` holds: a burst must stop the
    /// moment the address is no longer on this host. Frame `n` leaves at `epoch + n·interval`
    /// on the monotonic clock, so a burst continued in another process keeps its spacing.
    pub fn burst(
        &mut self,
        first: u32,
        count: u32,
        interval: Duration,
        epoch: MonotonicNs,
        mut still_ours: impl FnMut() -> bool,
    ) -> Result<u32, AnnounceError> {
        let mut sent = 0;
        for n in first..first.saturating_add(count) {
            let due = epoch
                .0
                .saturating_add(interval.as_nanos() as u64 * u64::from(n));
            let now = MonotonicNs::now().0;
            if due > now {
                std::thread::sleep(Duration::from_nanos(due - now));
            }
            if !still_ours() {
                break;
            }
            self.send(n)?;
            sent += 1;
        }
        Ok(sent)
    }

    /// RFC 5227-style probe for an IPv4 address: `probes` ARP probes `spacing` apart, then
    /// listen until `deadline`. Returns the MAC of another host that claims the address.
    pub fn probe_duplicate(
        &mut self,
        probes: u32,
        spacing: Duration,
        listen: Duration,
    ) -> Result<Option<MacAddr>, AnnounceError> {
        let IpAddr::V4(ip) = self.ip else {
            return Ok(None);
        };
        let probe = arp_probe(self.mac, ip);
        let start = Instant::now();
        let deadline = start + spacing * probes.saturating_sub(1) + listen;
        let mut next_probe = start;
        let mut sent = 0;
        while Instant::now() < deadline {
            if sent < probes && Instant::now() >= next_probe {
                self.send_raw(&probe)?;
                sent += 1;
                next_probe += spacing;
            }
            // Timeouts and errors on receive only mean "nothing yet"; the deadline bounds us.
            if let Ok(frame) = self.rx.next() {
                if let Some(mac) = claims(frame, ip, self.mac) {
                    return Ok(Some(mac));
                }
            }
        }
        Ok(None)
    }
}

/// Whether `frame` is an ARP packet from another host that uses `ip`: a reply or request
/// with `ip` as sender, or another host's probe for the same address.
fn claims(frame: &[u8], ip: Ipv4Addr, own: MacAddr) -> Option<MacAddr> {
    let eth = EthernetPacket::new(frame)?;
    if eth.get_ethertype() != EtherTypes::Arp {
        return None;
    }
    let arp = ArpPacket::new(eth.payload())?;
    let sender = arp.get_sender_hw_addr();
    if sender == own {
        return None;
    }
    let uses_it = arp.get_sender_proto_addr() == ip;
    let probes_it = arp.get_sender_proto_addr().is_unspecified()
        && arp.get_operation() == ArpOperations::Request
        && arp.get_target_proto_addr() == ip;
    (uses_it || probes_it).then_some(sender)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pnet_packet::icmpv6::ndp::NeighborAdvertPacket;
    use pnet_packet::ipv6::Ipv6Packet;

    const MAC: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x0a);

    #[test]
    fn gratuitous_arp_carries_vip_as_sender_and_target() {
        let ip = Ipv4Addr::new(192, 0, 2, 10);
        let f = gratuitous_arp(MAC, ip, ArpOperations::Request);
        let eth = EthernetPacket::new(&f).unwrap();
        assert_eq!(eth.get_destination(), MacAddr::broadcast());
        assert_eq!(eth.get_source(), MAC);
        let arp = ArpPacket::new(eth.payload()).unwrap();
        assert_eq!(arp.get_operation(), ArpOperations::Request);
        assert_eq!(
            (arp.get_sender_proto_addr(), arp.get_target_proto_addr()),
            (ip, ip)
        );
        assert_eq!(arp.get_sender_hw_addr(), MAC);
        let r = gratuitous_arp(MAC, ip, ArpOperations::Reply);
        assert_eq!(
            ArpPacket::new(&r[14..]).unwrap().get_operation(),
            ArpOperations::Reply
        );
    }

    #[test]
    fn both_mode_alternates_request_and_reply() {
        let ops: Vec<_> = (0..4).map(|n| ArpMode::Both.operation(n)).collect();
        assert_eq!(
            ops,
            [
                ArpOperations::Request,
                ArpOperations::Reply,
                ArpOperations::Request,
                ArpOperations::Reply
            ]
        );
        assert_eq!(ArpMode::Reply.operation(0), ArpOperations::Reply);
        assert_eq!(ArpMode::parse("bogus"), None);
    }

    #[test]
    fn neighbor_advertisement_has_override_hop_limit_and_valid_checksum() {
        let ip: Ipv6Addr = "2001:db8::10".parse().unwrap();
        let f = unsolicited_na(MAC, ip);
        let eth = EthernetPacket::new(&f).unwrap();
        assert_eq!(eth.get_destination(), ALL_NODES_MAC);
        let ip6 = Ipv6Packet::new(eth.payload()).unwrap();
        assert_eq!(ip6.get_hop_limit(), 255);
        assert_eq!(ip6.get_destination(), ALL_NODES);
        assert_eq!(ip6.get_source(), ip);
        let na = NeighborAdvertPacket::new(ip6.payload()).unwrap();
        assert_eq!(na.get_flags(), NA_FLAG_OVERRIDE);
        assert_eq!(na.get_target_addr(), ip);
        assert_eq!(&ip6.payload()[26..32], &MAC.octets());
        let icmp = Icmpv6Packet::new(ip6.payload()).unwrap();
        assert_eq!(
            icmpv6::checksum(&icmp, &ip, &ALL_NODES),
            icmp.get_checksum()
        );
        assert_ne!(icmp.get_checksum(), 0);
    }

    #[test]
    fn duplicate_claims_come_from_other_macs_only() {
        let ip = Ipv4Addr::new(192, 0, 2, 10);
        let other = MacAddr(0x02, 0, 0, 0, 0, 0x0b);
        assert_eq!(
            claims(&gratuitous_arp(other, ip, ArpOperations::Reply), ip, MAC),
            Some(other)
        );
        assert_eq!(claims(&arp_probe(other, ip), ip, MAC), Some(other));
        assert_eq!(
            claims(&gratuitous_arp(MAC, ip, ArpOperations::Reply), ip, MAC),
            None
        );
        assert_eq!(
            claims(&arp_probe(other, Ipv4Addr::new(192, 0, 2, 11)), ip, MAC),
            None
        );
    }
}
