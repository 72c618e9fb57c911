//! `make bench-phases`: the guard machine's promises in figures, at the DEFAULT lease settings
//! (lease_ttl 10, lease_margin 2), against a real three-member etcd in namespaces:
//! - the key deleted one second into a raise of about 5 s (a foreground burst of 20 frames):
//!   how long the VIP outlives the delete (target: within 1 s);
//! - the lease revoked while leading: how long the VIP outlives the revoke (target: within one
//!   renewal interval, 3.33 s, not at the deadline).
//!
//! Writes its section into docs/benchmarks.md. `PHASE_TRIALS` sets the trials (default 10).

use hamaster_lab as support;
use hamaster_lab::bench as common;

use support::etcd::EtcdCluster;
use support::master::Node;
use support::phases::{self, Loss};

const MARK_START: &str = "<!-- bench:phases:start -->";
const MARK_END: &str = "<!-- bench:phases:end -->";

fn row(what: &str, ms: &[f64], target: &str) -> String {
    format!(
        "| {what} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {target} |\n",
        ms.len(),
        ms.iter().copied().fold(f64::MAX, f64::min),
        common::median(ms),
        ms.iter().copied().fold(0.0, f64::max),
    )
}

fn main() {
    let trials: u32 = std::env::var("PHASE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut etcd = EtcdCluster::new("bph");
    let a = Node::new(&mut etcd, "na");
    let (raising, vip) = phases::slow_raise(&a, &etcd, false);
    let mut deleted = Vec::new();
    for i in 0..trials {
        let took = phases::lose_during_the_raise(&etcd, &a, &raising, vip, Loss::Deleted);
        eprintln!("delete during the raise, trial {i}: {took:?}");
        deleted.push(took.as_secs_f64() * 1000.0);
    }
    let mut leading = a.agent(&etcd);
    leading.params.remove("lease_ttl");
    leading.params.remove("lease_margin");
    let mut revoked = Vec::new();
    for i in 0..trials {
        let took = phases::lose_while_leading(&etcd, &a, &leading, Loss::Revoked);
        eprintln!("revoke while leading, trial {i}: {took:?}");
        revoked.push(took.as_secs_f64() * 1000.0);
    }
    let section = format!(
        "{MARK_START}\n## The guard machine in every phase (`make bench-phases`, {})\n\n\
         Default lease settings where no corosync runs (lease_ttl 10 s, lease_margin 2 s), three etcd members in their own\n\
         namespaces; the VIP seen by a 5 ms netlink observer in the master's namespace, the loss\n\
         made with etcdctl from a member's namespace.\n\n\
         | what | trials | min | median | max | target |\n|---|---|---|---|---|---|\n{}{}",
        common::now_utc(),
        row(
            "key deleted 1 s into a 5 s raise (20-frame foreground burst) → VIP gone",
            &deleted,
            "≤ 1000 ms",
        ),
        row(
            "lease revoked while leading → VIP gone",
            &revoked,
            "≤ 3333 ms (one renewal interval)",
        ),
    );
    let section = format!(
        "{section}\nThe worst duration of every agent action against its timeout over the test runs is\n\
         printed at the end of `make check` (`scripts/action-durations`).\n{MARK_END}\n"
    );
    println!("{section}");
    common::write_section(MARK_START, MARK_END, &section);
}
