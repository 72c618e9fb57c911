//! The guard machine's rules in every phase, against real etcd in namespaces: a key lost in
//! the middle of the raise, a service that will not stop on SIGTERM inside the demote budget,
//! stop and demote with nothing running and stale files that name somebody else's process,
//! and the run directory wiped while promoted.

use hamaster_lab as support;

use std::time::{Duration, Instant};

use support::etcd::{EtcdCluster, KeyWatch};
use support::master::Node;
use support::phases::{self, Loss, KEY};

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// `setsid sleep 1000`: nobody's process, leading its own group, as a stale state file might
/// name it.
fn bystander() -> std::process::Child {
    std::process::Command::new("setsid")
        .args(["sleep", "1000"])
        .spawn()
        .expect("setsid sleep")
}

/// A cluster, a node and its agent at the default lease settings: the key lost one second
/// into a raise of about 5 s; how long the VIP outlived the loss.
fn lost_during_the_raise(tag: &str, loss: Loss, v6: bool) -> Duration {
    let mut etcd = EtcdCluster::new(tag);
    let a = Node::new(&mut etcd, "na");
    let (agent, vip) = phases::slow_raise(&a, &etcd, v6);
    phases::lose_during_the_raise(&etcd, &a, &agent, vip, loss)
}

#[test]
fn a_key_deleted_one_second_into_a_five_second_raise_takes_the_vip_within_a_second() {
    let took = lost_during_the_raise("gpr", Loss::Deleted, false);
    assert!(took <= Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_key_deleted_while_an_ipv6_vip_waits_for_dad_takes_the_vip_within_a_second() {
    let took = lost_during_the_raise("gp6", Loss::Deleted, true);
    assert!(took <= Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_lease_revoked_during_the_raise_fences_within_one_renewal_interval() {
    let took = lost_during_the_raise("gpv", Loss::Revoked, false);
    assert!(took <= Duration::from_millis(10_000 / 3), "{took:?}");
}

#[test]
fn a_service_that_ignores_sigterm_is_killed_within_the_demote_budget_before_the_key_goes() {
    let mut etcd = EtcdCluster::new("gpt");
    let a = Node::new(&mut etcd, "na");
    let mut agent = a
        .agent(&etcd)
        .param("command", "/bin/sh")
        .param("args", "-c 'trap \"\" TERM; exec sleep 1000'");
    agent.params.remove("health_url");
    agent.params.remove("health_cacert");
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}\n{}", promote.stderr, a.log());
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(agent.run_dir.join("api/state.json")).expect("state.json"),
    )
    .unwrap();
    let pid = state["service_pid"].as_u64().expect("service pid") as u32;
    assert!(alive(pid));
    // An 8 s demote: its budget is 7 s, the guard's step-down 5 s, the grace 3 s.
    let demote_agent = agent.env("OCF_RESKEY_CRM_meta_timeout", "8000");
    // The key's deletion as etcd tells it (a watch, not a poll that the demote's end could
    // cut short), and whether the service was alive when the watch heard of it.
    let deletion = KeyWatch::start(&etcd, KEY, move || alive(pid));
    let (demote, took, dead_at) = std::thread::scope(|s| {
        let begun = Instant::now();
        let demoting = s.spawn(|| demote_agent.run("demote"));
        // The service's death, watched closely on a thread of its own.
        let dying = s.spawn(move || {
            while begun.elapsed() < Duration::from_secs(12) {
                if !alive(pid) {
                    return Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            None
        });
        let run = demoting.join().unwrap();
        (run, begun.elapsed(), dying.join().unwrap())
    });
    let deleted = deletion.first(Duration::from_secs(5), |e| e.kind == "DELETE");
    eprintln!(
        "TERM-ignoring service: demote {} in {took:?}, service gone: {}, key deleted: {deleted:?}",
        demote.code,
        dead_at.is_some()
    );
    assert_eq!(demote.code, 0, "{}\n{}", demote.stderr, a.log());
    assert!(
        took < Duration::from_secs(8),
        "within the timeout: {took:?}"
    );
    assert!(!alive(pid), "SIGKILLed after the grace");
    assert!(etcd.get(KEY).is_none(), "released at last");
    let dead_at = dead_at.expect("seen dying");
    let deleted = deleted.expect("etcd's watch saw the key deleted");
    assert!(!deleted.found, "the key went while the service still ran");
    assert!(
        dead_at <= deleted.at,
        "the key's deletion was heard {:?} before the service died",
        dead_at - deleted.at
    );
    assert_eq!(demote_agent.run("stop").code, 0);
}

#[test]
fn stop_and_demote_with_nothing_running_are_zero_and_signal_nobody() {
    let mut etcd = EtcdCluster::new("gpn");
    let a = Node::new(&mut etcd, "na");
    let mut other = bystander();
    let dir = a.agent(&etcd).run_dir.join("api");
    std::fs::create_dir_all(&dir).unwrap();
    let stale = |start: Option<u64>| {
        let state = serde_json::json!({
            "guard_pid": 999_999, "node": "na", "key": KEY, "lease_id": 12345,
            "fencing_token": 7, "service_pid": other.id(), "service_start": start,
            "vip_added": true, "fenced": null
        });
        std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
        std::fs::write(dir.join("promoted"), "").unwrap();
        std::fs::write(dir.join("guard.pid"), "999999\n").unwrap();
    };

    // Command mode: a state file naming a live process of somebody else's with a wrong start
    // time: proven not ours, nothing to do.
    let agent = a.agent(&etcd);
    stale(Some(1));
    let demote = agent.run("demote");
    assert_eq!(demote.code, 0, "{}", demote.stderr);
    assert!(alive(other.id()), "never signalled");
    stale(Some(1));
    assert_eq!(agent.run("stop").code, 0);
    assert!(alive(other.id()));
    // With no start time recorded (a state file from before they were), a live group under
    // that id cannot be proven ours or not: never signalled, and demote says so.
    stale(None);
    agent
        .run("demote")
        .expect(1, "no start time was recorded to prove it the service's");
    assert!(alive(other.id()), "never signalled");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();

    // systemd mode: a unit that is not loaded (stop fails with 5, is-active says inactive).
    let stub = a.state.join("bin");
    std::fs::create_dir_all(&stub).unwrap();
    let script = r#"#!/bin/sh
case "$1" in
stop) echo "Failed to stop $3: Unit $3 not loaded." >&2; exit 5 ;;
show) printf 'LoadState=not-found\nActiveState=inactive\nSubState=dead\n'; exit 0 ;;
esac
exit 1
"#;
    std::fs::write(stub.join("systemctl"), script).unwrap();
    support::must("chmod", &["+x", stub.join("systemctl").to_str().unwrap()]);
    let mut unit = a.agent(&etcd).param("service", "api.service").env(
        "PATH",
        &format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", stub.display()),
    );
    unit.params.remove("command");
    unit.params.remove("args");
    stale(None);
    let demote = unit.run("demote");
    assert_eq!(demote.code, 0, "{}", demote.stderr);
    assert_eq!(unit.run("stop").code, 0);
    // No files at all.
    assert_eq!(unit.run("demote").code, 0);
    assert_eq!(unit.run("stop").code, 0);
    assert!(alive(other.id()));
    let _ = other.kill();
    let _ = other.wait();
}

/// The guard processes in a node's namespace.
fn guards_in(node: &Node) -> Vec<u32> {
    support::sh("ip", &["netns", "pids", &node.ns.name])
        .stdout
        .split(|b| *b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok()?.trim().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let argv: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                    argv.contains(&&b"guard"[..]) && argv.contains(&&b"--resource"[..])
                })
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn with_the_run_directory_wiped_the_guard_is_still_found_and_never_doubled() {
    let mut etcd = EtcdCluster::new("gpw");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let pid = a.guard_status(&agent).expect("guard answers").pid;
    assert_eq!(guards_in(&a), vec![pid]);
    std::fs::remove_dir_all(agent.run_dir.join("api")).unwrap();
    let monitor = agent.run("monitor");
    assert_eq!(monitor.code, 8, "still promoted: {}", monitor.stderr);
    let again = agent.run("promote");
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(guards_in(&a), vec![pid], "the same guard, no second one");
    let demote = agent.run("demote");
    assert_eq!(demote.code, 0, "{}", demote.stderr);
    assert!(
        support::wait_for(Duration::from_secs(3), || !alive(pid)),
        "the guard stepped down and exited"
    );
    assert!(!a.holds_vip() && a.service_pids().is_empty());
    assert!(etcd.get(KEY).is_none(), "released");
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
fn a_unit_that_will_not_stop_keeps_the_key_and_demote_says_so_within_its_timeout() {
    let mut etcd = EtcdCluster::new("gpf");
    let a = Node::new(&mut etcd, "na");
    let stub = a.state.join("bin");
    std::fs::create_dir_all(&stub).unwrap();
    // A unit whose stop (and kill) does nothing: it goes only once `stoppable` exists.
    let script = format!(
        r#"#!/bin/sh
st={state}
case "$1" in
start) touch $st/unit.active ;;
stop|kill) [ -f $st/stoppable ] && rm -f $st/unit.active; exit 0 ;;
show) if [ -f $st/unit.active ] && [ ! -f $st/stoppable ]; then state=deactivating; else state=inactive; fi
      printf 'LoadState=loaded\nActiveState=%s\nSubState=x\n' $state ;;
esac
"#,
        state = a.state.display()
    );
    std::fs::write(stub.join("systemctl"), script).unwrap();
    support::must("chmod", &["+x", stub.join("systemctl").to_str().unwrap()]);
    let mut agent = a.agent(&etcd).param("service", "api.service").env(
        "PATH",
        &format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", stub.display()),
    );
    for p in ["command", "args", "health_url", "health_cacert"] {
        agent.params.remove(p);
    }
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}\n{}", promote.stderr, a.log());
    let (_, lease, _) = etcd.get(KEY).expect("key");
    let short = agent.env("OCF_RESKEY_CRM_meta_timeout", "8000");
    let begun = Instant::now();
    let demote = short.run("demote");
    let took = begun.elapsed();
    eprintln!(
        "unit that will not stop: demote {} in {took:?}: {:?}",
        demote.code,
        demote.reasons()
    );
    assert!(
        took < Duration::from_secs(8),
        "within its timeout: {took:?}"
    );
    demote.expect(1, "not confirmed stopped");
    assert!(!a.holds_vip(), "the VIP went first");
    assert_eq!(
        etcd.get(KEY).map(|k| k.1),
        Some(lease.clone()),
        "the key stays ours while the unit may serve"
    );
    // Still held three seconds later: the guard renews, it does not let the lease go.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(etcd.get(KEY).map(|k| k.1), Some(lease));
    // The unit stops at last: the guard confirms it, and only then releases.
    std::fs::write(a.state.join("stoppable"), "").unwrap();
    assert!(
        support::wait_for(Duration::from_secs(10), || etcd.get(KEY).is_none()),
        "released once the unit is down"
    );
    assert_eq!(short.run("demote").code, 0);
    assert_eq!(short.run("stop").code, 0);
}

