//! The clients told of a takeover (issue 53): after the VIP came up here, each connection the
//! last master had on it gets a "tickle ACK" and each neighbour on the link an address request
//! from the VIP, a few rounds apart, in process.
//!
//! - **The tickle** (Samba CTDB's, resource-agents' tickle_tcp): a bare ACK from VIP:port to
//!   the client's port, sequence numbers far outside the window. The client's kernel answers it
//!   with a challenge ACK carrying its real numbers; this node has no such socket, so its
//!   kernel answers that with a reset, and the client's socket fails at once instead of
//!   waiting for its own timeout (keepalive: two hours). A client answers at most one such ACK
//!   per socket every 500 ms (`tcp_invalid_ratelimit`): the rounds are ROUND_GAP apart, and
//!   alternate the sequence number between 0 and 2^31 so that one of them is out of any window.
//! - **The neighbours**: an ARP request (IPv6: a Neighbor Solicitation) from the VIP and this
//!   node's MAC for each client on the link and each gateway of the link. A host that ignores
//!   gratuitous ARP (`drop_gratuitous_arp`, many switches and firewalls) still takes the
//!   sender's address from a request for its own address, and answers it: its answer is how
//!   we know it now sends to this MAC.
//!
//! Each round asks `keep` first (the guard: the VIP is still ours to announce) and sends only
//! to those who have not answered yet; it ends early once all have. Counted: the sessions
//! tickled and answered (each answer is a reset by this node's kernel), the neighbours asked and
//! answered, and when the last neighbour answered. No send can block: the sockets are
//! non-blocking, a failed send is counted, never retried in a loop.

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    self, AddressFamily, SockFlag, SockProtocol, SockType, SockaddrIn, SockaddrIn6, SockaddrStorage,
};
use pnet_datalink::MacAddr;

use super::frames;

/// Rounds of tickles and requests.
pub const ROUNDS: u32 = 3;
/// Between rounds: more than a client's `tcp_invalid_ratelimit` (500 ms), or its second
/// answer would be suppressed.
pub const ROUND_GAP: Duration = Duration::from_millis(600);
/// The window CTDB's tickle carries (any value will do; a recognisable one helps a capture).
const TICKLE_WINDOW: u16 = 1234;
const TCP_HEADER_LEN: usize = 20;
const TCP_ACK: u8 = 0x10;
const TCP_RST: u8 = 0x04;

/// One connection the last master had on the VIP: the VIP's end and the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Conn {
    pub local: SocketAddr,
    pub peer: SocketAddr,
}

/// What to tell, for one VIP up here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub vip: IpAddr,
    /// The VIP's interface and its MAC (None: no neighbour is asked).
    pub link: Option<(u32, [u8; 6])>,
    /// The connections to tickle (none this node owns itself).
    pub conns: Vec<Conn>,
    /// The neighbours to ask: the clients on the link, its gateways.
    pub neighbours: Vec<IpAddr>,
}

/// What the rounds did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Connections tickled, and those whose client answered (reset by this node's kernel).
    pub tickled: usize,
    pub answered: usize,
    /// Neighbours asked, and those that answered (they send to this node's MAC now).
    pub neighbours: usize,
    pub neighbours_answered: usize,
    /// From the first round to the last neighbour's answer.
    pub last_neighbour_ms: Option<u64>,
    /// From the first round to the last session's answer.
    pub last_answer_ms: Option<u64>,
    pub rounds: u32,
    /// Stopped before its rounds were done: the VIP was no longer ours to announce.
    pub stopped: bool,
    /// Sends that failed, and sockets that could not be opened, in words (the first few).
    pub errors: Vec<String>,
}

