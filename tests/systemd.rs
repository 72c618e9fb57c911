//! service= mode against a real systemd (Debian trixie's systemd 257 as PID 1 of its own
//! namespaces in the node's network namespace: lab::systemd), real etcd, the default lease
//! settings: a unit whose ExecStop is slow, the same with `systemctl daemon-reexec` during the
//! stop (systemctl cannot reach PID 1 while it re-executes: "cannot tell", never "stopped"),
//! units that fail to start, and the packaged takeover unit (Type=notify: ready once the master
//! serves; static). The key's deletion is seen from etcd's side, the unit's
//! processes from its cgroup on the host. `make check-systemd` (in `make check`) runs these.

use hamaster_lab as support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::etcd::{EtcdCluster, KeyWatch};
use support::master::Node;
use support::phases::KEY;
use support::systemd::{unit_processes, Systemd};
use support::Agent;

/// The test's units: `api.service` runs until stopped and takes 8 s to stop (ExecStop);
/// `api-oneshot.service` fails its start; `api-false.service` starts and dies at once.
fn units(dir: &Path) -> std::path::PathBuf {
    let units = dir.join("units");
    std::fs::create_dir_all(&units).unwrap();
    let write = |name: &str, text: &str| std::fs::write(units.join(name), text).unwrap();
    write(
        "api.service",
        "[Unit]\nDescription=a master whose stop takes 8 s\n[Service]\n\
         ExecStart=/bin/sleep 100000\nExecStop=/bin/sleep 8\nTimeoutStopSec=30\n",
    );
    write(
        "api-oneshot.service",
        "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo failing; exit 3'\n",
    );
    write("api-false.service", "[Service]\nExecStart=/bin/false\n");
    units
}

/// The packaged unit `name` among `units`, its paths pointed at the test's binary and the
/// node's files, nothing else changed.
fn install_packaged(units: &Path, a: &Node, name: &str) {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("packaging")
            .join(name),
    )
    .unwrap();
    let bin = support::OcfDir::get().root().join("hamaster");
    let unit = shipped
        .replace("/usr/sbin/hamaster", &bin.display().to_string())
        .replace("/etc/hamaster/", &format!("{}/", a.state.display()));
    assert_ne!(unit, shipped);
    std::fs::write(units.join(name), unit).unwrap();
}

/// The agent for `unit`, at the default lease settings, inside the node's systemd.
fn agent<'a>(a: &'a Node, etcd: &EtcdCluster, sd: &Systemd, unit: &str) -> Agent<'a> {
    let mut agent = sd.agent(a.agent(etcd).param("service", unit));
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
    agent
}

fn booted(tag: &str) -> (EtcdCluster, Node) {
    let mut etcd = EtcdCluster::new(tag);
    let a = Node::new(&mut etcd, "na");
    (etcd, a)
}

/// Demotes while `during` runs beside it; returns the demote, how long it took, and the
/// key's deletion as etcd saw it with whether the unit still had a process then.
fn demote_watched(
    etcd: &EtcdCluster,
    sd: &Systemd,
    agent: &Agent,
    during: impl FnOnce() + Send,
) -> (support::Run, Duration, support::etcd::KeyEvent<bool>) {
    let cgroup = sd.cgroup();
    let watch = KeyWatch::start(etcd, KEY, move || {
        !unit_processes(&cgroup, "api.service").is_empty()
    });
    let (demote, took) = std::thread::scope(|s| {
        let begun = Instant::now();
        let demoting = s.spawn(|| agent.run("demote"));
        during();
        let run = demoting.join().unwrap();
        (run, begun.elapsed())
    });
    let deleted = watch
        .first(Duration::from_secs(30), |e| e.kind == "DELETE")
        .expect("the key was released");
    (demote, took, deleted)
}