#[test]
fn promote_warns_of_an_etcd_with_issue_15247_and_validate_of_a_margin_too_small_for_slew() {
    let mut etcd = EtcdCluster::new("gpe");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    let version = support::etcd::etcd_version();
    let old = hamaster::lease::etcd::has_lease_revoke_fix(&version) == Some(false);
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let warned = support::wait_for(Duration::from_secs(3), || a.log().contains("issue 15247"));
    eprintln!("etcd {version}: warned {warned}");
    assert_eq!(
        warned, old,
        "a warning exactly for an etcd without the fix ({version})"
    );
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);

    let loose = agent.param("lease_ttl", "30").param("lease_margin", "1");
    assert_eq!(loose.run("validate-all").code, 0, "allowed");
    assert!(
        a.log()
            .contains("lease_margin=1 does not cover the clocks' largest slew at lease_ttl=30"),
        "{}",
        a.log()
    );
}

/// A stand-in `systemctl` for a unit whose stop takes `stop_secs` (its ExecStop), during which
/// systemctl cannot reach systemd (PID 1 re-executing during a package update): `show` prints
/// nothing on stdout, the bus error on stderr, and exits 1. The unit's process is a `sleep`
/// whose pid is in `unit.pid`; `stopped` holds when (Unix time) it was killed.
fn systemctl_blind_during_stop(dir: &std::path::Path, stop_secs: u32) -> String {
    let stub = dir.join("bin");
    std::fs::create_dir_all(&stub).unwrap();
    let script = format!(
        r#"#!/bin/sh
st={state}
case "$1" in
start) setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > $st/unit.pid ;;
stop) kill -0 "$(cat $st/unit.pid 2>/dev/null)" 2>/dev/null || exit 0
      [ -f $st/stopping ] && exit 0
      touch $st/stopping
      ( sleep {stop_secs}; date +%s.%N > $st/stopped; kill "$(cat $st/unit.pid)"
        rm -f $st/stopping ) </dev/null >/dev/null 2>&1 & ;;
