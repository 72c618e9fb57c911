//! `hamaster takeover` / `release` and the runbook (docs/runbook.md) against a real etcd
//! cluster in namespaces: the runbook's commands are run here in its order.

use hamaster_lab as support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::etcd::EtcdCluster;
use support::master::{Node, VIP};

const KEY: &str = support::API_KEY;

/// The `$ hamaster …` lines of docs/runbook.md, in order.
fn runbook_commands() -> Vec<Vec<String>> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/runbook.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("$ hamaster "))
        .map(|l| shell_words::split(l).unwrap())
        .collect()
}

/// `hamaster takeover --config CONFIG --wait 10` on the node, in the background.
fn spawn_takeover(
    a: &Node,
    agent: &support::Agent,
    config: &std::path::Path,
) -> std::process::Child {
    a.cli(
        agent,
        &[
            "takeover",
            "--config",
            config.to_str().unwrap(),
            "--wait",
            "10",
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

/// Sends SIG`sig` to a running takeover and waits (bounded) until it has exited.
fn signal_and_wait(child: &mut std::process::Child, sig: &str) {
    support::must("kill", &[&format!("-{sig}"), &child.id().to_string()]);
    assert!(
        support::wait_for(Duration::from_secs(15), || matches!(
            child.try_wait(),
            Ok(Some(_))
        )),
        "takeover ended after SIG{sig}"
    );
}

#[test]
fn the_runbook_commands_take_over_and_hand_back() {
    let mut etcd = EtcdCluster::new("rb");
    let old = Node::new(&mut etcd, "nb");
    let standby = Node::new(&mut etcd, "na");
    // The old master: promoted by the agent, then its host crashes with the key still leased.
    let old_agent = old.agent(&etcd);
    assert_eq!(old_agent.run("start").code, 0);
    let run = old_agent.run("promote");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (_, _, old_token) = etcd.get(KEY).unwrap();
    support::kill_all_in(&old.ns.name);
    old.ns.ip(&["addr", "flush", "dev", "lan0"]);

    let agent = standby.agent(&etcd);
    let config = standby.config_file(&agent);
    let config = config.to_str().unwrap();
    let commands = runbook_commands();
    let verbs: Vec<&str> = commands.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        verbs,
        ["takeover", "status", "takeover", "status", "release"],
        "the runbook's steps"
    );
    assert!(commands[0].iter().any(|a| a == "--check"), "0. the drill");
    let args = |i: usize| -> Vec<String> {
        commands[i]
            .iter()
            .map(|a| a.replace("/etc/hamaster/api.toml", config))
            .collect()
    };

    // 0. The drill: every check passes, nothing is taken (the old master's key stays).
    let a = args(0);
    let drill = support::run_command(
        standby.cli(&agent, &a.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    assert_eq!(drill.code, 0, "{}{}", drill.stdout, drill.stderr);
    assert!(
        drill
            .stdout
            .contains("a takeover of api could go ahead here (nothing was taken)")
            && drill.stdout.contains(&format!(
                "ok      known        its leader key {KEY} is held by nb now"
            ))
            && drill
                .stdout
                .contains(&format!("ok      cluster      the leader key is {KEY}"))
            && drill
                .stdout
                .contains(&format!("ok      vip          {VIP}/24 would go on lan0")),
        "{}",
        drill.stdout
    );
    assert!(!drill.stdout.contains("PROBLEM"), "{}", drill.stdout);
    assert_eq!(etcd.get(KEY).map(|k| k.2), Some(old_token), "nothing taken");
    assert!(!standby.holds_vip() && standby.service_pids().is_empty());

    // 1. Detect.
    let a = args(1);
    let st = support::run_command(
        standby.cli(&agent, &a.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    assert_eq!(st.code, 0, "{}", st.stderr);
    assert!(
        st.stdout.contains("etcd holder     nb (lease 0x")
            && st.stdout.contains("this node       stopped"),
        "{}",
        st.stdout
    );

    // 3. Take over (in the foreground, so in the background here).
    let a = args(2);
    let log = standby.state.join("takeover.err");
    let mut takeover = standby
        .cli(&agent, &a.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    assert!(
        support::wait_for(Duration::from_secs(20), || standby.holds_vip()),
        "VIP raised: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let waited = t.elapsed();
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(
        err.contains("leader key held by nb (lease 0x"),
        "it showed who held the key: {err}"
    );
    assert!(
        err.contains(&format!(
            "api is known to etcd: its leader key {KEY} is held by nb now"
        )),
        "{err}"
    );
    assert!(
        waited > Duration::from_millis(500),
        "it waited for the stale lease ({waited:?})"
    );

    // 4. Verify (once the service has come up behind the VIP).
    let a = args(3);
    let mut st = support::run_command(
        standby.cli(&agent, &a.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    let healthy = support::wait_for(Duration::from_secs(10), || {
        st = support::run_command(
            standby.cli(&agent, &a.iter().map(String::as_str).collect::<Vec<_>>()),
        );
        st.stdout.contains("service         healthy")
    });
    assert!(healthy, "{}", st.stdout);
    assert!(
        st.stdout.contains("etcd holder     na (lease 0x") && st.stdout.contains("na is leader"),
        "{}",
        st.stdout
    );
    assert!(
        st.stdout
            .contains(&format!("VIP             {VIP} present"))
            && st.stdout.contains("service         healthy"),
        "{}",
        st.stdout
    );
    let (_, _, token) = etcd.get(KEY).unwrap();
    assert!(token > old_token, "fencing token {old_token} → {token}");
    assert_eq!(standby.tokens(), vec![token]);

    // 5. Hand back.
    let a = args(4);
    let rel = support::run_command(
        standby.cli(&agent, &a.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    assert_eq!(rel.code, 0, "{}", rel.stderr);
    assert!(rel.stdout.contains(&format!("released api: service stopped, VIP removed, leader key given back (fencing token was {token})")), "{}", rel.stdout);
    let exited = support::wait_for(Duration::from_secs(10), || {
        matches!(takeover.try_wait(), Ok(Some(_)))
    });
    assert!(exited, "takeover ends after release");
    assert_eq!(takeover.wait().unwrap().code(), Some(0));
    assert!(!standby.holds_vip() && standby.service_pids().is_empty() && etcd.get(KEY).is_none());
    let again = support::run_command(standby.cli(&agent, &["release", "--resource", "api"]));
    assert_eq!(again.code, 0, "release is idempotent");
    assert!(again.stdout.contains("nothing to release"));
}

#[test]
fn takeover_steps_down_on_a_signal_and_rejects_unknown_config_keys() {
    let mut etcd = EtcdCluster::new("tk");
    // The cluster's master has held the key before (its seen mark).
    mark_seen(&etcd, support::RESOURCE);
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    let config = a.config_file(&agent);
    // SIGTERM, as `systemctl stop hamaster-takeover@api` sends it; SIGHUP, as a dropped SSH
    // session sends it; SIGINT (Ctrl-C) and SIGQUIT (Ctrl-\\). The guard is the grandchild of
    // `ip netns exec … unshare sh`, which exec in place: the child is the guard.
    for sig in ["TERM", "HUP", "INT", "QUIT"] {
        let mut child = spawn_takeover(&a, &agent, &config);
        assert!(support::wait_for(Duration::from_secs(20), || a.holds_vip()
            && etcd.get(KEY).is_some()));
        signal_and_wait(&mut child, sig);
        assert!(
            !a.holds_vip() && a.service_pids().is_empty() && etcd.get(KEY).is_none(),
            "SIG{sig}: stepped down cleanly"
        );
    }

    // A wait no deadline can hold is refused before anything starts.
    let huge = support::run_command(a.cli(
        &agent,
        &[
            "takeover",
            "--config",
            config.to_str().unwrap(),
            "--wait",
            "18446744073709551615",
        ],
    ));
    assert_eq!(huge.code, 2, "{}", huge.stderr);
    assert!(huge.stderr.contains("--wait"), "{}", huge.stderr);
    assert!(
        !agent.run_dir.join("api/guard.pid").exists()
            && !agent.run_dir.join("api/state.json").exists(),
        "nothing left behind"
    );

    std::fs::write(
        &config,
        format!(
            "{}\nlease_ttll = 5\n",
            std::fs::read_to_string(&config).unwrap()
        ),
    )
    .unwrap();
    let run =
        support::run_command(a.cli(&agent, &["takeover", "--config", config.to_str().unwrap()]));
    assert_eq!(run.code, 6);
    assert!(
        run.stderr.contains("unknown parameter lease_ttll"),
        "{}",
        run.stderr
    );
    assert!(etcd.get(KEY).is_none() && !a.holds_vip());

    // The agent's rule (crate::failure): a file this node lacks is 5, one that is wrong
    // everywhere 6, with the parameter and the value named.
    let plain = std::fs::read_to_string(&config)
        .unwrap()
        .replace("\nlease_ttll = 5\n", "\n")
        .replace("http://", "https://");
    let not_pem = std::env::temp_dir().join(support::unique("notpem"));
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let not_pem = not_pem.to_str().unwrap().to_string();
    for (cacert, code) in [(not_pem.as_str(), 6), ("/nonexistent/hamaster-ca.crt", 5)] {
        std::fs::write(&config, format!("{plain}etcd_cacert = \"{cacert}\"\n")).unwrap();
        let run = support::run_command(
            a.cli(&agent, &["takeover", "--config", config.to_str().unwrap()]),
        );
        assert_eq!(run.code, code, "etcd_cacert={cacert}: {}", run.stderr);
        let named = format!("hamaster takeover: parameter etcd_cacert=\"{cacert}\"");
        assert!(run.stderr.contains(&named), "{}", run.stderr);
    }
    let _ = std::fs::remove_file(&not_pem);
    assert!(etcd.get(KEY).is_none() && !a.holds_vip());
}

#[test]
fn takeover_refuses_where_this_hosts_cib_names_the_resource_unless_the_cluster_is_down() {
    let mut etcd = EtcdCluster::new("tcb");
    // The cluster's master has held the key before (its seen mark).
    mark_seen(&etcd, support::RESOURCE);
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    let config = a.config_file(&agent);
    // This host's CIB (a stand-in, bind-mounted in a private mount namespace) names the
    // resource; Pacemaker is not running.
    let cib = a.state.join("cib");
    std::fs::create_dir_all(&cib).unwrap();
    std::fs::write(
        cib.join("cib.xml"),
        r#"<cib><configuration><resources><clone id="api-clone"><primitive id="api" class="ocf" provider="hamaster" type="master"/></clone></resources></configuration></cib>"#,
    )
    .unwrap();
    assert!(
        std::path::Path::new("/var/lib/pacemaker/cib").is_dir(),
        "pacemaker's CIB directory (scripts/install-deps installs pacemaker)"
    );
    let takeover = |extra: &[&str]| {
        let mut cmd = std::process::Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &a.ns.name,
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount --bind \"$0\" /var/lib/pacemaker/cib && hostname na && exec \"$@\"",
            cib.to_str().unwrap(),
        ]);
        cmd.arg(support::hamaster_bin())
            .args([
                "takeover",
                "--config",
                config.to_str().unwrap(),
                "--wait",
                "10",
            ])
            .args(extra)
            .env("HAMASTER_RUN_DIR", &agent.run_dir)
            .stdin(Stdio::null());
        cmd
    };
    let refused = support::run_command(takeover(&[]));
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("manages api, though Pacemaker is not running here")
            && refused.stderr.contains("--cluster-down"),
        "{}",
        refused.stderr
    );
    assert!(etcd.get(KEY).is_none() && !a.holds_vip(), "nothing taken");
    // Confirmed: it takes over, and steps down on SIGTERM.
    let mut child = takeover(&["--cluster-down"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(support::wait_for(Duration::from_secs(20), || a.holds_vip()
        && etcd.get(KEY).is_some()));
    signal_and_wait(&mut child, "TERM");
    assert!(!a.holds_vip() && etcd.get(KEY).is_none());
}

#[test]
fn the_takeover_unit_never_stops_the_cluster_stack_nor_starts_at_boot() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/hamaster-takeover@.service"
    ))
    .unwrap();
    for line in unit.lines().filter(|l| !l.starts_with('#')) {
        let stops_the_stack = line.starts_with("Conflicts=")
            && (line.contains("pacemaker") || line.contains("corosync"));
        assert!(!stops_the_stack, "{line}");
    }
    assert!(
        unit.contains("$TAKEOVER_ARGS"),
        "the confirmation can be given"
    );
    assert!(
        !unit
            .lines()
            .any(|l| l.starts_with("[Install]") || l.starts_with("WantedBy")),
        "it cannot be enabled: a boot never takes over"
    );
    let value = |name: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name}= in the unit"))
            .to_string()
    };
    assert_eq!(value("Type"), "notify");
    let secs = |v: String| v.parse::<u64>().unwrap();
    let release_wait = value("ExecStop")
        .split("--wait ")
        .nth(1)
        .map(|w| secs(w.trim().to_string()))
        .expect("ExecStop names release's --wait");
    assert!(
        secs(value("TimeoutStopSec")) > release_wait,
        "the stop outlasts release's wait"
    );
    assert!(
        secs(value("TimeoutStartSec")) > 120,
        "the start outlasts takeover's default --wait"
    );
}

#[test]
fn agent_actions_beside_a_running_takeover_wait_then_fail_naming_it() {
    let mut etcd = EtcdCluster::new("tlk");
    // The cluster's master has held the key before (its seen mark).
    mark_seen(&etcd, support::RESOURCE);
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    let config = a.config_file(&agent);
    let mut child = spawn_takeover(&a, &agent, &config);
    assert!(support::wait_for(Duration::from_secs(20), || a.holds_vip()));
    // As `pcs resource debug-start` or `crm_resource --force-start` would run it: it waits
    // half its timeout for the lock, then gives up with who holds it.
    let agent = agent.env("OCF_RESKEY_CRM_meta_timeout", "3000");
    let beside = agent.run("start");
    beside.expect(1, "hamaster takeover");
    assert!(
        beside.elapsed >= Duration::from_millis(1400),
        "waited {:?}",
        beside.elapsed
    );
    assert!(a.holds_vip(), "the takeover is untouched");
    signal_and_wait(&mut child, "TERM");
    assert_eq!(agent.run("start").code, 0, "free once the takeover ended");
    assert_eq!(agent.run("stop").code, 0);
}

/// The cold standby during a hold (docs/runbook.md): the failsafe record names a node that
/// may be holding the master through an etcd outage, its key gone with the lease etcd let
/// go. Outside the cluster nothing can prove that node down: takeover waits, naming it and
/// what to say once it is down; with `--holder-down NODE` it takes over, and the record goes
/// with the old leadership.
#[test]
fn takeover_waits_while_a_failsafe_record_names_a_master_it_cannot_prove_down() {
    let mut etcd = EtcdCluster::new("fs");
    let standby = Node::new(&mut etcd, "na");
    let agent = standby.agent(&etcd);
    let config = standby.config_file(&agent);
    let config = config.to_str().unwrap();
    let record = r#"{"node":"nb","lease":"0x7","nodes":["na","nb"],"written_unix_ms":1}"#;
    let put = etcd.etcdctl(&["put", &record_key(), record]);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    assert!(etcd.get(KEY).is_none(), "no leader key: nb's lease ran out");

    let refused =
        support::run_command(standby.cli(&agent, &["takeover", "--config", config, "--wait", "3"]));
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(
            "the failsafe record names nb, which may be holding the master through an etcd outage"
        ) && refused.stderr.contains("--holder-down nb"),
        "it names the holder and what to say: {}",
        refused.stderr
    );
    assert!(
        !standby.holds_vip() && etcd.get(KEY).is_none(),
        "nothing taken"
    );

    // Another node confirmed down is no confirmation of nb.
    let wrong = support::run_command(standby.cli(
        &agent,
        &[
            "takeover",
            "--config",
            config,
            "--wait",
            "2",
            "--holder-down",
            "nc",
        ],
    ));
    assert_ne!(wrong.code, 0);
    assert!(etcd.get(KEY).is_none());

    let log = standby.state.join("takeover.err");
    let mut takeover = standby
        .cli(
            &agent,
            &[
                "takeover",
                "--config",
                config,
                "--wait",
                "10",
                "--holder-down",
                "nb",
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    assert!(
        support::wait_for(Duration::from_secs(20), || standby.holds_vip()),
        "VIP raised: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("nb confirmed down by the operator"), "{err}");
    assert_eq!(etcd.get(KEY).map(|k| k.0).as_deref(), Some("na"));
    // Outside the cluster this guard cannot hold: the old record went with its taking.
    let read = etcd.etcdctl(&["get", &record_key()]);
    assert!(
        String::from_utf8_lossy(&read.stdout).trim().is_empty(),
        "record left: {}",
        String::from_utf8_lossy(&read.stdout)
    );
    signal_and_wait(&mut takeover, "TERM");
    assert!(!standby.holds_vip() && etcd.get(KEY).is_none());
}

/// The seen mark of `resource`, as a guard writes it when it takes the key: that resource
/// has had a master in this etcd (in the lab's cluster).
fn mark_seen(etcd: &EtcdCluster, resource: &str) {
    mark_seen_in(etcd, support::CLUSTER_NAME, resource)
}

/// The seen mark of `resource` of the cluster named `cluster`.
fn mark_seen_in(etcd: &EtcdCluster, cluster: &str, resource: &str) {
    let seen = hamaster::lease::Seen {
        node: "nb".into(),
        at_unix_ms: hamaster::lease::clock::unix_ms(),
        by: "pacemaker".into(),
    };
    let put = etcd.etcdctl(&[
        "put",
        &hamaster::lease::seen_key(&scope_of(cluster), resource),
        &seen.to_json(),
    ]);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
}

/// `{etcd_prefix}/{cluster}` at the default prefix.
fn scope_of(cluster: &str) -> String {
    let prefix = hamaster::params::master::ETCD_PREFIX.default.unwrap();
    format!("{prefix}/{cluster}")
}

/// A standby whose file names the resource unlike the cluster (`apiserver.toml` for the
/// cluster's `api`) would lead beside the cluster's master under a key of its own: takeover
/// refuses a resource this etcd has never seen, names the ones it has, and goes ahead only
/// with --force; the drill says the same with exit 1 and takes nothing. Once the resource is
/// known (the cluster's master took its key), drill and takeover go ahead, and the takeover's
/// own taking leaves the seen mark, as etcd shows it.
#[test]
fn takeover_refuses_a_resource_this_etcd_has_never_seen_unless_forced() {
    let mut etcd = EtcdCluster::new("tsn");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    let config = a.config_file(&agent);
    let config = config.to_str().unwrap();
    // A file that does not name the cluster, on a host without corosync: there is no key to
    // take. Exit 6, the parameter named; nothing taken.
    let unnamed = config.replace(".toml", "-unnamed.toml");
    let text = std::fs::read_to_string(config).unwrap();
    let named = format!("cluster_name = \"{}\"\n", support::CLUSTER_NAME);
    assert!(text.contains(&named), "{text}");
    std::fs::write(&unnamed, text.replace(&named, "")).unwrap();
    for args in [&["takeover", "--force"][..], &["takeover", "--check"]] {
        let mut args = args.to_vec();
        args.extend(["--config", &unnamed, "--resource", "api"]);
        let run = support::run_command(a.cli(&agent, &args));
        let out = format!("{}{}", run.stdout, run.stderr);
        assert!(
            out.contains("cluster_name is not set and corosync-cmapctl does not answer")
                && run.code == if args[1] == "--check" { 1 } else { 6 },
            "{args:?}: exit {}: {out}",
            run.code
        );
    }
    assert!(etcd.get(KEY).is_none() && !a.holds_vip(), "nothing taken");

    // Refused with exit 1; the reason.
    let refusal = || {
        let r = support::run_command(a.cli(&agent, &["takeover", "--config", config]));
        assert_eq!(r.code, 1, "{}", r.stderr);
        r.stderr
    };
    mark_seen(&etcd, "apiserver");
    let why = refusal();
    assert!(
        why.contains(
            "no master named api of cluster \"hamaster-lab\" has ever held a key under /hamaster in this etcd (neither /hamaster/hamaster-lab/api/leader nor /hamaster/hamaster-lab/api/seen); seen there: hamaster-lab/apiserver"
        ) && why.contains("--force"),
        "{why}"
    );
    // The resource seen under another cluster's name (two clusters share this etcd): refused,
    // the other cluster named.
    mark_seen_in(&etcd, "prod-b", "api");
    let why = refusal();
    assert!(
        why.contains(
            "api was seen in this etcd under cluster prod-b and not under cluster_name=\"hamaster-lab\""
        ) && why.contains("seen there: hamaster-lab/apiserver, prod-b/api"),
        "{why}"
    );
    assert!(etcd.get(KEY).is_none() && !a.holds_vip(), "nothing taken");
    let drill = support::run_command(a.cli(&agent, &["takeover", "--config", config, "--check"]));
    assert_eq!(drill.code, 1, "{}{}", drill.stdout, drill.stderr);
    assert!(
        drill
            .stdout
            .contains("PROBLEM known        no master named api")
            && drill
                .stdout
                .contains("1 problem(s): a takeover of api would not go ahead here"),
        "{}",
        drill.stdout
    );

    // --force: a new installation.
    let mut child = a
        .cli(
            &agent,
            &["takeover", "--config", config, "--wait", "10", "--force"],
        )
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(support::wait_for(Duration::from_secs(20), || a.holds_vip()
        && etcd.get(KEY).is_some()));
    let mark = etcd.etcdctl(&[
        "get",
        "--print-value-only",
        &hamaster::lease::seen_key(&scope_of(support::CLUSTER_NAME), "api"),
    ]);
    let seen =
        hamaster::lease::Seen::from_json(String::from_utf8_lossy(&mark.stdout).trim().as_bytes())
            .expect("the seen mark written with the key");
    assert_eq!((seen.node.as_str(), seen.by.as_str()), ("na", "takeover"));
    signal_and_wait(&mut child, "TERM");
    assert!(!a.holds_vip() && etcd.get(KEY).is_none());

    // Known now (the key has gone; its mark stays): the drill passes, nothing taken.
    let drill = support::run_command(a.cli(&agent, &["takeover", "--config", config, "--check"]));
    assert_eq!(drill.code, 0, "{}{}", drill.stdout, drill.stderr);
    assert!(
        drill
            .stdout
            .contains("ok      known        na took its key last (takeover, "),
        "{}",
        drill.stdout
    );
    assert!(
        etcd.get(KEY).is_none() && !a.holds_vip(),
        "the drill took nothing"
    );

    // etcd unreachable: cannot tell is a problem, not a pass.
    let dead = config.replace(".toml", "-dead.toml");
    let text = std::fs::read_to_string(config).unwrap();
    let endpoints = text
        .lines()
        .find(|l| l.starts_with("etcd_endpoints"))
        .unwrap()
        .to_string();
    std::fs::write(
        &dead,
        text.replace(&endpoints, "etcd_endpoints = \"http://127.0.0.1:9\""),
    )
    .unwrap();
    let drill = support::run_command(a.cli(
        &agent,
        &[
            "takeover",
            "--config",
            &dead,
            "--resource",
            "api",
            "--check",
        ],
    ));
    assert_eq!(drill.code, 1, "{}{}", drill.stdout, drill.stderr);
    assert!(
        drill.stdout.contains("PROBLEM etcd")
            && drill.stdout.contains(
                "PROBLEM known        cannot tell whether this etcd has seen a master named api"
            ),
        "{}",
        drill.stdout
    );
}

/// The lab master's fail-safe record key, as the library writes it.
fn record_key() -> String {
    hamaster::failsafe::record_key(&scope_of(support::CLUSTER_NAME), support::RESOURCE)
}

/// The `$ etcdctl …` lines of docs/etcd-auth.md, in order: (arguments, the file its standard
/// input is read from).
fn etcd_auth_commands() -> Vec<(Vec<String>, Option<String>)> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/etcd-auth.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("$ etcdctl "))
        .map(|l| match l.split_once(" < ") {
            Some((args, file)) => (shell_words::split(args).unwrap(), Some(file.to_string())),
            None => (shell_words::split(l).unwrap(), None),
        })
        .collect()
}

#[test]
fn etcd_with_authentication_and_the_documented_role_serves_the_master_and_the_takeover() {
    let mut etcd = EtcdCluster::new("au");
    // Named after member e1: leader placement will want to move etcd's leader off it.
    let a = Node::new(&mut etcd, "e1");
    etcd.enable_auth("root-pw");
    let password = a.state.join("etcd-password");
    std::fs::write(&password, "hamaster-pw\n").unwrap();
    let commands = etcd_auth_commands();
    assert_eq!(commands.len(), 4, "the doc's role: {commands:?}");
    for (args, stdin) in commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = etcd.etcdctl_command(&args);
        if let Some(file) = stdin {
            assert_eq!(
                file, "/etc/hamaster/etcd-password",
                "the doc's password file"
            );
            cmd.stdin(std::fs::File::open(&password).unwrap());
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let pw = password.to_str().unwrap();
    let with = |user: &str, file: &str| {
        a.agent(&etcd)
            .param("etcd_user", user)
            .param("etcd_password_file", file)
            .env("OCF_RESKEY_CRM_meta_timeout", "8000")
    };
    let nothing_taken = || etcd.get(KEY).is_none() && !a.holds_vip() && a.service_pids().is_empty();

    // Refusals, each naming what to fix; nothing is left behind.
    let anonymous = a.agent(&etcd).env("OCF_RESKEY_CRM_meta_timeout", "8000");
    assert_eq!(anonymous.run("start").code, 0);
    anonymous.run("promote").expect(
        1,
        "etcd has authentication enabled: set etcd_user and etcd_password_file",
    );
    assert!(nothing_taken());
    let wrong = a.state.join("wrong-password");
    std::fs::write(&wrong, "not-it\n").unwrap();
    with("hamaster", wrong.to_str().unwrap())
        .run("promote")
        .expect(
        1,
        "etcd_user=\"hamaster\" does not exist or etcd_password_file does not hold its password",
    );
    assert!(nothing_taken());
    // A role that may only read: the reason names the permission and the prefix.
    for args in [
        &["role", "add", "reader"][..],
        &[
            "role",
            "grant-permission",
            "reader",
            "--prefix=true",
            "read",
            "/hamaster/",
        ],
        &["user", "add", "reader:reader-pw"],
        &["user", "grant-role", "reader", "reader"],
    ] {
        assert!(etcd.etcdctl(args).status.success(), "etcdctl {args:?}");
    }
    let reader_pw = a.state.join("reader-password");
    std::fs::write(&reader_pw, "reader-pw\n").unwrap();
    with("reader", reader_pw.to_str().unwrap()).run("promote").expect(
        1,
        "etcd user reader lacks the permission for acquire transaction: its role needs readwrite on the key prefix /hamaster/",
    );
    assert!(nothing_taken());
    with("hamaster", "/nonexistent/etcd-password")
        .run("validate-all")
        .expect(
            5,
            "etcd_password_file=\"/nonexistent/etcd-password\" cannot be read",
        );
    assert_eq!(anonymous.run("stop").code, 0);

    // The documented role: promote, renewals past several TTLs, release.
    assert!(
        etcd.move_leader_to(0),
        "member e1 did not become etcd's leader"
    );
    let agent = a
        .agent(&etcd)
        .param("etcd_user", "hamaster")
        .param("etcd_password_file", pw);
    assert_eq!(agent.run("start").code, 0);
    let run = agent.run("promote");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (holder, lease, token) = etcd.get(KEY).expect("the key, seen by root");
    assert_eq!(holder, "e1");
    assert!(a.holds_vip());
    std::thread::sleep(Duration::from_millis(3 * support::LEASE_TTL_S * 1000 + 500));
    assert_eq!(
        etcd.get(KEY),
        Some(("e1".to_string(), lease, token)),
        "renewed under the same lease\n{}",
        a.log()
    );
    assert_eq!(agent.run("monitor").code, 8);
    assert_eq!(agent.env("OCF_CHECK_LEVEL", "20").run("monitor").code, 8);
    // etcd_move_leader (on by default) works with the role: the leader left this node's member.
    assert!(
        support::wait_for(Duration::from_secs(5), || etcd
            .leader()
            .is_some_and(|l| l != 0)),
        "etcd's leader still on e1\n{}",
        a.log()
    );
    assert!(
        !a.log().contains("etcd_move_leader is on, but"),
        "{}",
        a.log()
    );
    // While it leads, etcd's users and roles change (the auth store's revision moves on: the
    // guard's tokens are refused as old) and its own password is changed in etcd and in the
    // file: its next requests authenticate again with the new one. The release at demote is
    // the proof: the key goes with the demote, not 3 s later with the lease.
    assert!(etcd.etcdctl(&["role", "add", "another"]).status.success());
    std::fs::write(&password, "hamaster-pw-2\n").unwrap();
    let mut passwd = etcd.etcdctl_command(&["user", "passwd", "hamaster", "--interactive=false"]);
    passwd.stdin(std::fs::File::open(&password).unwrap());
    assert!(passwd.output().unwrap().status.success());
    let agent = a
        .agent(&etcd)
        .param("etcd_user", "hamaster")
        .param("etcd_password_file", pw);
    assert_eq!(agent.run("demote").code, 0);
    assert!(etcd.get(KEY).is_none(), "released\n{}", a.log());
    assert!(
        !a.log().contains("releasing the leader key:"),
        "{}",
        a.log()
    );
    assert_eq!(agent.run("stop").code, 0);

    // The cold standby's takeover with the same user (its TOML names the same two settings).
    let config = a.config_file(&agent);
    let mut child = spawn_takeover(&a, &agent, &config);
    assert!(
        support::wait_for(Duration::from_secs(20), || a.holds_vip()
            && etcd.get(KEY).is_some_and(|k| k.0 == "e1")),
        "takeover with etcd_user\n{}",
        a.log()
    );
    signal_and_wait(&mut child, "TERM");
    assert!(nothing_taken(), "the takeover released");
}

/// An etcd on 127.0.0.1 of the host (a port no lab uses), killed and removed on drop.
struct LoopbackEtcd {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Drop for LoopbackEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client left idle longer than etcd's token lives (2 s here, 5 min by default: a guard
/// waiting for the key, a standby's status) is refused with "invalid auth token": it
/// authenticates again and sends the request again, instead of failing it.
#[test]
fn an_idle_clients_expired_etcd_token_is_renewed_and_the_request_sent_again() {
    // Ports of this run's own (an etcd another run left behind must not answer for it).
    let port = 20000 + (std::process::id() % 20000) as u16;
    let url = format!("http://127.0.0.1:{port}");
    let peer = format!("http://127.0.0.1:{}", port + 1);
    let dir = std::env::temp_dir().join(format!("hamaster-token-{}", std::process::id()));
    let etcd = LoopbackEtcd {
        child: std::process::Command::new(support::etcd::etcd_bin())
            .args(["--name", "t", "--data-dir"])
            .arg(dir.join("data"))
            .args([
                &format!("--listen-client-urls={url}"),
                &format!("--advertise-client-urls={url}"),
                &format!("--listen-peer-urls={peer}"),
                &format!("--initial-advertise-peer-urls={peer}"),
                &format!("--initial-cluster=t={peer}"),
                "--auth-token-ttl=2",
                "--log-level=error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        dir,
    };
    let etcdctl = |args: &[&str]| {
        std::process::Command::new("etcdctl")
            .arg(format!("--endpoints={url}"))
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        support::wait_for(Duration::from_secs(15), || etcdctl(&["endpoint", "health"])
            .status
            .success()),
        "etcd on {url}"
    );
    for args in [
        &["user", "add", "root", "--new-user-password", "root-pw"][..],
        &["auth", "enable"],
    ] {
        assert!(etcdctl(args).status.success(), "etcdctl {args:?}");
    }
    let password = etcd.dir.join("password");
    std::fs::write(&password, "root-pw\n").unwrap();
    // As a cold standby's TOML names them.
    let values = hamaster::params::Values::from_toml(
        &hamaster::params::master::MASTER_AGENT,
        &format!(
            "etcd_endpoints = \"{url}\"\netcd_user = \"root\"\netcd_password_file = \"{}\"\n",
            password.display()
        ),
    )
    .unwrap();
    let cfg = hamaster::lease::EtcdConfig::from_values(&values).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = hamaster::lease::etcd::Etcd::connect(&cfg, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(client.holder(KEY).await.unwrap().is_none());
        tokio::time::sleep(Duration::from_secs(5)).await;
        let again = client.holder(KEY).await;
        assert!(
            matches!(again, Ok(None)),
            "after the token expired: {again:?}"
        );
    });
    drop(etcd);
}
