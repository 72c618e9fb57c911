//! Fenced as RHEL clusters are fenced: a real Pacemaker cluster in the lab's namespaces whose
//! nodes have BMCs (OpenIPMI's ipmi_sim, one per node, on the switch: lab/src/bmc.rs), fenced
//! by Debian's fence_ipmilan and ipmitool over IPMI's LAN protocol (RMCP+), configured by
//! cib/fence-ipmilan.sh as an administrator would. A BMC's power off is the node's power cut
//! (every process killed, its links down). The master with its VIP (master-with-vip) is
//! crashed, then cut off while its BMC does not answer, then fenced with Pacemaker's reboot:
//! the new master raises only after the BMC cut the old one's power, never two VIP holders,
//! and a node powered on again rejoins as a standby. `make check-cluster`; ignored by a plain
//! `cargo test` (a whole cluster).

use hamaster_lab as support;

use std::time::{Duration, Instant};

use support::cluster::{create_topology, outage, record, Etcd, HealthClient, Lab, VIP};

const KEY: &str = support::API_KEY;
const TTL_MS: u64 = support::LEASE_TTL_S * 1000;

/// Pacemaker's fencing history of `node`, as node `from` sees it.
fn fence_history(lab: &Lab, from: usize, node: &str) -> String {
    let out = lab.on(from, &["stonith_admin", "--history", node, "--verbose"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fences of `node` Pacemaker records as done, as node `from` sees them.
fn fences_done(lab: &Lab, from: usize, node: &str) -> usize {
    let history = fence_history(lab, from, node);
    history.lines().filter(|l| l.contains("successful")).count()
}

/// The fencing of `node` after `since_unix` before the new master on `new_master` took the key
/// (Lab::fenced_before_the_key), as a BMC did it: no fabric record (the desk hears of a power
/// cut only from a BMC's chassis program when the BMCs' are the only devices), and Pacemaker's
/// record of one more fence done than `done_before`. Returns the fence's time after
/// `since_unix`.
fn fenced_by_its_bmc_before_the_key(
    lab: &Lab,
    node: &str,
    since_unix: u64,
    new_master: usize,
    done_before: usize,
) -> u64 {
    let after = lab.fenced_before_the_key(node, since_unix, new_master);
    assert!(
        lab.fenced()
            .iter()
            .all(|f| f.node != node || f.at_unix_ms < since_unix || !f.fabric),
        "{node}'s power cut by its BMC, not a fabric fence"
    );
    let devices = lab.on(new_master, &["stonith_admin", "--list-registered"]);
    let devices = String::from_utf8_lossy(&devices.stdout).into_owned();
    let names: Vec<&str> = devices
        .split_whitespace()
        .filter(|w| w.contains('-'))
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|d| d.starts_with("ipmi-")),
        "only fence_ipmilan devices: {devices}"
    );
    let done = fences_done(lab, new_master, node);
    assert!(
        done > done_before,
        "Pacemaker records {done} fences of {node} done, {done_before} before the fault"
    );
    after
}

#[test]
#[ignore = "a whole cluster with BMCs: make check-cluster"]
fn fence_ipmilan_through_a_simulated_bmc_cuts_the_old_masters_power_before_the_new_one_raises() {
    let mut lab = Lab::new("fi", 3, Etcd::OnNodes);
    lab.enable_ipmi_fencing(false);
    let bmcs = lab.bmcs.as_ref().expect("BMCs");
    for i in 0..3 {
        let status = bmcs.ipmitool(i, &["chassis", "power", "status"]);
        assert!(
            status
                .as_deref()
                .is_ok_and(|s| s.contains("Chassis Power is on")),
            "n{}'s BMC over RMCP+: {status:?}",
            i + 1
        );
    }
    let obs = lab.observe_vip();
    create_topology(&lab, "master-with-vip", false);
    let p = lab.wait_promoted(0, "api", None, Duration::from_secs(90));
    let pi = lab.index(&p);
    assert!(
        obs.wait_state(pi, true, Duration::from_secs(30)),
        "VIP on {p}"
    );
    let client = HealthClient::start(&lab, VIP, 8443);
    assert!(client.wait_ok(Duration::from_secs(30)));

    // 1. The master crashes: Pacemaker fences it through its BMC, then promotes another.
    let t_crash = Instant::now();
    let crash_unix = hamaster::lease::clock::unix_ms();
    let done = fences_done(&lab, (pi + 1) % 3, &p);
    lab.crash(pi);
    let other = (pi + 1) % 3;
    let p2 = lab.wait_promoted(other, "api", Some(&p), Duration::from_secs(90));
    let p2i = lab.index(&p2);
    assert!(
        obs.wait_state(p2i, true, Duration::from_secs(30)),
        "VIP on {p2}"
    );
    let promote_crash = t_crash.elapsed();
    assert!(client.wait_ok(Duration::from_secs(30)));
    let fence_crash = fenced_by_its_bmc_before_the_key(&lab, &p, crash_unix, p2i, done);
    lab.bring_back(pi);
    lab.rejoined(&p, p2i, "powered on again");

    // 2. The master is cut off while its BMC does not answer: Pacemaker's fence fails and is
    // retried, nobody else raises, the cut-off master's guard drops the VIP at its deadline.
    // Once the BMC answers again, the fence goes through and another node takes over.
    lab.bmcs.as_mut().expect("BMCs").silence(p2i);
    let t_cut = Instant::now();
    let cut_unix = hamaster::lease::clock::unix_ms();
    let done = fences_done(&lab, (p2i + 1) % 3, &p2);
    lab.cut(p2i);
    assert!(
        obs.wait_state(p2i, false, Duration::from_millis(3 * TTL_MS)),
        "the cut-off master drops its VIP at its deadline"
    );
    let dropped = t_cut.elapsed();
    let majority = (p2i + 1) % 3;
    // Asked, and not done: pending (fence_ipmilan waiting out a BMC that does not answer) or
    // failed and retried.
    let history = || fence_history(&lab, majority, &p2);
    let asked = support::wait_for(Duration::from_secs(40), || {
        let h = history();
        h.contains("pending") || h.contains("failed")
    });
    assert!(asked, "Pacemaker asked to fence {p2}:\n{}", history());
    // And meanwhile, for a few seconds more: no fence, nobody promoted, nobody with the VIP.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(fences_done(&lab, majority, &p2), done, "{}", history());
    assert!(
        lab.fenced()
            .iter()
            .all(|f| f.node != p2 || f.at_unix_ms < cut_unix),
        "no fence without the BMC"
    );
    assert!(
        lab.promoted_seen_from(majority, "api")
            .iter()
            .all(|n| *n == p2),
        "nobody promoted while the fence fails:\n{}",
        lab.crm_mon_text()
    );
    for i in 0..3 {
        assert!(
            obs.wait_state(i, false, Duration::from_millis(100)),
            "nobody holds the VIP meanwhile (n{})",
            i + 1
        );
    }
    let t_bmc = Instant::now();
    lab.bmcs.as_mut().expect("BMCs").power_up(p2i);
    let p3 = lab.wait_promoted(majority, "api", Some(&p2), Duration::from_secs(120));
    let p3i = lab.index(&p3);
    assert!(
        obs.wait_state(p3i, true, Duration::from_secs(30)),
        "VIP on {p3}"
    );
    let promote_after_bmc = t_bmc.elapsed();
    assert!(client.wait_ok(Duration::from_secs(30)));
    fenced_by_its_bmc_before_the_key(&lab, &p2, cut_unix, p3i, done);
    let (holder, token3) = lab.leader_key(KEY).expect("the key");
    assert_eq!(holder, p3);
    lab.bring_back(p2i);
    lab.rejoined(&p2, p3i, "powered on again");

    // 3. Pacemaker's default reboot (off, then on): the master cut off is powered off and on
    // by its BMC; its node boots again and rejoins as a standby, never raising the VIP itself.
    // Every device (a node's fencer does not register the device kept off it).
    let devices: Vec<String> = lab
        .node_names()
        .iter()
        .map(|n| format!("ipmi-{n}"))
        .collect();
    let update = lab.sh(
        0,
        &format!(
            "set -e; for d in {}; do pcs stonith update $d pcmk_reboot_action=reboot; done",
            devices.join(" ")
        ),
    );
    assert!(
        update.status.success(),
        "{}",
        String::from_utf8_lossy(&update.stderr)
    );
    let t_reboot = Instant::now();
    let reboot_unix = hamaster::lease::clock::unix_ms();
    let done = fences_done(&lab, (p3i + 1) % 3, &p3);
    lab.cut(p3i);
    let majority = (p3i + 1) % 3;
    let p4 = lab.wait_promoted(majority, "api", Some(&p3), Duration::from_secs(120));
    let p4i = lab.index(&p4);
    assert!(
        obs.wait_state(p4i, true, Duration::from_secs(30)),
        "VIP on {p4}"
    );
    let promote_reboot = t_reboot.elapsed();
    fenced_by_its_bmc_before_the_key(&lab, &p3, reboot_unix, p4i, done);
    let desk = lab.fence.as_ref().expect("fencing on");
    let powered = support::wait_for(Duration::from_secs(60), || {
        desk.powered_on_by_bmc().iter().any(|(n, _)| *n == p3)
    });
    assert!(
        powered,
        "{p3}'s BMC powered it on again (the reboot's second half)"
    );
    // Its power back, the machine boots: the lab's boot of the node.
    lab.bring_back(p3i);
    lab.rejoined(&p3, p4i, "powered on again");
    std::thread::sleep(Duration::from_millis(3 * TTL_MS));
    let (holder, token4) = lab.leader_key(KEY).expect("the key");
    assert!(
        holder == p4 && token4 > token3,
        "{p4} keeps the key ({holder}, token {token3} -> {token4}) after {p3} rejoined"
    );

    let samples = client.finish();
    let seen = obs.finish();
    seen.assert_complete();
    assert!(
        !seen.holds[p3i].iter().any(|h| h.began.0 > t_reboot),
        "{p3}, rebooted by its BMC, never raised the VIP on its own"
    );
    record(
        "crash of the master, fenced by fence_ipmilan through its BMC",
        "master-with-vip",
        seen.overlap(),
        outage(&samples, t_crash),
        Some(promote_crash),
    );
    record(
        "partition of the master, its BMC silent until the fence could go through",
        "master-with-vip",
        seen.overlap(),
        None,
        Some(promote_after_bmc),
    );
    record(
        "partition of the master, fenced by fence_ipmilan's reboot (off, on, rejoins)",
        "master-with-vip",
        seen.overlap(),
        outage(&samples, t_reboot),
        Some(promote_reboot),
    );
    eprintln!(
        "fence_ipmilan: the crashed master's power cut {fence_crash} ms after the crash; the \
         cut-off master dropped its VIP {} ms after the cut with its BMC silent",
        dropped.as_millis()
    );
    assert_eq!(seen.overlap(), Duration::ZERO, "never two VIP holders");
}