/// The rounds for `plan`, each asked of `keep` first; returns when everyone answered, or a
/// ROUND_GAP after the last round.
pub fn run(plan: &Plan, keep: &dyn Fn() -> bool) -> Report {
    let mut report = Report {
        tickled: plan.conns.len(),
        neighbours: plan.neighbours.len(),
        ..Report::default()
    };
    let err = |r: &mut Report, what: String| {
        if r.errors.len() < 4 {
            r.errors.push(what);
        }
    };
    let tcp = match plan.conns.is_empty() {
        true => None,
        false => match tcp_socket(plan.vip) {
            Ok(s) => Some(s),
            Err(e) => {
                err(&mut report, format!("raw TCP socket on {}: {e}", plan.vip));
                None
            }
        },
    };
    let link = match (&plan.link, plan.neighbours.is_empty()) {
        (Some((index, mac)), false) => match link_socket(*index, plan.vip) {
            Ok(s) => Some((s, MacAddr::from(*mac))),
            Err(e) => {
                err(&mut report, format!("packet socket on link {index}: {e}"));
                None
            }
        },
        _ => None,
    };
    let mut conns_left: BTreeSet<Conn> = match tcp {
        Some(_) => plan.conns.iter().copied().collect(),
        None => BTreeSet::new(),
    };
    let mut asked_left: BTreeSet<IpAddr> = match link {
        Some(_) => plan.neighbours.iter().copied().collect(),
        None => BTreeSet::new(),
    };
    let start = Instant::now();
    let mut buf = vec![0u8; 2048];
    for round in 0..ROUNDS {
        if conns_left.is_empty() && asked_left.is_empty() {
            break;
        }
        if !keep() {
            report.stopped = true;
            break;
        }
        report.rounds = round + 1;
        // The neighbours first: a client whose cache still names the old MAC would send its
        // answer to the tickle there.
        if let Some((fd, mac)) = &link {
            for n in &asked_left {
                let frame = match (plan.vip, n) {
                    (IpAddr::V4(v), IpAddr::V4(t)) => frames::arp_request(*mac, v, *t).to_vec(),
                    (IpAddr::V6(v), IpAddr::V6(t)) => {
                        frames::neighbor_solicitation(*mac, v, *t).to_vec()
                    }
                    _ => continue,
                };
                if let Err(e) = socket::send(fd.as_raw_fd(), &frame, socket::MsgFlags::empty()) {
                    err(&mut report, format!("request for {n}: {e}"));
                }
            }
        }
        if let Some(fd) = &tcp {
            let seq = if round % 2 == 0 { 0 } else { 1 << 31 };
            for c in &conns_left {
                if let Err(e) = send_tickle(fd, c, seq) {
                    err(&mut report, format!("tickle to {}: {e}", c.peer));
                }
            }
        }
        let until = start + ROUND_GAP * (round + 1);
        while Instant::now() < until && !(conns_left.is_empty() && asked_left.is_empty()) {
            let wait = until.saturating_duration_since(Instant::now());
            let mut fds = Vec::new();
            if let Some(fd) = &tcp {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            if let Some((fd, _)) = &link {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            let ms =
                PollTimeout::try_from(wait.as_millis().max(1) as i32).unwrap_or(PollTimeout::NONE);
            if poll(&mut fds, ms).unwrap_or(0) == 0 {
                continue;
            }
            let at = start.elapsed().as_millis() as u64;
            if let Some(fd) = &tcp {
                while let Some(from) = recv_tcp(fd, plan.vip, &mut buf) {
                    if let Some(c) = conns_left.iter().find(|c| from == (c.peer, c.local.port())) {
                        let c = *c;
                        conns_left.remove(&c);
                        report.answered += 1;
                        report.last_answer_ms = Some(at);
                    }
                }
            }
            if let Some((fd, _)) = &link {
                while let Ok((n, _, for_us)) = frames::recv_frame(fd, &mut buf) {
                    let Some(who) = frames::answer_to(&buf[..n], plan.vip) else {
                        continue;
                    };
                    if for_us && asked_left.remove(&who) {
                        report.neighbours_answered += 1;
                        report.last_neighbour_ms = Some(at);
                    }
                }
            }
        }
    }
    report
}

/// A raw TCP socket bound to the VIP: what it sends leaves from the VIP; it receives a copy of
/// every TCP segment to this host (the clients' answers among them).
fn tcp_socket(vip: IpAddr) -> io::Result<OwnedFd> {
    let family = match vip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket::socket(
        family,
        SockType::Raw,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        SockProtocol::Tcp,
    )?;
    match vip {
        IpAddr::V4(v) => socket::bind(
            fd.as_raw_fd(),
            &SockaddrIn::from(SocketAddr::new(v.into(), 0).to_v4()),
        )?,
        IpAddr::V6(v) => socket::bind(
            fd.as_raw_fd(),
            &SockaddrIn6::from(SocketAddr::new(v.into(), 0).to_v6()),
        )?,
    }
    Ok(fd)
}

trait Family {
    fn to_v4(self) -> std::net::SocketAddrV4;
    fn to_v6(self) -> std::net::SocketAddrV6;
}

impl Family for SocketAddr {
    fn to_v4(self) -> std::net::SocketAddrV4 {
        match self {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(a) => std::net::SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, a.port()),
        }
    }
    fn to_v6(self) -> std::net::SocketAddrV6 {
        match self {
            SocketAddr::V6(a) => a,
            SocketAddr::V4(a) => {
                std::net::SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0)
            }
        }
    }
}

