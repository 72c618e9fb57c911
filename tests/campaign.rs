//! `hamaster campaign` on three nodes without Pacemaker (issue 29 item 5): a real etcd
//! cluster and the lab's namespaces, each node running the campaign from the TOML the cold
//! standby uses. One holder at a time, seen from etcd's side and on the nodes' addresses; the
//! holder's node crashed → another holds within lease_ttl plus the watch's latency; the
//! holder's link silent → its VIP gone before etcd deletes the key, the next holder raises
//! after; the silenced node stands again once its leadership is over; candidates use no CPU
//! to speak of while they wait; SIGTERM steps the holder down and ends the campaign.

use hamaster_lab as support;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::etcd::{EtcdCluster, KeyWatch};
use support::master::{Node, VipObserver};

const KEY: &str = support::API_KEY;

/// `hamaster campaign --config api.toml` on the node, its stderr kept in campaign.err, its
/// log lines in campaign.log.
fn spawn_campaign(node: &Node, agent: &support::Agent) -> Child {
    let config = node.config_file(agent);
    let err = std::fs::File::create(node.state.join("campaign.err")).unwrap();
    node.cli(agent, &["campaign", "--config", config.to_str().unwrap()])
        .env("HA_LOGFILE", node.state.join("campaign.log"))
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap()
}

/// `hamaster campaign` run to its end (a refusal).
fn campaign_once(node: &Node, agent: &support::Agent) -> support::Run {
    let config = node.config_file(agent);
    support::run_command(node.cli(agent, &["campaign", "--config", config.to_str().unwrap()]))
}

fn campaign_log(node: &Node) -> String {
    let read = |f: &str| std::fs::read_to_string(node.state.join(f)).unwrap_or_default();
    read("campaign.err") + &read("campaign.log")
}

/// Whether the campaign ends (bounded: 20 s, a step-down's time) with exit code 0.
fn ends_well(campaign: &mut Child) -> bool {
    support::wait_for(Duration::from_secs(20), || {
        matches!(campaign.try_wait(), Ok(Some(_)))
    }) && campaign.wait().is_ok_and(|s| s.success())
}

/// Every node's campaign output and log, for a failed assertion.
fn all_logs(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| format!("--- {}:\n{}", n.name, campaign_log(n)))
        .collect()
}

/// CPU time (clock ticks, user + system) process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's name, whatever it holds: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The node named in the leader key's value, if the key exists.
fn holder(etcd: &EtcdCluster) -> Option<String> {
    etcd.get(KEY).map(|k| k.0)
}

/// Waits (bounded) until exactly one node holds the VIP, that node is the key's holder, and
/// its service runs; the index.
fn one_master(etcd: &EtcdCluster, nodes: &[&Node], limit: Duration) -> Option<usize> {
    let mut found = None;
    support::wait_for(limit, || {
        let holding: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].holds_vip()).collect();
        found = match (holding.as_slice(), holder(etcd)) {
            ([i], Some(h)) if nodes[*i].name == h && !nodes[*i].service_pids().is_empty() => {
                Some(*i)
            }
            _ => None,
        };
        found.is_some()
    });
    found
}

