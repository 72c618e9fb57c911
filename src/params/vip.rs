//! Parameters of the floating IP, shared by `ocf:hamaster:vip` and the master agent's
//! built-in VIP. Names and meanings follow `ocf:heartbeat:IPaddr2` where they overlap.

use super::{Kind, Param, Unit};

pub const IP: Param = Param {
    name: "ip",
    kind: Kind::String,
    default: None,
    required: false,
    unique: true,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Floating IPv4 or IPv6 address",
    longdesc: "The floating IP address to manage, IPv4 (192.0.2.10) or IPv6 (2001:db8::10), \
        in any valid spelling. It is added to the interface where the resource runs and \
        announced with gratuitous ARP or unsolicited Neighbor Advertisements. 127.0.0.0/8 \
        addresses go on lo (LVS direct routing).",
};

pub const CIDR_NETMASK: Param = Param {
    name: "cidr_netmask",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Prefix length",
    longdesc: "The prefix length of the address in CIDR form (24, 64), or a dotted IPv4 \
        netmask (255.255.255.0). When unset it is taken from the route that matches the \
        address, the way IPaddr2's findif does. Without nic, a route must contain the whole \
        network this prefix makes: a prefix wider than the base network's finds no interface.",
};

pub const NIC: Param = Param {
    name: "nic",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Network interface",
    longdesc: "The interface to add the address to; nic:label also sets iflabel, as in \
        IPaddr2. When unset, the interface of the longest-prefix, lowest-metric route of the \
        main table that contains the address is used, as IPaddr2's findif does: for IPv4 only \
        routes of scope link (never one through a gateway), for 127.0.0.0/8 the local route \
        on lo. Required for an IPv6 link-local address.",
};

pub const IFLABEL: Param = Param {
    name: "iflabel",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Interface label (IPv4)",
    longdesc: "A label for the IPv4 address: it shows as nic:iflabel in `ip addr`. \
        nic:iflabel must fit in 15 characters. Ignored for IPv6, like IPaddr2.",
};

pub const ARP_COUNT: Param = Param {
    name: "arp_count",
    kind: Kind::Integer,
    default: Some("5"),
    required: false,
    unique: false,
    reloadable: true,
    range: Some((0, 1000)),
    unit: None,
    shortdesc: "Number of announcements at start",
    longdesc: "How many gratuitous ARP (IPv4) or unsolicited Neighbor Advertisement (IPv6) \
        frames to send when the address is brought up. The first leaves before start \
        returns, the others are sent in the background. 0 sends none.",
};

pub const ARP_INTERVAL: Param = Param {
    name: "arp_interval",
    kind: Kind::Integer,
    default: Some("200"),
    required: false,
    unique: false,
    reloadable: true,
    range: Some((1, 60_000)),
    unit: Some(Unit::Milliseconds),
    shortdesc: "Milliseconds between announcements",
    longdesc: "The interval in milliseconds between two announcement frames.",
};

pub const ARP_COUNT_REFRESH: Param = Param {
    name: "arp_count_refresh",
    kind: Kind::Integer,
    default: Some("0"),
    required: false,
    unique: false,
    reloadable: true,
    range: Some((0, 1000)),
    unit: None,
    shortdesc: "Announcements on each monitor",
    longdesc: "How many announcement frames to send on every recurring monitor, to refresh \
        stale ARP and neighbour caches (after a split brain, for instance). 0 sends none.",
};

pub const ARP_MODE: Param = Param {
    name: "arp_mode",
    kind: Kind::String,
    default: Some("both"),
    required: false,
    unique: false,
    reloadable: true,
    range: None,
    unit: None,
    shortdesc: "ARP frame type: both, request or reply",
    longdesc: "Which gratuitous ARP frames to send for an IPv4 address: 'both' alternates \
        request and reply (some switches and hosts honour only one of them), 'request' or \
        'reply' send only that kind. IPv6 always uses unsolicited Neighbor Advertisements.",
};

pub const RUN_ARPING: Param = Param {
    name: "run_arping",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: true,
    range: None,
    unit: None,
    shortdesc: "Check for a duplicate address before adding it",
    longdesc: "Before adding an IPv4 address, probe with ARP (sender 0.0.0.0) whether another \
        host already answers for it, and fail the start if one does. IPv6 relies on the \
        kernel's duplicate address detection instead (see nodad).",
};

pub const NODAD: Param = Param {
    name: "nodad",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Skip IPv6 duplicate address detection",
    longdesc: "For IPv6: add the address without duplicate address detection, so it is \
        usable at once. When false, start waits (bounded by the operation timeout) until \
        DAD has finished, and fails when it detects a duplicate.",
};

pub const NOPREFIXROUTE: Param = Param {
    name: "noprefixroute",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Do not add a prefix route",
    longdesc: "Add the address without the kernel's automatic route for its prefix.",
};

