//! The vip agent against the real kernel: every test builds its own namespaces and veth
//! pair, runs the built agent inside, and checks addresses and the frames seen on the peer.

use hamaster_lab as support;

use std::time::Duration;

use pnet_packet::arp::ArpPacket;
use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use pnet_packet::icmpv6::ndp::NeighborAdvertPacket;
use pnet_packet::icmpv6::{self, Icmpv6Packet, Icmpv6Types};
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::Packet;
use support::{Agent, Capture, Frame, Pair, NODE_IF, PEER_IF};

const VIP4: &str = "192.0.2.10";
const VIP6: &str = "2001:db8::10";

/// Gratuitous ARP frames for `ip`: (time, operation, sender MAC, sender IP, target IP).
fn arp_frames(
    frames: &[Frame],
    ip: &str,
) -> Vec<(std::time::Instant, u16, [u8; 6], String, String)> {
    frames
        .iter()
        .filter_map(|f| {
            let eth = EthernetPacket::new(&f.bytes)?;
            if eth.get_ethertype() != EtherTypes::Arp {
                return None;
            }
            let arp = ArpPacket::new(eth.payload())?;
            let spa = arp.get_sender_proto_addr().to_string();
            (spa == ip).then(|| {
                (
                    f.at,
                    arp.get_operation().0,
                    arp.get_sender_hw_addr().octets(),
                    spa,
                    arp.get_target_proto_addr().to_string(),
                )
            })
        })
        .collect()
}

/// Unsolicited NAs for `ip`, each checked for destination MAC, hop limit, flags, checksum and
/// the target link-layer address; returns their times and source MACs.
fn na_frames(frames: &[Frame], ip: &str) -> Vec<(std::time::Instant, [u8; 6])> {
    let target: std::net::Ipv6Addr = ip.parse().unwrap();
    frames
        .iter()
        .filter_map(|f| {
            let eth = EthernetPacket::new(&f.bytes)?;
            if eth.get_ethertype() != EtherTypes::Ipv6 {
                return None;
            }
            let ip6 = Ipv6Packet::new(eth.payload())?;
            let icmp = Icmpv6Packet::new(ip6.payload())?;
            if icmp.get_icmpv6_type() != Icmpv6Types::NeighborAdvert {
                return None;
            }
            let na = NeighborAdvertPacket::new(ip6.payload())?;
            if na.get_target_addr() != target {
                return None;
            }
            assert_eq!(
                eth.get_destination().octets(),
                [0x33, 0x33, 0, 0, 0, 1],
                "NA goes to all-nodes MAC"
            );
            assert_eq!(ip6.get_destination().to_string(), "ff02::1");
            assert_eq!(ip6.get_hop_limit(), 255);
            assert_eq!(
                na.get_flags(),
                0x20,
                "Override only, not Solicited or Router"
            );
            assert_eq!(
                icmpv6::checksum(&icmp, &ip6.get_source(), &ip6.get_destination()),
                icmp.get_checksum(),
                "checksum"
            );
            let tlla = &ip6.payload()[24..32];
            assert_eq!(
                (tlla[0], tlla[1]),
                (2, 1),
                "target link-layer address option"
            );
            assert_eq!(&tlla[2..8], &eth.get_source().octets());
            Some((f.at, eth.get_source().octets()))
        })
        .collect()
}

fn gaps_ms(times: &[std::time::Instant]) -> Vec<u128> {
    times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect()
}