#[test]
#[ignore = "boots systemd in a namespace: make check-systemd"]
fn a_unit_whose_stop_takes_8_s_is_gone_before_the_key_is_released() {
    let (etcd, a) = booted("sds");
    let sd = Systemd::boot(&a.ns, &units(&a.state), &[&a.state, &a.ns.run_dir()]);
    let agent = agent(&a, &etcd, &sd, "api.service");
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}\n{}", promote.stderr, a.log());
    assert_eq!(sd.property("api.service", "ActiveState"), "active");
    assert!(!sd.unit_processes("api.service").is_empty());
    assert_eq!(agent.run("monitor").code, 8);
    let (demote, took, deleted) = demote_watched(&etcd, &sd, &agent, || {});
    eprintln!("slow ExecStop: demote {} in {took:?}", demote.code);
    assert_eq!(demote.code, 0, "{}\n{}", demote.stderr, a.log());
    assert!(
        took >= Duration::from_secs(8),
        "it waited for the stop: {took:?}"
    );
    assert!(
        !deleted.found,
        "the key went while the unit still had processes"
    );
    assert!(sd.unit_processes("api.service").is_empty());
    assert_eq!(sd.property("api.service", "ActiveState"), "inactive");
    assert!(!a.holds_vip());
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
#[ignore = "boots systemd in a namespace: make check-systemd"]
fn a_daemon_reexec_during_the_stop_is_cannot_tell_and_the_key_waits_for_the_unit() {
    let (etcd, a) = booted("sdr");
    let sd = Systemd::boot(&a.ns, &units(&a.state), &[&a.state, &a.ns.run_dir()]);
    let agent = agent(&a, &etcd, &sd, "api.service");
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}\n{}", promote.stderr, a.log());
    // PID 1 re-executes five times while the unit's ExecStop runs (as a package update does).
    let (demote, took, deleted) = demote_watched(&etcd, &sd, &agent, || {
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(900));
            let out = sd.systemctl(&["daemon-reexec"]);
            assert!(out.status.success(), "daemon-reexec: {out:?}");
        }
    });
    eprintln!(
        "daemon-reexec during the stop: demote {} in {took:?}",
        demote.code
    );
    let log = a.log();
    assert!(
        log.contains("cannot tell whether the service is stopped"),
        "the re-executions were seen as what they are:\n{log}"
    );
    assert_eq!(demote.code, 0, "{}\n{log}", demote.stderr);
    assert!(
        !deleted.found,
        "the key went while the unit still had processes"
    );
    assert!(sd.unit_processes("api.service").is_empty());
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
#[ignore = "boots systemd in a namespace: make check-systemd"]
fn a_unit_that_fails_to_start_fails_promote_and_leaves_nothing_up() {
    let (etcd, a) = booted("sdf");
    let sd = Systemd::boot(&a.ns, &units(&a.state), &[&a.state, &a.ns.run_dir()]);
    // systemctl start itself fails (a oneshot that exits 3).
    let oneshot = agent(&a, &etcd, &sd, "api-oneshot.service");
    assert_eq!(oneshot.run("start").code, 0);
    oneshot
        .run("promote")
        .expect(1, "systemctl start api-oneshot.service failed");
    assert!(!a.holds_vip(), "nothing raised stays up");
    assert!(etcd.get(KEY).is_none(), "the key was given back");
    assert_eq!(sd.property("api-oneshot.service", "ActiveState"), "failed");
    assert_eq!(oneshot.run("stop").code, 0);
    // The start succeeds, the unit dies at once: never a healthy leader; promote says why
    // within its timeout and undoes itself.
    let dies =
        agent(&a, &etcd, &sd, "api-false.service").env("OCF_RESKEY_CRM_meta_timeout", "15000");
    assert_eq!(dies.run("start").code, 0);
    let begun = Instant::now();
    dies.run("promote")
        .expect(1, "api-false.service is not active");
    assert!(begun.elapsed() < Duration::from_secs(15));
    assert!(!a.holds_vip());
    assert!(
        support::wait_for(Duration::from_secs(10), || etcd.get(KEY).is_none()),
        "the key was given back"
    );
    assert_eq!(dies.run("stop").code, 0);
}

