//! `make bench-outage`: what an etcd outage and the failsafe cost, side by side, on fenced
//! 3-node lab clusters (the lab's fence agent; corosync token 1000 ms; lease_ttl 3 s,
//! lease_margin 1 s):
//! - a 40 s etcd quorum loss: the client's longest gap with hamaster at its default
//!   (etcd_outage=auto: holds, fencing being on), with etcd_outage=fence (the behaviour before
//!   the hold) and with the IPaddr2 group, which does not use etcd;
//! - the master's node partitioned during an etcd outage (etcd back on the majority's side at
//!   once): when the old master's VIP went, and when the new master's went up;
//! - a crash of the master, and its node partitioned off: failover with the failsafe (auto)
//!   and without it (fence), the cost the failsafe may add to a failover;
//! - the guard's CPU while it holds, against while it leads on the lease.
//!
//! Writes its table into docs/benchmarks.md.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::time::{Duration, Instant};

use support::cluster::{longest_outage, outage, HealthClient, Lab};

const MARK_START: &str = "<!-- bench:outage:start -->";
const MARK_END: &str = "<!-- bench:outage:end -->";
const QUORUM_LOSS: Duration = Duration::from_secs(40);

fn holder(lab: &Lab) -> usize {
    lab.vip_holder(Duration::from_secs(60), None)
        .unwrap_or_else(|| panic!("nobody holds the VIP:\n{}", lab.crm_mon_text()))
}

/// etcd's quorum lost for 40 s (the two members away from the VIP holder stopped): the
/// client's longest gap from the loss until 10 s after etcd is back; and, for hamaster, the
/// guard's CPU over the hold against the same span leading on the lease.
fn quorum_loss(lab: &mut Lab, client: &HealthClient, guard: bool) -> (f64, Option<(f64, f64)>) {
    let h = holder(lab);
    let (a, b) = ((h + 1) % 3, (h + 2) % 3);
    let pid = guard.then(|| lab.guard_status(h).expect("the guard answers").pid);
    let cpu = |pid: u32| common::cpu_ns(pid) as f64;
    let leading = pid.map(|p| {
        let (c0, t0) = (cpu(p), Instant::now());
        std::thread::sleep(QUORUM_LOSS / 2);
        (cpu(p) - c0) / t0.elapsed().as_nanos() as f64
    });
    let t = Instant::now();
    lab.stop_etcd(a);
    lab.stop_etcd(b);
    // The hold's CPU from its start on (a few seconds in) to the end of the outage.
    std::thread::sleep(Duration::from_secs(5));
    let holding = pid.map(|p| (cpu(p), Instant::now()));
    std::thread::sleep(QUORUM_LOSS - Duration::from_secs(5));
    let held = holding.map(|(c0, t0)| (cpu(pid.unwrap()) - c0) / t0.elapsed().as_nanos() as f64);
    lab.start_etcd(a);
    lab.start_etcd(b);
    assert!(lab.etcd.wait_healthy(Duration::from_secs(60)));
    // Without the hold the master fences and fails over: wait for it to be served again.
    assert!(
        client.wait_ok(Duration::from_secs(120)),
        "served after the outage"
    );
    std::thread::sleep(Duration::from_secs(10));
    let gap = longest_outage(&client.samples(), t, Instant::now());
    let cpu = leading.zip(held);
    (gap.as_secs_f64() * 1000.0, cpu)
}

/// Which clause of the takeover rule cleared a failsafe record, from the guard's log line.
fn clause(line: &str) -> &'static str {
    [
        ("offline and clean", "the node offline and clean"),
        ("not promoted", "the instance not promoted"),
        (
            "out of this node's membership for",
            "the membership time bound",
        ),
        ("confirmed down", "the operator"),
    ]
    .into_iter()
    .find(|(words, _)| line.contains(words))
    .map_or("unknown", |(_, name)| name)
}