#[test]
fn ipv4_start_adds_the_address_and_sends_five_alternating_gratuitous_arps() {
    let pair = Pair::new("v4");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[("ip", VIP4), ("cidr_netmask", "24"), ("nic", NODE_IF)],
    );
    let cap = Capture::start(&pair.peer, PEER_IF);
    let run = agent.run("start");
    assert_eq!(run.code, 0, "start: {}", run.stderr);
    assert!(pair
        .node
        .addresses(NODE_IF)
        .contains(&"192.0.2.10/24".to_string()));
    std::thread::sleep(Duration::from_millis(1300));
    let frames = cap.finish();
    let arps = arp_frames(&frames, VIP4);
    let mac = pair.node.mac(NODE_IF);
    assert_eq!(arps.len(), 5, "arp_count default is 5: {arps:?}");
    let ops: Vec<u16> = arps.iter().map(|a| a.1).collect();
    assert_eq!(
        ops,
        [1, 2, 1, 2, 1],
        "both mode alternates request (1) and reply (2)"
    );
    for a in &arps {
        assert_eq!(a.2, mac, "sender MAC is the interface's");
        assert_eq!(
            (a.3.as_str(), a.4.as_str()),
            (VIP4, VIP4),
            "sender IP = target IP = VIP"
        );
    }
    for gap in gaps_ms(&arps.iter().map(|a| a.0).collect::<Vec<_>>()) {
        assert!(
            (170..=450).contains(&gap),
            "arp_interval 200 ms, got gaps {gap}"
        );
    }
}

#[test]
fn ipv4_start_and_stop_are_idempotent_and_monitor_follows() {
    let pair = Pair::new("idem");
    let agent = Agent::new(&pair.node, "vip", &[("ip", VIP4), ("arp_count", "1")]);
    assert_eq!(agent.run("monitor").code, 7, "not running before start");
    assert_eq!(agent.probe().code, 7);
    assert_eq!(agent.run("start").code, 0);
    assert_eq!(agent.run("start").code, 0, "start on a started resource");
    assert_eq!(
        pair.node
            .addresses(NODE_IF)
            .iter()
            .filter(|a| a.starts_with(VIP4))
            .count(),
        1
    );
    assert_eq!(agent.run("monitor").code, 0);
    assert_eq!(agent.probe().code, 0);
    assert_eq!(agent.run("stop").code, 0);
    assert!(!pair.node.holds(VIP4), "stop removes the address");
    assert_eq!(agent.run("stop").code, 0, "stop on a stopped resource");
    let mon = agent.run("monitor");
    mon.expect(7, "192.0.2.10/24 is not configured on vip0");
    assert!(
        pair.node.holds("192.0.2.1"),
        "the node's own address is untouched"
    );
}

#[test]
fn ipv6_start_waits_out_dad_then_sends_unsolicited_neighbor_advertisements() {
    let pair = Pair::new("v6");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", "2001:DB8:0:0::10"),
            ("cidr_netmask", "64"),
            ("arp_count", "3"),
        ],
    );
    let cap = Capture::start(&pair.peer, PEER_IF);
    let run = agent.run("start");
    assert_eq!(run.code, 0, "start: {}", run.stderr);
    let lines = pair.node.address_lines(NODE_IF);
    let line = lines
        .lines()
        .find(|l| l.contains("2001:db8::10/64"))
        .expect("VIP present");
    assert!(
        !line.contains("tentative"),
        "start returns after DAD: {line}"
    );
    std::thread::sleep(Duration::from_millis(800));
    let frames = cap.finish();
    let nas = na_frames(&frames, VIP6);
    assert_eq!(nas.len(), 3, "three NAs");
    assert!(nas.iter().all(|n| n.1 == pair.node.mac(NODE_IF)));
    for gap in gaps_ms(&nas.iter().map(|n| n.0).collect::<Vec<_>>()) {
        assert!((170..=450).contains(&gap), "gap {gap}");
    }
    assert_eq!(
        agent.run("monitor").code,
        0,
        "non-canonical spelling still monitors"
    );
    assert_eq!(agent.run("stop").code, 0);
    assert!(!pair.node.holds(VIP6));
}

