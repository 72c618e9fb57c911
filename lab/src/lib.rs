//! hamaster's lab, one crate for the tests, the benchmarks and the demo: network namespaces
//! with veth pairs and bridges (never the host's interfaces), the built agent laid out as an
//! OCF directory, agent runs inside a namespace, frame capture on the peer end of a veth; a
//! real etcd cluster (etcd), real Pacemaker clusters (cluster), VMs with a hardware watchdog
//! (vm), Prometheus (prometheus), and what the benchmarks share (bench). Everything a test
//! creates is removed when its guard drops, also when the test fails.

pub mod agent;
pub mod bench;
pub mod bmc;
pub mod capture;
pub mod cib;
pub mod clients;
pub mod cluster;
pub mod deadline;
pub mod etcd;
pub mod fence;
pub mod master;
pub mod netns;
pub mod peers;
pub mod phases;
pub mod process;
pub mod prometheus;
pub mod rpm;
pub mod systemd;
pub mod timeline;
pub mod vm;

pub use agent::*;
pub use capture::*;
pub use netns::*;
pub use process::*;
pub use rpm::*;

/// The resource id every lab master is created as.
pub const RESOURCE: &str = "api";

/// The lease every lab master (agent runs and the clusters' pcs scripts) is given, unless a
/// test asks for the defaults: tests derive their bounds from these, never from copies.
pub const LEASE_TTL_S: u64 = 3;
pub const LEASE_MARGIN_S: u64 = 1;

/// The name of every lab cluster (corosync's totem.cluster_name), which the agents run
/// outside a cluster and the cold standby's files are given as cluster_name.
pub const CLUSTER_NAME: &str = "hamaster-lab";

/// Its leader key at the default etcd_prefix, as the library writes it (a test holds the two
/// together): what tests and benchmarks watch from etcd's side.
pub const API_KEY: &str = "/hamaster/hamaster-lab/api/leader";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_labs_leader_key_is_the_librarys() {
        let prefix = hamaster::params::master::ETCD_PREFIX.default.unwrap();
        let scope = format!("{prefix}/{CLUSTER_NAME}");
        assert_eq!(API_KEY, hamaster::lease::leader_key(&scope, RESOURCE));
    }

    #[test]
    fn a_wait_ends_at_its_bound_or_when_the_condition_holds() {
        let begun = Instant::now();
        assert!(!wait_for(Duration::from_millis(50), || false));
        assert!(begun.elapsed() >= Duration::from_millis(50));
        assert!(begun.elapsed() < Duration::from_secs(5));
        let mut n = 0;
        assert!(wait_for(Duration::from_secs(5), || {
            n += 1;
            n == 3
        }));
        assert_eq!(n, 3);
    }

    #[test]
    fn unique_names_are_the_labs_and_never_repeat() {
        let (a, b) = (unique("n"), unique("n"));
        assert_ne!(a, b);
        // The clean-up of stale lab namespaces finds them by this prefix.
        assert!(a.starts_with("hmt-n-"), "{a}");
    }

    #[test]
    fn order_statistics_of_the_benchmarks() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(bench::median(&v), 3.0);
        assert_eq!(bench::p90(&v), 5.0);
        assert_eq!(bench::quantile(&v, 0.0), 1.0);
        assert!(bench::median(&[]).is_nan());
        assert_eq!(
            timeline::spread(&[2.0, f64::NAN, 1.0, 3.0]),
            Some((1.0, 2.0, 3.0))
        );
        assert_eq!(timeline::spread(&[]), None);
    }
}
