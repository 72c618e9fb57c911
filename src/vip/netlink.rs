//! A small synchronous rtnetlink client: list links, addresses and routes; the one VIP writer
//! (add and delete one address, its lifetimes), address labels, a link up; address and link
//! events. It speaks to the kernel of the network namespace the calling thread is in, and
//! never runs `ip`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use netlink_packet_core::{
    parse_string, DecodeError, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK,
    NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressMessage, AddressScope, CacheInfo,
};
use netlink_packet_route::link::{
    LinkAttribute, LinkExtentMask, LinkFlags, LinkMessage, LinkMessageBuffer,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::presence::Presence;

/// The kernel answers rtnetlink at once; this bound only guards against the impossible.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// netlink's message header (nlmsghdr) length, and the types read raw (linux/netlink.h,
/// linux/rtnetlink.h).
const NLMSG_HEADER: usize = 16;
const NLMSG_ERROR: u16 = 2;
const RTM_NEWLINK: u16 = 16;

#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("netlink {op}: {source}")]
    Io { op: &'static str, source: io::Error },
    #[error("netlink {op}: undecodable reply: {detail}")]
    Decode { op: &'static str, detail: String },
}

impl NetlinkError {
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Io { source, .. } => source.raw_os_error(),
            NetlinkError::Decode { .. } => None,
        }
    }

    pub fn is_permission(&self) -> bool {
        matches!(self.errno(), Some(libc::EPERM) | Some(libc::EACCES))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: Option<[u8; 6]>,
    /// Administratively up (IFF_UP).
    pub admin_up: bool,
    /// Carrier present (IFF_LOWER_UP).
    pub carrier: bool,
}

impl Link {
    pub fn is_up(&self) -> bool {
        self.admin_up && self.carrier
    }
}

/// Which copies of an address a look counts: the one rule behind every "is the VIP here?" —
/// the agents', the guard's status and wire watch, the announcer's. An interface or prefix left
/// `None` matches any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrMatch {
    pub ip: IpAddr,
    pub index: Option<u32>,
    pub prefix: Option<u8>,
}

impl AddrMatch {
    /// The address on any interface, with any prefix.
    pub fn anywhere(ip: IpAddr) -> AddrMatch {
        AddrMatch {
            ip,
            index: None,
            prefix: None,
        }
    }

    /// The address on one interface, with any prefix.
    pub fn on(ip: IpAddr, index: u32) -> AddrMatch {
        AddrMatch {
            index: Some(index),
            ..AddrMatch::anywhere(ip)
        }
    }

    pub fn matches(&self, a: &Addr) -> bool {
        a.ip == self.ip
            && self.index.is_none_or(|i| a.index == i)
            && self.prefix.is_none_or(|p| a.prefix == p)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    pub index: u32,
    pub ip: IpAddr,
    pub prefix: u8,
    pub flags: AddressFlags,
    pub label: Option<String>,
    /// IPv4 broadcast address (IFA_BROADCAST), if the address has one.
    pub broadcast: Option<Ipv4Addr>,
}

impl Addr {
    /// The address `ip/prefix` on interface `index`, as a deletion names it.
    pub fn on(index: u32, ip: IpAddr, prefix: u8) -> Addr {
        Addr {
            index,
            ip,
            prefix,
            flags: AddressFlags::empty(),
            label: None,
            broadcast: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dst: IpAddr,
    pub prefix: u8,
    pub oif: Option<u32>,
    pub metric: u32,
    pub table: u32,
    pub kind: RouteType,
    pub scope: RouteScope,
    /// Reached through a gateway (RTA_GATEWAY or RTA_VIA), not directly on the link.
    pub gateway: bool,
    /// The gateway's address, where RTA_GATEWAY names one.
    pub via: Option<IpAddr>,
    /// The preferred source address (RTA_PREFSRC): for connected routes, the base address.
    pub prefsrc: Option<IpAddr>,
}

/// What to add: the address and the flags IPaddr2's parameters map to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAddr {
    pub index: u32,
    pub ip: IpAddr,
    pub prefix: u8,
    pub label: Option<String>,
    /// IPv4 broadcast address (IFA_BROADCAST); None adds the address without one.
    pub broadcast: Option<Ipv4Addr>,
    pub nodad: bool,
    pub noprefixroute: bool,
    /// Seconds; None = forever.
    pub preferred_lft: Option<u32>,
    /// Seconds after which the kernel deletes the address itself; None = forever.
    pub valid_lft: Option<u32>,
}

impl NewAddr {
    /// The address as a delete names it (interface, address, prefix).
    pub fn addr(&self) -> Addr {
        Addr::on(self.index, self.ip, self.prefix)
    }