#[test]
fn ipv6_nodad_adds_the_address_usable_at_once() {
    let pair = Pair::new("nodad");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", VIP6),
            ("nodad", "true"),
            ("arp_count", "1"),
            ("preferred_lft", "0"),
        ],
    );
    let cap = Capture::start(&pair.peer, PEER_IF);
    let run = agent.run("start");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let frames = cap.finish();
    assert_eq!(
        na_frames(&frames, VIP6).len(),
        1,
        "the first NA is on the wire when start returns"
    );
    let lines = pair.node.address_lines(NODE_IF);
    let line = lines
        .lines()
        .find(|l| l.contains("2001:db8::10/64"))
        .expect("VIP with the route's /64");
    assert!(
        line.contains("nodad") && line.contains("deprecated"),
        "nodad and preferred_lft 0: {line}"
    );
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
fn ipv6_duplicate_address_fails_start_and_leaves_nothing() {
    let pair = Pair::new("dad");
    pair.peer
        .ip(&["addr", "add", "2001:db8::10/64", "dev", PEER_IF, "nodad"]);
    let agent = Agent::new(&pair.node, "vip", &[("ip", VIP6)]);
    let run = agent.run("start");
    run.expect(1, "dadfailed");
    assert!(
        !pair.node.holds(VIP6),
        "a failed start removes the duplicate address"
    );
}

#[test]
fn interface_lookup_picks_longest_prefix_route_and_its_mask() {
    let pair = Pair::new("find");
    // A second interface whose /25 is more specific than vip0's /24; and a default route.
    let other = support::Netns::new("findo");
    support::must(
        "ip",
        &[
            "-n",
            &pair.node.name,
            "link",
            "add",
            "vip1",
            "type",
            "veth",
            "peer",
            "name",
            "o0",
            "netns",
            &other.name,
        ],
    );
    pair.node.ip(&["link", "set", "vip1", "up"]);
    other.ip(&["link", "set", "o0", "up"]);
    pair.node
        .ip(&["addr", "add", "198.51.100.1/24", "dev", "vip1"]);
    pair.node.ip(&[
        "route",
        "add",
        "192.0.2.0/25",
        "dev",
        "vip1",
        "metric",
        "10",
    ]);
    pair.node
        .ip(&["route", "add", "default", "via", "192.0.2.2"]);

    let low = Agent::new(&pair.node, "vip", &[("ip", VIP4), ("arp_count", "0")]);
    assert_eq!(low.run("start").code, 0);
    assert!(
        pair.node
            .addresses("vip1")
            .contains(&"192.0.2.10/25".to_string()),
        "{:?}",
        pair.node.addresses("vip1")
    );
    let high = Agent::new(
        &pair.node,
        "vip",
        &[("ip", "192.0.2.200"), ("arp_count", "0")],
    );
    assert_eq!(high.run("start").code, 0);
    assert!(pair
        .node
        .addresses(NODE_IF)
        .contains(&"192.0.2.200/24".to_string()));
    // Only the default route matches: findif refuses, so do we — as a trouble of this node
    // (1: Pacemaker tries another node), never 6, which would stop the VIP everywhere.
    let none = Agent::new(&pair.node, "vip", &[("ip", "203.0.113.5")]);
    none.run("validate-all")
        .expect(1, "ip=\"203.0.113.5\" matches no route on this host");
    none.run("start")
        .expect(1, "ip=\"203.0.113.5\" matches no route on this host");
    assert_eq!(low.run("stop").code, 0);
    assert_eq!(high.run("stop").code, 0);
}

