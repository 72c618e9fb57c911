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
//! Every send and every wait asks `keep` first (the guard: the VIP is still ours to announce);
//! each round sends only to those who have not answered yet; it ends early once all have. Counted: the sessions
//! tickled and answered (each answer is a reset by this node's kernel), the neighbours asked and
//! answered, and when the last neighbour answered. No send can block: the sockets are
//! non-blocking, a failed send is counted, never retried in a loop.

use std::collections::{BTreeMap, BTreeSet};
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
    /// Sends the kernel refused (one it had no room for was tried twice).
    #[serde(default)]
    pub failed_sends: usize,
    /// Stopped before its rounds were done: the VIP was no longer ours to announce.
    pub stopped: bool,
    /// Sends that failed, and sockets that could not be opened, in words (the first few).
    pub errors: Vec<String>,
}

/// Packets read from one socket before the wait looks at the time and `keep` again: a flood
/// (every IPv6 frame of the link, a reconnect storm to the VIP) cannot hold the rounds.
const DRAIN_MAX: usize = 256;
/// A send the kernel could not queue (EAGAIN, ENOBUFS: a burst of a thousand) is tried once
/// more after this pause.
const SEND_PAUSE: Duration = Duration::from_millis(1);

/// The rounds for `plan`; `keep` is asked before every send and every wait (the VIP is still
/// ours to announce). Returns when everyone answered, or a ROUND_GAP after the last round.
pub fn run(plan: &Plan, keep: &dyn Fn() -> bool) -> Report {
    let mut r = Rounds::open(plan);
    for round in 0..ROUNDS {
        if r.conns_left.is_empty() && r.asked_left.is_empty() {
            break;
        }
        r.report.rounds = round + 1;
        let until = r.start + ROUND_GAP * (round + 1);
        if !r.send(plan, round, keep) || !r.wait(plan.vip, until, keep) {
            r.report.stopped = true;
            break;
        }
    }
    r.report
}

/// The rounds' sockets, who is left to answer, and the report so far.
struct Rounds {
    tcp: Option<OwnedFd>,
    link: Option<(OwnedFd, MacAddr)>,
    /// Each connection by what its answer carries: the client's address and the VIP's port.
    conns_left: BTreeMap<(SocketAddr, u16), Conn>,
    asked_left: BTreeSet<IpAddr>,
    start: Instant,
    buf: Vec<u8>,
    report: Report,
}

impl Rounds {
    /// The sockets `plan` needs (one that cannot be opened is said, and its part left out).
    fn open(plan: &Plan) -> Rounds {
        let mut report = Report {
            tickled: plan.conns.len(),
            neighbours: plan.neighbours.len(),
            ..Report::default()
        };
        let tcp = match plan.conns.is_empty() {
            true => None,
            false => tcp_socket(plan.vip)
                .map_err(|e| report.error(format!("raw TCP socket on {}: {e}", plan.vip)))
                .ok(),
        };
        let link = match (&plan.link, plan.neighbours.is_empty()) {
            (Some((index, mac)), false) => frames::link_socket(*index, plan.vip)
                .map(|s| (s, MacAddr::from(*mac)))
                .map_err(|e| report.error(format!("packet socket on link {index}: {e}")))
                .ok(),
            (None, false) => {
                report.error("the VIP's link has no MAC: no neighbour asked".into());
                None
            }
            _ => None,
        };
        Rounds {
            conns_left: match tcp {
                Some(_) => plan
                    .conns
                    .iter()
                    .map(|c| ((c.peer, c.local.port()), *c))
                    .collect(),
                None => BTreeMap::new(),
            },
            asked_left: match link {
                Some(_) => plan.neighbours.iter().copied().collect(),
                None => BTreeSet::new(),
            },
            tcp,
            link,
            start: Instant::now(),
            buf: vec![0u8; 2048],
            report,
        }
    }

    /// One round's sends to those who have not answered: the neighbours' requests first (a
    /// client whose cache still names the old MAC would send its answer to the tickle there),
    /// then the tickles. False: `keep` said no.
    fn send(&mut self, plan: &Plan, round: u32, keep: &dyn Fn() -> bool) -> bool {
        if let Some((fd, mac)) = &self.link {
            for n in &self.asked_left {
                let frame = match (plan.vip, n) {
                    (IpAddr::V4(v), IpAddr::V4(t)) => frames::arp_request(*mac, v, *t).to_vec(),
                    (IpAddr::V6(v), IpAddr::V6(t)) => {
                        frames::neighbor_solicitation(*mac, v, *t).to_vec()
                    }
                    _ => continue,
                };
                if !keep() {
                    return false;
                }
                let sent = send_twice(|| {
                    socket::send(fd.as_raw_fd(), &frame, socket::MsgFlags::empty()).map(|_| ())
                });
                if let Err(e) = sent {
                    self.report.failed_sends += 1;
                    self.report.error(format!("request for {n}: {e}"));
                }
            }
        }
        if let Some(fd) = &self.tcp {
            let seq = if round.is_multiple_of(2) { 0 } else { 1 << 31 };
            for c in self.conns_left.values() {
                if !keep() {
                    return false;
                }
                if let Err(e) = send_twice(|| send_tickle(fd, c, seq)) {
                    self.report.failed_sends += 1;
                    self.report.error(format!("tickle to {}: {e}", c.peer));
                }
            }
        }
        true
    }

