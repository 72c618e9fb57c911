//! The VIP watched while the guard leads, on the wire and in the kernel.
//!
//! On the wire (RFC 5227's ongoing detection): a packet socket on the VIP's interface sees
//! ARP (IPv4) or Neighbor Advertisements (IPv6), a kernel filter passing only frames that name
//! the VIP. One that claims the VIP for a MAC address of none of this node's interfaces is a
//! conflict, told to the guard machine (machine::observe), which counts and names it, defends
//! the VIP with one announcement at most every DEFEND_INTERVAL, and with conflict_action=push
//! tells Pacemaker. Our own frames (outgoing, or from this node's other interfaces) never count.
//!
//! In the kernel: rtnetlink's address and link events. The VIP deleted, or its interface set
//! down or removed, is told to the machine, which knows whether it took the VIP down itself
//! (fence, step-down) and otherwise tells Pacemaker at once (push_failures), as of a dead
//! service; the guard does not add it back behind Pacemaker's back (monitor reports it).
//! This module only reads the wire and the kernel, and sends the one announcement it is told.

use std::collections::HashSet;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use super::fence::Fence;
use super::machine::{self, Gone, Input};
use crate::resource::config::{ConflictAction, MasterConfig};
use crate::vip::announce::{Announcer, ArpMode};
use crate::vip::netlink::{AddrMatch, Event, Events, Link, Rtnl};

/// A MAC found foreign is taken as foreign this long without looking at the own interfaces
/// again (a host that keeps claiming costs one link dump a second, not one a frame).
const FOREIGN_FOR: Duration = Duration::from_secs(1);

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
/// sll_pkttype: to us, broadcast, multicast. Not PACKET_OTHERHOST (3: a frame for another MAC,
/// such as one of a VLAN not configured here, handed up untagged by VLAN offload) nor
/// PACKET_OUTGOING (4: our own).
const PACKET_FOR_US: [u8; 3] = [0, 1, 2];

/// Frames handled before the watch yields to the guard's other tasks (the lease keepalive runs
/// on the same thread): a flood of claims must not delay a renewal.
const FRAMES_PER_TURN: usize = 32;

/// The socket's receive buffer: a flood overflows it (and frames are dropped) rather than
/// queueing work.
const RCVBUF: libc::c_int = 64 * 1024;

/// The own interfaces are dumped again at most this often when an unknown MAC claims the VIP
/// (new interfaces are also learnt from link events).
const OWN_LOOK_INTERVAL: Duration = Duration::from_millis(100);

/// What the watch needs: the VIP, its interface as raised, the machine it reports to, and the
/// configuration in force (conflict_action).
pub struct WireWatch {
    /// For the log.
    pub resource: String,
    pub link: Link,
    pub ip: IpAddr,
    pub fence: Fence,
    pub config: watch::Receiver<MasterConfig>,
}

/// A frame that claims an address: who, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub mac: [u8; 6],
    pub frame: &'static str,
}