#[test]
fn three_candidates_one_holder_through_crash_and_silence_then_sigterm_steps_down() {
    let mut etcd = EtcdCluster::new("cp");
    let nodes: Vec<Node> = ["ka", "kb", "kc"]
        .iter()
        .map(|n| Node::new(&mut etcd, n))
        .collect();
    let agents: Vec<support::Agent> = nodes.iter().map(|n| n.agent(&etcd)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    let observer = VipObserver::start(&refs);
    let keys = KeyWatch::start(&etcd, KEY, || ());
    let mut campaigns: Vec<Child> = nodes
        .iter()
        .zip(&agents)
        .map(|(n, a)| spawn_campaign(n, a))
        .collect();
    let logs = || all_logs(&nodes);

    // One holder; the others wait as candidates.
    let first = one_master(&etcd, &refs, Duration::from_secs(30)).unwrap_or_else(|| {
        panic!("one master: {}", logs());
    });
    let others: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    for &i in &others {
        assert!(nodes[i].service_pids().is_empty(), "{}", logs());
    }

    // Candidates use no CPU to speak of while they wait (a watch, never a poll).
    let ticks_per_s = 100.0; // USER_HZ on Linux
    let window = Duration::from_secs(5);
    let before: Vec<u64> = others
        .iter()
        .map(|&i| cpu_ticks(campaigns[i].id()))
        .collect();
    std::thread::sleep(window);
    for (n, &i) in others.iter().enumerate() {
        let used = (cpu_ticks(campaigns[i].id()) - before[n]) as f64 / ticks_per_s;
        let share = used / window.as_secs_f64();
        println!(
            "candidate {}: {:.2} s of CPU in {} s ({:.1} % of a core)",
            nodes[i].name,
            used,
            window.as_secs(),
            share * 100.0
        );
        assert!(share < 0.02, "candidate {} used {used} s", nodes[i].name);
    }

    // The holder's node crashes: another holds within lease_ttl plus the watch's latency.
    let crashed_at = Instant::now();
    nodes[first].crash();
    // A crashed host's address answers nobody: gone from the count of holders.
    nodes[first].ns.ip(&["addr", "flush", "dev", "lan0"]);
    let _ = campaigns[first].wait();
    let second = one_master(&etcd, &refs, Duration::from_secs(20)).unwrap_or_else(|| {
        panic!("a master after the crash: {}", logs());
    });
    assert_ne!(second, first);
    let taken = keys
        .first(Duration::from_secs(1), |e| {
            e.kind == "PUT" && e.at > crashed_at
        })
        .expect("a new key after the crash")
        .at;
    let ttl = Duration::from_secs(support::LEASE_TTL_S);
    println!(
        "crash of {}: {} holds the key after {} ms (lease_ttl {} s)",
        nodes[first].name,
        nodes[second].name,
        (taken - crashed_at).as_millis(),
        ttl.as_secs()
    );
    assert!(
        taken - crashed_at <= ttl + Duration::from_secs(2),
        "{} ms",
        (taken - crashed_at).as_millis()
    );

    // The holder's link goes silent: its VIP goes before etcd deletes the key, the last
    // candidate raises after.
    let third = 3 - first - second;
    let silenced_at = Instant::now();
    etcd.silence(&nodes[second].ns);
    let deleted = keys
        .first(Duration::from_secs(20), |e| {
            e.kind == "DELETE" && e.at > silenced_at
        })
        .expect("etcd deleted the silent holder's key")
        .at;
    assert!(
        support::wait_for(Duration::from_secs(20), || nodes[third].holds_vip()),
        "{}",
        logs()
    );
    assert_eq!(holder(&etcd).as_deref(), Some(nodes[third].name.as_str()));
    // The silent node steps down by itself and stands again: its campaign lives on.
    assert!(
        support::wait_for(Duration::from_secs(20), || !nodes[second].holds_vip()
            && nodes[second].service_pids().is_empty()),
        "{}",
        logs()
    );
    etcd.unsilence(&nodes[second].ns);
    assert!(
        support::wait_for(Duration::from_secs(15), || campaign_log(&nodes[second])
            .contains("a candidate again")),
        "{}",
        logs()
    );
    assert!(
        campaigns[second].try_wait().unwrap().is_none(),
        "{}",
        logs()
    );

    // The new holder crashes too: the node that lost its leadership takes it back.
    nodes[third].crash();
    nodes[third].ns.ip(&["addr", "flush", "dev", "lan0"]);
    let _ = campaigns[third].wait();
    assert_eq!(
        one_master(&etcd, &refs, Duration::from_secs(30)),
        Some(second),
        "{}",
        logs()
    );

    // SIGTERM: the holder steps down (service, VIP, then the key) and the campaign ends.
    support::must("kill", &["-TERM", &campaigns[second].id().to_string()]);
    assert!(
        ends_well(&mut campaigns[second]),
        "after SIGTERM: {}",
        logs()
    );
    assert_eq!(holder(&etcd), None, "the key released");
    assert!(!nodes[second].holds_vip() && nodes[second].service_pids().is_empty());

    let seen = observer.finish();
    seen.assert_complete();
    let vip_gone = seen
        .losses(second)
        .into_iter()
        .find(|(after, _)| *after >= silenced_at)
        .expect("the silent holder lost the VIP");
    println!(
        "silent link on {}: VIP gone at most {} ms after the cut, key deleted {} ms after it",
        nodes[second].name,
        (vip_gone.1 - silenced_at).as_millis(),
        (deleted - silenced_at).as_millis()
    );
    assert!(
        vip_gone.1 < deleted,
        "the VIP went before etcd deleted the key"
    );
    assert_eq!(seen.overlap(), Duration::ZERO, "never two VIP holders");
}

#[test]
fn a_failed_service_steps_down_by_itself_and_release_ends_the_campaign() {
    let mut etcd = EtcdCluster::new("cr");
    let nodes: Vec<Node> = ["ke", "kf"]
        .iter()
        .map(|n| Node::new(&mut etcd, n))
        .collect();
    let agents: Vec<support::Agent> = nodes.iter().map(|n| n.agent(&etcd)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    let observer = VipObserver::start(&refs);
    let mut campaigns: Vec<Child> = nodes
        .iter()
        .zip(&agents)
        .map(|(n, a)| spawn_campaign(n, a))
        .collect();
    let logs = || all_logs(&nodes);
    let h = one_master(&etcd, &refs, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("one master: {}", logs()));
    let o = 1 - h;

    // The holder's service dies: with no Pacemaker to tell, its guard steps down by itself,
    // the other node takes over, and the node stands again.
    for pid in nodes[h].service_pids() {
        support::must("kill", &["-KILL", &pid.to_string()]);
    }
    assert_eq!(
        one_master(&etcd, &refs, Duration::from_secs(20)),
        Some(o),
        "{}",
        logs()
    );
    assert!(
        support::wait_for(Duration::from_secs(10), || campaign_log(&nodes[h])
            .contains("a candidate again")),
        "{}",
        logs()
    );
    assert!(campaign_log(&nodes[h]).contains("stepping down"));
    assert!(campaigns[h].try_wait().unwrap().is_none(), "{}", logs());

    // `hamaster release` on the new holder steps it down and ends its campaign; the node that
    // stood again takes over.
    let release = support::run_command(nodes[o].cli(
        &agents[o],
        &["release", "--resource", support::master::RESOURCE],
    ));
    assert_eq!(release.code, 0, "{}{}", release.stderr, logs());
    assert!(ends_well(&mut campaigns[o]), "after release: {}", logs());
    assert_eq!(
        one_master(&etcd, &refs, Duration::from_secs(20)),
        Some(h),
        "{}",
        logs()
    );
    assert!(!nodes[o].holds_vip() && nodes[o].service_pids().is_empty());

    support::must("kill", &["-TERM", &campaigns[h].id().to_string()]);
    for c in &mut campaigns {
        assert!(ends_well(c), "after SIGTERM: {}", logs());
    }
    assert_eq!(holder(&etcd), None, "the key released");
    let seen = observer.finish();
    seen.assert_complete();
    assert_eq!(seen.overlap(), Duration::ZERO, "never two VIP holders");
}

#[test]
fn a_campaign_refuses_etcd_outage_hold_a_missing_cluster_name_and_a_warm_standby() {
    let mut etcd = EtcdCluster::new("cq");
    let node = Node::new(&mut etcd, "kd");
    let agent = node.agent(&etcd).param("etcd_outage", "hold");
    let run = campaign_once(&node, &agent);
    assert_eq!(run.code, 6, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("etcd_outage=hold: a campaign has no second witness"),
        "{}",
        run.stderr
    );

    // No corosync here to name the cluster, and the file names none.
    let mut agent = node.agent(&etcd);
    agent.params.remove("cluster_name");
    let run = campaign_once(&node, &agent);
    assert_eq!(run.code, 6, "{}", run.stderr);
    assert!(run.stderr.contains("cluster_name"), "{}", run.stderr);

    // A campaign's service starts with the role: no resident standby here.
    let agent = node.agent(&etcd).param("standby", "warm");
    let run = campaign_once(&node, &agent);
    assert_eq!(run.code, 6, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("standby=warm: only ocf:hamaster:master runs a resident standby"),
        "{}",
        run.stderr
    );
    assert!(etcd.get(KEY).is_none() && !node.holds_vip());
}