/// IPaddr2 keeps and adds the address whatever the link's state, and brings the interface up:
/// a switch reboot must not ban the VIP from every node (start 5 did), nor a monitor report it
/// gone while the cable is out.
#[test]
fn loss_of_carrier_and_a_downed_interface_do_not_stop_the_vip_as_in_ipaddr2() {
    let pair = Pair::new("down");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", VIP4),
            ("nic", NODE_IF),
            ("cidr_netmask", "24"),
            ("arp_count", "0"),
        ],
    );
    assert_eq!(agent.run("start").code, 0);
    pair.peer.ip(&["link", "set", PEER_IF, "down"]);
    assert!(support::wait_for(Duration::from_secs(5), || !pair
        .node
        .ip(&["link", "show", NODE_IF])
        .contains("LOWER_UP")));
    assert_eq!(agent.run("monitor").code, 0, "no carrier: still running");
    assert_eq!(agent.run("stop").code, 0);
    assert!(!pair.node.holds(VIP4));
    assert_eq!(
        agent.run("start").code,
        0,
        "no carrier: the address goes on anyway"
    );
    assert!(pair.node.holds(VIP4));
    // IPv6 without carrier: no DAD to wait for yet; start does not hang on it.
    let v6 = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", "2001:db8::77"),
            ("nic", NODE_IF),
            ("cidr_netmask", "64"),
            ("arp_count", "0"),
        ],
    );
    let run = v6.run("start");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.elapsed < Duration::from_secs(5),
        "took {:?}",
        run.elapsed
    );
    assert!(pair.node.holds("2001:db8::77"));
    assert_eq!(v6.run("stop").code, 0);
    // Administratively down: start adds the address and brings the interface up.
    assert_eq!(agent.run("stop").code, 0);
    pair.node.ip(&["link", "set", NODE_IF, "down"]);
    assert_eq!(agent.run("start").code, 0);
    assert!(pair.node.holds(VIP4));
    let link = pair.node.ip(&["-o", "link", "show", NODE_IF]);
    assert!(link.contains(",UP"), "start brings {NODE_IF} up: {link}");
    pair.node.ip(&["link", "set", NODE_IF, "down"]);
    assert_eq!(
        agent.run("monitor").code,
        0,
        "down with the address on it: running"
    );
    assert_eq!(agent.run("stop").code, 0);
    assert!(!pair.node.holds(VIP4));
}

#[test]
fn run_arping_refuses_an_address_another_host_answers_for() {
    let pair = Pair::new("dup");
    pair.peer
        .ip(&["addr", "add", "192.0.2.10/24", "dev", PEER_IF]);
    let peer_mac = pair.peer.mac(PEER_IF);
    let agent = Agent::new(&pair.node, "vip", &[("ip", VIP4), ("run_arping", "yes")]);
    let run = agent.run("start");
    let mac = peer_mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    run.expect(1, &format!("already in use by {mac}"));
    assert!(!pair.node.holds(VIP4));
    // With nobody else on it, the same start goes through.
    pair.peer
        .ip(&["addr", "del", "192.0.2.10/24", "dev", PEER_IF]);
    assert_eq!(agent.run("start").code, 0);
    assert!(pair.node.holds(VIP4));
}

#[test]
fn stop_cancels_a_running_burst() {
    let pair = Pair::new("cancel");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[("ip", VIP4), ("arp_count", "50"), ("arp_interval", "50")],
    );
    let cap = Capture::start(&pair.peer, PEER_IF);
    assert_eq!(agent.run("start").code, 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(agent.run("stop").code, 0);
    let stopped = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let frames = cap.finish();
    let arps = arp_frames(&frames, VIP4);
    assert!(arps.len() >= 3, "burst was running: {}", arps.len());
    assert!(arps.len() < 20, "burst was cut short: {}", arps.len());
    assert!(
        arps.iter().all(|a| a.0 <= stopped),
        "no frame after stop returned"
    );
}