    /// The answers until `until` (or until everyone answered). False: `keep` said no.
    fn wait(&mut self, vip: IpAddr, until: Instant, keep: &dyn Fn() -> bool) -> bool {
        while Instant::now() < until && !(self.conns_left.is_empty() && self.asked_left.is_empty())
        {
            if !keep() {
                return false;
            }
            let wait = until.saturating_duration_since(Instant::now());
            let mut fds = Vec::new();
            if let Some(fd) = &self.tcp {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            if let Some((fd, _)) = &self.link {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            // At most the round's gap, and a look at `keep` at least every 50 ms.
            let ms = wait.as_millis().clamp(1, 50) as u16;
            if poll(&mut fds, PollTimeout::from(ms)).unwrap_or(0) == 0 {
                continue;
            }
            drop(fds);
            self.read_answers(vip);
        }
        true
    }

    /// At most DRAIN_MAX packets of each socket: the answers among them counted.
    fn read_answers(&mut self, vip: IpAddr) {
        let at = self.start.elapsed().as_millis() as u64;
        if let Some(fd) = &self.tcp {
            for _ in 0..DRAIN_MAX {
                let Some(from) = recv_tcp(fd, vip, &mut self.buf) else {
                    break;
                };
                if self.conns_left.remove(&from).is_some() {
                    self.report.answered += 1;
                    self.report.last_answer_ms = Some(at);
                }
            }
        }
        if let Some((fd, _)) = &self.link {
            for _ in 0..DRAIN_MAX {
                let Ok((n, _, for_us)) = frames::recv_frame(fd, &mut self.buf) else {
                    break;
                };
                let Some(who) = frames::answer_to(&self.buf[..n.min(self.buf.len())], vip) else {
                    continue;
                };
                if for_us && self.asked_left.remove(&who) {
                    self.report.neighbours_answered += 1;
                    self.report.last_neighbour_ms = Some(at);
                }
            }
        }
    }
}

impl Report {
    /// Keeps the first few errors in words (the count of failed sends keeps the rest).
    pub fn error(&mut self, what: String) {
        if self.errors.len() < 4 {
            self.errors.push(what);
        }
    }
}

/// One send, and once more after SEND_PAUSE when the kernel had no room for it.
fn send_twice(mut send: impl FnMut() -> nix::Result<()>) -> nix::Result<()> {
    match send() {
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::ENOBUFS) => {
            std::thread::sleep(SEND_PAUSE);
            send()
        }
        r => r,
    }
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
            &SockaddrIn::from(std::net::SocketAddrV4::new(v, 0)),
        )?,
        IpAddr::V6(v) => socket::bind(
            fd.as_raw_fd(),
            &SockaddrIn6::from(std::net::SocketAddrV6::new(v, 0, 0, 0)),
        )?,
    }
    Ok(fd)
}

fn send_tickle(fd: &OwnedFd, c: &Conn, seq: u32) -> nix::Result<()> {
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

/// The neighbours to ask for `peers` of a VIP on interface `index`: each peer the kernel
/// reaches on the link itself (its route of the main table through the link, no gateway), the
/// gateway through which it reaches the others by the link, and the gateways of the link's
/// default routes. `routes` is the family's route dump.
pub fn neighbours(routes: &[super::netlink::Route], index: u32, peers: &[IpAddr]) -> Vec<IpAddr> {
    use netlink_packet_route::route::RouteType;
    let main: Vec<&super::netlink::Route> = routes
        .iter()
        .filter(|r| r.table == 254 && r.kind == RouteType::Unicast)
        .collect();
    let mut out = BTreeSet::new();
    for p in peers {
        // The route the kernel takes: the longest prefix, then the lowest metric.
        let taken = main
            .iter()
            .filter(|r| super::findif::contains(r.dst, r.prefix, *p))
            .min_by_key(|r| (std::cmp::Reverse(r.prefix), r.metric));
        match taken {
            Some(r) if r.oif == Some(index) && !r.gateway => {
                out.insert(*p);
            }
            Some(r) if r.oif == Some(index) => out.extend(r.via),
            _ => {}
        }
    }
    out.extend(
        main.iter()
            .filter(|r| r.oif == Some(index) && r.prefix == 0)
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
            route("10.0.0.0", 8, 2, Some("192.0.2.254")),
        ];
        let peers: Vec<IpAddr> = ["192.0.2.99", "203.0.113.5", "198.51.100.7", "10.1.2.3"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let got: Vec<String> = neighbours(&routes, 2, &peers)
            .iter()
            .map(|a| a.to_string())
            .collect();
        // On the link: 192.0.2.99; through the link's gateways: 203.0.113.5 (default) and
        // 10.1.2.3 (its own route's); 198.51.100.7 is reached by another link.
        assert_eq!(got, ["192.0.2.1", "192.0.2.99", "192.0.2.254"]);
    }
}
