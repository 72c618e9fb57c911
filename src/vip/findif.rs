//! Interface lookup the way IPaddr2's findif does it: the longest-prefix, lowest-metric route
//! of the main table that contains the address, ignoring default and non-unicast routes.
//! Pure: it reads a list of routes and decides.

use std::net::IpAddr;

use netlink_packet_route::route::RouteType;

use super::netlink::Route;

const RT_TABLE_MAIN: u32 = 254;

/// The route that decides interface and prefix length for `ip`, if any.
pub fn matching_route(routes: &[Route], ip: IpAddr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| r.table == RT_TABLE_MAIN && r.kind == RouteType::Unicast)
        .filter(|r| r.prefix > 0 && r.oif.is_some())
        .filter(|r| contains(r.dst, r.prefix, ip))
        .min_by_key(|r| (std::cmp::Reverse(r.prefix), r.metric))
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
        }
    }

    #[test]
    fn longest_prefix_wins_then_lowest_metric() {
        let routes = vec![
            route("192.0.2.0", 24, 1, 0),
            route("192.0.2.0", 25, 2, 100),
            route("192.0.2.0", 25, 3, 10),
            route("0.0.0.0", 0, 4, 0),
        ];
        let r = matching_route(&routes, "192.0.2.10".parse().unwrap()).unwrap();
        assert_eq!((r.oif, r.prefix), (Some(3), 25));
        let r = matching_route(&routes, "192.0.2.200".parse().unwrap()).unwrap();
        assert_eq!((r.oif, r.prefix), (Some(1), 24));
    }

    #[test]
    fn default_unreachable_and_other_tables_are_ignored() {
        let mut unreachable = route("198.51.100.0", 24, 1, 0);
        unreachable.kind = RouteType::Unreachable;
        let mut local = route("198.51.100.0", 24, 1, 0);
        local.table = 255;
        let routes = vec![route("0.0.0.0", 0, 4, 0), unreachable, local];
        assert!(matching_route(&routes, "198.51.100.7".parse().unwrap()).is_none());
    }

    #[test]
    fn ipv6_routes_match_ipv6_addresses_only() {
        let routes = vec![
            route("2001:db8::", 64, 5, 256),
            route("192.0.2.0", 24, 1, 0),
        ];
        let r = matching_route(&routes, "2001:db8::10".parse().unwrap()).unwrap();
        assert_eq!(r.oif, Some(5));
        assert!(matching_route(&routes, "2001:db8:1::10".parse().unwrap()).is_none());
        assert!(!contains(
            "192.0.2.0".parse().unwrap(),
            24,
            "2001:db8::1".parse().unwrap()
        ));
    }
}