/// The packaged hamaster-takeover@.service (its paths pointed at the test's binary and
/// files, nothing else changed) under a real systemd: `systemctl start` returns only once the
/// master serves (Type=notify: key held as etcd shows it, VIP on the node, service active);
/// the unit cannot be enabled (static: no [Install]); `systemctl stop` releases everything;
/// a takeover that refuses (a resource this etcd has never seen) fails the start, with
/// nothing taken.
#[test]
#[ignore = "boots systemd in a namespace: make check-systemd"]
fn the_takeover_unit_is_ready_once_the_master_serves_and_releases_on_stop() {
    let (etcd, a) = booted("sdt");
    let units = units(&a.state);
    install_packaged(&units, &a, "hamaster-takeover@.service");
    // A resource new to this etcd (--force), and the node's name as the lab's.
    std::fs::write(
        a.state.join("api.takeover.env"),
        "TAKEOVER_ARGS=--force --node na\n",
    )
    .unwrap();
    let sd = Systemd::boot(&a.ns, &units, &[&a.state, &a.ns.run_dir()]);
    let agent = agent(&a, &etcd, &sd, "api.service");
    a.config_file(&agent);
    assert_eq!(
        sd.property("hamaster-takeover@api.service", "UnitFileState"),
        "static",
        "no [Install]: it cannot be enabled"
    );

    let begun = Instant::now();
    let start = sd.systemctl(&["start", "hamaster-takeover@api.service"]);
    let took = begun.elapsed();
    // Read at once, before anything else can happen: start returned when the master served.
    let key = etcd.get(KEY);
    let vip = a.holds_vip();
    let service = sd.property("api.service", "ActiveState");
    assert!(
        start.status.success(),
        "systemctl start: {}",
        String::from_utf8_lossy(&start.stderr)
    );
    eprintln!("systemctl start hamaster-takeover@api returned after {took:?}");
    assert_eq!(key.map(|k| k.0).as_deref(), Some("na"), "the key held");
    assert!(vip, "the VIP up when start returned");
    assert_eq!(service, "active", "the service running when start returned");
    assert_eq!(
        sd.property("hamaster-takeover@api.service", "ActiveState"),
        "active"
    );
    assert!(sd
        .property("hamaster-takeover@api.service", "StatusText")
        .contains("key held, VIP up, service running"));

    let stop = sd.systemctl(&["stop", "hamaster-takeover@api.service"]);
    assert!(stop.status.success(), "{stop:?}");
    assert!(etcd.get(KEY).is_none(), "the key given back");
    assert!(!a.holds_vip());
    assert_eq!(sd.property("api.service", "ActiveState"), "inactive");
    assert_eq!(
        sd.property("hamaster-takeover@api.service", "ActiveState"),
        "inactive",
        "stopped, not failed"
    );

    // A resource this etcd has never seen, without --force: the start fails, nothing taken.
    std::fs::copy(a.state.join("api.toml"), a.state.join("apiserver.toml")).unwrap();
    std::fs::write(
        a.state.join("apiserver.takeover.env"),
        "TAKEOVER_ARGS=--node na\n",
    )
    .unwrap();
    let refused = sd.systemctl(&["start", "hamaster-takeover@apiserver.service"]);
    assert!(!refused.status.success(), "the refusal fails the start");
    assert_eq!(
        sd.property("hamaster-takeover@apiserver.service", "ActiveState"),
        "failed"
    );
    assert!(
        etcd.get(&support::API_KEY.replace("/api/", "/apiserver/"))
            .is_none()
            && !a.holds_vip()
    );
}

