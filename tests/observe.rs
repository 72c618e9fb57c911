//! What the guard shows and sees (issue 19), with real parts: a real Prometheus scrapes the
//! promoted guard's /metrics (promtool checks the exposition) and counts a fence after an etcd
//! outage; /leader and /health answer as a load balancer needs; a host outside the cluster on
//! the same bridge claims the VIP (iputils' `arping -U`, and for IPv6 an unsolicited Neighbor
//! Advertisement) and the guard names its MAC, defends once and tells Pacemaker (a stand-in
//! crm_resource records the call); the VIP deleted, or its link set down, is told at once and
//! not added back. The Pacemaker side of the push is the cluster scenario's (tests/cluster.rs).

use hamaster_lab as support;

use std::time::{Duration, Instant};

use support::etcd::EtcdCluster;
use support::master::{CrmStandIn, Node, VIP};
use support::prometheus::{check_exposition, Prometheus};
use support::{http_get, Capture, Run};

const KEY: &str = support::API_KEY;
const METRICS: &str = "127.0.0.1:9405";

fn promoted(run: Run, node: &Node) {
    assert_eq!(run.code, 0, "promote: {}\nlog:\n{}", run.stderr, node.log());
}

/// The node's master agent with metrics on METRICS, under a Pacemaker stand-in: the node name
/// Pacemaker would give, and `crm` first in PATH.
fn observed_agent<'a>(a: &'a Node, etcd: &EtcdCluster, crm: &CrmStandIn) -> support::Agent<'a> {
    a.agent(etcd)
        .param("metrics_address", METRICS)
        .env("OCF_RESKEY_CRM_meta_on_node", "na")
        .env("PATH", &crm.path)
}

fn metrics_text(node: &Node) -> String {
    let (code, body) = http_get(&node.ns.name, METRICS, "/metrics").expect("metrics answer");
    assert_eq!(code, 200, "{body}");
    body
}