kill) ;;
show) if [ -f $st/stopping ]; then
        echo "Failed to connect to bus: Connection refused" >&2; exit 1
      fi
      if kill -0 "$(cat $st/unit.pid 2>/dev/null)" 2>/dev/null; then s=active; else s=inactive; fi
      printf 'LoadState=loaded\nActiveState=%s\nSubState=x\n' $s ;;
esac
"#,
        state = dir.display()
    );
    std::fs::write(stub.join("systemctl"), script).unwrap();
    support::must("chmod", &["+x", stub.join("systemctl").to_str().unwrap()]);
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", stub.display())
}

/// The seen bug: a unit counted as stopped because systemctl could not say. At the default
/// lease settings, service= mode, systemctl blind for the whole of an 8 s stop: demote with a
/// 6 s timeout says within it that the unit is not confirmed stopped (and why), the key stays
/// until the unit's process is gone (seen from etcd: at its deletion the process was dead),
/// and is released after.
#[test]
fn a_systemctl_that_cannot_answer_during_an_8s_stop_never_lets_the_key_go_first() {
    let mut etcd = EtcdCluster::new("gpb");
    let a = Node::new(&mut etcd, "na");
    let path = systemctl_blind_during_stop(&a.state, 8);
    let mut agent = a
        .agent(&etcd)
        .param("service", "api.service")
        .env("PATH", &path);
    for p in [
        "command",
        "args",
        "health_url",
        "health_cacert",
        "lease_ttl",
        "lease_margin",
    ] {
        agent.params.remove(p);
    }
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}\n{}", promote.stderr, a.log());
    let unit_pid: u32 = std::fs::read_to_string(a.state.join("unit.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(unit_pid));
    let watch = support::etcd::KeyWatch::start(&etcd, KEY, move || alive(unit_pid));
    let short = agent.env("OCF_RESKEY_CRM_meta_timeout", "6000");
    let begun = Instant::now();
    let demote = short.run("demote");
    let took = begun.elapsed();
    eprintln!(
        "blind systemctl: demote {} in {took:?}: {:?}",
        demote.code,
        demote.reasons()
    );
    assert!(
        took < Duration::from_secs(6),
        "within its timeout: {took:?}"
    );
    demote.expect(
        1,
        "cannot tell: systemctl show exited 1: Failed to connect to bus",
    );
    assert!(!a.holds_vip(), "the VIP went first");
    assert!(
        etcd.get(KEY).is_some(),
        "the key stays while the unit may serve"
    );
    let deleted = watch
        .first(Duration::from_secs(20), |e| e.kind == "DELETE")
        .expect("released once the unit is gone");
    assert!(
        !deleted.found,
        "the key was deleted while the unit's process still ran"
    );
    let stopped: f64 = std::fs::read_to_string(a.state.join("stopped"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        deleted.wall >= stopped,
        "deleted at {}, the unit's process killed at {stopped}",
        deleted.wall
    );
    eprintln!(
        "blind systemctl: key deleted {:.3} s after the unit's process was killed",
        deleted.wall - stopped
    );
    let again = short.run("demote");
    assert_eq!(again.code, 0, "{}\n{}", again.stderr, a.log());
    assert_eq!(short.run("stop").code, 0);
}

/// A stale state file names a pid whose process group now belongs to a double-forked daemon
/// (its leader gone, a member living on): not proven ours, so never signalled; demote says
/// it cannot tell rather than pretending.
#[test]
fn a_double_forked_daemon_under_a_recorded_group_id_is_never_signalled() {
    let mut etcd = EtcdCluster::new("gpd");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    let dir = agent.run_dir.join("api");
    std::fs::create_dir_all(&dir).unwrap();
    // setsid makes the shell a group leader; it forks the daemon and exits.
    let out = support::sh(
        "setsid",
        &[
            "sh",
            "-c",
            "sleep 1000 </dev/null >/dev/null 2>&1 & echo $$ $!",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut ids = text.split_whitespace().map(|w| w.parse::<u32>().unwrap());
    let (leader, daemon) = (ids.next().unwrap(), ids.next().unwrap());
    assert!(support::wait_for(Duration::from_secs(2), || !alive(leader)));
    assert_eq!(hamaster::procfs::process_group(daemon), Some(leader));
    let state = serde_json::json!({
        "guard_pid": 999_999, "node": "na", "key": KEY, "lease_id": 12345,
        "fencing_token": 7, "service_pid": leader, "service_start": 4242,
        "vip_added": false, "fenced": null
    });
    std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    std::fs::write(dir.join("promoted"), "").unwrap();
    agent.run("demote").expect(
        1,
        "lives on without its recorded leader: not proven ours, not signalled",
    );
    assert!(alive(daemon), "never signalled");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Every step of every action within its CRM_meta_timeout, with two of three etcd members
/// silent (links down: nothing answers) and a unit whose stop takes 3 s: monitor at check
/// level 20, demote and stop (target/action-durations.tsv records each against its timeout).
#[test]
fn with_two_etcd_members_silent_and_a_slow_unit_every_action_ends_in_its_timeout() {
    let mut etcd = EtcdCluster::new("gps");
    let a = Node::new(&mut etcd, "na");
    let path = systemctl_blind_during_stop(&a.state, 3);
    let mut agent = a
        .agent(&etcd)
        .param("service", "api.service")
        .env("PATH", &path);
    for p in [
        "command",
        "args",
        "health_url",
        "health_cacert",
        "lease_ttl",
        "lease_margin",
    ] {
        agent.params.remove(p);
    }
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}\n{}", promote.stderr, a.log());
    let leader = etcd.leader().expect("an etcd leader");
    let silent: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    for &i in &silent {
        etcd.cut_member(i);
    }
    // Without a quorum etcd answers nothing definite: the guard holds its lease meanwhile.
    for (action, level, timeout) in [("monitor", "20", 4000), ("demote", "0", 10_000)] {
        let run = agent
            .clone()
            .env("OCF_RESKEY_CRM_meta_timeout", &timeout.to_string())
            .env("OCF_CHECK_LEVEL", level);
        let begun = Instant::now();
        let r = run.run(action);
        let took = begun.elapsed();
        eprintln!(
            "{action} (level {level}) with etcd's quorum gone: {} in {took:?}",
            r.code
        );
        assert!(
            took < Duration::from_millis(timeout),
            "{action}: {took:?} of {timeout} ms: {}",
            r.stderr
        );
    }
    let stop = agent.env("OCF_RESKEY_CRM_meta_timeout", "10000");
    let begun = Instant::now();
    let r = stop.run("stop");
    eprintln!(
        "stop with etcd's quorum gone: {} in {:?}",
        r.code,
        begun.elapsed()
    );
    assert!(begun.elapsed() < Duration::from_secs(10), "{}", r.stderr);
    for &i in &silent {
        etcd.heal_member(i);
    }
    assert!(etcd.wait_healthy(Duration::from_secs(30)));
    // Once etcd is back, nothing is left behind: stop ends clean.
    assert!(support::wait_for(Duration::from_secs(20), || stop
        .run("stop")
        .code
        == 0));
}

/// The fencing side's kernel effects on several VIPs (extra_vips), with real netlink in a
/// namespace: every address added with the lifetime, extended, and removed in one step; an
/// address gone with its interface counts as removed.
#[test]
fn the_fencing_side_adds_extends_and_removes_every_vip_together() {
    use hamaster::guard::fence::Host;
    use hamaster::guard::machine::Kernel;
    let ns = support::Netns::new("hx");
    for (dev, peer) in [("lan0", "lan0p"), ("lan1", "lan1p")] {
        ns.ip(&["link", "add", dev, "type", "veth", "peer", "name", peer]);
        ns.ip(&["link", "set", peer, "up"]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    let (v4, v6) = ("192.0.2.10", "2001:db8:71::10");
    let name = ns.name.clone();
    let lifetimes =
        move || [("lan0", v4), ("lan1", v6)].map(|(dev, ip)| support::valid_lft_in(&name, dev, ip));
    let text = format!(
        "ip={v4} cidr_netmask=24 nic=lan0 nodad=true; ip={v6} cidr_netmask=64 nic=lan1 nodad=true"
    );
    let name = ns.name.clone();
    let lifetimes2 = lifetimes.clone();
    let ns_ip = move |args: &[&str]| {
        let mut full = vec!["-n", name.as_str()];
        full.extend_from_slice(args);
        std::process::Command::new("ip")
            .args(&full)
            .status()
            .unwrap()
    };
    let ns_name = ns.name.clone();
    std::thread::spawn(move || {
        support::enter_netns(&ns_name);
        let configs =
            hamaster::vip::VipConfig::list_from(&hamaster::params::master::EXTRA_VIPS, &text, 8)
                .unwrap();
        let addrs = configs
            .into_iter()
            .map(|c| {
                let r = hamaster::vip::up::prepare(c).unwrap();
                r.vip.new_addr(&r.target)
            })
            .collect();
        let mut host = Host::new(addrs, None).unwrap();
        host.add_vip(5).unwrap();
        assert_eq!(
            lifetimes2(),
            [Some(5), Some(5)],
            "both added with the lifetime"
        );
        // The status's look at every VIP at once: usable means on a link that is up, as
        // configured (interface, prefix); a missing interface or another prefix is absent.
        use hamaster::presence::Presence;
        let look = |extra: &str| {
            let list = |t: &str| {
                hamaster::vip::VipConfig::list_from(&hamaster::params::master::EXTRA_VIPS, t, 8)
                    .unwrap()
            };
            let mut c = list(&text);
            c.extend(list(extra));
            hamaster::vip::usable_all(&c)
        };
        let others = "ip=192.0.2.10 cidr_netmask=25 nic=lan0; ip=2001:db8:71::10 nic=lan9";
        let both = [Presence::Present, Presence::Present];
        let absent = Presence::Absent;
        assert_eq!(
            look(others),
            [
                both[0].clone(),
                both[1].clone(),
                absent.clone(),
                absent.clone()
            ]
        );
        assert!(ns_ip(&["link", "set", "lan0", "down"]).success());
        assert_eq!(
            look(others)[..2],
            [absent.clone(), Presence::Present],
            "an IPv4 address on a downed link is not usable"
        );
        assert!(ns_ip(&["link", "set", "lan0", "up"]).success());
        assert_eq!(look(others)[..2], both);
        host.extend_vip(3).unwrap();
        assert_eq!(lifetimes2(), [Some(3), Some(3)], "both extended");
        host.remove_vip().unwrap();
        assert_eq!(lifetimes2(), [None, None], "both removed");
        // One already gone counts as removed.
        host.add_vip(5).unwrap();
        assert!(ns_ip(&["addr", "del", &format!("{v6}/64"), "dev", "lan1"]).success());
        host.remove_vip().unwrap();
        assert_eq!(lifetimes2(), [None, None]);
        // The first address's interface deleted, and the address with it: gone counts as
        // removed (ENODEV), never as a removal to try again forever; the second is removed.
        host.add_vip(5).unwrap();
        assert!(ns_ip(&["link", "del", "lan0"]).success());
        host.remove_vip().unwrap();
        assert_eq!(lifetimes2()[1], None, "the second removed");
    })
    .join()
    .unwrap();
    drop(lifetimes);
}
