//! The upgrade docs/upgrading.md describes, on a live 3-node cluster with fencing on (`make
//! check-cluster`; ignored by a plain `cargo test`): the cluster runs the previous release
//! (its commit in RELEASES built by scripts/build-previous-release), the package is replaced under the
//! running master, the master moves onto the new binary by `hamaster switchover`, and the
//! reverse. A client polls the master's /healthz through the VIP throughout; Pacemaker's
//! history (the CIB's status section), etcd's keys and the guard's socket say what happened.

use hamaster_lab as support;

use std::time::{Duration, Instant};

use hamaster::resource::status::PROTOCOL;
use support::cluster::{create_topology, longest_outage, outage, record, Etcd, HealthClient, Lab};
use support::OcfDir;

/// The leader key of this release (the cluster's name in it).
const KEY: &str = support::API_KEY;

/// The leader key a master of release `tag` holds: v0.1.0's had no cluster name in it.
fn key_of(tag: &str) -> &'static str {
    if tag == "v0.1.0" {
        "/hamaster/api/leader"
    } else {
        KEY
    }
}

/// The leader keys of this release and of the previous one but `kept`, all absent.
fn only_key(lab: &Lab, kept: &str, previous: &str) {
    for k in [KEY, previous].into_iter().filter(|k| *k != kept) {
        assert_eq!(lab.etcd.get(k), None, "{k} is not held (only {kept} is)");
    }
}

/// Long enough for every monitor of every node to run at least twice (promoted every 2 s,
/// unpromoted every 3 s) on the binary just installed.
const MONITORS: Duration = Duration::from_secs(8);

/// Pacemaker's record of what it did to `api` (each node's last non-recurring action and any
/// failure), which a demote, promote, stop, start or failed monitor would change.
fn history(lab: &Lab) -> Vec<(String, String, String, String, String)> {
    lab.operations("api")
        .into_iter()
        .filter(|op| op.1.ends_with("_last_0") || op.1.contains("last_failure"))
        .collect()
}

/// The binary installed and kept: what each node's next action runs.
fn installed() -> std::path::PathBuf {
    OcfDir::get().root.join("hamaster")
}

/// What must hold after a binary was put under a running master `pi`: for one round of every
/// monitor, Pacemaker did nothing to the resource (its history as `before`), the same guard
/// process serves, etcd's `key` is the same (holder, lease, revision) and the client was served
/// throughout.
fn nothing_happened(
    lab: &Lab,
    client: &HealthClient,
    pi: usize,
    key: &str,
    before: &[(String, String, String, String, String)],
    guard_pid: u32,
    what: &str,
) {
    let etcd_before = lab.etcd.get(key);
    let t = Instant::now();
    std::thread::sleep(MONITORS);
    assert_eq!(
        history(lab),
        before,
        "{what}: Pacemaker's history changed\n{}",
        lab.crm_mon_text()
    );
    assert_eq!(lab.etcd.get(key), etcd_before, "{what}: {key} changed");
    let st = lab.guard_status(pi).expect("the guard answers");
    assert_eq!(st.pid, guard_pid, "{what}: the same guard");
    assert_eq!(
        lab.promoted_seen_from(0, "api"),
        [lab.nodes[pi].name.clone()]
    );
    let gap = longest_outage(&client.samples(), t, Instant::now());
    assert_eq!(gap, Duration::ZERO, "{what}: the client saw a gap");
}