/// The VIP holder crashed, or its node partitioned off (its switch port down): the majority
/// fences it, then promotes. The client's outage, and which clause cleared the takeover (from
/// what the new master's guard logged since the fault; None: no failsafe record to clear).
fn failover(
    lab: &mut Lab,
    client: &HealthClient,
    what: &str,
    fault: fn(&mut Lab, usize),
) -> (f64, Option<&'static str>) {
    let h = holder(lab);
    assert!(client.wait_ok(Duration::from_secs(30)));
    std::thread::sleep(Duration::from_secs(2));
    let logged: Vec<usize> = (0..3)
        .map(|i| lab.log_text(i, "pacemaker.log").lines().count())
        .collect();
    let t = Instant::now();
    fault(lab, h);
    let n = lab
        .vip_holder(Duration::from_secs(90), Some(h))
        .unwrap_or_else(|| panic!("no failover after the {what}:\n{}", lab.crm_mon_text()));
    assert!(client.wait_ok(Duration::from_secs(30)));
    std::thread::sleep(Duration::from_secs(1));
    let out = outage(&client.samples(), t)
        .expect("an outage")
        .as_secs_f64()
        * 1000.0;
    let log = lab.log_text(n, "pacemaker.log");
    let line = log
        .lines()
        .skip(logged[n])
        .find(|l| l.contains("failsafe record of"));
    eprintln!(
        "{what} of n{}: outage {out:.0} ms; {}",
        h + 1,
        line.unwrap_or("no failsafe record to clear")
    );
    lab.heal(h);
    lab.restart(h);
    assert!(lab.wait_online(&lab.node_names(), Duration::from_secs(180)));
    std::thread::sleep(Duration::from_secs(5));
    (out, line.map(clause))
}

fn crash(lab: &mut Lab, client: &HealthClient) -> (f64, Option<&'static str>) {
    failover(lab, client, "crash", |lab, h| lab.crash(h))
}

fn partition(lab: &mut Lab, client: &HealthClient) -> (f64, Option<&'static str>) {
    failover(lab, client, "partition", |lab, h| lab.cut(h))
}

/// How many failovers each clause cleared, in words.
fn tally(clauses: &[Option<&'static str>]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for c in clauses {
        *counts.entry(c.unwrap_or("no record")).or_insert(0) += 1;
    }
    counts
        .iter()
        .map(|(c, k)| format!("{c} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The master's node partitioned during an etcd outage (all three members stopped, the
/// majority's two started again at the cut): when its VIP went, and when another node's went
/// up (ms after the cut).
fn partition_during_outage(lab: &mut Lab, client: &HealthClient) -> (f64, f64) {
    let h = holder(lab);
    assert!(client.wait_ok(Duration::from_secs(30)));
    let (a, b) = ((h + 1) % 3, (h + 2) % 3);
    for i in [a, b, h] {
        lab.stop_etcd(i);
    }
    let holding = support::wait_for(Duration::from_secs(15), || {
        lab.guard_status(h)
            .and_then(|s| s.failsafe)
            .and_then(|f| f.holding_since_unix_ms)
            .is_some()
    });
    assert!(holding, "the master holds");
    let obs = lab.observe_vip();
    let t = Instant::now();
    lab.cut(h);
    lab.start_etcd(a);
    lab.start_etcd(b);
    assert!(
        obs.wait_state(h, false, Duration::from_secs(15)),
        "old VIP gone"
    );
    let gone = t.elapsed();
    let n = lab
        .vip_holder(Duration::from_secs(120), Some(h))
        .expect("a new master");
    assert!(obs.wait_state(n, true, Duration::from_secs(5)));
    let raised = t.elapsed();
    let seen = obs.finish();
    assert_eq!(seen.overlap(), Duration::ZERO, "never two holders");
    assert!(client.wait_ok(Duration::from_secs(30)));
    lab.heal(h);
    lab.restart(h);
    assert!(lab.wait_online(&lab.node_names(), Duration::from_secs(180)));
    std::thread::sleep(Duration::from_secs(5));
    (gone.as_secs_f64() * 1000.0, raised.as_secs_f64() * 1000.0)
}

fn ms(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.0} ms")
    }
}

/// A table cell: the median, and the max in brackets.
fn cell(v: &[f64]) -> String {
    format!(
        "{} ({})",
        ms(common::median(v)),
        ms(common::quantile(v, 1.0))
    )
}

/// `n` crashes, then `n` partitions, of whichever node holds the VIP: their outages, and what
/// cleared each failover's failsafe record.
fn failovers(
    lab: &mut Lab,
    client: &HealthClient,
    n: usize,
) -> (Vec<f64>, Vec<f64>, Vec<Option<&'static str>>) {
    let (mut crashes, mut cuts, mut cleared) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let (out, by) = crash(lab, client);
        crashes.push(out);
        cleared.push(by);
    }
    for _ in 0..n {
        let (out, by) = partition(lab, client);
        cuts.push(out);
        cleared.push(by);
    }
    (crashes, cuts, cleared)
}