/// The value of one sample line `name{labels}` (or `name`) in an exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn prometheus_scrapes_the_guard_and_counts_a_fence_after_an_etcd_outage() {
    let mut etcd = EtcdCluster::new("om");
    let a = Node::new(&mut etcd, "na");
    let crm = CrmStandIn::new(&a);
    let agent = observed_agent(&a, &etcd, &crm);
    assert_eq!(agent.run("start").code, 0);
    // Unpromoted, the standby's listener answers on the same address: no leader, but up.
    let leader = wait_answer(&a, "/leader");
    assert_eq!(leader.0, 503, "a standby is no leader: {leader:?}");
    assert!(leader.1.contains("\"role\":\"standby\""), "{leader:?}");
    assert_eq!(http_get(&a.ns.name, METRICS, "/health").unwrap().0, 200);
    let text = metrics_text(&a);
    check_exposition(&text);
    assert_eq!(sample(&text, "hamaster_standby"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "hamaster_leader"), Some(0.0), "{text}");
    assert_eq!(
        sample(&text, "hamaster_promotable"),
        None,
        "nothing said before a monitor looked: {text}"
    );
    // The unpromoted monitor's look is what it serves.
    assert_eq!(agent.run("monitor").code, 0);
    let text = metrics_text(&a);
    check_exposition(&text);
    assert_eq!(sample(&text, "hamaster_promotable"), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "hamaster_etcd_reachable"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "hamaster_etcd_members_answering"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "hamaster_last_failure_timestamp_seconds"),
        None,
        "{text}"
    );
    promoted(agent.run("promote"), &a);

    // The exposition passes promtool, and the endpoints answer as documented.
    let text = metrics_text(&a);
    check_exposition(&text);
    assert_eq!(sample(&text, "hamaster_leader"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "hamaster_vip_present"), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "hamaster_lease_ttl_seconds"),
        Some(3.0),
        "{text}"
    );
    let token = etcd.get(KEY).expect("key taken").2;
    assert_eq!(
        sample(&text, "hamaster_fencing_token"),
        Some(token as f64),
        "the token is the key's create revision, seen from etcd: {text}"
    );
    let leader = http_get(&a.ns.name, METRICS, "/leader").unwrap();
    assert_eq!(leader.0, 200, "{leader:?}");
    assert!(leader.1.contains("\"role\":\"leader\""), "{leader:?}");
    assert_eq!(http_get(&a.ns.name, METRICS, "/health").unwrap().0, 200);
    assert_eq!(http_get(&a.ns.name, METRICS, "/nothing").unwrap().0, 404);

    // A real Prometheus in the node's namespace scrapes it every second.
    let prom = Prometheus::start(&a.ns.name, &[METRICS]);
    prom.expect_value(
        "hamaster_lease_remaining_seconds",
        Duration::from_secs(20),
        |v| v > 0.0 && v <= 3.0,
        "lease time left through Prometheus",
    );
    prom.expect_value(
        "hamaster_renewal_duration_seconds_count",
        Duration::from_secs(10),
        |v| v >= 1.0,
        "renewals counted",
    );
    assert_eq!(
        prom.query("hamaster_fences_total{cause=\"deadline\"}"),
        Some(0.0)
    );

    // etcd silent (the node's switch port leaves the bridge): the guard fences at its deadline.
    etcd.silence(&a.ns);
    let st = a
        .wait_fenced(&agent, Duration::from_secs(10))
        .expect("fenced after the outage");
    assert_eq!(st.fence_cause.as_deref(), Some("deadline"), "{st:?}");
    prom.expect_value(
        "hamaster_fences_total{cause=\"deadline\"}",
        Duration::from_secs(10),
        |v| v == 1.0,
        "the fence counted in Prometheus",
    );
    prom.expect_value(
        "hamaster_leader",
        Duration::from_secs(10),
        |v| v == 0.0,
        "no longer leader in Prometheus",
    );
    prom.expect_value(
        "sum(hamaster_renewal_failures_total)",
        Duration::from_secs(10),
        |v| v >= 1.0,
        "failed renewals counted",
    );
    assert_eq!(
        prom.query("hamaster_guard_role{role=\"fenced\"}"),
        Some(1.0)
    );
    let leader = http_get(&a.ns.name, METRICS, "/leader").unwrap();
    assert_eq!(leader.0, 503, "a fenced guard is no leader: {leader:?}");
    assert!(leader.1.contains("fenced"), "{leader:?}");
    assert_eq!(
        http_get(&a.ns.name, METRICS, "/health").unwrap().0,
        200,
        "a fenced guard works"
    );
    // The guard's own removal of the VIP is nobody else's: nothing pushed for it.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!a.log().contains("by another program"), "{}", a.log());
    assert_eq!(
        sample(
            &metrics_text(&a),
            "hamaster_vip_lost_total{what=\"deleted\"}"
        ),
        Some(0.0)
    );

    // Pacemaker's monitor finds the fence: the failure this node's standby will show.
    let failed_at = hamaster::lease::clock::unix_ms() / 1000;
    assert_eq!(agent.run("monitor").code, 9);
    etcd.unsilence(&a.ns);
    assert_eq!(agent.run("demote").code, 0);
    // The guard gone, the standby's listener serves again, with the failure.
    let leader = wait_answer(&a, "/leader");
    assert_eq!(leader.0, 503, "{leader:?}");
    assert!(leader.1.contains("\"role\":\"standby\""), "{leader:?}");
    let text = metrics_text(&a);
    let at = sample(&text, "hamaster_last_failure_timestamp_seconds").expect("the failure");
    assert!(
        (at as u64).abs_diff(failed_at) <= 2,
        "the monitor's failure at {failed_at}, shown {at}: {text}"
    );
    assert_eq!(agent.run("stop").code, 0);
    assert!(
        http_get(&a.ns.name, METRICS, "/health").is_none(),
        "stopped: nothing listens"
    );
}

