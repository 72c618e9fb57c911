//! Announcements of a floating address: gratuitous ARP for IPv4, unsolicited Neighbor
//! Advertisements for IPv6 (the frames from vip::frames), sent on an AF_PACKET socket bound to
//! the VIP's interface. Also the ARP duplicate probe of `run_arping`.
//! It never decides which interface to use: callers hand it the resolved link.

use std::net::IpAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use pnet_datalink::{Channel, Config, DataLinkReceiver, DataLinkSender, MacAddr, NetworkInterface};
use pnet_packet::arp::{ArpOperation, ArpOperations};

use super::frames::{arp_probe, claim, gratuitous_arp, unsolicited_na};
use super::netlink::Link;

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
                use std::os::fd::IntoRawFd;
                // The fd is handed to pnet, which closes it.
                super::frames::send_socket()
                    .map_err(open_err)?
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
                // Another host that uses the address, or probes for it too.
                match claim(frame, IpAddr::V4(ip)) {
                    Some(c) if c.mac != self.mac.octets() => return Ok(Some(MacAddr::from(c.mac))),
                    _ => {}
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