#[test]
#[ignore = "cluster scenario: run by make check-cluster"]
fn three_nodes_upgrade_from_the_previous_release_and_back_without_a_master_restart() {
    let (tag, old) = support::agent::previous_release();
    let new = support::hamaster_bin();
    eprintln!("previous release: {tag} ({})", old.display());
    OcfDir::get().install(&old);
    // Whatever fails below, the next test finds this release's binary installed.
    struct Reinstall(std::path::PathBuf);
    impl Drop for Reinstall {
        fn drop(&mut self) {
            OcfDir::get().install(&self.0);
        }
    }
    let _reinstall = Reinstall(new.clone());

    let mut lab = Lab::new("up", 3, Etcd::OnNodes);
    lab.enable_fencing();
    let obs = lab.observe_vip();
    create_topology(&lab, "master-with-vip", false);
    let p = lab.wait_promoted(0, "api", None, Duration::from_secs(90));
    let pi = lab.index(&p);
    assert!(
        obs.wait_state(pi, true, Duration::from_secs(30)),
        "VIP on {p}"
    );
    let client = HealthClient::start(&lab, support::cluster::VIP, 8443);
    assert!(
        client.wait_ok(Duration::from_secs(30)),
        "served through the VIP"
    );

    // The previous release: its key, its guard, of the protocol before this one's at most
    // (v0.1.0's answers none: 0).
    let old_key = key_of(&tag);
    let legacy = lab.etcd.get(old_key).expect("the previous release's key");
    assert_eq!(legacy.0, p, "{old_key} held by the master");
    only_key(&lab, old_key, old_key);
    let st = lab.guard_status(pi).expect("the old guard answers");
    let old_protocol = st.protocol;
    assert!(
        old_protocol + 1 >= PROTOCOL && old_protocol <= PROTOCOL,
        "the previous release's guard is within the window: protocol {old_protocol}"
    );
    let old_pid = st.pid;
    // The cluster settles (probes, the unpromoted monitors' first runs) before its history is
    // the reference.
    std::thread::sleep(MONITORS);
    let h0 = history(&lab);
    assert!(
        h0.iter()
            .any(|op| op.0 == p && op.1 == "api_last_0" && op.2 == "promote"),
        "{p}'s last action is its promote: {h0:#?}"
    );
    assert!(
        !h0.iter().any(|op| op.1.contains("last_failure")),
        "no failure under the previous release: {h0:#?}"
    );

    // 1. The package updated under the running master: nothing happens. Every action from
    // now on runs the new file (the agent's link points at it): the monitors below are the new
    // agent's, on the old guard.
    OcfDir::get().install(&new);
    nothing_happened(
        &lab,
        &client,
        pi,
        old_key,
        &h0,
        old_pid,
        "upgrade under the master",
    );
    only_key(&lab, old_key, old_key);
    let out = lab.on(pi, &[installed().to_str().unwrap(), "status", "api"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("guard binary")
                && l.contains(&format!("protocol {old_protocol}"))),
        "hamaster status names the old guard:\n{text}"
    );

    // 2. The master moves onto the new binary.
    let to = (pi + 1) % 3;
    let to_name = lab.nodes[to].name.clone();
    let t_up = Instant::now();
    let (code, text) = lab.switchover(&installed(), (pi + 2) % 3, &["--to", &to_name]);
    assert!(
        code == Some(0) && text.contains(&format!("{to_name} is the master")),
        "switchover onto the new binary: {text}\n{}",
        lab.crm_mon_text()
    );
    if let Err(why) = lab.switched_over(to, pi) {
        panic!("switchover onto the new binary: {why}");
    }
    only_key(&lab, KEY, old_key);
    let (_, token) = lab.leader_key(KEY).expect("the new key");
    assert!(token > legacy.2, "a higher fencing token");
    let st = lab.guard_status(to).expect("the new guard answers");
    assert_eq!(st.protocol, PROTOCOL);
    let new_pid = st.pid;
    assert!(client.wait_ok(Duration::from_secs(30)), "served after it");
    let up_gap = outage(&client.samples(), t_up);

    // 3. The downgrade under the new master: nothing happens.
    std::thread::sleep(MONITORS);
    let h1 = history(&lab);
    OcfDir::get().install(&old);
    nothing_happened(
        &lab,
        &client,
        to,
        KEY,
        &h1,
        new_pid,
        "downgrade under the master",
    );
    only_key(&lab, KEY, old_key);

    // 4. The master moves back onto the previous release, by this release's switchover as the
    // master's node (not downgraded yet) has it: the previous release's may not know this
    // release's key (v0.1.0's does not).
    let t_down = Instant::now();
    let (code, text) = lab.switchover(&new, to, &["--to", &p]);
    assert!(
        code == Some(0) && text.contains(&format!("{p} is the master")),
        "switchover onto the previous release: {text}\n{}",
        lab.crm_mon_text()
    );
    let back = support::wait_for(Duration::from_secs(10), || {
        lab.etcd.get(old_key).map(|k| k.0).as_deref() == Some(p.as_str())
    });
    assert!(back, "{old_key} held by {p} again");
    only_key(&lab, old_key, old_key);
    assert!(
        support::wait_for(Duration::from_secs(5), || lab.nodes[pi]
            .ns
            .holds(support::cluster::VIP))
            && !lab.nodes[to].ns.holds(support::cluster::VIP),
        "the VIP back on {p} only"
    );
    assert!(client.wait_ok(Duration::from_secs(30)), "served after it");
    let down_gap = outage(&client.samples(), t_down);
    std::thread::sleep(MONITORS);
    let h2 = history(&lab);
    assert!(
        !h2.iter().any(|op| op.1.contains("last_failure")),
        "no failure in the whole upgrade and downgrade: {h2:#?}"
    );

    let overlap = obs.finish().overlap();
    assert_eq!(overlap, Duration::ZERO, "VIP overlap");
    let conflicts = lab.vip_conflicts();
    assert!(conflicts.is_empty(), "VIP conflicts: {conflicts:#?}");
    let topology = "master-with-vip (fencing on)";
    record(
        &format!("package replaced under the master ({tag} -> this, and back)"),
        topology,
        overlap,
        Some(Duration::ZERO),
        None,
    );
    record(
        &format!("hamaster switchover onto the new binary ({tag} -> this)"),
        topology,
        overlap,
        up_gap,
        None,
    );
    record(
        &format!("hamaster switchover back onto {tag}"),
        topology,
        overlap,
        down_gap,
        None,
    );
}
