//! The VIP's established TCP connections as the kernel lists them (sock_diag(7), inet_diag),
//! without an `ss` process: the first part of issue 53 (the clients told of a failover), which
//! records them while leading so that the next master can reset them. One dump per family of
//! the sockets whose local address is the VIP (a kernel-side filter, as `ss src VIP` sends),
//! in the calling thread's network namespace, whoever owns them; an IPv4 VIP is also looked
//! for among IPv6 sockets as its v4-mapped form (a service listening on `[::]`).
//!
//! The request and the answers are laid out by hand at fixed offsets (uapi linux/inet_diag.h),
//! as frames.rs lays out frames: the netlink crates the project uses have no sock_diag of the
//! same core version. A message too short for what it claims is no session.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr as NlAddr};

/// One established connection of the VIP: the VIP's end, the peer's, and the socket's inode
/// (which grows with each socket the kernel makes: the older connection has the smaller one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Session {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub inode: u32,
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;
const IPPROTO_TCP: u8 = libc::IPPROTO_TCP as u8;
/// `1 << TCP_ESTABLISHED` (TCP_ESTABLISHED is 1).
const ESTABLISHED: u32 = 1 << 1;
/// struct inet_diag_req_v2: family, protocol, ext, pad, states, then the 48-byte sockid.
const REQ_LEN: usize = 56;
/// INET_DIAG_REQ_BYTECODE, and the one operation it carries: INET_DIAG_BC_S_COND.
const REQ_BYTECODE: u16 = 1;
const BC_S_COND: u8 = 7;
/// struct inet_diag_msg: family, state, timer, retrans, the sockid, expires, rqueue, wqueue,
/// uid, inode.
const MSG_LEN: usize = 72;
/// How long the kernel may take to answer a dump.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// The established TCP connections whose local address is `vip`, oldest first.
pub fn established(vip: IpAddr) -> io::Result<Vec<Session>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&NlAddr::new(0, 0))?;
    super::netlink::set_recv_timeout(&socket, REPLY_TIMEOUT)?;
    // An IPv4 VIP: IPv4 sockets, and IPv6 sockets that carry it v4-mapped.
    let families: &[u8] = match vip {
        IpAddr::V4(_) => &[AF_INET, AF_INET6],
        IpAddr::V6(_) => &[AF_INET6],
    };
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    for (seq, family) in (1u32..).zip(families) {
        socket.send(&request(*family, vip, seq), 0)?;
        loop {
            buf.clear();
            let size = socket.recv(&mut buf, 0)?;
            let size = size.min(buf.len());
            if read_answers(&buf[..size], seq, &mut out)? {
                break;
            }
        }
    }
    out.sort_by_key(|s| s.inode);
    out.dedup();
    Ok(out)
}

/// The dump request for `family`'s established TCP sockets whose local address is `vip`.
fn request(family: u8, vip: IpAddr, seq: u32) -> Vec<u8> {
    let addr: Vec<u8> = match vip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let (cond_family, prefix) = match vip {
        IpAddr::V4(_) => (AF_INET, 32u8),
        IpAddr::V6(_) => (AF_INET6, 128u8),
    };
    // The operation: S_COND, matched → the end (yes = its length), not matched → past the
    // end (no = length + 4), which rejects the socket; then inet_diag_hostcond (family, prefix
    // length, two bytes of padding, port -1: any) and the address.
    let op_len = 4 + 8 + addr.len();
    let mut op = vec![BC_S_COND, op_len as u8];
    op.extend_from_slice(&((op_len + 4) as u16).to_ne_bytes());
    op.extend_from_slice(&[cond_family, prefix, 0, 0]);
    op.extend_from_slice(&(-1i32).to_ne_bytes());
    op.extend_from_slice(&addr);
    let attr_len = 4 + op.len();
    let total = NLMSG_HDR + REQ_LEN + attr_len;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_ne_bytes());
    out.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    out.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&[family, IPPROTO_TCP, 0, 0]);
    out.extend_from_slice(&ESTABLISHED.to_ne_bytes());
    out.extend_from_slice(&[0u8; 48]);
    out.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    out.extend_from_slice(&REQ_BYTECODE.to_ne_bytes());
    out.extend_from_slice(&op);
    out
}

