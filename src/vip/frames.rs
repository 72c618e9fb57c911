//! Frames of the address-resolution protocols, in one place: the ones hamaster sends
//! (gratuitous ARP and the ARP probe for IPv4, the unsolicited Neighbor Advertisement for IPv6),
//! the one parser that says whether a frame claims an address (for the start's duplicate probe
//! and the guard's wire watch alike), the kernel filter that passes only such frames, and the
//! packet sockets both open. Built with pnet_packet; parsed by fixed offsets that the filter
//! repeats, so that what the kernel passes and what is counted cannot disagree. Bounds are
//! checked before every read: a hostile frame is no claim, never a panic.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{self, sockopt, AddressFamily, LinkAddr, SockFlag, SockType};
use pnet_datalink::MacAddr;
use pnet_packet::arp::{ArpHardwareTypes, ArpOperation, ArpOperations, MutableArpPacket};
use pnet_packet::ethernet::{EtherTypes, MutableEthernetPacket};
use pnet_packet::icmpv6::ndp::{
    MutableNeighborAdvertPacket, MutableNeighborSolicitPacket, NdpOption, NdpOptionTypes,
};
use pnet_packet::icmpv6::{self, Icmpv6Packet, Icmpv6Types};
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv6::MutableIpv6Packet;

pub const ETH_HEADER_LEN: usize = 14;
pub const ARP_FRAME_LEN: usize = ETH_HEADER_LEN + 28;
pub const NA_FRAME_LEN: usize = ETH_HEADER_LEN + 40 + 24 + 8;
/// Neighbor Advertisement flags (RFC 4861 4.4): we set Override only.
pub const NA_FLAG_OVERRIDE: u8 = 0x20;
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const ALL_NODES_MAC: MacAddr = MacAddr(0x33, 0x33, 0, 0, 0, 1);

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
/// sll_pkttype: to us, broadcast, multicast. Not PACKET_OTHERHOST (3: a frame for another MAC,
/// such as one of a VLAN not configured here, handed up untagged by VLAN offload) nor
/// PACKET_OUTGOING (4: our own).
const PACKET_FOR_US: [u8; 3] = [0, 1, 2];

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
    ndp_frame(mac, ALL_NODES_MAC, ip, ALL_NODES, |icmp| {
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
    })
}

/// An NDP message of 32 bytes (an advertisement or a solicitation with one link-layer
/// option) from `mac` and `src` to `eth_dst` and `dst`, hop limit 255: the headers, the body
/// `body` writes, then its checksum.
fn ndp_frame(
    mac: MacAddr,
    eth_dst: MacAddr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    body: impl FnOnce(&mut [u8]),
) -> [u8; NA_FRAME_LEN] {
    let mut buf = [0u8; NA_FRAME_LEN];
    {
        let mut eth =
            MutableEthernetPacket::new(&mut buf).expect("buffer holds an Ethernet header");
        eth.set_destination(eth_dst);
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
        ip6.set_source(src);
        ip6.set_destination(dst);
    }
    let icmp = &mut buf[ETH_HEADER_LEN + 40..];
    body(icmp);
    let sum = icmpv6::checksum(
        &Icmpv6Packet::new(icmp).expect("buffer holds ICMPv6"),
        &src,
        &dst,
    );
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    buf
}

/// An ARP request from `sender` (the VIP) and `mac` for `target` (a neighbour): whoever has
/// `target` takes the sender's address into its cache from it — also a host that drops
/// gratuitous ARP, since it is a request for its own address — and answers.
pub fn arp_request(mac: MacAddr, sender: Ipv4Addr, target: Ipv4Addr) -> [u8; ARP_FRAME_LEN] {
    arp_frame(mac, sender, target, MacAddr::zero(), ArpOperations::Request)
}