/// A non-blocking packet socket on interface `index` for address resolution (ARP, or IPv6):
/// the requests go out on it, the answers come in on it.
fn link_socket(index: u32, vip: IpAddr) -> io::Result<OwnedFd> {
    frames::link_socket(index, vip)
}

fn send_tickle(fd: &OwnedFd, c: &Conn, seq: u32) -> io::Result<()> {
    let seg = tickle_segment(c.local, c.peer, seq);
    match c.peer {
        SocketAddr::V4(p) => {
            let to = SockaddrIn::from(std::net::SocketAddrV4::new(*p.ip(), 0));
            socket::sendto(fd.as_raw_fd(), &seg, &to, socket::MsgFlags::empty())?;
        }
        SocketAddr::V6(p) => {
            let to = SockaddrIn6::from(std::net::SocketAddrV6::new(*p.ip(), 0, 0, p.scope_id()));
            socket::sendto(fd.as_raw_fd(), &seg, &to, socket::MsgFlags::empty())?;
        }
    }
    Ok(())
}

/// The tickle: a bare ACK from `local` to `peer`, sequence `seq`, acknowledging 0, its checksum
/// over the pseudo-header of the two addresses.
pub fn tickle_segment(local: SocketAddr, peer: SocketAddr, seq: u32) -> [u8; TCP_HEADER_LEN] {
    let mut s = [0u8; TCP_HEADER_LEN];
    s[0..2].copy_from_slice(&local.port().to_be_bytes());
    s[2..4].copy_from_slice(&peer.port().to_be_bytes());
    s[4..8].copy_from_slice(&seq.to_be_bytes());
    // Acknowledgment number 0 (bytes 8..12), data offset 5 words.
    s[12] = 5 << 4;
    s[13] = TCP_ACK;
    s[14..16].copy_from_slice(&TICKLE_WINDOW.to_be_bytes());
    let sum = tcp_checksum(local.ip(), peer.ip(), &s);
    s[16..18].copy_from_slice(&sum.to_be_bytes());
    s
}

/// The TCP checksum of `segment` from `src` to `dst` (RFC 793, RFC 8200 8.1's pseudo-header).
pub fn tcp_checksum(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
    let mut pseudo = Vec::with_capacity(40);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, libc::IPPROTO_TCP as u8]);
            pseudo.extend_from_slice(&(segment.len() as u16).to_be_bytes());
        }
        _ => {
            pseudo.extend_from_slice(&v6(src).octets());
            pseudo.extend_from_slice(&v6(dst).octets());
            pseudo.extend_from_slice(&(segment.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, libc::IPPROTO_TCP as u8]);
        }
    }
    let mut sum: u32 = 0;
    for chunk in pseudo.chunks(2).chain(segment.chunks(2)) {
        let word = match chunk {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V6(v) => v,
        IpAddr::V4(v) => v.to_ipv6_mapped(),
    }
}