/// The messages of one datagram that answer request `seq`, into `out`; true once the dump is
/// done. An error message is the kernel's errno; a message too short for what it claims ends
/// the datagram (nothing after it can be found).
fn read_answers(buf: &[u8], seq: u32, out: &mut Vec<Session>) -> io::Result<bool> {
    let mut at = 0;
    while at + NLMSG_HDR <= buf.len() {
        let len = u32_at(buf, at) as usize;
        if len < NLMSG_HDR || at + len > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "sock_diag: a message of {len} bytes at {at} of {}",
                    buf.len()
                ),
            ));
        }
        let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        let msg_seq = u32_at(buf, at + 8);
        let body = &buf[at + NLMSG_HDR..at + len];
        at += (len + 3) & !3;
        if msg_seq != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = body
                    .get(..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                if errno == 0 {
                    return Ok(true);
                }
                return Err(io::Error::from_raw_os_error(-errno));
            }
            SOCK_DIAG_BY_FAMILY => out.extend(session(body)),
            _ => {}
        }
    }
    Ok(false)
}

/// One inet_diag_msg as a session; None when it is too short or of another family. A
/// v4-mapped IPv6 socket is told as the IPv4 connection it carries.
fn session(msg: &[u8]) -> Option<Session> {
    if msg.len() < MSG_LEN {
        return None;
    }
    let family = msg[0];
    let port = |at: usize| u16::from_be_bytes([msg[at], msg[at + 1]]);
    let addr = |at: usize| -> Option<IpAddr> {
        match family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::new(
                msg[at],
                msg[at + 1],
                msg[at + 2],
                msg[at + 3],
            ))),
            AF_INET6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&msg[at..at + 16]);
                let v6 = Ipv6Addr::from(o);
                Some(match v6.to_ipv4_mapped() {
                    Some(v4) => IpAddr::V4(v4),
                    None => IpAddr::V6(v6),
                })
            }
            _ => None,
        }
    };
    // The sockid at 4: sport, dport, src (16), dst (16), if, cookie; the inode at 68.
    Some(Session {
        local: SocketAddr::new(addr(8)?, port(4)),
        peer: SocketAddr::new(addr(24)?, port(6)),
        inode: u32_at(msg, 68),
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_carries_the_filter_on_the_vip_as_ss_sends_it() {
        let vip: IpAddr = "192.0.2.10".parse().unwrap();
        let r = request(AF_INET, vip, 7);
        // Header, request, attribute (4) and the operation: 4 + 8 + 4 bytes of address.
        assert_eq!(r.len(), 16 + 56 + 4 + 16);
        assert_eq!(u32_at(&r, 0) as usize, r.len());
        assert_eq!(u16::from_ne_bytes([r[4], r[5]]), SOCK_DIAG_BY_FAMILY);
        assert_eq!(u16::from_ne_bytes([r[6], r[7]]), 0x301);
        assert_eq!(u32_at(&r, 8), 7);
        assert_eq!(&r[16..20], &[AF_INET, IPPROTO_TCP, 0, 0]);
        assert_eq!(u32_at(&r, 20), 2, "established only");
        let attr = &r[72..];
        assert_eq!(u16::from_ne_bytes([attr[0], attr[1]]), 20);
        assert_eq!(u16::from_ne_bytes([attr[2], attr[3]]), REQ_BYTECODE);
        // S_COND, yes = 16 (the end), no = 20 (past it: rejected).
        assert_eq!(&attr[4..6], &[BC_S_COND, 16]);
        assert_eq!(u16::from_ne_bytes([attr[6], attr[7]]), 20);
        assert_eq!(&attr[8..10], &[AF_INET, 32]);
        assert_eq!(
            i32::from_ne_bytes([attr[12], attr[13], attr[14], attr[15]]),
            -1
        );
        assert_eq!(&attr[16..20], &[192, 0, 2, 10]);
        // IPv6: 16 bytes of address, prefix 128.
        let v6: IpAddr = "2001:db8::10".parse().unwrap();
        let r = request(AF_INET6, v6, 1);
        assert_eq!(r.len(), 16 + 56 + 4 + 28);
        assert_eq!(&r[76..78], &[BC_S_COND, 28]);
        assert_eq!(&r[80..82], &[AF_INET6, 128]);
    }

    /// An inet_diag_msg as the kernel writes it, in a netlink message of request `seq`.
    fn answer(
        seq: u32,
        family: u8,
        local: ([u8; 16], u16),
        peer: ([u8; 16], u16),
        inode: u32,
    ) -> Vec<u8> {
        let mut m = vec![family, 1, 0, 0];
        m.extend_from_slice(&local.1.to_be_bytes());
        m.extend_from_slice(&peer.1.to_be_bytes());
        m.extend_from_slice(&local.0);
        m.extend_from_slice(&peer.0);
        m.extend_from_slice(&[0u8; 12]);
        m.extend_from_slice(&[0u8; 16]);
        m.extend_from_slice(&inode.to_ne_bytes());
        assert_eq!(m.len(), MSG_LEN);
        message(seq, SOCK_DIAG_BY_FAMILY, &m)
    }

    fn message(seq: u32, kind: u16, body: &[u8]) -> Vec<u8> {
        let mut out = ((NLMSG_HDR + body.len()) as u32).to_ne_bytes().to_vec();
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&0u16.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(body);
        out
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut o = [0u8; 16];
        o[..4].copy_from_slice(&a);
        o
    }

    #[test]
    fn answers_are_read_until_done_and_a_mapped_address_is_ipv4() {
        let mut dgram = answer(
            1,
            AF_INET,
            (v4([192, 0, 2, 10]), 443),
            (v4([198, 51, 100, 7]), 40000),
            90,
        );
        let mapped = Ipv4Addr::new(198, 51, 100, 8).to_ipv6_mapped().octets();
        let vip6 = Ipv4Addr::new(192, 0, 2, 10).to_ipv6_mapped().octets();
        dgram.extend(answer(1, AF_INET6, (vip6, 443), (mapped, 40001), 80));
        // Another request's answer is not this one's.
        dgram.extend(answer(
            9,
            AF_INET,
            (v4([10, 0, 0, 1]), 1),
            (v4([10, 0, 0, 2]), 2),
            1,
        ));
        let mut out = Vec::new();
        assert!(!read_answers(&dgram, 1, &mut out).unwrap());
        assert!(read_answers(&message(1, NLMSG_DONE, &[0; 4]), 1, &mut out).unwrap());
        assert_eq!(
            out,
            [
                Session {
                    local: "192.0.2.10:443".parse().unwrap(),
                    peer: "198.51.100.7:40000".parse().unwrap(),
                    inode: 90
                },
                Session {
                    local: "192.0.2.10:443".parse().unwrap(),
                    peer: "198.51.100.8:40001".parse().unwrap(),
                    inode: 80
                },
            ]
        );
    }

    #[test]
    fn an_error_is_the_kernels_errno_and_a_short_message_is_no_session() {
        let mut out = Vec::new();
        let e = read_answers(
            &message(1, NLMSG_ERROR, &(-libc::EPERM).to_ne_bytes()),
            1,
            &mut out,
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        // A message claiming more than the datagram holds.
        let mut short = message(1, SOCK_DIAG_BY_FAMILY, &[AF_INET; 8]);
        short[0] = 200;
        assert!(read_answers(&short, 1, &mut out).is_err());
        // A body shorter than inet_diag_msg: no session, and nothing else breaks.
        assert!(!read_answers(
            &message(1, SOCK_DIAG_BY_FAMILY, &[AF_INET; 40]),
            1,
            &mut out
        )
        .unwrap());
        assert!(out.is_empty());
    }
}