    /// IFA_CACHEINFO for the lifetimes, when either is limited (preferred never above valid).
    fn cache_info(&self) -> Option<CacheInfo> {
        if self.preferred_lft.is_none() && self.valid_lft.is_none() {
            return None;
        }
        let mut info = CacheInfo::default();
        info.ifa_valid = self.valid_lft.unwrap_or(u32::MAX);
        info.ifa_preferred = self.preferred_lft.unwrap_or(u32::MAX).min(info.ifa_valid);
        Some(info)
    }

    fn message(&self) -> AddressMessage {
        let mut msg = address_message(self.index, self.ip, self.prefix);
        // As `ip addr add`: 127.0.0.0/8 has host scope (the kernel refuses another).
        if matches!(self.ip, IpAddr::V4(v4) if v4.is_loopback()) {
            msg.header.scope = AddressScope::Host;
        }
        if let (true, Some(label)) = (self.ip.is_ipv4(), &self.label) {
            msg.attributes.push(AddressAttribute::Label(label.clone()));
        }
        if let (true, Some(brd)) = (self.ip.is_ipv4(), self.broadcast) {
            msg.attributes.push(AddressAttribute::Broadcast(brd));
        }
        let mut flags = AddressFlags::empty();
        flags.set(AddressFlags::Nodad, self.nodad);
        flags.set(AddressFlags::Noprefixroute, self.noprefixroute);
        if !flags.is_empty() {
            msg.attributes.push(AddressAttribute::Flags(flags));
        }
        if let Some(info) = self.cache_info() {
            msg.attributes.push(AddressAttribute::CacheInfo(info));
        }
        msg
    }
}

pub struct Rtnl {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    pub fn open() -> Result<Rtnl, NetlinkError> {
        let io = |source| NetlinkError::Io { op: "open", source };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(io)?;
        socket.bind_auto().map_err(io)?;
        socket.connect(&SocketAddr::new(0, 0)).map_err(io)?;
        set_recv_timeout(&socket, REPLY_TIMEOUT).map_err(io)?;
        Ok(Rtnl {
            socket,
            seq: 0,
            // Not zeroed: recv fills it (zeroing 64 KiB is a sixth of a monitor's page faults).
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// A dump: every reply `pick` takes.
    fn dump<T>(
        &mut self,
        op: &'static str,
        request: RouteNetlinkMessage,
        pick: impl FnMut(RouteNetlinkMessage) -> Option<T>,
    ) -> Result<Vec<T>, NetlinkError> {
        let replies = self.exchange(op, request, NLM_F_DUMP)?;
        Ok(replies.into_iter().filter_map(pick).collect())
    }

    pub fn links(&mut self) -> Result<Vec<Link>, NetlinkError> {
        let request = RouteNetlinkMessage::GetLink(LinkMessage::default());
        self.dump("list links", request, |m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(link_from(l)),
            _ => None,
        })
    }

    /// One link by name: a single RTM_GETLINK, not a dump (monitor runs this every 10 s).
    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>, NetlinkError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        self.get_link(msg)
    }

    pub fn link_by_index(&mut self, index: u32) -> Result<Option<Link>, NetlinkError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        self.get_link(msg)
    }

