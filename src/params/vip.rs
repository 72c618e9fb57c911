//! Parameters of the floating IP, shared by `ocf:hamaster:vip` and the master agent's
//! built-in VIP. Names and meanings follow `ocf:heartbeat:IPaddr2` where they overlap.

use super::{Kind, Param};

pub const IP: Param = Param {
    name: "ip",
    kind: Kind::String,
    default: None,
    required: false,
    unique: true,
    shortdesc: "Floating IPv4 or IPv6 address",
    longdesc: "The floating IP address to manage, IPv4 (192.0.2.10) or IPv6 (2001:db8::10), \
        in any valid spelling. It is added to the interface where the resource runs and \
        announced with gratuitous ARP or unsolicited Neighbor Advertisements.",
};

pub const CIDR_NETMASK: Param = Param {
    name: "cidr_netmask",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    shortdesc: "Prefix length",
    longdesc: "The prefix length of the address in CIDR form (24, 64), or a dotted IPv4 \
        netmask (255.255.255.0). When unset it is taken from the route that matches the \
        address, the way IPaddr2's findif does.",
};

pub const NIC: Param = Param {
    name: "nic",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    shortdesc: "Network interface",
    longdesc: "The interface to add the address to. When unset, the interface of the \
        longest-prefix, lowest-metric route matching the address is used (default and \
        unreachable routes are ignored).",
};

pub const IFLABEL: Param = Param {
    name: "iflabel",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
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
    shortdesc: "Milliseconds between announcements",
    longdesc: "The interval in milliseconds between two announcement frames.",
};

pub const ARP_COUNT_REFRESH: Param = Param {
    name: "arp_count_refresh",
    kind: Kind::Integer,
    default: Some("0"),
    required: false,
    unique: false,
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
    shortdesc: "Do not add a prefix route",
    longdesc: "Add the address without the kernel's automatic route for its prefix.",
};

pub const PREFERRED_LFT: Param = Param {
    name: "preferred_lft",
    kind: Kind::String,
    default: Some("forever"),
    required: false,
    unique: false,
    shortdesc: "Preferred lifetime (IPv6)",
    longdesc: "For IPv6: the preferred lifetime of the address in seconds, or 'forever'. \
        0 marks the address deprecated, so it is not chosen as a source address for \
        outgoing connections.",
};

/// Every parameter of the floating IP, in meta-data order.
pub const ALL: [Param; 12] = [
    IP,
    CIDR_NETMASK,
    NIC,
    IFLABEL,
    ARP_COUNT,
    ARP_INTERVAL,
    ARP_COUNT_REFRESH,
    ARP_MODE,
    RUN_ARPING,
    NODAD,
    NOPREFIXROUTE,
    PREFERRED_LFT,
];

/// `ocf:hamaster:vip`'s table: the same parameters, with `ip` required.
pub static VIP_AGENT: [Param; 12] = {
    let mut table = ALL;
    table[0] = Param {
        required: true,
        ..IP
    };
    table
};