/// A Neighbor Solicitation (RFC 4861 7.2.2) from `src` (the VIP) and `mac` for `target`, to
/// its solicited-node address, with the Source Link-Layer Address option: the target takes
/// `src`'s address from it into its cache, and answers.
pub fn neighbor_solicitation(mac: MacAddr, src: Ipv6Addr, target: Ipv6Addr) -> [u8; NA_FRAME_LEN] {
    let t = target.octets();
    let group = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(t[13]),
        u16::from_be_bytes([t[14], t[15]]),
    );
    let eth_dst = MacAddr(0x33, 0x33, 0xff, t[13], t[14], t[15]);
    ndp_frame(mac, eth_dst, src, group, |icmp| {
        let mut ns =
            MutableNeighborSolicitPacket::new(icmp).expect("buffer holds a Neighbor Solicitation");
        ns.set_icmpv6_type(Icmpv6Types::NeighborSolicit);
        ns.set_target_addr(target);
        ns.set_options(&[NdpOption {
            option_type: NdpOptionTypes::SourceLLAddr,
            length: 1,
            data: mac.octets().to_vec(),
        }]);
    })
}

/// Whether `frame` answers a request from `vip` (arp_request, neighbor_solicitation): an ARP
/// reply to the VIP, or a Neighbor Advertisement to it. The neighbour that answered.
pub fn answer_to(frame: &[u8], vip: IpAddr) -> Option<IpAddr> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let at = |from: usize, to: usize| frame.get(ETH_HEADER_LEN + from..ETH_HEADER_LEN + to);
    match vip {
        IpAddr::V4(v) if ethertype == ETH_P_ARP => {
            let reply = at(6, 8)? == [0, 2];
            let target = Ipv4Addr::from(<[u8; 4]>::try_from(at(24, 28)?).ok()?);
            let sender = Ipv4Addr::from(<[u8; 4]>::try_from(at(14, 18)?).ok()?);
            (reply && target == v).then_some(IpAddr::V4(sender))
        }
        IpAddr::V6(v) if ethertype == ETH_P_IPV6 => {
            let icmp = *at(6, 7)?.first()? == 58;
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(at(24, 40)?).ok()?);
            let advert = *at(40, 41)?.first()? == 136;
            let target = Ipv6Addr::from(<[u8; 16]>::try_from(at(48, 64)?).ok()?);
            (icmp && advert && dst == v).then_some(IpAddr::V6(target))
        }
        _ => None,
    }
}

/// What kind of frame claims an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimKind {
    ArpRequest,
    ArpReply,
    /// RFC 5227's probe: sender 0.0.0.0, asking for the address. Another host that is about
    /// to take it; a conflict for a start's probe, not for a holder (RFC 5227 2.4).
    ArpProbe,
    NeighborAdvertisement,
}

impl ClaimKind {
    pub const fn name(self) -> &'static str {
        match self {
            ClaimKind::ArpRequest => "ARP request",
            ClaimKind::ArpReply => "ARP reply",
            ClaimKind::ArpProbe => "ARP probe",
            ClaimKind::NeighborAdvertisement => "neighbor advertisement",
        }
    }
}

/// A frame that claims an address: who, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub mac: [u8; 6],
    pub kind: ClaimKind,
}