/// The answer on METRICS at `path` once something listens there (the standby's listener is
/// spawned, not waited for), bounded.
fn wait_answer(node: &Node, path: &str) -> (u16, String) {
    let mut got = None;
    support::wait_for(Duration::from_secs(5), || {
        got = http_get(&node.ns.name, METRICS, path);
        got.is_some()
    });
    got.unwrap_or_else(|| panic!("nothing answers {path} on {METRICS}:\n{}", node.log()))
}

#[test]
fn a_metrics_address_that_cannot_be_bound_or_parsed_takes_no_key() {
    let mut etcd = EtcdCluster::new("ob");
    let a = Node::new(&mut etcd, "na");
    agent_bad_value(&a, &etcd);
    // The port taken by another program on this node: promote fails here (1), key untouched.
    let holder = std::process::Command::new("ip")
        .args(["netns", "exec", &a.ns.name, "python3", "-c"])
        .arg("import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',9406))\ns.listen()\nprint('ok',flush=True)\ntime.sleep(60)")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut holder = KillOnDrop(holder);
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(holder.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ok");
    }
    let agent = a.agent(&etcd).param("metrics_address", "127.0.0.1:9406");
    assert_eq!(agent.run("start").code, 0);
    agent
        .run("promote")
        .expect(1, "metrics_address=127.0.0.1:9406: cannot listen there");
    assert!(etcd.get(KEY).is_none(), "the key was never taken");
    assert!(!a.holds_vip(), "nothing raised");
    assert_eq!(agent.run("stop").code, 0);
}

