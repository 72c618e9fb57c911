//! Interface lookup the way IPaddr2's findif does it (findif.sh, resource-agents 4.x): the
//! longest-prefix route of the main table that contains the address, only IPv4 routes of scope
//! link (so a route through a gateway never names the interface or the prefix), and for
//! 127.0.0.0/8 the local route on lo. Pure: it reads a list of routes and decides.

use std::net::IpAddr;

use netlink_packet_route::route::{RouteScope, RouteType};

use super::netlink::Route;

const RT_TABLE_MAIN: u32 = 254;
const RT_TABLE_LOCAL: u32 = 255;

/// What the lookup may use: the interface and prefix the parameters fix, if any.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lookup {
    /// Only routes through this interface (nic is set).
    pub oif: Option<u32>,
    /// cidr_netmask is set: a route must contain the whole `ip/netmask` network, as
    /// `ip route list match IP/NETMASK` asks.
    pub netmask: Option<u8>,
}

/// The route that decides interface and prefix length for `ip`, if any. Among routes of the
/// longest prefix the lowest metric wins: the route the kernel uses. (findif takes the last one
/// `ip route` lists, which is the highest metric: docs/migrating-from-ipaddr2.md.)
pub fn matching_route(routes: &[Route], ip: IpAddr, lookup: Lookup) -> Option<&Route> {
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let best = routes
        .iter()
        .filter(|r| r.table == RT_TABLE_MAIN && r.kind == RouteType::Unicast)
        .filter(|r| r.oif.is_some() && !r.gateway)
        .filter(|r| ip.is_ipv6() || r.scope == RouteScope::Link)
        // `ip route` prints a host route without "/len", and findif only reads lines with one.
        .filter(|r| r.prefix > 0 && r.prefix < max)
        .filter(|r| lookup.netmask.is_none_or(|m| r.prefix <= m))
        .filter(|r| lookup.oif.is_none_or(|i| r.oif == Some(i)))
        .filter(|r| contains(r.dst, r.prefix, ip))
        .min_by_key(|r| (std::cmp::Reverse(r.prefix), r.metric));
    best.or_else(|| loopback_route(routes, ip))
}

/// findif's fallback for 127.0.0.0/8: the local table's route on lo (`127.0.0.0/8`).
fn loopback_route(routes: &[Route], ip: IpAddr) -> Option<&Route> {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => routes.iter().find(|r| {
            r.table == RT_TABLE_LOCAL
                && r.kind == RouteType::Local
                && r.prefix > 0
                && r.prefix < 32
                && contains(r.dst, r.prefix, ip)
        }),
        _ => None,
    }
}

/// Whether `ip` lies inside `net/prefix` (both of the same family).
pub fn contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            masked(u32::from(n).into(), prefix, 32) == masked(u32::from(i).into(), prefix, 32)
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            masked(u128::from(n), prefix, 128) == masked(u128::from(i), prefix, 128)
        }
        _ => false,
    }
}

fn masked(bits: u128, prefix: u8, width: u32) -> u128 {
    let prefix = u32::from(prefix).min(width);
    if prefix == 0 {
        return 0;
    }
    bits >> (width - prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(dst: &str, prefix: u8, oif: u32, metric: u32) -> Route {
        Route {
            dst: dst.parse().unwrap(),
            prefix,
            oif: Some(oif),
            metric,
            table: RT_TABLE_MAIN,
            kind: RouteType::Unicast,
            scope: RouteScope::Link,
            gateway: false,
            via: None,
            prefsrc: None,
        }
    }

    fn find(routes: &[Route], ip: &str) -> Option<(Option<u32>, u8)> {
        matching_route(routes, ip.parse().unwrap(), Lookup::default()).map(|r| (r.oif, r.prefix))
    }

    #[test]
    fn gateway_routes_never_name_the_interface() {
        let mut via = route("10.0.0.0", 8, 2, 0);
        via.scope = RouteScope::Universe;
        via.gateway = true;
        assert_eq!(find(&[via.clone()], "10.1.2.3"), None);
        let mut v6via = route("2001:db8:5::", 64, 2, 0);
        v6via.scope = RouteScope::Universe;
        v6via.gateway = true;
        assert_eq!(find(&[v6via], "2001:db8:5::1"), None);
        // A link route of scope universe (IPv4) is not findif's either.
        let mut universe = route("10.0.0.0", 8, 2, 0);
        universe.scope = RouteScope::Universe;
        assert_eq!(
            find(&[universe, route("10.1.0.0", 16, 3, 0)], "10.1.2.3"),
            Some((Some(3), 16))
        );
    }

    #[test]
    fn a_netmask_wider_than_the_route_finds_nothing_and_nic_restricts() {
        let routes = vec![route("192.0.2.0", 24, 1, 0), route("192.0.2.0", 25, 2, 0)];
        let ip = "192.0.2.10".parse().unwrap();
        let at = |netmask, oif| {
            matching_route(&routes, ip, Lookup { oif, netmask }).map(|r| (r.oif, r.prefix))
        };
        assert_eq!(at(Some(16), None), None);
        assert_eq!(at(Some(24), None), Some((Some(1), 24)));
        assert_eq!(at(Some(28), None), Some((Some(2), 25)));
        assert_eq!(at(None, Some(1)), Some((Some(1), 24)));
        assert_eq!(at(None, Some(7)), None);
    }

    #[test]
    fn loopback_addresses_fall_back_to_the_local_route_on_lo() {
        let mut local = route("127.0.0.0", 8, 1, 0);
        local.table = RT_TABLE_LOCAL;
        local.kind = RouteType::Local;
        local.scope = RouteScope::Host;
        let mut host = route("127.0.0.1", 32, 1, 0);
        host.table = RT_TABLE_LOCAL;
        host.kind = RouteType::Local;
        let routes = vec![host, local];
        assert_eq!(find(&routes, "127.0.0.3"), Some((Some(1), 8)));
        assert_eq!(find(&routes, "10.0.0.3"), None);
    }

    #[test]
    fn longest_prefix_wins_then_lowest_metric() {
        let routes = vec![
            route("192.0.2.0", 24, 1, 0),
            route("192.0.2.0", 25, 2, 100),
            route("192.0.2.0", 25, 3, 10),
            route("0.0.0.0", 0, 4, 0),
        ];
        assert_eq!(find(&routes, "192.0.2.10"), Some((Some(3), 25)));
        assert_eq!(find(&routes, "192.0.2.200"), Some((Some(1), 24)));
    }

    #[test]
    fn default_unreachable_and_other_tables_are_ignored() {
        let mut unreachable = route("198.51.100.0", 24, 1, 0);
        unreachable.kind = RouteType::Unreachable;
        let mut local = route("198.51.100.0", 24, 1, 0);
        local.table = 255;
        let routes = vec![route("0.0.0.0", 0, 4, 0), unreachable, local];
        assert_eq!(find(&routes, "198.51.100.7"), None);
    }

    #[test]
    fn ipv6_routes_match_ipv6_addresses_only() {
        let routes = vec![
            route("2001:db8::", 64, 5, 256),
            route("192.0.2.0", 24, 1, 0),
        ];
        assert_eq!(find(&routes, "2001:db8::10"), Some((Some(5), 64)));
        assert_eq!(find(&routes, "2001:db8:1::10"), None);
        assert!(!contains(
            "192.0.2.0".parse().unwrap(),
            24,
            "2001:db8::1".parse().unwrap()
        ));
    }
}