/// The packaged hamaster-campaign@.service (its paths pointed at the test's binary and
/// files, nothing else changed) under a real systemd: it can be enabled; once started, the
/// campaign takes the free key and the master serves (key as etcd shows it, VIP, service
/// active); killed outright, it is restarted and stops the unit the dead one left before it
/// leads again; `systemctl stop` steps it down — service, VIP, key — and the unit ends inactive,
/// not failed; a configuration the campaign refuses (etcd_outage=hold) fails the unit once,
/// never restarted, with nothing taken.
#[test]
#[ignore = "boots systemd in a namespace: make check-systemd"]
fn the_campaign_unit_leads_once_started_and_steps_down_on_stop() {
    let (etcd, a) = booted("sdc");
    let units = units(&a.state);
    install_packaged(&units, &a, "hamaster-campaign@.service");
    std::fs::write(
        a.state.join("api.campaign.env"),
        "CAMPAIGN_ARGS=--node na\n",
    )
    .unwrap();
    let sd = Systemd::boot(&a.ns, &units, &[&a.state, &a.ns.run_dir()]);
    let agent = agent(&a, &etcd, &sd, "api.service");
    a.config_file(&agent);

    let enable = sd.systemctl(&["enable", "hamaster-campaign@api.service"]);
    assert!(enable.status.success(), "{enable:?}");
    assert_eq!(
        sd.property("hamaster-campaign@api.service", "UnitFileState"),
        "enabled"
    );
    let start = sd.systemctl(&["start", "hamaster-campaign@api.service"]);
    assert!(start.status.success(), "{start:?}");
    assert!(
        support::wait_for(Duration::from_secs(20), || etcd
            .get(KEY)
            .is_some_and(|k| k.0 == "na")
            && a.holds_vip()
            && sd.property("api.service", "ActiveState") == "active"),
        "the campaign leads: key {:?}, VIP {}, service {}",
        etcd.get(KEY),
        a.holds_vip(),
        sd.property("api.service", "ActiveState")
    );

    // The campaign killed outright while it leads: the unit it started runs on (it is not in
    // the campaign's cgroup). systemd starts the campaign again, which stops that unit before
    // it stands: the service runs again later under a new invocation, never beside the old.
    let invocation = sd.property("api.service", "InvocationID");
    let kill = sd.systemctl(&[
        "kill",
        "--kill-whom=main",
        "--signal=KILL",
        "hamaster-campaign@api.service",
    ]);
    assert!(kill.status.success(), "{kill:?}");
    assert!(
        support::wait_for(Duration::from_secs(30), || sd
            .property("hamaster-campaign@api.service", "NRestarts")
            == "1"),
        "restarted by systemd"
    );
    assert!(
        support::wait_for(Duration::from_secs(60), || etcd
            .get(KEY)
            .is_some_and(|k| k.0 == "na")
            && a.holds_vip()
            && sd.property("api.service", "ActiveState") == "active"
            && sd.property("api.service", "InvocationID") != invocation),
        "leads again with the service started anew: key {:?}, VIP {}, service {} ({})",
        etcd.get(KEY),
        a.holds_vip(),
        sd.property("api.service", "ActiveState"),
        sd.property("api.service", "InvocationID")
    );

    let stop = sd.systemctl(&["stop", "hamaster-campaign@api.service"]);
    assert!(stop.status.success(), "{stop:?}");
    assert!(etcd.get(KEY).is_none(), "the key given back");
    assert!(!a.holds_vip());
    assert_eq!(sd.property("api.service", "ActiveState"), "inactive");
    assert_eq!(
        sd.property("hamaster-campaign@api.service", "ActiveState"),
        "inactive",
        "stopped, not failed"
    );

    // etcd_outage=hold: refused (exit 6), the unit failed and not restarted.
    let toml = std::fs::read_to_string(a.state.join("api.toml")).unwrap();
    let held: String = toml
        .lines()
        .filter(|l| !l.starts_with("etcd_outage"))
        .chain(["etcd_outage = \"hold\""])
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(a.state.join("apihold.toml"), held).unwrap();
    let _ = sd.systemctl(&["start", "hamaster-campaign@apihold.service"]);
    assert!(
        support::wait_for(Duration::from_secs(10), || sd
            .property("hamaster-campaign@apihold.service", "ActiveState")
            == "failed"),
        "the refusal fails the unit"
    );
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        sd.property("hamaster-campaign@apihold.service", "NRestarts"),
        "0",
        "a configuration a restart cannot mend is not retried"
    );
    assert_eq!(
        sd.property("hamaster-campaign@apihold.service", "ExecMainStatus"),
        "6"
    );
    assert!(
        etcd.get(&support::API_KEY.replace("/api/", "/apihold/"))
            .is_none()
            && !a.holds_vip()
    );
}