fn agent_bad_value(a: &Node, etcd: &EtcdCluster) {
    for (value, problem) in [
        ("localhost:9405", "must be an IP address and port"),
        ("127.0.0.1", "must be an IP address and port"),
        ("127.0.0.1:0", "needs a port other than 0"),
    ] {
        a.agent(etcd)
            .param("metrics_address", value)
            .run("validate-all")
            .expect(6, &format!("metrics_address=\"{value}\" {problem}"));
    }
    a.agent(etcd)
        .param("conflict_action", "fence")
        .run("validate-all")
        .expect(6, "conflict_action=\"fence\" must be report or push");
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// ARP frames in `frames` that claim `ip` for `mac` (sender addresses), and when.
fn arp_claims(frames: &[support::Frame], mac: [u8; 6], ip: std::net::Ipv4Addr) -> Vec<Instant> {
    frames
        .iter()
        .filter(|f| {
            let b = &f.bytes;
            b.len() >= 42 && b[12..14] == [8, 6] && b[22..28] == mac && b[28..32] == ip.octets()
        })
        .map(|f| f.at)
        .collect()
}

fn wait_conflict(
    a: &Node,
    agent: &support::Agent,
    mac: &str,
    limit: Duration,
) -> Option<hamaster::resource::status::GuardStatus> {
    let mut st = None;
    support::wait_for(limit, || {
        st = a.guard_status(agent);
        st.as_ref()
            .and_then(|s| s.vip_conflict.as_ref())
            .is_some_and(|c| c.mac == mac)
    });
    st.filter(|s| s.vip_conflict.as_ref().is_some_and(|c| c.mac == mac))
}

/// iputils' arping in namespace `ns`: `count` unsolicited ARP requests for the VIP, 1 s apart.
fn claim_vip(ns: &str, count: u32) -> std::process::Output {
    let count = count.to_string();
    support::sh(
        "ip",
        &[
            "netns", "exec", ns, "arping", "-U", "-c", &count, "-w", "3", "-I", "lan0", "-s", VIP,
            VIP,
        ],
    )
}

/// The Unix time (ms) of an earlier moment.
fn unix_ms_of(t: Instant) -> u64 {
    hamaster::lease::clock::unix_ms() - Instant::now().duration_since(t).as_millis() as u64
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[test]
fn a_host_outside_the_cluster_claiming_the_vip_is_named_defended_once_and_pushed() {
    let mut etcd = EtcdCluster::new("oc");
    let a = Node::new(&mut etcd, "na");
    let outsider = etcd.node("oout");
    let crm = CrmStandIn::new(&a);
    let agent = observed_agent(&a, &etcd, &crm).param("conflict_action", "push");
    assert_eq!(agent.run("start").code, 0);
    let burst = Capture::start(&outsider, "lan0");
    promoted(agent.run("promote"), &a);
    std::thread::sleep(Duration::from_millis(1500));
    let burst = burst.finish();
    let vip: std::net::Ipv4Addr = VIP.parse().unwrap();
    let master_mac = a.ns.mac("lan0");
    assert!(
        !arp_claims(&burst, master_mac, vip).is_empty(),
        "the promote's own announcement was on the wire"
    );

    // This node's own frames never count: its promote burst, and a gratuitous ARP for the VIP
    // sent from another of its interfaces on the same bridge.
    etcd.switch().plug(&a.ns, "lan1", "p2nd", "br0", None);
    let own = support::sh(
        "ip",
        &[
            "netns", "exec", &a.ns.name, "arping", "-U", "-c", "2", "-w", "3", "-I", "lan1", "-s",
            VIP, VIP,
        ],
    );
    assert!(
        String::from_utf8_lossy(&own.stdout).contains("Sent 2"),
        "arping from lan1: {own:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let st = a.guard_status(&agent).unwrap();
    assert_eq!(st.vip_conflict, None, "own frames counted: {st:?}");
    assert_eq!(crm.calls(), "");

    // The outsider takes the VIP and announces it (iputils arping, unsolicited ARP).
    let out_mac = outsider.mac("lan0");
    outsider.ip(&["addr", "add", &format!("{VIP}/24"), "dev", "lan0"]);
    let cap = Capture::start(&outsider, "lan0");
    let at_master = Capture::start(&a.ns, "lan0");
    let out_ns = outsider.name.clone();
    // One frame: the record's time stamp is then that frame's.
    let claimer = std::thread::spawn(move || claim_vip(&out_ns, 1));
    let st = wait_conflict(&a, &agent, &mac_text(out_mac), Duration::from_secs(3));
    let claimed = claimer.join().unwrap();
    let st = st.unwrap_or_else(|| panic!("conflict not reported\n{}\n{claimed:?}", a.log()));
    let c = st.vip_conflict.unwrap();
    // Timed from the claim's arrival on the master's NIC to the guard's record of it.
    let arrived = arp_claims(&at_master.finish(), out_mac, vip)[0];
    let after = c.last_unix_ms as i64 - unix_ms_of(arrived) as i64;
    assert!(after < 1000, "reported {after} ms after the frame arrived");
    assert!(c.frame.starts_with("ARP"), "{c:?}");
    assert!(
        support::wait_for(Duration::from_secs(2), || crm
            .calls()
            .contains("--fail --resource api --node na")),
        "conflict_action=push told Pacemaker: {:?}",
        crm.calls()
    );
    let log = a.log();
    assert!(
        log.contains(&format!(
            "VIP conflict: {VIP} claimed by {}",
            mac_text(out_mac)
        )),
        "{log}"
    );
    let text = metrics_text(&a);
    assert!(
        sample(&text, "hamaster_vip_conflicts_total").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // Counted for the address claimed, too (several VIPs: extra_vips).
    let per_address = format!("hamaster_vip_address_conflicts_total{{address=\"{VIP}\"}}");
    assert!(
        sample(&text, &per_address).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // A second claim 2 s later: counted, but not defended again within 10 s.
    std::thread::sleep(Duration::from_secs(2));
    let _ = claim_vip(&outsider.name, 2);
    std::thread::sleep(Duration::from_millis(500));
    let frames = cap.finish();
    let defences = arp_claims(&frames, master_mac, vip);
    assert_eq!(
        defences.len(),
        1,
        "one defending announcement from {} in the first 10 s: {defences:?}",
        mac_text(master_mac)
    );
    let claimed_at = arp_claims(&frames, out_mac, vip)[0];
    assert!(
        defences[0] > claimed_at && defences[0] - claimed_at < Duration::from_secs(1),
        "defended at once: {:?} after the claim",
        defences[0].checked_duration_since(claimed_at)
    );
    let st = a.guard_status(&agent).unwrap();
    assert!(
        st.vip_conflict.unwrap().frames >= 3,
        "every claiming frame counted"
    );
    assert_eq!(
        crm.calls().lines().count(),
        1,
        "told once per leadership: {:?}",
        crm.calls()
    );
    outsider.ip(&["addr", "del", &format!("{VIP}/24"), "dev", "lan0"]);
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);

    // IPv6: an unsolicited Neighbor Advertisement for the VIP from the outsider (the
    // project's own announcer, as any host's would send), reported with its MAC.
    let v6 = "2001:db8:19::100";
    crm.clear();
    let agent6 = agent
        .clone()
        .param("ip", v6)
        .param("cidr_netmask", "64")
        .param("nic", "lan0");
    assert_eq!(agent6.run("start").code, 0);
    promoted(agent6.run("promote"), &a);
    outsider.ip(&[
        "-6",
        "addr",
        "add",
        &format!("{v6}/64"),
        "dev",
        "lan0",
        "nodad",
    ]);
    let at_master = Capture::start(&a.ns, "lan0");
    let na = support::sh(
        "ip",
        &[
            "netns",
            "exec",
            &outsider.name,
            support::hamaster_bin().to_str().unwrap(),
            "announce",
            "--nic",
            "lan0",
            "--ip",
            v6,
            "--count",
            "2",
            "--interval-ms",
            "100",
        ],
    );
    assert!(na.status.success(), "announce: {na:?}");
    let st = wait_conflict(&a, &agent6, &mac_text(out_mac), Duration::from_secs(3))
        .unwrap_or_else(|| panic!("IPv6 conflict not reported\n{}", a.log()));
    let c = st.vip_conflict.unwrap();
    assert_eq!(c.frame, "neighbor advertisement");
    // Serving, but claimed: OCF_DEGRADED_PROMOTED where Pacemaker knows it (2.1+), naming the
    // MAC; 8 on 2.0.
    let on = |feature_set: &str| {
        agent6
            .clone()
            .env("OCF_RESKEY_crm_feature_set", feature_set)
            .run("monitor")
    };
    let newer = on("3.16.2");
    assert_eq!(newer.code, 191, "{}", newer.stderr);
    let reason = newer
        .stderr
        .lines()
        .find(|l| l.starts_with("ocf-exit-reason:"))
        .unwrap_or_default();
    assert!(
        reason.contains(&format!("VIP {v6} claimed by {}", mac_text(out_mac))),
        "{}",
        newer.stderr
    );
    assert_eq!(on("3.2.0").code, 8);
    let arrived = at_master
        .finish()
        .iter()
        .find(|f| {
            let b = &f.bytes;
            b.len() >= 78 && b[12..14] == [0x86, 0xdd] && b[54] == 136 && b[6..12] == out_mac
        })
        .expect("the outsider's advertisement arrived")
        .at;
    let after = c.last_unix_ms as i64 - unix_ms_of(arrived) as i64;
    assert!(after < 1000, "reported {after} ms after the frame arrived");
    assert_eq!(agent6.run("demote").code, 0);
    assert_eq!(agent6.run("stop").code, 0);
}

#[test]
fn the_vip_deleted_or_its_link_set_down_is_told_at_once_and_not_added_back() {
    let mut etcd = EtcdCluster::new("ol");
    let a = Node::new(&mut etcd, "na");
    let crm = CrmStandIn::new(&a);
    let agent = observed_agent(&a, &etcd, &crm);
    let want = "--fail --resource api --node na";
    assert_eq!(agent.run("start").code, 0);

    // The guard's own removals (demote) are nobody else's: nothing told.
    promoted(agent.run("promote"), &a);
    assert_eq!(agent.run("demote").code, 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(crm.calls(), "", "demote's own removal was pushed");

    // Deleted by hand.
    promoted(agent.run("promote"), &a);
    let t = hamaster::lease::clock::unix_ms();
    a.ns.ip(&["addr", "del", &format!("{VIP}/24"), "dev", "lan0"]);
    assert!(
        support::wait_for(Duration::from_secs(2), || crm.calls().contains(want)),
        "not told: {:?}\n{}",
        crm.calls(),
        a.log()
    );
    let told = crm.first_call_unix_ms().unwrap().saturating_sub(t);
    assert!(told < 1000, "told {told} ms after");
    let st = a.guard_status(&agent).unwrap();
    assert!(
        st.vip_lost
            .as_deref()
            .is_some_and(|l| l.contains("deleted")),
        "{st:?}"
    );
    agent.run("monitor").expect(9, "was deleted from lan0");
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        !a.holds_vip(),
        "the guard added the VIP back behind Pacemaker's back"
    );
    let text = metrics_text(&a);
    assert_eq!(
        sample(&text, "hamaster_vip_lost_total{what=\"deleted\"}"),
        Some(1.0)
    );
    assert_eq!(crm.calls().lines().count(), 1, "{:?}", crm.calls());
    assert_eq!(agent.run("demote").code, 0);

    // The link set down.
    crm.clear();
    promoted(agent.run("promote"), &a);
    let t = hamaster::lease::clock::unix_ms();
    a.ns.ip(&["link", "set", "lan0", "down"]);
    assert!(
        support::wait_for(Duration::from_secs(2), || crm.calls().contains(want)),
        "link down not told: {:?}\n{}",
        crm.calls(),
        a.log()
    );
    let told = crm.first_call_unix_ms().unwrap().saturating_sub(t);
    assert!(told < 1000, "told {told} ms after");
    assert!(a.log().contains("link lan0 was set down"), "{}", a.log());
    let text = metrics_text(&a);
    assert_eq!(
        sample(&text, "hamaster_vip_lost_total{what=\"link_down\"}"),
        Some(1.0)
    );
    // An IPv4 address stays on a link that is down: it is no VIP that serves.
    assert_eq!(sample(&text, "hamaster_vip_present"), Some(0.0), "{text}");
    agent.run("monitor").expect(9, "link lan0 was set down");
    assert_eq!(http_get(&a.ns.name, METRICS, "/leader").unwrap().0, 503);
    a.ns.ip(&["link", "set", "lan0", "up"]);
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
fn the_standby_listener_is_found_by_the_next_action_and_ends_when_no_longer_wanted() {
    let mut etcd = EtcdCluster::new("ol");
    let a = Node::new(&mut etcd, "na");
    let crm = CrmStandIn::new(&a);
    let agent = observed_agent(&a, &etcd, &crm);
    // A stop right after the start finds the listener the start spawned: nothing listens.
    assert_eq!(agent.run("start").code, 0);
    assert_eq!(agent.run("stop").code, 0);
    assert!(
        http_get(&a.ns.name, METRICS, "/health").is_none(),
        "stopped right after its start: nothing listens"
    );
    // A promote right after the start: the listener gives the address up, the guard binds it.
    assert_eq!(agent.run("start").code, 0);
    promoted(agent.run("promote"), &a);
    let leader = http_get(&a.ns.name, METRICS, "/leader").expect("the guard answers");
    assert_eq!(leader.0, 200, "{leader:?}");
    // Back to standby, the report from before the promote is not served as now.
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(wait_answer(&a, "/leader").0, 503);
    let text = metrics_text(&a);
    assert_eq!(sample(&text, "hamaster_standby"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "hamaster_promotable"), None, "{text}");
    // A listener whose instance is no longer marked started (a stop that missed it, an older
    // agent's stop) ends by itself.
    let started = agent.run_dir.join(support::RESOURCE).join("started");
    std::fs::remove_file(&started).expect("the started marker");
    assert!(
        support::wait_for(Duration::from_secs(5), || http_get(
            &a.ns.name, METRICS, "/health"
        )
        .is_none()),
        "the listener ended once its instance was not started"
    );
}