pub const PREFERRED_LFT: Param = Param {
    name: "preferred_lft",
    kind: Kind::String,
    default: Some("forever"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Preferred lifetime (IPv6)",
    longdesc: "For IPv6: the preferred lifetime of the address in seconds, or 'forever'. \
        0 marks the address deprecated, so it is not chosen as a source address for \
        outgoing connections.",
};

pub const BROADCAST: Param = Param {
    name: "broadcast",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Broadcast address (IPv4)",
    longdesc: "The broadcast address of the IPv4 address: an address, '+' (host bits set) or \
        '-' (host bits clear). When unset it is the broadcast address of the base address the \
        matching route names as its source, as IPaddr2 does, or none. Refused for IPv6.",
};

pub const ARP_BG: Param = Param {
    name: "arp_bg",
    kind: Kind::Boolean,
    default: None,
    required: false,
    unique: false,
    reloadable: true,
    range: None,
    unit: None,
    shortdesc: "Send announcements in the background",
    longdesc: "true or unset: the first announcement leaves before start returns and the rest \
        follow in the background. false: start returns after the last of arp_count frames, \
        like IPaddr2 with arp_bg=false.",
};

pub const ARP_SENDER: Param = Param {
    name: "arp_sender",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: true,
    range: None,
    unit: None,
    shortdesc: "IPaddr2's ARP program (accepted, not used)",
    longdesc: "IPaddr2's choice of program for gratuitous ARP: send_arp, iputils_arping or \
        libnet_arping. Accepted for compatibility; every announcement is sent in-process, as \
        Ethernet frames of the kind arp_mode chooses. ipoibarping (IP over InfiniBand) is \
        refused: no IPoIB frames are built. Any other value is refused.",
};

pub const SEND_ARP_OPTS: Param = Param {
    name: "send_arp_opts",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: true,
    range: None,
    unit: None,
    shortdesc: "Options for IPaddr2's ARP program (refused)",
    longdesc: "Extra command-line options for IPaddr2's ARP program. There is no such program \
        here: a non-empty value is refused; use arp_mode, arp_count and arp_interval.",
};

pub const FLUSH_ROUTES: Param = Param {
    name: "flush_routes",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Flush the routing cache on stop",
    longdesc: "After removing the address, flush the kernel's routing cache of its address \
        family (IPaddr2 runs `ip route flush cache`, which flushes IPv4 only).",
};

pub const LVS_SUPPORT: Param = Param {
    name: "lvs_support",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "LVS direct routing: take the address over from lo",
    longdesc: "IPv4 only. For LVS direct-routing real servers that hold the VIP on lo: start \
        removes a copy of the address on lo (as /32) and stop puts it back.",
};

pub const LVS_IPV6_ADDRLABEL: Param = Param {
    name: "lvs_ipv6_addrlabel",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Give the IPv6 address an address label",
    longdesc: "IPv6 only. Add an address label (`ip addrlabel`) for the address while it is up, \
        so that source address selection avoids it (LVS direct routing).",
};

pub const LVS_IPV6_ADDRLABEL_VALUE: Param = Param {
    name: "lvs_ipv6_addrlabel_value",
    kind: Kind::Integer,
    default: Some("99"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "The IPv6 address label",
    longdesc: "The label lvs_ipv6_addrlabel gives the address.",
};

pub const MAC: Param = Param {
    name: "mac",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "CLUSTERIP multicast MAC (not supported)",
    longdesc: "IPaddr2's multicast MAC for its iptables CLUSTERIP mode. CLUSTERIP is \
        deprecated and removed from current kernels; vip refuses a value.",
};

pub const CLUSTERIP_HASH: Param = Param {
    name: "clusterip_hash",
    kind: Kind::String,
    default: Some("sourceip-sourceport"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "CLUSTERIP hash (not supported)",
    longdesc: "IPaddr2's hash for its iptables CLUSTERIP mode, which vip does not support: \
        any value but the default is refused.",
};

pub const UNIQUE_CLONE_ADDRESS: Param = Param {
    name: "unique_clone_address",
    kind: Kind::Boolean,
    default: Some("false"),
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "One address per clone instance (not supported)",
    longdesc: "IPaddr2's addresses-per-clone mode. vip is not cloned: true is refused.",
};

pub const NETWORK_NAMESPACE: Param = Param {
    name: "network_namespace",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "Network namespace to operate within",
    longdesc: "A named network namespace (/run/netns/NAME, as `ip netns add` makes them) in \
        which every action runs: the interface must be in it.",
};

/// The floating IP's parameters, in meta-data order: those of both agents.
pub const ALL: [Param; 17] = [
    IP,
    CIDR_NETMASK,
    NIC,
    IFLABEL,
    BROADCAST,
    ARP_COUNT,
    ARP_INTERVAL,
    ARP_COUNT_REFRESH,
    ARP_MODE,
    ARP_BG,
    ARP_SENDER,
    SEND_ARP_OPTS,
    RUN_ARPING,
    NODAD,
    NOPREFIXROUTE,
    PREFERRED_LFT,
    FLUSH_ROUTES,
];

/// IPaddr2's parameters that only the stand-alone agent has: LVS, CLUSTERIP, namespaces.
pub const VIP_ONLY: [Param; 7] = [
    LVS_SUPPORT,
    LVS_IPV6_ADDRLABEL,
    LVS_IPV6_ADDRLABEL_VALUE,
    MAC,
    CLUSTERIP_HASH,
    UNIQUE_CLONE_ADDRESS,
    NETWORK_NAMESPACE,
];

/// `ocf:hamaster:vip`'s table: the same parameters with `ip` required, then its own.
pub static VIP_AGENT: [Param; ALL.len() + VIP_ONLY.len()] = {
    let mut table = [IP; ALL.len() + VIP_ONLY.len()];
    let mut i = 0;
    while i < ALL.len() {
        table[i] = ALL[i];
        i += 1;
    }
    while i < table.len() {
        table[i] = VIP_ONLY[i - ALL.len()];
        i += 1;
    }
    table[0] = Param {
        required: true,
        ..IP
    };
    table
};