#[test]
fn a_restart_replaces_the_running_burst_instead_of_adding_one() {
    let pair = Pair::new("restart");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[("ip", VIP4), ("arp_count", "6"), ("arp_interval", "100")],
    );
    let cap = Capture::start(&pair.peer, PEER_IF);
    assert_eq!(agent.run("start").code, 0);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(agent.run("start").code, 0);
    std::thread::sleep(Duration::from_millis(1000));
    let arps = arp_frames(&cap.finish(), VIP4);
    // First burst: frames 0 and 1 (at 0 and 100 ms); second: all six.
    assert!(
        (7..=8).contains(&arps.len()),
        "one burst at a time: {}",
        arps.len()
    );
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
fn arp_mode_request_or_reply_sends_only_that_kind() {
    for (mode, op) in [("request", 1u16), ("reply", 2)] {
        let pair = Pair::new("mode");
        let agent = Agent::new(
            &pair.node,
            "vip",
            &[
                ("ip", VIP4),
                ("arp_mode", mode),
                ("arp_count", "3"),
                ("arp_interval", "50"),
            ],
        );
        let cap = Capture::start(&pair.peer, PEER_IF);
        assert_eq!(agent.run("start").code, 0);
        std::thread::sleep(Duration::from_millis(400));
        let arps = arp_frames(&cap.finish(), VIP4);
        assert_eq!(
            arps.iter().map(|a| a.1).collect::<Vec<_>>(),
            vec![op; 3],
            "mode {mode}"
        );
    }
}

#[test]
fn arp_count_refresh_reannounces_on_recurring_monitors_only() {
    let pair = Pair::new("refresh");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", VIP4),
            ("arp_count", "0"),
            ("arp_count_refresh", "2"),
            ("arp_interval", "50"),
        ],
    );
    assert_eq!(agent.run("start").code, 0);
    let cap = Capture::start(&pair.peer, PEER_IF);
    assert_eq!(agent.probe().code, 0);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(agent.run("monitor").code, 0);
    std::thread::sleep(Duration::from_millis(300));
    let arps = arp_frames(&cap.finish(), VIP4);
    assert_eq!(
        arps.len(),
        2,
        "two frames from the recurring monitor, none from the probe"
    );
}

#[test]
fn iflabel_and_noprefixroute_reach_the_kernel() {
    let pair = Pair::new("label");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", "192.0.2.50"),
            ("cidr_netmask", "32"),
            ("nic", NODE_IF),
            ("iflabel", "api"),
            ("noprefixroute", "1"),
            ("arp_count", "0"),
        ],
    );
    assert_eq!(agent.run("start").code, 0);
    let lines = pair.node.address_lines(NODE_IF);
    let line = lines
        .lines()
        .find(|l| l.contains("192.0.2.50/32"))
        .expect("present");
    assert!(
        line.contains("vip0:api") && line.contains("noprefixroute"),
        "{line}"
    );
    let long = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", "192.0.2.51"),
            ("nic", NODE_IF),
            ("iflabel", "muchtoolong1"),
        ],
    );
    long.run("validate-all")
        .expect(6, "iflabel=\"muchtoolong1\"");
}

#[test]
fn an_address_held_with_another_prefix_is_not_taken_over_or_removed() {
    let pair = Pair::new("foreign");
    pair.node
        .ip(&["addr", "add", "192.0.2.10/32", "dev", NODE_IF]);
    let agent = Agent::new(&pair.node, "vip", &[("ip", VIP4), ("cidr_netmask", "24")]);
    agent
        .run("start")
        .expect(1, "already configured on vip0 as 192.0.2.10/32");
    assert_eq!(agent.run("stop").code, 0);
    assert!(
        pair.node
            .addresses(NODE_IF)
            .contains(&"192.0.2.10/32".to_string()),
        "not ours: left alone"
    );
}