fn main() {
    let n: usize = std::env::var("OUTAGE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);

    // hamaster at its defaults: etcd_outage=auto holds (fencing is on).
    let (mut ham, ham_client) = common::served_lab("bo", "master-with-vip", "");
    let (ham_gap, cpu) = quorum_loss(&mut ham, &ham_client, true);
    let (ham_crash, ham_cut, cleared) = failovers(&mut ham, &ham_client, n);
    let mut gone = Vec::new();
    let mut raised = Vec::new();
    for _ in 0..n {
        let (g, r) = partition_during_outage(&mut ham, &ham_client);
        gone.push(g);
        raised.push(r);
    }
    drop(ham_client);
    drop(ham);

    // hamaster with the lease alone (the behaviour before the failsafe).
    let (mut fence, fence_client) =
        common::served_lab("bf", "master-with-vip", "ETCD_OUTAGE=fence");
    let (fence_gap, _) = quorum_loss(&mut fence, &fence_client, false);
    let (fence_crash, fence_cut, _) = failovers(&mut fence, &fence_client, n);
    drop(fence_client);
    drop(fence);

    // The IPaddr2 group: no etcd at all.
    let (mut base, base_client) = common::served_lab("bb", "ipaddr2-group-baseline", "");
    let (base_gap, _) = quorum_loss(&mut base, &base_client, false);
    let (base_crash, base_cut, _) = failovers(&mut base, &base_client, n);
    drop(base_client);
    drop(base);

    let (lead_cpu, hold_cpu) = cpu.unwrap_or((f64::NAN, f64::NAN));
    let section = format!(
        "{MARK_START}\n## An etcd outage (`make bench-outage`, {})\n\n\
         Fenced 3-node lab clusters (the lab's fence agent, corosync token 1000 ms, lease_ttl 3 s,\n\
         lease_margin 1 s), a client polling /healthz through the VIP every 20 ms, the same\n\
         faults for each row. `auto` is the default (it holds: fencing is on); `fence` is the\n\
         behaviour before the failsafe; the IPaddr2 group does not use etcd.\n\n\
         | fault | hamaster (auto) | hamaster (fence) | IPaddr2 group |\n|---|---|---|---|\n\
         | etcd quorum lost 40 s: the client's longest gap | {} | {} | {} |\n\
         | crash of the master: client outage, median of {n} (max) | {} | {} | {} |\n\
         | the master's node partitioned off: client outage, median of {n} (max) | {} | {} | {} |\n\n\
         With `auto`, what cleared the failed master's failsafe record before the new master took\n\
         the key (the takeover rule's clauses, docs/safety.md), over these {} failovers: {}.\n\n\
         The master's node partitioned during an etcd outage (etcd back on the majority's side at\n\
         the cut), {n} trials, ms after the cut — the old master's VIP gone: median {}, max {};\n\
         the new master's VIP up: median {}, max {}; two holders: never.\n\n\
         The guard's CPU (its threads' scheduler time over wall time): {:.2} % while it leads on\n\
         the lease, {:.2} % while it holds (asking corosync every 0.5 s, a keepalive every\n\
         0.25 s).\n{MARK_END}\n",
        common::now_utc(),
        ms(ham_gap),
        ms(fence_gap),
        ms(base_gap),
        cell(&ham_crash),
        cell(&fence_crash),
        cell(&base_crash),
        cell(&ham_cut),
        cell(&fence_cut),
        cell(&base_cut),
        cleared.len(),
        tally(&cleared),
        ms(common::median(&gone)),
        ms(common::quantile(&gone, 1.0)),
        ms(common::median(&raised)),
        ms(common::quantile(&raised, 1.0)),
        lead_cpu * 100.0,
        hold_cpu * 100.0,
    );
    println!("{section}");
    common::write_section(MARK_START, MARK_END, &section);
}