/// The claim `frame` (from the link-layer header on) makes for `ip`, if any: an ARP packet
/// whose sender is `ip`, or a Neighbor Advertisement whose target is `ip` (its MAC from the
/// target link-layer address option, else the frame's source). Probes (sender 0.0.0.0) and
/// solicitations claim nothing.
pub fn claim(frame: &[u8], ip: IpAddr) -> Option<Claim> {
    let mac_at = |at: usize| -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&frame[at..at + 6]);
        m
    };
    match ip {
        IpAddr::V4(v4) => {
            // Ethernet (14), then ARP: htype 1, ptype 0x0800, hlen 6, plen 4, op, sha, spa.
            if frame.len() < 42
                || frame[12..14] != ETH_P_ARP.to_be_bytes()
                || frame[14..16] != [0, 1]
                || frame[16..18] != [8, 0]
                || frame[18] != 6
                || frame[19] != 4
                || frame[28..32] != v4.octets()
            {
                return None;
            }
            let frame_kind = match frame[21] {
                1 => "ARP request",
                2 => "ARP reply",
                _ => return None,
            };
            Some(Claim {
                mac: mac_at(22),
                frame: frame_kind,
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
                frame: "neighbor advertisement",
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

/// A classic BPF program that passes only frames naming `ip` (the check in `claim` is repeated
/// in user space): for IPv4 the ARP sender address, for IPv6 an ICMPv6 Neighbor Advertisement's
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

/// A non-blocking packet socket on interface `index` for the frames that may claim `ip`.
fn packet_socket(index: u32, ip: IpAddr) -> io::Result<OwnedFd> {
    let proto = if ip.is_ipv4() { ETH_P_ARP } else { ETH_P_IPV6 };
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(proto.to_be()),
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: raw is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let prog = filter(ip);
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points at prog, which outlives the call; the kernel copies it.
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
    // SAFETY: sockaddr_ll is plain data; zeroed is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = index as i32;
    // SAFETY: sll lives across the call and its size is given.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: an int option, its size given. A failure leaves the default: not fatal.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &RCVBUF as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    Ok(fd)
}

/// One frame: its length, the interface it came on, and whether it counts (for this host:
/// not our own outgoing frame, not another host's unicast).
fn recv_frame(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<(usize, i32, bool)> {
    // SAFETY: as above.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: buf and sll live across the call, with their sizes given.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
            &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
            &mut len,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        n as usize,
        sll.sll_ifindex,
        PACKET_FOR_US.contains(&sll.sll_pkttype),
    ))
}

/// The MAC addresses of every interface in this namespace (loopback's all-zero one left out:
/// a claim from 00:00:00:00:00:00 is nobody's); None when the kernel cannot be asked.
fn own_macs() -> Option<HashSet<[u8; 6]>> {
    Rtnl::open().and_then(|mut r| r.links()).ok().map(|links| {
        links
            .into_iter()
            .filter_map(|l| l.mac)
            .filter(|m| *m != [0; 6])
            .collect()
    })
}

/// Runs a netlink lookup off the runtime thread: the lease keepalive shares that thread, and a
/// contended rtnl lock must not delay a renewal. None when the task could not run.
async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

/// Datagrams of link and address events handled before the watch yields to the guard's other
/// tasks.
const EVENTS_PER_TURN: usize = 32;

/// The foreign-MAC cache is pruned at most this often, and emptied when it grows past
/// FOREIGN_MAX (a flood of made-up MACs).
const FOREIGN_PRUNE: Duration = Duration::from_secs(1);
const FOREIGN_MAX: usize = 1024;

struct State {
    w: WireWatch,
    own: HashSet<[u8; 6]>,
    /// MACs found foreign by a fresh look at the own interfaces, and when.
    foreign: std::collections::HashMap<[u8; 6], Instant>,
    foreign_pruned: Instant,
    /// When the own interfaces were last dumped.
    own_looked: Instant,
}

impl State {
    /// Whether `mac` is one of this node's. An interface added since the last look is learnt
    /// from its link event, which comes before any frame it sends: the events still queued
    /// are taken first; a dump of the interfaces (at most every OWN_LOOK_INTERVAL) covers
    /// events the kernel dropped.
    async fn is_own(
        &mut self,
        mac: &[u8; 6],
        events: Option<&Events>,
        nlbuf: &mut Vec<u8>,
    ) -> bool {
        if self.own.contains(mac) {
            return true;
        }
        if self
            .foreign
            .get(mac)
            .is_some_and(|t| t.elapsed() < FOREIGN_FOR)
        {
            return false;
        }
        if let Some(events) = events {
            self.drain(events, nlbuf).await;
        }
        if !self.own.contains(mac) && self.own_looked.elapsed() >= OWN_LOOK_INTERVAL {
            self.own_looked = Instant::now();
            // A failed look keeps what was known.
            if let Some(Some(own)) = off_thread(own_macs).await {
                self.own = own;
            }
        }
        if self.own.contains(mac) {
            return true;
        }
        if self.foreign.len() >= FOREIGN_MAX {
            self.foreign.clear();
        } else if self.foreign_pruned.elapsed() >= FOREIGN_PRUNE {
            self.foreign_pruned = Instant::now();
            self.foreign.retain(|_, t| t.elapsed() < FOREIGN_FOR);
        }
        self.foreign.insert(*mac, Instant::now());
        false
    }

    /// The link and address events queued now (at most EVENTS_PER_TURN datagrams), read
    /// outside the netlink branch; events the kernel dropped (ENOBUFS) mean a look.
    /// True when the socket was emptied, false when the turn's budget ran out first.
    async fn drain(&mut self, events: &Events, nlbuf: &mut Vec<u8>) -> bool {
        for _ in 0..EVENTS_PER_TURN {
            match events.read(nlbuf) {
                Ok(list) => {
                    for e in list {
                        self.event(e).await;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.look().await,
                Err(_) => return true,
            }
        }
        false
    }

    /// A frame from a MAC of none of this node's interfaces claiming the VIP: told to the
    /// machine, which counts it, names it, and decides the defence and the push.
    async fn conflict(&mut self, c: Claim, events: Option<&Events>, nlbuf: &mut Vec<u8>) {
        if self.is_own(&c.mac, events, nlbuf).await {
            return;
        }
        let w = &self.w;
        let mac = mac_text(&c.mac);
        let what = format!(
            "VIP conflict: {} claimed by {mac} on {} ({})",
            w.ip, w.link.name, c.frame
        );
        let push = w.config.borrow().conflict_action == ConflictAction::Push;
        w.fence.handle(Input::VipClaimed(machine::Claim {
            mac,
            frame: c.frame.into(),
            what,
            push,
        }));
    }

    /// The VIP's link removed (None) or set down: told, and true; up: false.
    fn link_lost(&self, link: Option<&Link>, with_address: bool) -> bool {
        let nic = &self.w.link.name;
        let detail = match link {
            None => format!("interface {nic} was removed"),
            Some(l) if !l.admin_up => format!("link {nic} was set down"),
            Some(_) => return false,
        };
        let how = match with_address {
            true => Gone::Deleted { with_link: true },
            false => Gone::LinkDown,
        };
        self.w.fence.handle(Input::VipGone { how, detail });
        true
    }

    async fn event(&mut self, e: Event) {
        let (index, ip, nic) = (self.w.link.index, self.w.ip, self.w.link.name.clone());
        if let Event::Link(l) = &e {
            // A new (or re-addressed) interface of this node: its frames are our own.
            if let Some(mac) = l.mac.filter(|m| *m != [0; 6]) {
                self.own.insert(mac);
                self.foreign.remove(&mac);
            }
        }
        match e {
            Event::AddressDeleted(a) if AddrMatch::on(ip, index).matches(&a) => {
                // IPv6 addresses go with their link: say which happened.
                let link =
                    off_thread(move || Rtnl::open().and_then(|mut r| r.link_by_index(index))).await;
                if !matches!(link, Some(Ok(l)) if self.link_lost(l.as_ref(), true)) {
                    self.w.fence.handle(Input::VipGone {
                        how: Gone::Deleted { with_link: false },
                        detail: format!("VIP {ip} was deleted from {nic} by another program"),
                    });
                }
            }
            Event::Link(l) if l.index == index => {
                self.link_lost(Some(&l), false);
            }
            Event::LinkRemoved(i) if i == index => {
                self.link_lost(None, false);
            }
            Event::Undecodable => self.look().await,
            _ => {}
        }
    }

    /// Events were dropped (ENOBUFS), or the watch just started: look at the state itself.
    async fn look(&mut self) {
        let (index, ip, nic) = (self.w.link.index, self.w.ip, self.w.link.name.clone());
        let seen = off_thread(move || {
            let mut rtnl = Rtnl::open().ok()?;
            let link = rtnl.link_by_index(index).ok()?;
            let present = rtnl.presence(&AddrMatch::on(ip, index));
            Some((link, present))
        })
        .await
        .flatten();
        if let Some((link, present)) = seen {
            // Only a proven absence is a loss; a dump that failed keeps what was known.
            let gone = present.is_absent();
            if !self.link_lost(link.as_ref(), gone) && gone {
                self.w.fence.handle(Input::VipGone {
                    how: Gone::Deleted { with_link: false },
                    detail: format!("VIP {ip} is no longer on {nic} (deleted by another program)"),
                });
            }
        }
    }
}

/// One announcement of the VIP from our MAC (RFC 5227's defence, the machine's Order::Defend),
/// off the runtime thread, from the interface's MAC as it is now (a bond's may have moved since
/// the raise), only while the machine may still defend it.
pub fn defend(link: Link, ip: IpAddr, mode: Option<ArpMode>, fence: Fence, rsc: String) {
    tokio::task::spawn_blocking(move || {
        if !fence.may_defend() {
            return;
        }
        let link = Rtnl::open()
            .and_then(|mut r| r.link_by_index(link.index))
            .ok()
            .flatten()
            .unwrap_or(link);
        match Announcer::open(&link, ip, mode.unwrap_or(ArpMode::Both)).and_then(|mut a| a.send(0))
        {
            Ok(()) => log::info!("guard {rsc}: defended VIP {ip}: one announcement sent"),
            Err(e) => log::warn!("guard {rsc}: cannot defend VIP {ip}: {e}"),
        }
    });
}

/// The readiness of a socket the watch may lack (then: never).
async fn readable<T: AsRawFd>(
    fd: &Option<AsyncFd<T>>,
) -> io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, T>> {
    match fd {
        Some(f) => f.readable().await,
        None => std::future::pending().await,
    }
}

/// Watches until the task is dropped (the leadership ends).
pub async fn watch(w: WireWatch) {
    let rsc = w.resource.clone();
    // SAFETY (both registrations): the AsyncFd owns the socket, which nothing else closes or
    // replaces while it is registered.
    let events = match Events::open().and_then(|e| {
        unsafe { AsyncFd::register(e) }.map_err(|e| crate::vip::netlink::NetlinkError::Io {
            op: "subscribe",
            source: e.into(),
        })
    }) {
        Ok(e) => Some(e),
        Err(e) => {
            log::warn!("guard {rsc}: cannot watch the VIP's address and link: {e}");
            None
        }
    };
    let frames = match packet_socket(w.link.index, w.ip)
        .and_then(|fd| unsafe { AsyncFd::register(fd) }.map_err(io::Error::from))
    {
        Ok(f) => Some(f),
        Err(e) => {
            log::warn!(
                "guard {rsc}: cannot watch {} for VIP conflicts: {e}",
                w.link.name
            );
            None
        }
    };
    let mut st = State {
        own: off_thread(own_macs).await.flatten().unwrap_or_default(),
        foreign: std::collections::HashMap::new(),
        foreign_pruned: Instant::now(),
        own_looked: Instant::now(),
        w,
    };
    // Subscribed first, then looked: nothing between the raise and now is missed.
    st.look().await;
    let mut buf = vec![0u8; 2048];
    let mut nlbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        tokio::select! {
            r = readable(&events) => {
                let Ok(mut ready) = r else { return };
                if st.drain(ready.get_inner(), &mut nlbuf).await {
                    // Emptied: readiness goes, unless an event came in meanwhile (its tick is
                    // newer than this guard's, and clearing leaves it set).
                    ready.clear_ready();
                } else {
                    tokio::task::yield_now().await;
                }
            }
            r = readable(&frames) => {
                let Ok(mut ready) = r else { return };
                let mut handled = 0;
                while let Ok(Ok((n, ifindex, counts))) =
                    ready.try_io(|fd| recv_frame(fd.get_ref(), &mut buf))
                {
                    if counts && ifindex == st.w.link.index as i32 {
                        if let Some(c) = claim(&buf[..n], st.w.ip) {
                            let events = events.as_ref().map(|e| e.get_ref());
                            st.conflict(c, events, &mut nlbuf).await;
                        }
                    }
                    handled += 1;
                    if handled == FRAMES_PER_TURN {
                        // The rest waits for the next turn (readiness is still set).
                        break;
                    }
                }
                if handled == FRAMES_PER_TURN {
                    tokio::task::yield_now().await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vip::announce::{gratuitous_arp, unsolicited_na};
    use pnet_datalink::MacAddr;
    use pnet_packet::arp::ArpOperations;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

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
    fn an_arp_frame_from_another_mac_for_the_vip_is_a_claim_and_passes_the_filter() {
        let vip: IpAddr = "198.51.100.100".parse().unwrap();
        let other: IpAddr = "198.51.100.101".parse().unwrap();
        for (op, kind) in [
            (ArpOperations::Reply, "ARP reply"),
            (ArpOperations::Request, "ARP request"),
        ] {
            let IpAddr::V4(v4) = vip else { unreachable!() };
            let frame = gratuitous_arp(MacAddr::from(MAC), v4, op);
            assert_eq!(
                claim(&frame, vip),
                Some(Claim {
                    mac: MAC,
                    frame: kind
                })
            );
            assert_eq!(run(&filter(vip), &frame), 0xffff);
            assert_eq!(claim(&frame, other), None);
            assert_eq!(run(&filter(other), &frame), 0);
        }
        // A probe for the VIP (sender 0.0.0.0) claims nothing.
        let IpAddr::V4(v4) = vip else { unreachable!() };
        let probe = crate::vip::announce::arp_probe(MacAddr::from(MAC), v4);
        assert_eq!(claim(&probe, vip), None);
        assert_eq!(run(&filter(vip), &probe), 0);
        assert_eq!(claim(&probe[..30], vip), None, "short frames are no claim");
    }

    #[test]
    fn a_neighbor_advertisement_for_the_vip_is_a_claim_with_the_options_mac() {
        let vip: IpAddr = "2001:db8::100".parse().unwrap();
        let other: IpAddr = "2001:db8::101".parse().unwrap();
        let IpAddr::V6(v6) = vip else { unreachable!() };
        let mut frame = unsolicited_na(MacAddr::from(MAC), v6).to_vec();
        assert_eq!(
            claim(&frame, vip),
            Some(Claim {
                mac: MAC,
                frame: "neighbor advertisement"
            })
        );
        assert_eq!(run(&filter(vip), &frame), 0xffff);
        assert_eq!(claim(&frame, other), None);
        assert_eq!(run(&filter(other), &frame), 0);
        // The target link-layer option names the MAC, not the frame's source.
        frame[6..12].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
        assert_eq!(claim(&frame, vip).unwrap().mac, MAC);
        // A solicitation (135) is no claim.
        frame[54] = 135;
        assert_eq!(claim(&frame, vip), None);
        assert_eq!(run(&filter(vip), &frame), 0);
    }

    #[test]
    fn macs_are_written_as_ip_link_writes_them() {
        assert_eq!(mac_text(&[2, 0, 0xab, 0, 0, 7]), "02:00:ab:00:00:07");
    }
}