#[test]
fn a_missing_or_vanished_interface_is_this_nodes_trouble_never_a_configuration_error() {
    let pair = Pair::new("nif");
    // nic names no interface on this node: 1 with the reason, nothing added (IPaddr2: 1).
    let nosuch = Agent::new(
        &pair.node,
        "vip",
        &[("ip", "192.0.2.10"), ("nic", "nosuch0"), ("arp_count", "0")],
    );
    for action in ["validate-all", "start"] {
        let run = nosuch.run(action);
        run.expect(1, "nic=\"nosuch0\" is not an interface on this host");
        assert_eq!(run.reasons().len(), 1, "{action}: {}", run.stderr);
    }
    assert!(!pair.node.holds("192.0.2.10"));
    assert_eq!(nosuch.probe().code, 7, "a probe finds nothing here");
    // The interface the VIP was on vanishes: monitor says 1 (IPaddr2: 1), a probe 7.
    pair.node.ip(&[
        "link", "add", "extra0", "type", "veth", "peer", "name", "extra1",
    ]);
    pair.node.ip(&["link", "set", "extra0", "up"]);
    pair.node.ip(&["link", "set", "extra1", "up"]);
    pair.node
        .ip(&["addr", "add", "198.51.100.1/24", "dev", "extra0"]);
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", "198.51.100.10"),
            ("nic", "extra0"),
            ("arp_count", "0"),
        ],
    );
    assert_eq!(agent.run("start").code, 0);
    assert_eq!(agent.run("monitor").code, 0);
    pair.node.ip(&["link", "del", "extra0"]);
    agent
        .run("monitor")
        .expect(1, "nic=\"extra0\" is not an interface on this host");
    assert_eq!(agent.probe().code, 7);
    assert_eq!(agent.run("stop").code, 0, "nothing left to remove");
}

/// network_namespace names a namespace that is not on this node: its trouble (1, probe 7,
/// stop 0), never 6. A cloned vip (clone-max > 1) would be IPaddr2's CLUSTERIP mode: 6.
#[test]
fn a_missing_network_namespace_is_this_nodes_trouble_and_a_clone_is_refused() {
    let pair = Pair::new("nsx");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[
            ("ip", VIP4),
            ("arp_count", "0"),
            ("network_namespace", "hmt-no-such-namespace"),
        ],
    );
    agent.run("start").expect(
        1,
        "network_namespace=\"hmt-no-such-namespace\": cannot enter",
    );
    assert_eq!(agent.probe().code, 7);
    assert_eq!(agent.run("stop").code, 0);
    let cloned = Agent::new(&pair.node, "vip", &[("ip", VIP4), ("arp_count", "0")])
        .env("OCF_RESKEY_CRM_meta_clone_max", "2");
    cloned
        .run("start")
        .expect(6, "clone-max=\"2\" means IPaddr2's CLUSTERIP mode");
    assert!(!pair.node.holds(VIP4));
}

/// vip::sessions (issue 53's first part): the kernel's list of the VIP's established TCP
/// connections, by sock_diag in the namespace. The server's end of each connection to the
/// VIP, an IPv4 client of a dual-stack (`[::]`) listener told as IPv4; neither the clients'
/// own ends, nor a listener, nor a connection between other addresses.
#[test]
fn the_vips_established_connections_are_listed_from_the_kernel() {
    use std::net::{TcpListener, TcpStream};
    let ns = support::Netns::new("ses");
    ns.ip(&["link", "set", "lo", "up"]);
    for a in ["192.0.2.10/32", "198.51.100.7/32", "198.51.100.8/32"] {
        ns.ip(&["addr", "add", a, "dev", "lo"]);
    }
    let name = ns.name.clone();
    let seen = std::thread::spawn(move || {
        support::enter_netns(&name);
        let v4 = TcpListener::bind("192.0.2.10:8080").unwrap();
        let dual = TcpListener::bind("[::]:8081").unwrap();
        let other = TcpListener::bind("198.51.100.8:8082").unwrap();
        // A client from 198.51.100.7 (bound before it connects).
        let connect = |to: &str| {
            use nix::sys::socket::SockaddrIn;
            use nix::sys::socket::{bind, connect, socket, AddressFamily, SockFlag, SockType};
            use std::os::fd::AsRawFd;
            let fd = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::empty(),
                None,
            )
            .unwrap();
            let from: std::net::SocketAddrV4 = "198.51.100.7:0".parse().unwrap();
            bind(fd.as_raw_fd(), &SockaddrIn::from(from)).unwrap();
            let to: std::net::SocketAddrV4 = to.parse().unwrap();
            connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
            TcpStream::from(fd)
        };
        let c1 = connect("192.0.2.10:8080");
        let c2 = connect("192.0.2.10:8081");
        let c3 = connect("198.51.100.8:8082");
        let kept = [
            v4.accept().unwrap().0,
            dual.accept().unwrap().0,
            other.accept().unwrap().0,
        ];
        let found = hamaster::vip::sessions::established("192.0.2.10".parse().unwrap()).unwrap();
        let expected = [
            ("192.0.2.10:8080", c1.local_addr().unwrap()),
            ("192.0.2.10:8081", c2.local_addr().unwrap()),
        ];
        drop((kept, c3));
        (
            found,
            expected.map(|(l, p)| (l.parse::<std::net::SocketAddr>().unwrap(), p)),
        )
    })
    .join()
    .unwrap();
    let (found, expected) = seen;
    let pairs: Vec<_> = found.iter().map(|s| (s.local, s.peer)).collect();
    let mut want = expected.to_vec();
    want.sort();
    let mut got = pairs.clone();
    got.sort();
    assert_eq!(got, want, "{found:?}");
    assert!(
        found.windows(2).all(|w| w[0].inode <= w[1].inode),
        "oldest first: {found:?}"
    );
}