/// The next segment on the raw socket that answers a tickle: an ACK (not a reset) to the VIP,
/// as (its sender, the VIP's port). None once nothing more is queued.
fn recv_tcp(fd: &OwnedFd, vip: IpAddr, buf: &mut [u8]) -> Option<(SocketAddr, u16)> {
    loop {
        let (n, from) = socket::recvfrom::<SockaddrStorage>(fd.as_raw_fd(), buf).ok()?;
        let from_ip = from.and_then(|f| {
            f.as_sockaddr_in()
                .map(|a| IpAddr::V4(a.ip()))
                .or_else(|| f.as_sockaddr_in6().map(|a| IpAddr::V6(a.ip())))
        });
        if let Some(found) = answer(&buf[..n.min(buf.len())], vip, from_ip) {
            return Some(found);
        }
    }
}

/// Whether `packet` (an IPv4 raw socket's: with its IP header; an IPv6 one's: the TCP segment
/// alone, its source `from`) is an ACK without reset to `vip`: (its sender, the VIP's port).
pub fn answer(packet: &[u8], vip: IpAddr, from: Option<IpAddr>) -> Option<(SocketAddr, u16)> {
    let (src, seg) = match vip {
        IpAddr::V4(v) => {
            let ihl = usize::from(*packet.first()? & 0x0f) * 4;
            if packet.first()? >> 4 != 4 || ihl < 20 || packet.get(9) != Some(&6) {
                return None;
            }
            let dst = Ipv4Addr::from(<[u8; 4]>::try_from(packet.get(16..20)?).ok()?);
            if dst != v {
                return None;
            }
            let src = Ipv4Addr::from(<[u8; 4]>::try_from(packet.get(12..16)?).ok()?);
            (IpAddr::V4(src), packet.get(ihl..)?)
        }
        IpAddr::V6(_) => (from?, packet),
    };
    let flags = *seg.get(13)?;
    if flags & TCP_ACK == 0 || flags & TCP_RST != 0 {
        return None;
    }
    let sport = u16::from_be_bytes([*seg.first()?, *seg.get(1)?]);
    let dport = u16::from_be_bytes([*seg.get(2)?, *seg.get(3)?]);
    let src = match src {
        IpAddr::V6(v) => v.to_ipv4_mapped().map_or(IpAddr::V6(v), IpAddr::V4),
        v4 => v4,
    };
    Some((SocketAddr::new(src, sport), dport))
}

