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
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use super::answers::{self, LinkSeen};
use super::fence::Fence;
use crate::resource::config::{ConflictAction, MasterConfig};
use crate::vip::announce::{Announcer, ArpMode};
use crate::vip::frames::{self, mac_text, recv_frame, Claim, ClaimKind};
use crate::vip::netlink::{AddrMatch, Event, Events, Link, Rtnl};

/// A MAC found foreign is taken as foreign this long without looking at the own interfaces
/// again (a host that keeps claiming costs one link dump a second, not one a frame).
const FOREIGN_FOR: Duration = Duration::from_secs(1);

/// Frames handled before the watch yields to the guard's other tasks (the lease keepalive runs
/// on the same thread): a flood of claims must not delay a renewal.
const FRAMES_PER_TURN: usize = 32;

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
        let push = w.config.borrow().conflict_action == ConflictAction::Push;
        let (mac, frame) = (mac_text(&c.mac), c.kind.name());
        w.fence
            .handle(answers::claimed(w.ip, &w.link.name, mac, frame, push));
    }

    /// The VIP's link removed (None) or set down: told, and true; up: false.
    fn link_lost(&self, link: Option<&Link>, with_address: bool) -> bool {
        let told = answers::link(&self.w.link.name, LinkSeen::of(link), with_address);
        told.map(|input| self.w.fence.handle(input)).is_some()
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
                let seen = match link {
                    Some(Ok(l)) => Some(LinkSeen::of(l.as_ref())),
                    _ => None,
                };
                self.w
                    .fence
                    .handle(answers::address_deleted(ip, &nic, seen));
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
            let seen = LinkSeen::of(link.as_ref());
            if let Some(input) = answers::looked(ip, &nic, seen, &present) {
                self.w.fence.handle(input);
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

/// The watch's sockets: the kernel's address and link events, the frames on the VIP's link
/// (each None, said once, when it cannot be had: the watch goes on without it).
#[allow(clippy::type_complexity)]
fn open_sockets(w: &WireWatch) -> (Option<AsyncFd<Events>>, Option<AsyncFd<OwnedFd>>) {
    let rsc = &w.resource;
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
    // SAFETY: as above, for the packet socket.
    let frames = match frames::watch_socket(w.link.index, w.ip)
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
    (events, frames)
}

/// Watches until the task is dropped (the leadership ends).
pub async fn watch(w: WireWatch) {
    let (events, frames) = open_sockets(&w);
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
                        // A probe is another host asking, not using (RFC 5227 2.4); the
                        // kernel's filter passes none, this says so again.
                        if let Some(c) = frames::claim(&buf[..n], st.w.ip)
                            .filter(|c| c.kind != ClaimKind::ArpProbe)
                        {
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