/// The claim `frame` (from the link-layer header on) makes for `ip`, if any: an ARP request or
/// reply whose sender is `ip`, an ARP probe for `ip`, or a Neighbor Advertisement whose target
/// is `ip` (its MAC from the target link-layer address option, else the frame's source).
/// Solicitations and frames of other addresses claim nothing.
pub fn claim(frame: &[u8], ip: IpAddr) -> Option<Claim> {
    let mac_at = |at: usize| -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&frame[at..at + 6]);
        m
    };
    match ip {
        IpAddr::V4(v4) => {
            // Ethernet (14), then ARP: htype 1, ptype 0x0800, hlen 6, plen 4, op, sha (22),
            // spa (28), tha (32), tpa (38).
            if frame.len() < ARP_FRAME_LEN
                || frame[12..14] != ETH_P_ARP.to_be_bytes()
                || frame[14..16] != [0, 1]
                || frame[16..18] != [8, 0]
                || frame[18] != 6
                || frame[19] != 4
                || frame[20] != 0
            {
                return None;
            }
            let (sender, target) = (&frame[28..32], &frame[38..42]);
            let kind = match frame[21] {
                1 if sender == v4.octets() => ClaimKind::ArpRequest,
                2 if sender == v4.octets() => ClaimKind::ArpReply,
                1 if sender == [0; 4] && target == v4.octets() => ClaimKind::ArpProbe,
                _ => return None,
            };
            Some(Claim {
                mac: mac_at(22),
                kind,
            })
        }
        IpAddr::V6(v6) => {
            // Ethernet (14), IPv6 (40, next header ICMPv6 = 58), ICMPv6 type 136: 4 bytes, 4
            // of flags, the target (16), then options of (type, length in 8 bytes).
            if frame.len() < 78
                || frame[12..14] != ETH_P_IPV6.to_be_bytes()
                || frame[20] != 58
                || frame[54] != 136
                || frame[62..78] != v6.octets()
            {
                return None;
            }
            let mut mac = mac_at(6);
            let mut at = 78;
            while at + 8 <= frame.len() {
                let (kind, len) = (frame[at], frame[at + 1] as usize * 8);
                if len == 0 {
                    break;
                }
                if kind == 2 && len >= 8 {
                    mac = mac_at(at + 2);
                    break;
                }
                at += len;
            }
            Some(Claim {
                mac,
                kind: ClaimKind::NeighborAdvertisement,
            })
        }
    }
}