    /// The kernel's reply without its statistics (RTEXT_FILTER_SKIP_STATS, Linux 4.15+; an
    /// older kernel ignores the mask), read for the attributes a Link has and no other: every
    /// monitor makes this look, and decoding the whole reply — some fifty attributes, each
    /// with an error context netlink-packet-route formats whether it fails or not — cost more
    /// than the exchange with the kernel (docs/benchmarks.md, "Where a monitor's time goes").
    fn get_link(&mut self, mut msg: LinkMessage) -> Result<Option<Link>, NetlinkError> {
        let op = "get link";
        msg.attributes
            .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
        self.send(op, RouteNetlinkMessage::GetLink(msg), 0)?;
        match self.await_reply(op) {
            Ok(Some((RTM_NEWLINK, payload))) => {
                link_from_bytes(&payload)
                    .map(Some)
                    .map_err(|e| NetlinkError::Decode {
                        op,
                        detail: e.to_string(),
                    })
            }
            Ok(_) => Ok(None),
            Err(e) if e.errno() == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Addresses of one family (IPv4 or IPv6) on every interface.
    pub fn addresses(&mut self, ipv6: bool) -> Result<Vec<Addr>, NetlinkError> {
        let mut msg = AddressMessage::default();
        msg.header.family = family(ipv6);
        self.dump(
            "list addresses",
            RouteNetlinkMessage::GetAddress(msg),
            |m| match m {
                RouteNetlinkMessage::NewAddress(a) => addr_from(a),
                _ => None,
            },
        )
    }

    /// Every copy of an address that `m` counts, from one dump of its family.
    pub fn matching(&mut self, m: &AddrMatch) -> Result<Vec<Addr>, NetlinkError> {
        let mut all = self.addresses(m.ip.is_ipv6())?;
        all.retain(|a| m.matches(a));
        Ok(all)
    }

    /// The first copy of an address that `m` counts.
    pub fn find(&mut self, m: &AddrMatch) -> Result<Option<Addr>, NetlinkError> {
        Ok(self.matching(m)?.into_iter().next())
    }

    /// Whether the address is here: a dump that failed cannot tell, and is never "gone".
    pub fn presence(&mut self, m: &AddrMatch) -> Presence {
        match self.find(m) {
            Ok(Some(_)) => Presence::Present,
            Ok(None) => Presence::Absent,
            Err(e) => Presence::CannotTell(e.to_string()),
        }
    }

    pub fn routes(&mut self, ipv6: bool) -> Result<Vec<Route>, NetlinkError> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = family(ipv6);
        self.dump(
            "list routes",
            RouteNetlinkMessage::GetRoute(msg),
            |m| match m {
                RouteNetlinkMessage::NewRoute(r) => route_from(r),
                _ => None,
            },
        )
    }

    /// Adds the address: true when added, false when it is there already (`EEXIST`). The one
    /// writer of a VIP for the agents and the guard's fencing thread alike.
    pub fn add_address(&mut self, new: &NewAddr) -> Result<bool, NetlinkError> {
        match self.exchange(
            "add address",
            RouteNetlinkMessage::NewAddress(new.message()),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.errno() == Some(libc::EEXIST) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets the lifetimes of an address that exists (RTM_NEWADDR with NLM_F_REPLACE and
    /// IFA_CACHEINFO): the kernel counts them afresh from now. The same flags go with it, as
    /// IPv6 takes them from the request. The kernel would add the address if it were gone, so
    /// the caller looks first.
    pub fn replace_lifetimes(&mut self, new: &NewAddr) -> Result<(), NetlinkError> {
        self.exchange(
            "set address lifetime",
            RouteNetlinkMessage::NewAddress(new.message()),
            NLM_F_ACK | NLM_F_REPLACE,
        )
        .map(drop)
    }

    /// Deletes the address: true when deleted, false when it was gone already
    /// (`EADDRNOTAVAIL`: the kernel's lifetime, or someone else; `ENODEV`: its interface was
    /// deleted, and the address with it — interface indexes are not reused).
    pub fn del_address(&mut self, addr: &Addr) -> Result<bool, NetlinkError> {
        let msg = address_message(addr.index, addr.ip, addr.prefix);
        match self.exchange(
            "delete address",
            RouteNetlinkMessage::DelAddress(msg),
            NLM_F_ACK,
        ) {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.errno(), Some(libc::EADDRNOTAVAIL | libc::ENODEV)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets the interface administratively up (`ip link set NIC up`); a no-op when it is.
    pub fn set_link_up(&mut self, index: u32) -> Result<(), NetlinkError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        msg.header.flags = LinkFlags::Up;
        msg.header.change_mask = LinkFlags::Up;
        self.exchange("set link up", RouteNetlinkMessage::SetLink(msg), NLM_F_ACK)
            .map(drop)
    }

    /// Adds (`add`) or deletes an IPv6 address label for one address (`ip addrlabel add|del
    /// prefix IP/128 label VALUE`). netlink-packet-route has no type for RTM_NEWADDRLABEL, so
    /// the request is laid out here: nlmsghdr, ifaddrlblmsg, IFAL_ADDRESS, IFAL_LABEL.
    pub fn addrlabel(&mut self, add: bool, ip: Ipv6Addr, label: u32) -> Result<(), NetlinkError> {
        const RTM_NEWADDRLABEL: u16 = 72;
        const RTM_DELADDRLABEL: u16 = 73;
        const IFAL_ADDRESS: u16 = 1;
        const IFAL_LABEL: u16 = 2;
        let op = if add {
            "add address label"
        } else {
            "delete address label"
        };
        self.seq = self.seq.wrapping_add(1);
        // ifaddrlblmsg (12) + IFAL_ADDRESS (20) + IFAL_LABEL (8).
        let mut body = Vec::with_capacity(40);
        // struct ifaddrlblmsg { family, reserved, prefixlen, flags; index; seq }
        body.extend_from_slice(&[libc::AF_INET6 as u8, 0, 128, 0]);
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(&20u16.to_ne_bytes());
        body.extend_from_slice(&IFAL_ADDRESS.to_ne_bytes());
        body.extend_from_slice(&ip.octets());
        body.extend_from_slice(&8u16.to_ne_bytes());
        body.extend_from_slice(&IFAL_LABEL.to_ne_bytes());
        body.extend_from_slice(&label.to_ne_bytes());
        let flags = NLM_F_REQUEST | NLM_F_ACK | if add { NLM_F_CREATE | NLM_F_EXCL } else { 0 };
        let mut out = Vec::with_capacity(16 + body.len());
        out.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        let kind = if add {
            RTM_NEWADDRLABEL
        } else {
            RTM_DELADDRLABEL
        };
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&flags.to_ne_bytes());
        out.extend_from_slice(&self.seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&body);
        self.socket
            .send(&out, 0)
            .map_err(|source| NetlinkError::Io { op, source })?;
        self.await_ack(op)
    }

    /// One datagram of replies into the buffer; its length.
    fn recv(&mut self, op: &'static str) -> Result<usize, NetlinkError> {
        self.buf.clear();
        let size = self
            .socket
            .recv(&mut self.buf, 0)
            .map_err(|source| NetlinkError::Io { op, source })?;
        Ok(size.min(self.buf.len()))
    }

    /// Reads until the acknowledgement of the last request (an error message with code 0).
    fn await_ack(&mut self, op: &'static str) -> Result<(), NetlinkError> {
        while self.await_reply(op)?.is_some() {}
        Ok(())
    }

    /// The first message that answers the last request (its sequence number), undecoded: an
    /// error message as the error it carries, the acknowledgement (an error message with code
    /// 0) as None, any other as its type and payload.
    fn await_reply(&mut self, op: &'static str) -> Result<Option<(u16, Vec<u8>)>, NetlinkError> {
        loop {
            let size = self.recv(op)?;
            let mut offset = 0;
            // nlmsghdr: len u32, type u16, flags u16, seq u32, pid u32; NLMSG_ERROR carries an
            // i32 error code after it.
            while offset + NLMSG_HEADER <= size {
                let word = |at: usize| {
                    let mut b = [0u8; 4];
                    b.copy_from_slice(&self.buf[offset + at..offset + at + 4]);
                    b
                };
                let len = u32::from_ne_bytes(word(0)) as usize;
                if len < NLMSG_HEADER || offset + len > size {
                    break;
                }
                let kind = u16::from_ne_bytes([self.buf[offset + 4], self.buf[offset + 5]]);
                let seq = u32::from_ne_bytes(word(8));
                if seq == self.seq {
                    let payload = &self.buf[offset + NLMSG_HEADER..offset + len];
                    if kind != NLMSG_ERROR {
                        return Ok(Some((kind, payload.to_vec())));
                    }
                    let code = match payload.get(..4) {
                        Some(b) => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
                        None => {
                            return Err(NetlinkError::Decode {
                                op,
                                detail: format!("an error message of {len} bytes"),
                            })
                        }
                    };
                    if code == 0 {
                        return Ok(None);
                    }
                    let source = io::Error::from_raw_os_error(-code);
                    return Err(NetlinkError::Io { op, source });
                }
                offset += (len + 3) & !3;
            }
        }
    }

    /// Sends one request with the next sequence number.
    fn send(
        &mut self,
        op: &'static str,
        request: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<(), NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = self.seq;
        let out = encode(NetlinkMessage::new(header, NetlinkPayload::from(request)));
        self.socket
            .send(&out, 0)
            .map_err(|source| NetlinkError::Io { op, source })?;
        Ok(())
    }

    fn exchange(
        &mut self,
        op: &'static str,
        request: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NetlinkError> {
        self.send(op, request, flags)?;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut replies = Vec::new();
        loop {
            let size = self.recv(op)?;
            for msg in messages(&self.buf[..size]) {
                let msg = msg.map_err(|e| NetlinkError::Decode {
                    op,
                    detail: e.to_string(),
                })?;
                if msg.header.sequence_number == self.seq {
                    match msg.payload {
                        NetlinkPayload::Done(_) => return Ok(replies),
                        NetlinkPayload::Error(err) => match err.code {
                            None => return Ok(replies),
                            Some(code) => {
                                let source = io::Error::from_raw_os_error(-code.get());
                                return Err(NetlinkError::Io { op, source });
                            }
                        },
                        NetlinkPayload::InnerMessage(inner) => {
                            replies.push(inner);
                            if !dump {
                                return Ok(replies);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// A message as one datagram to send (its length and padding filled in).
fn encode(mut packet: NetlinkMessage<RouteNetlinkMessage>) -> Vec<u8> {
    packet.finalize();
    let mut out = vec![0; packet.buffer_len()];
    packet.serialize(&mut out);
    out
}

/// The messages of one rtnetlink datagram, in order, each at its aligned length (NLMSG_NEXT);
/// one that cannot be decoded ends them, as its error.
fn messages(
    datagram: &[u8],
) -> impl Iterator<Item = Result<NetlinkMessage<RouteNetlinkMessage>, DecodeError>> + '_ {
    let mut offset = 0;
    std::iter::from_fn(move || {
        if offset >= datagram.len() {
            return None;
        }
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&datagram[offset..]);
        match &msg {
            // A zero length would never move on: the datagram ends there.
            Ok(m) if m.header.length > 0 => offset += (m.header.length as usize + 3) & !3,
            _ => offset = datagram.len(),
        }
        Some(msg)
    })
}

/// What the kernel announces about addresses and links (rtnetlink multicast).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    AddressAdded(Addr),
    AddressDeleted(Addr),
    /// A link's flags or attributes changed (RTM_NEWLINK).
    Link(Link),
    /// A link was removed (RTM_DELLINK), by index.
    LinkRemoved(u32),
    /// A message of the datagram could not be decoded (nor the rest of it): events may be
    /// missing, as after ENOBUFS (the caller must look at the state itself).
    Undecodable,
}

/// A non-blocking rtnetlink socket subscribed to link and address events (IPv4 and IPv6).
pub struct Events {
    socket: Socket,
}

/// RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR (linux/rtnetlink.h).
const EVENT_GROUPS: u32 = 0x1 | 0x10 | 0x100;

impl Events {
    pub fn open() -> Result<Events, NetlinkError> {
        let io = |source| NetlinkError::Io {
            op: "subscribe",
            source,
        };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(io)?;
        socket.bind(&SocketAddr::new(0, EVENT_GROUPS)).map_err(io)?;
        socket.set_non_blocking(true).map_err(io)?;
        Ok(Events { socket })
    }

    /// The events of one datagram, read into `buf` (its capacity is the most read: 64 KiB
    /// is the kernel's largest); WouldBlock when there is none. ENOBUFS: the kernel dropped
    /// events (the caller must look at the state itself).
    pub fn read(&self, buf: &mut Vec<u8>) -> io::Result<Vec<Event>> {
        buf.clear();
        let size = self.socket.recv(buf, 0)?;
        Ok(decode_events(&buf[..size.min(buf.len())]))
    }
}

/// The events of one rtnetlink datagram, in order; `Undecodable` last if a message could not
/// be decoded.
fn decode_events(datagram: &[u8]) -> Vec<Event> {
    let mut events = Vec::new();
    for msg in messages(datagram) {
        let Ok(msg) = msg else {
            events.push(Event::Undecodable);
            break;
        };
        if let NetlinkPayload::InnerMessage(inner) = msg.payload {
            match inner {
                RouteNetlinkMessage::NewAddress(a) => {
                    events.extend(addr_from(a).map(Event::AddressAdded))
                }
                RouteNetlinkMessage::DelAddress(a) => {
                    events.extend(addr_from(a).map(Event::AddressDeleted))
                }
                RouteNetlinkMessage::NewLink(l) => events.push(Event::Link(link_from(l))),
                RouteNetlinkMessage::DelLink(l) => events.push(Event::LinkRemoved(l.header.index)),
                _ => {}
            }
        }
    }
    events
}

impl std::os::fd::AsRawFd for Events {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }
}

/// The part of an address request that names the address: interface, family, prefix, IP.
fn address_message(index: u32, ip: IpAddr, prefix: u8) -> AddressMessage {
    let mut msg = AddressMessage::default();
    msg.header.family = family(ip.is_ipv6());
    msg.header.prefix_len = prefix;
    msg.header.index = index;
    msg.attributes.push(AddressAttribute::Local(ip));
    msg.attributes.push(AddressAttribute::Address(ip));
    msg
}

fn family(ipv6: bool) -> AddressFamily {
    if ipv6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    }
}

pub(crate) fn set_recv_timeout(socket: &Socket, timeout: Duration) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimeout};
    let tv = nix::sys::time::TimeVal::new(
        timeout.as_secs() as nix::sys::time::time_t,
        timeout.subsec_micros() as nix::sys::time::suseconds_t,
    );
    setsockopt(socket, ReceiveTimeout, &tv).map_err(io::Error::from)
}

/// A Link from an RTM_NEWLINK payload, reading only the attributes a Link has (the same as
/// link_from's, which decodes the events' whole messages).
fn link_from_bytes(payload: &[u8]) -> Result<Link, DecodeError> {
    let buf = LinkMessageBuffer::new_checked(payload)?;
    let flags = LinkFlags::from_bits_retain(buf.flags());
    let mut link = Link {
        index: buf.link_index(),
        name: String::new(),
        mac: None,
        admin_up: flags.contains(LinkFlags::Up),
        carrier: flags.contains(LinkFlags::LowerUp),
    };
    for nla in buf.attributes() {
        let nla = nla?;
        let value = nla.value();
        match nla.kind() {
            libc::IFLA_IFNAME => link.name = parse_string(value)?,
            libc::IFLA_ADDRESS if value.len() == 6 => {
                let mut mac = [0; 6];
                mac.copy_from_slice(value);
                link.mac = Some(mac);
            }
            _ => {}
        }
    }
    Ok(link)
}

fn link_from(l: LinkMessage) -> Link {
    let mut link = Link {
        index: l.header.index,
        name: String::new(),
        mac: None,
        admin_up: l.header.flags.contains(LinkFlags::Up),
        carrier: l.header.flags.contains(LinkFlags::LowerUp),
    };
    for attr in l.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name = n,
            LinkAttribute::Address(a) if a.len() == 6 => {
                let mut mac = [0; 6];
                mac.copy_from_slice(&a);
                link.mac = Some(mac);
            }
            _ => {}
        }
    }
    link
}

fn addr_from(a: AddressMessage) -> Option<Addr> {
    let mut local = None;
    let mut address = None;
    let mut flags = AddressFlags::from_bits_retain(u32::from(a.header.flags.bits()));
    let mut label = None;
    let mut broadcast = None;
    for attr in a.attributes {
        match attr {
            AddressAttribute::Local(ip) => local = Some(ip),
            AddressAttribute::Address(ip) => address = Some(ip),
            // IFA_FLAGS carries all 32 bits; the header only the low 8.
            AddressAttribute::Flags(f) => flags = f,
            AddressAttribute::Label(l) => label = Some(l),
            AddressAttribute::Broadcast(b) => broadcast = Some(b),
            _ => {}
        }
    }
    // On point-to-point links IFA_ADDRESS is the peer; IFA_LOCAL is always ours.
    let ip = local.or(address)?;
    Some(Addr {
        index: a.header.index,
        ip,
        prefix: a.header.prefix_len,
        flags,
        label,
        broadcast,
    })
}

fn route_from(r: RouteMessage) -> Option<Route> {
    let RouteHeader {
        destination_prefix_length,
        table,
        kind,
        scope,
        ..
    } = r.header;
    let mut route = Route {
        dst: match r.header.address_family {
            AddressFamily::Inet6 => IpAddr::from([0u16; 8]),
            _ => IpAddr::from([0u8; 4]),
        },
        prefix: destination_prefix_length,
        oif: None,
        metric: 0,
        table: u32::from(table),
        kind,
        scope,
        gateway: false,
        via: None,
        prefsrc: None,
    };
    for attr in r.attributes {
        match attr {
            RouteAttribute::Destination(RouteAddress::Inet(ip)) => route.dst = ip.into(),
            RouteAttribute::Destination(RouteAddress::Inet6(ip)) => route.dst = ip.into(),
            RouteAttribute::Oif(i) => route.oif = Some(i),
            RouteAttribute::Priority(p) => route.metric = p,
            RouteAttribute::Table(t) => route.table = t,
            RouteAttribute::Gateway(g) => {
                route.gateway = true;
                route.via = match g {
                    RouteAddress::Inet(ip) => Some(ip.into()),
                    RouteAddress::Inet6(ip) => Some(ip.into()),
                    _ => None,
                };
            }
            RouteAttribute::Via(_) => route.gateway = true,
            RouteAttribute::PrefSource(RouteAddress::Inet(ip)) => route.prefsrc = Some(ip.into()),
            RouteAttribute::PrefSource(RouteAddress::Inet6(ip)) => route.prefsrc = Some(ip.into()),
            _ => {}
        }
    }
    Some(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(msg: RouteNetlinkMessage) -> Vec<u8> {
        encode(NetlinkMessage::from(msg))
    }

    #[test]
    fn one_rule_says_which_copies_of_an_address_count() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let at = |index, prefix| Addr::on(index, ip, prefix);
        let anywhere = AddrMatch::anywhere(ip);
        assert!(anywhere.matches(&at(3, 24)) && anywhere.matches(&at(9, 32)));
        let on = AddrMatch::on(ip, 3);
        assert!(on.matches(&at(3, 24)) && !on.matches(&at(9, 24)));
        let exact = AddrMatch {
            prefix: Some(32),
            ..on
        };
        assert!(exact.matches(&at(3, 32)) && !exact.matches(&at(3, 24)));
        let other = AddrMatch::anywhere("192.0.2.8".parse().unwrap());
        assert!(!other.matches(&at(3, 32)));
    }

    #[test]
    fn events_decode_in_order_and_an_undecodable_message_says_so() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let mut buf = datagram(RouteNetlinkMessage::NewAddress(address_message(3, ip, 32)));
        buf.extend(datagram(RouteNetlinkMessage::DelAddress(address_message(
            3, ip, 32,
        ))));
        let events = decode_events(&buf);
        assert!(
            matches!(&events[..], [Event::AddressAdded(a), Event::AddressDeleted(d)]
                if a.ip == ip && a.index == 3 && d.ip == ip && d.prefix == 32),
            "{events:?}"
        );
        // A truncated second message: the first still counts, then the loss is said.
        let cut = buf.len() - 6;
        let events = decode_events(&buf[..cut]);
        assert!(
            matches!(&events[..], [Event::AddressAdded(_), Event::Undecodable]),
            "{events:?}"
        );
        assert_eq!(decode_events(&[1, 2, 3, 4, 5]), vec![Event::Undecodable]);
    }

    /// The monitor's reading of a link (only its own attributes) and the events' (the whole
    /// message decoded) agree, on a reply with the attributes a real one carries around them.
    #[test]
    fn a_link_read_raw_is_the_link_decoded_whole() {
        use netlink_packet_route::link::{LinkHeader, State};
        let mut msg = LinkMessage::default();
        msg.header = LinkHeader {
            index: 7,
            flags: LinkFlags::Up | LinkFlags::Broadcast | LinkFlags::LowerUp,
            ..LinkHeader::default()
        };
        msg.attributes = vec![
            LinkAttribute::IfName("lan0".into()),
            LinkAttribute::TxQueueLen(1000),
            LinkAttribute::OperState(State::Up),
            LinkAttribute::Mtu(1500),
            LinkAttribute::Address(vec![0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            LinkAttribute::Broadcast(vec![0xff; 6]),
        ];
        let bytes = datagram(RouteNetlinkMessage::NewLink(msg.clone()));
        let raw = link_from_bytes(&bytes[NLMSG_HEADER..]).unwrap();
        assert_eq!(raw, link_from(msg.clone()));
        assert_eq!(
            (raw.index, raw.name.as_str(), raw.admin_up, raw.carrier),
            (7, "lan0", true, true)
        );
        assert_eq!(raw.mac, Some([0x52, 0x54, 0, 0x12, 0x34, 0x56]));
        // Down, no carrier, no Ethernet address (a tunnel): the same on both sides.
        msg.header.flags = LinkFlags::Broadcast;
        msg.attributes
            .retain(|a| !matches!(a, LinkAttribute::Address(_)));
        let bytes = datagram(RouteNetlinkMessage::NewLink(msg.clone()));
        let raw = link_from_bytes(&bytes[NLMSG_HEADER..]).unwrap();
        assert_eq!(raw, link_from(msg));
        assert!(!raw.admin_up && !raw.carrier && raw.mac.is_none());
        // A cut reply is an error, never a link.
        assert!(link_from_bytes(&bytes[NLMSG_HEADER..bytes.len() - 3]).is_err());
        assert!(link_from_bytes(&[0; 4]).is_err());
    }
}