/// command= mode under a real systemd: the command's output (stdout and stderr) is in the
/// journal under the resource's name and the command's pid (`journalctl -t api`), as a unit's
/// would be, and not in the agent's log (Pacemaker's log file). A flood of output is cut at
/// the output's own rate limit (service::output::BURST lines per WINDOW) and what was dropped
/// is said in the service's stream when the next window's first line comes.
#[test]
#[ignore = "boots systemd in a namespace: make check-systemd"]
fn a_commands_output_goes_to_the_journal_under_the_resources_name() {
    let (etcd, a) = booted("sdj");
    let units = units(&a.state);
    let sd = Systemd::boot(&a.ns, &units, &[&a.state, &a.ns.run_dir()]);
    let mut agent = sd.agent(a.agent(&etcd).param("command", "/bin/sh").param(
        "args",
        "-c 'echo api says hello; echo api warns >&2; seq -f \"flood %g\" 2500; sleep 11; \
         echo api later; exec sleep 100000'",
    ));
    for p in ["health_url", "health_cacert", "lease_ttl", "lease_margin"] {
        agent.params.remove(p);
    }
    assert_eq!(agent.run("start").code, 0);
    let run = agent.run("promote");
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, a.log());
    let journal = |format: &str| {
        let out = sd
            .command("journalctl")
            .args(["-t", "api", "--no-pager", "-o", format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        support::wait_for(Duration::from_secs(10), || {
            let text = journal("cat");
            text.contains("api says hello") && text.contains("api warns")
        }),
        "journalctl -t api: {}\n{}",
        journal("cat"),
        a.log()
    );
    // 2 + 2500 lines at once: the first window takes hamaster's BURST (1000) of them.
    assert_eq!(hamaster::service::output::BURST, 1000);
    assert!(
        support::wait_for(Duration::from_secs(25), || journal("cat")
            .contains("api later")),
        "{}",
        journal("cat")
    );
    // Under the service's pid (inside systemd's pid namespace, as the guard sees it): the
    // shell's, which execs sleep after its last line.
    let mut pid = String::new();
    let one_sleep = support::wait_for(Duration::from_secs(5), || {
        let pidof = sd.command("pidof").arg("sleep").output().unwrap();
        pid = String::from_utf8_lossy(&pidof.stdout).trim().to_string();
        !pid.is_empty() && !pid.contains(' ')
    });
    assert!(one_sleep, "one sleep: {pid:?}");
    let entries = journal("json");
    let others: Vec<&str> = entries
        .lines()
        .filter(|l| !l.contains(&format!("\"SYSLOG_PID\":\"{pid}\"")))
        .collect();
    assert!(
        others.is_empty(),
        "{} entries under another pid: {:?}",
        others.len(),
        others.first()
    );
    assert!(
        !a.log().contains("api says hello"),
        "the service's output is not in the agent's log: {}",
        a.log()
    );
    let text = journal("cat");
    let floods = text.lines().filter(|l| l.starts_with("flood ")).count();
    assert!(
        floods == 998
            && text.contains("hamaster suppressed 1502 lines of this service's output")
            && text.find("suppressed") < text.find("api later"),
        "{floods} flood lines: {}",
        text.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
}