/// The neighbours to ask for `peers` of a VIP on interface `index`: each peer reached on the
/// link itself (a route of the main table through it, no gateway), and the gateways of the
/// link's default routes. `routes` is the family's route dump.
pub fn neighbours(routes: &[super::netlink::Route], index: u32, peers: &[IpAddr]) -> Vec<IpAddr> {
    let main = |r: &&super::netlink::Route| r.table == 254 && r.oif == Some(index);
    let mut out: BTreeSet<IpAddr> = peers
        .iter()
        .filter(|p| {
            routes.iter().filter(main).any(|r| {
                !r.gateway && r.prefix > 0 && super::findif::contains(r.dst, r.prefix, **p)
            })
        })
        .copied()
        .collect();
    out.extend(
        routes
            .iter()
            .filter(main)
            .filter(|r| r.prefix == 0)
            .filter_map(|r| r.via),
    );
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_tickle_is_a_bare_ack_with_a_valid_checksum() {
        for (l, p) in [
            ("192.0.2.10:443", "192.0.2.99:40000"),
            ("[2001:db8::10]:443", "[2001:db8::99]:40000"),
        ] {
            let seg = tickle_segment(sa(l), sa(p), 1 << 31);
            assert_eq!(&seg[0..2], &443u16.to_be_bytes());
            assert_eq!(&seg[2..4], &40000u16.to_be_bytes());
            assert_eq!(&seg[4..8], &(1u32 << 31).to_be_bytes());
            assert_eq!(&seg[8..12], &[0, 0, 0, 0]);
            assert_eq!(seg[13], TCP_ACK);
            // Summing the segment with its checksum over the same pseudo-header gives 0.
            assert_eq!(tcp_checksum(sa(l).ip(), sa(p).ip(), &seg), 0, "{l} → {p}");
        }
    }

    #[test]
    fn a_known_checksum() {
        // A SYN from 10.0.0.1:12345 to 10.0.0.2:80, seq 1, window 65535: RFC 1071's sum,
        // worked out apart (a few lines of Python over the same bytes).
        let mut seg = [0u8; 20];
        seg[0..2].copy_from_slice(&12345u16.to_be_bytes());
        seg[2..4].copy_from_slice(&80u16.to_be_bytes());
        seg[4..8].copy_from_slice(&1u32.to_be_bytes());
        seg[12] = 0x50;
        seg[13] = 0x02;
        seg[14..16].copy_from_slice(&65535u16.to_be_bytes());
        let sum = tcp_checksum(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            &seg,
        );
        assert_eq!(sum, 0x6b56);
    }

    fn ipv4_segment(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[9] = 6;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[33] = flags;
        p
    }

    #[test]
    fn only_an_ack_to_the_vip_is_an_answer() {
        let vip: IpAddr = "192.0.2.10".parse().unwrap();
        let ack = ipv4_segment([192, 0, 2, 99], [192, 0, 2, 10], 40000, 443, TCP_ACK);
        assert_eq!(answer(&ack, vip, None), Some((sa("192.0.2.99:40000"), 443)));
        let rst = ipv4_segment(
            [192, 0, 2, 99],
            [192, 0, 2, 10],
            40000,
            443,
            TCP_ACK | TCP_RST,
        );
        assert_eq!(answer(&rst, vip, None), None);
        let other = ipv4_segment([192, 0, 2, 99], [192, 0, 2, 11], 40000, 443, TCP_ACK);
        assert_eq!(answer(&other, vip, None), None);
        assert_eq!(answer(&ack[..30], vip, None), None, "cut short");
        assert_eq!(answer(&[], vip, None), None);
        let vip6: IpAddr = "2001:db8::10".parse().unwrap();
        let seg6 = &ack[20..];
        let from: IpAddr = "2001:db8::99".parse().unwrap();
        assert_eq!(
            answer(seg6, vip6, Some(from)),
            Some((sa("[2001:db8::99]:40000"), 443))
        );
        assert_eq!(answer(seg6, vip6, None), None);
    }

    fn route(dst: &str, prefix: u8, oif: u32, via: Option<&str>) -> super::super::netlink::Route {
        super::super::netlink::Route {
            dst: dst.parse().unwrap(),
            prefix,
            oif: Some(oif),
            metric: 0,
            table: 254,
            kind: netlink_packet_route::route::RouteType::Unicast,
            scope: netlink_packet_route::route::RouteScope::Universe,
            gateway: via.is_some(),
            via: via.map(|v| v.parse().unwrap()),
            prefsrc: None,
        }
    }

    #[test]
    fn neighbours_are_the_clients_on_the_link_and_its_gateways() {
        let routes = [
            route("0.0.0.0", 0, 2, Some("192.0.2.1")),
            route("192.0.2.0", 24, 2, None),
            route("198.51.100.0", 24, 3, None),
            route("0.0.0.0", 0, 3, Some("198.51.100.1")),
        ];
        let peers: Vec<IpAddr> = ["192.0.2.99", "203.0.113.5", "198.51.100.7"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let got: Vec<String> = neighbours(&routes, 2, &peers)
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(got, ["192.0.2.1", "192.0.2.99"]);
    }
}