pub fn mac_text(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A classic BPF program that passes only frames naming `ip` (`claim` repeats the check in user
/// space): for IPv4 the ARP sender address, for IPv6 an ICMPv6 Neighbor Advertisement's
/// target. On a busy interface the kernel then copies almost nothing to the guard.
fn filter(ip: IpAddr) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const LD_B_ABS: u16 = 0x30;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let ins = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    // Loads and comparisons; each comparison jumps to "drop" when unequal (fixed up below).
    let mut prog: Vec<libc::sock_filter> = Vec::new();
    let compare = |prog: &mut Vec<libc::sock_filter>, load: u16, at: u32, value: u32| {
        prog.push(ins(load, at));
        prog.push(ins(JEQ_K, value));
    };
    match ip {
        IpAddr::V4(v4) => compare(&mut prog, LD_W_ABS, 28, u32::from(v4)),
        IpAddr::V6(v6) => {
            compare(&mut prog, LD_B_ABS, 20, 58);
            compare(&mut prog, LD_B_ABS, 54, 136);
            let o = v6.octets();
            for w in 0..4 {
                let word = u32::from_be_bytes([o[4 * w], o[4 * w + 1], o[4 * w + 2], o[4 * w + 3]]);
                compare(&mut prog, LD_W_ABS, 62 + 4 * w as u32, word);
            }
        }
    }
    prog.push(ins(RET_K, 0xffff));
    prog.push(ins(RET_K, 0));
    let drop_at = prog.len() - 1;
    for (i, p) in prog.iter_mut().enumerate() {
        if p.code == JEQ_K {
            p.jf = (drop_at - (i + 1)) as u8;
        }
    }
    prog
}

/// A packet socket that receives nothing yet (protocol 0): for the announcer, which pnet binds
/// to the interface. Created with a protocol, the bind would first unhook it and wait an RCU
/// grace period.
pub fn send_socket() -> io::Result<OwnedFd> {
    Ok(socket::socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?)
}

/// A non-blocking packet socket on interface `index` for the frames that may claim `ip`:
/// created with protocol 0 (it receives nothing), filtered, then bound to the interface and
/// the protocol, so that no unfiltered frame is ever queued.
pub fn watch_socket(index: u32, ip: IpAddr) -> io::Result<OwnedFd> {
    let (fd, proto) = resolution_socket(ip)?;
    let prog = filter(ip);
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: SO_ATTACH_FILTER (which nix does not wrap) with a sock_fprog that points at
    // `prog`, alive across the call; the kernel copies the program.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &fprog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    bind_link(&fd, index, proto)?;
    // A flood overflows this buffer (frames dropped) rather than queueing work. A failure
    // leaves the default: not fatal.
    let _ = socket::setsockopt(&fd, sockopt::RcvBuf, &RCVBUF);
    Ok(fd)
}

/// A non-blocking packet socket that receives nothing yet (protocol 0), and the ethertype of
/// `ip`'s address resolution (ARP, or IPv6) to bind it to.
fn resolution_socket(ip: IpAddr) -> io::Result<(OwnedFd, u16)> {
    let proto = if ip.is_ipv4() { ETH_P_ARP } else { ETH_P_IPV6 };
    let fd = socket::socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    Ok((fd, proto))
}

/// Binds packet socket `fd` to interface `index` and ethertype `proto`.
fn bind_link(fd: &OwnedFd, index: u32, proto: u16) -> io::Result<()> {
    let sll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: proto.to_be(),
        sll_ifindex: index as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: nix builds a LinkAddr only from a raw sockaddr_ll; `sll` is one, complete, with
    // its size given.
    let at = unsafe {
        <LinkAddr as socket::SockaddrLike>::from_raw(
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            Some(std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t),
        )
    }
    .ok_or_else(|| io::Error::other("not a link-layer address"))?;
    socket::bind(fd.as_raw_fd(), &at)?;
    Ok(())
}

/// A non-blocking packet socket on interface `index` for the address resolution of `ip`'s
/// family (ARP, or IPv6), unfiltered: the clients' repointing (vip::tickle) sends its requests
/// on it and reads the answers for a second or two.
pub fn link_socket(index: u32, ip: IpAddr) -> io::Result<OwnedFd> {
    let (fd, proto) = resolution_socket(ip)?;
    bind_link(&fd, index, proto)?;
    let _ = socket::setsockopt(&fd, sockopt::RcvBuf, &RCVBUF);
    Ok(fd)
}

/// The watch socket's receive buffer.
const RCVBUF: usize = 64 * 1024;

/// One frame: its length, the interface it came on, and whether it counts (for this host:
/// not our own outgoing frame, not another host's unicast).
pub fn recv_frame(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<(usize, i32, bool)> {
    let (n, from) = socket::recvfrom::<LinkAddr>(fd.as_raw_fd(), buf)?;
    let (ifindex, pkttype) = from.map_or((0, u8::MAX), |l| (l.ifindex() as i32, l.pkttype()));
    Ok((n, ifindex, PACKET_FOR_US.contains(&pkttype)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pnet_packet::arp::ArpPacket;
    use pnet_packet::ethernet::EthernetPacket;
    use pnet_packet::icmpv6::ndp::NeighborAdvertPacket;
    use pnet_packet::ipv6::Ipv6Packet;
    use pnet_packet::Packet;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];
    const OWN: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x0a);

    /// Runs a classic BPF program the way the kernel does, for the instructions `filter` uses.
    fn run(prog: &[libc::sock_filter], frame: &[u8]) -> u32 {
        let mut pc = 0;
        let mut a: u32 = 0;
        loop {
            let i = prog[pc];
            match i.code {
                0x20 => {
                    let k = i.k as usize;
                    if k + 4 > frame.len() {
                        return 0;
                    }
                    a = u32::from_be_bytes(frame[k..k + 4].try_into().unwrap());
                }
                0x30 => {
                    let Some(b) = frame.get(i.k as usize) else {
                        return 0;
                    };
                    a = u32::from(*b);
                }
                0x15 => {
                    pc += if a == i.k {
                        i.jt as usize
                    } else {
                        i.jf as usize
                    };
                }
                0x06 => return i.k,
                other => panic!("instruction {other:#x} not expected"),
            }
            pc += 1;
        }
    }

    #[test]
    fn gratuitous_arp_carries_vip_as_sender_and_target() {
        let ip = Ipv4Addr::new(192, 0, 2, 10);
        let f = gratuitous_arp(OWN, ip, ArpOperations::Request);
        let eth = EthernetPacket::new(&f).unwrap();
        assert_eq!(eth.get_destination(), MacAddr::broadcast());
        assert_eq!(eth.get_source(), OWN);
        let arp = ArpPacket::new(eth.payload()).unwrap();
        assert_eq!(arp.get_operation(), ArpOperations::Request);
        assert_eq!(
            (arp.get_sender_proto_addr(), arp.get_target_proto_addr()),
            (ip, ip)
        );
        assert_eq!(arp.get_sender_hw_addr(), OWN);
        let r = gratuitous_arp(OWN, ip, ArpOperations::Reply);
        assert_eq!(
            ArpPacket::new(&r[14..]).unwrap().get_operation(),
            ArpOperations::Reply
        );
    }

    #[test]
    fn neighbor_advertisement_has_override_hop_limit_and_valid_checksum() {
        let ip: Ipv6Addr = "2001:db8::10".parse().unwrap();
        let f = unsolicited_na(OWN, ip);
        let eth = EthernetPacket::new(&f).unwrap();
        assert_eq!(eth.get_destination(), ALL_NODES_MAC);
        let ip6 = Ipv6Packet::new(eth.payload()).unwrap();
        assert_eq!(ip6.get_hop_limit(), 255);
        assert_eq!(ip6.get_destination(), ALL_NODES);
        assert_eq!(ip6.get_source(), ip);
        let na = NeighborAdvertPacket::new(ip6.payload()).unwrap();
        assert_eq!(na.get_flags(), NA_FLAG_OVERRIDE);
        assert_eq!(na.get_target_addr(), ip);
        assert_eq!(&ip6.payload()[26..32], &OWN.octets());
        let icmp = Icmpv6Packet::new(ip6.payload()).unwrap();
        assert_eq!(
            icmpv6::checksum(&icmp, &ip, &ALL_NODES),
            icmp.get_checksum()
        );
        assert_ne!(icmp.get_checksum(), 0);
    }

    #[test]
    fn an_arp_frame_for_the_vip_is_a_claim_and_passes_the_filter() {
        let vip: IpAddr = "198.51.100.100".parse().unwrap();
        let other: IpAddr = "198.51.100.101".parse().unwrap();
        let IpAddr::V4(v4) = vip else { unreachable!() };
        for (op, kind) in [
            (ArpOperations::Reply, ClaimKind::ArpReply),
            (ArpOperations::Request, ClaimKind::ArpRequest),
        ] {
            let frame = gratuitous_arp(MacAddr::from(MAC), v4, op);
            assert_eq!(claim(&frame, vip), Some(Claim { mac: MAC, kind }));
            assert_eq!(run(&filter(vip), &frame), 0xffff);
            assert_eq!(claim(&frame, other), None);
            assert_eq!(run(&filter(other), &frame), 0);
        }
        // A probe for the VIP (sender 0.0.0.0) is a probe's claim, which the wire's filter
        // does not pass (a holder ignores probes, RFC 5227 2.4); one for another address is
        // nothing.
        let probe = arp_probe(MacAddr::from(MAC), v4);
        assert_eq!(
            claim(&probe, vip),
            Some(Claim {
                mac: MAC,
                kind: ClaimKind::ArpProbe
            })
        );
        assert_eq!(run(&filter(vip), &probe), 0);
        assert_eq!(claim(&probe, other), None);
        for short in [0, 14, 30, ARP_FRAME_LEN - 1] {
            assert_eq!(
                claim(&probe[..short], vip),
                None,
                "{short} bytes are no claim"
            );
        }
    }

    #[test]
    fn a_neighbor_advertisement_for_the_vip_is_a_claim_with_the_options_mac() {
        let vip: IpAddr = "2001:db8::100".parse().unwrap();
        let other: IpAddr = "2001:db8::101".parse().unwrap();
        let IpAddr::V6(v6) = vip else { unreachable!() };
        let mut frame = unsolicited_na(MacAddr::from(MAC), v6).to_vec();
        let na = Some(Claim {
            mac: MAC,
            kind: ClaimKind::NeighborAdvertisement,
        });
        assert_eq!(claim(&frame, vip), na);
        assert_eq!(run(&filter(vip), &frame), 0xffff);
        assert_eq!(claim(&frame, other), None);
        assert_eq!(run(&filter(other), &frame), 0);
        // The target link-layer option names the MAC, not the frame's source.
        frame[6..12].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
        assert_eq!(claim(&frame, vip).unwrap().mac, MAC);
        // An option of length 0 ends the walk: the frame's source then.
        frame[79] = 0;
        assert_eq!(claim(&frame, vip).unwrap().mac, [2, 9, 9, 9, 9, 9]);
        // A solicitation (135) is no claim.
        frame[54] = 135;
        assert_eq!(claim(&frame, vip), None);
        assert_eq!(run(&filter(vip), &frame), 0);
    }

    #[test]
    fn no_byte_string_makes_the_parser_panic() {
        let vip4: IpAddr = "192.0.2.10".parse().unwrap();
        let vip6: IpAddr = "2001:db8::10".parse().unwrap();
        let mut rng = crate::splitmix::SplitMix64(27);
        let IpAddr::V6(v6) = vip6 else { unreachable!() };
        let base = unsolicited_na(OWN, v6);
        for _ in 0..20_000 {
            let len = (rng.next_u64() % 120) as usize;
            let mut f: Vec<u8> = base.iter().copied().cycle().take(len).collect();
            let flips = rng.next_u64() % 8;
            for _ in 0..flips {
                if !f.is_empty() {
                    let at = (rng.next_u64() as usize) % f.len();
                    f[at] = rng.next_u64() as u8;
                }
            }
            let _ = claim(&f, vip4);
            let _ = claim(&f, vip6);
            let _ = answer_to(&f, vip4);
            let _ = answer_to(&f, vip6);
            let _ = crate::vip::tickle::answer(&f, vip4, None);
            let _ = crate::vip::tickle::answer(&f, vip6, Some(vip6));
        }
    }

    /// The answers to the clients' repointing: an ARP reply to the VIP names its sender, a
    /// Neighbor Advertisement to the VIP its target; a request, or an answer to another
    /// address, is none.
    #[test]
    fn an_answer_to_a_request_from_the_vip_names_the_neighbour() {
        let (vip, client) = ("192.0.2.10".parse().unwrap(), "192.0.2.99".parse().unwrap());
        let request = arp_request(OWN, vip, client);
        assert_eq!(
            answer_to(&request, IpAddr::V4(vip)),
            None,
            "our own request"
        );
        let reply = arp_frame(OWN, client, vip, OWN, ArpOperations::Reply);
        assert_eq!(answer_to(&reply, IpAddr::V4(vip)), Some(IpAddr::V4(client)));
        let other: Ipv4Addr = "192.0.2.11".parse().unwrap();
        let elsewhere = arp_frame(OWN, client, other, OWN, ArpOperations::Reply);
        assert_eq!(answer_to(&elsewhere, IpAddr::V4(vip)), None);
        let (vip6, client6): (Ipv6Addr, Ipv6Addr) = (
            "2001:db8::10".parse().unwrap(),
            "2001:db8::99".parse().unwrap(),
        );
        let ns = neighbor_solicitation(OWN, vip6, client6);
        assert_eq!(
            &ns[0..3],
            &[0x33, 0x33, 0xff],
            "to the solicited-node group"
        );
        assert_eq!(answer_to(&ns, IpAddr::V6(vip6)), None, "a solicitation");
        // An advertisement of client6 sent to the VIP: the NA frame's layout with its source,
        // destination and target set so.
        let mut na = unsolicited_na(OWN, client6);
        na[ETH_HEADER_LEN + 24..ETH_HEADER_LEN + 40].copy_from_slice(&vip6.octets());
        assert_eq!(answer_to(&na, IpAddr::V6(vip6)), Some(IpAddr::V6(client6)));
        let unsolicited = unsolicited_na(OWN, client6);
        assert_eq!(
            answer_to(&unsolicited, IpAddr::V6(vip6)),
            None,
            "to all nodes"
        );
    }

    #[test]
    fn macs_are_written_as_ip_link_writes_them() {
        assert_eq!(mac_text(&[2, 0, 0xab, 0, 0, 7]), "02:00:ab:00:00:07");
    }
}