/// Runs `f` in a thread inside namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &support::Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    let name = ns.name.clone();
    std::thread::spawn(move || {
        support::enter_netns(&name);
        f()
    })
    .join()
    .unwrap()
}

/// vip::tickle (issue 53) on a switch of three hosts: the old master holding the VIP with an
/// idle client's connection, the new one, and the client's host, which drops gratuitous ARP
/// and unsolicited NA. The old master goes silent (its link down: a crash sends nothing); the
/// VIP comes up on the new one, which has no such connection. Tickles alone reach no one (the
/// client's answer goes to the old MAC): the client still waits. With its neighbour asked
/// first, the client answers to the new MAC, the new node's kernel resets the connection, and
/// the client's read fails within a second; its cache names the new MAC. IPv4 and IPv6.
#[test]
fn a_takeover_resets_an_idle_client_that_ignores_gratuitous_announcements() {
    use hamaster::vip::tickle::{self, Conn};
    use std::io::Read;
    use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
    use std::time::Instant;
    let sw = support::Switch::new("tk");
    let old = sw.attach("tko", "p1", "192.0.2.1/24");
    let new = sw.attach("tkn", "p2", "192.0.2.2/24");
    let client = sw.attach("tkc", "p3", "192.0.2.3/24");
    for (ns, six) in [
        (&old, "2001:db8::1/64"),
        (&new, "2001:db8::2/64"),
        (&client, "2001:db8::3/64"),
    ] {
        ns.ip(&["addr", "add", six, "dev", "lan0", "nodad"]);
    }
    for s in [
        "net.ipv4.conf.all.drop_gratuitous_arp=1",
        "net.ipv4.conf.lan0.drop_gratuitous_arp=1",
        "net.ipv6.conf.all.drop_unsolicited_na=1",
        "net.ipv6.conf.lan0.drop_unsolicited_na=1",
    ] {
        client.sysctl(s);
    }
    // The new node knows the client already (from its own address): sending to it takes no
    // address resolution of its kernel's, which would ask from the VIP and so repoint the
    // client by itself.
    for to in ["192.0.2.3", "2001:db8::3"] {
        let ping = std::process::Command::new("ip")
            .args(["netns", "exec", &new.name, "ping", "-c", "1", "-W", "2", to])
            .output()
            .unwrap();
        assert!(
            ping.status.success(),
            "{}",
            String::from_utf8_lossy(&ping.stdout)
        );
    }
    for (vip, cidr) in [
        ("192.0.2.10", "192.0.2.10/24"),
        ("2001:db8::10", "2001:db8::10/64"),
    ] {
        let vip_ip: IpAddr = vip.parse().unwrap();
        let at = SocketAddr::new(vip_ip, 8080);
        old.ip(&["link", "set", "lan0", "up"]);
        old.ip(&["addr", "add", cidr, "dev", "lan0", "nodad"]);
        // The old master's service: one connection accepted and kept.
        let listener = in_ns(&old, move || TcpListener::bind(at).unwrap());
        let conn = in_ns(&client, move || {
            TcpStream::connect_timeout(&at, Duration::from_secs(5)).unwrap()
        });
        let (kept, _) = listener.accept().unwrap();
        // The record the old master would leave.
        let left: Vec<Conn> = in_ns(&old, move || {
            hamaster::vip::sessions::established(vip_ip).unwrap()
        })
        .into_iter()
        .map(|s| Conn {
            local: s.local,
            peer: s.peer,
        })
        .collect();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].peer, conn.local_addr().unwrap());
        let old_mac =
            support::clients::neighbour_mac(&client, vip).expect("the client knows the VIP");
        // The crash: nothing more leaves the old master.
        old.ip(&["link", "set", "lan0", "down"]);
        new.ip(&["addr", "add", cidr, "dev", "lan0", "nodad"]);
        let (ended_tx, ended_rx) = std::sync::mpsc::channel();
        let waiting = {
            let mut conn = conn.try_clone().unwrap();
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                let r = conn.read(&mut [0u8; 16]);
                let _ = ended_tx.send((Instant::now(), format!("{r:?}")));
            })
        };
        let tell = move |repoint: bool| {
            let left = left.clone();
            move || {
                let mut rtnl = hamaster::vip::netlink::Rtnl::open().unwrap();
                let link = rtnl.link_by_name("lan0").unwrap().unwrap();
                let routes = rtnl.routes(vip_ip.is_ipv6()).unwrap();
                let plan = hamaster::guard::sessions::plan(
                    vip_ip,
                    (link.index, link.mac),
                    &left,
                    &Default::default(),
                    &Default::default(),
                    &routes,
                    true,
                    repoint,
                );
                (plan.neighbours.clone(), tickle::run(&plan, &|| true))
            }
        };
        let (asked, alone) = in_ns(&new, tell(false));
        assert!(asked.is_empty());
        assert_eq!((alone.tickled, alone.answered), (1, 0), "{alone:?}");
        assert!(
            ended_rx.try_recv().is_err(),
            "{vip}: the tickle alone reached the client: its answer went to the old MAC"
        );
        assert_eq!(
            support::clients::neighbour_mac(&client, vip),
            Some(old_mac.clone())
        );
        let t = Instant::now();
        let (asked, r) = in_ns(&new, tell(true));
        let (ended, how) = ended_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the client's read ended");
        waiting.join().unwrap();
        eprintln!(
            "{vip}: {r:?}; the client's read ended after {:?}: {how}",
            ended - t
        );
        assert_eq!(
            asked,
            vec![conn.local_addr().unwrap().ip()],
            "the client is on the link"
        );
        assert!(how.contains("ConnectionReset"), "{vip}: {how}");
        assert!(ended - t < Duration::from_secs(1), "{vip}: {:?}", ended - t);
        assert_eq!((r.tickled, r.answered), (1, 1), "{vip}: {r:?}");
        assert_eq!(
            (r.neighbours, r.neighbours_answered),
            (1, 1),
            "{vip}: {r:?}"
        );
        assert!(r.errors.is_empty(), "{r:?}");
        let new_mac = hamaster::vip::frames::mac_text(&new.mac("lan0"));
        assert_eq!(
            support::clients::neighbour_mac(&client, vip),
            Some(new_mac),
            "{vip}"
        );
        drop((kept, conn));
        new.ip(&["addr", "del", cidr, "dev", "lan0"]);
        // (IPv6 addresses went with the link.)
        let _ = std::process::Command::new("ip")
            .args(["-n", &old.name, "addr", "del", cidr, "dev", "lan0"])
            .output();
    }
}
