//! What OCF tools check on a node (root and namespaces; the meta-data and documents are
//! tests/ocf_documents.rs's): ocf-tester on the vip agent (IPv4 and IPv6) inside a namespace,
//! `crm_resource --validate` with the agent bind-mounted into a private mount namespace, and
//! every bad-input case with its exit code and reason line.

use hamaster_lab as support;

use std::process::Command;

use support::{must, Agent, Netns, OcfDir, Pair, NODE_IF};

fn ocf_tester(ns: &Netns, name: &str, options: &[(&str, &str)]) -> support::Run {
    let run_dir = ns.run_dir();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name, "ocf-tester", "-n", name]);
    for (k, v) in options {
        cmd.arg("-o").arg(format!("{k}={v}"));
    }
    cmd.arg(OcfDir::get().agent("vip"));
    cmd.env("HAMASTER_RUN_DIR", &run_dir);
    let run = support::run_command(cmd);
    let _ = std::fs::remove_dir_all(run_dir);
    run
}

#[test]
fn ocf_tester_passes_for_ipv4() {
    let pair = Pair::new("otv4");
    let run = ocf_tester(
        &pair.node,
        "api-vip",
        &[("ip", "192.0.2.10"), ("cidr_netmask", "24")],
    );
    assert_eq!(run.code, 0, "ocf-tester:\n{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("passed all tests"), "{}", run.stdout);
    assert!(!pair.node.holds("192.0.2.10"), "ocf-tester ends with stop");
}

#[test]
fn ocf_tester_passes_for_ipv6() {
    let pair = Pair::new("otv6");
    let run = ocf_tester(
        &pair.node,
        "api-vip6",
        &[("ip", "2001:db8::10"), ("cidr_netmask", "64")],
    );
    assert_eq!(run.code, 0, "ocf-tester:\n{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("passed all tests"), "{}", run.stdout);
}

#[test]
fn crm_resource_validate_accepts_the_agent_in_a_private_mount_namespace() {
    let pair = Pair::new("crm");
    let mount_point = "/usr/lib/ocf/resource.d/hamaster";
    let script = format!(
        "set -e; created=0; if [ ! -d {mp} ]; then mkdir {mp}; created=1; fi; \
         rc=0; unshare -m --propagation private sh -c 'mount --bind {dir} {mp} && \
         crm_resource --validate --class ocf --provider hamaster --agent vip --option ip=192.0.2.10 --option nic={nic}' || rc=$?; \
         if [ $created = 1 ]; then rmdir {mp}; fi; exit $rc",
        mp = mount_point,
        dir = OcfDir::get().provider().display(),
        nic = NODE_IF,
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.node.name, "sh", "-c", &script])
        .output()
        .unwrap();
    let text = support::output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    // And it reports our configuration errors, with our reason.
    let bad = script.replace("--option ip=192.0.2.10", "--option ip=192.0.2.300");
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.node.name, "sh", "-c", &bad])
        .output()
        .unwrap();
    let text = support::output_text(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("ip=\"192.0.2.300\""), "{text}");
}

/// Every bad-input case: validate-all and start both answer 6 with one reason line naming
/// the parameter and the value, and nothing is added.
/// A Pacemaker older than 1.1 (CRM feature set below 3.0.0) is refused with a reason by
/// validate-all, start and the probe — Pacemaker passes its feature set to every action, not
/// only to those under a node name — as OCF_ERR_INSTALLED; a supported one is not.
#[test]
fn an_unsupported_pacemaker_is_refused_by_validate_start_and_probe() {
    let pair = Pair::new("old");
    let base = Agent::new(&pair.node, "master", &[])
        .instance("api")
        .param("etcd_endpoints", "http://127.0.0.1:2379")
        .param("command", "/bin/sleep")
        .param("args", "1000");
    let old = base.clone().param("crm_feature_set", "2.0.0");
    for run in [old.run("validate-all"), old.run("start"), old.probe()] {
        run.expect(5, "CRM feature set 2.0.0 is not supported");
    }
    let current = base.param("crm_feature_set", "3.17.4");
    assert_eq!(current.run("validate-all").code, 0);
    assert_eq!(current.probe().code, 7);
}

#[test]
fn bad_configuration_is_err_configured_with_the_parameter_named() {
    let pair = Pair::new("bad");
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "required parameter ip is not set"),
        (
            &[("ip", "192.0.2")],
            "ip=\"192.0.2\" is not an IPv4 or IPv6 address",
        ),
        (
            &[("ip", "2001:db8::zz")],
            "ip=\"2001:db8::zz\" is not an IPv4 or IPv6 address",
        ),
        (
            &[("ip", "192.0.2.10"), ("cidr_netmask", "33")],
            "cidr_netmask=\"33\" is out of range 1..32",
        ),
        (
            &[("ip", "2001:db8::10"), ("cidr_netmask", "129")],
            "cidr_netmask=\"129\" is out of range 1..128",
        ),
        (
            &[("ip", "192.0.2.10"), ("cidr_netmask", "abc")],
            "cidr_netmask=\"abc\"",
        ),
        (
            &[("ip", "192.0.2.10"), ("arp_count", "five")],
            "arp_count=\"five\" is not a non-negative integer",
        ),
        (
            &[("ip", "192.0.2.10"), ("arp_interval", "1.5")],
            "arp_interval=\"1.5\" is not a non-negative integer",
        ),
        (
            &[("ip", "192.0.2.10"), ("arp_count_refresh", "-1")],
            "arp_count_refresh=\"-1\"",
        ),
        (
            &[("ip", "192.0.2.10"), ("arp_mode", "unicast")],
            "arp_mode=\"unicast\" must be both, request or reply",
        ),
        (
            &[("ip", "192.0.2.10"), ("run_arping", "sometimes")],
            "run_arping=\"sometimes\" is not a boolean",
        ),
    ];
    for (params, needle) in cases {
        let agent = Agent::new(&pair.node, "vip", params);
        for action in ["validate-all", "start"] {
            let run = agent.run(action);
            assert_eq!(run.code, 6, "{action} {params:?}: {}", run.stderr);
            let reasons = run.reasons();
            assert_eq!(
                reasons.len(),
                1,
                "{action} {params:?}: one reason line: {}",
                run.stderr
            );
            assert!(
                reasons[0].contains(needle),
                "{action} {params:?}: {:?} lacks {needle:?}",
                reasons[0]
            );
        }
        assert_eq!(
            pair.node.addresses(NODE_IF),
            ["192.0.2.1/24", "2001:db8::1/64", &fe80(&pair)],
            "nothing added for {params:?}"
        );
    }
}

fn fe80(pair: &Pair) -> String {
    pair.node
        .addresses(NODE_IF)
        .into_iter()
        .find(|a| a.starts_with("fe80"))
        .unwrap_or_default()
}

#[test]
fn a_probe_on_a_clean_host_is_not_running_even_with_incomplete_configuration() {
    let pair = Pair::new("probe");
    for params in [
        &[][..],
        &[("ip", "bogus")][..],
        &[("ip", "192.0.2.10"), ("nic", "nosuch0")][..],
    ] {
        let run = Agent::new(&pair.node, "vip", params).probe();
        assert_eq!(run.code, 7, "probe {params:?}: {}", run.stderr);
        assert!(
            run.reasons().is_empty(),
            "a probe finding nothing is not an error: {}",
            run.stderr
        );
    }
    // A recurring monitor with a broken configuration is a configuration error.
    Agent::new(&pair.node, "vip", &[("ip", "bogus")])
        .run("monitor")
        .expect(6, "ip=\"bogus\"");
}

#[test]
fn unknown_or_missing_action_is_unimplemented_with_usage() {
    let pair = Pair::new("act");
    let agent = Agent::new(&pair.node, "vip", &[("ip", "192.0.2.10")]);
    let run = agent.run("reload");
    run.expect(3, "\"reload\"");
    assert!(
        run.stderr
            .contains("usage: vip {start|stop|monitor|reload-agent|validate-all|meta-data|usage}"),
        "{}",
        run.stderr
    );
    let run = support::run_command(Command::new(OcfDir::get().agent("vip")));
    run.expect(3, "no action given");
    let run = support::run_command({
        let mut c = Command::new(env!("CARGO_BIN_EXE_hamaster"));
        c.args(["ocf", "vip", "promote"]);
        c
    });
    run.expect(3, "\"promote\"");
}

#[test]
fn without_privileges_start_and_stop_are_err_perm() {
    let pair = Pair::new("perm");
    let agent = Agent::new(&pair.node, "vip", &[("ip", "192.0.2.10"), ("nic", NODE_IF)]);
    let as_nobody = |action: &str| {
        let mut cmd = agent.command(action, 10_000);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        // ip netns exec NS setpriv ... AGENT ACTION: the namespace is entered as root, then
        // privileges are dropped for the agent alone.
        let mut wrapped = Command::new("ip");
        wrapped.args(&args[..3]).args([
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--inh-caps=-all",
        ]);
        wrapped.args(&args[3..]);
        wrapped.env_clear();
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                wrapped.env(k, v);
            }
        }
        wrapped.env("HAMASTER_RUN_DIR", "/tmp");
        cmd = wrapped;
        support::run_command(cmd)
    };
    as_nobody("start").expect(4, "insufficient privileges");
    assert!(!pair.node.holds("192.0.2.10"));
    assert_eq!(agent.run("start").code, 0);
    as_nobody("stop").expect(4, "insufficient privileges");
    assert!(
        pair.node.holds("192.0.2.10"),
        "a refused stop removed nothing"
    );
    assert_eq!(as_nobody("monitor").code, 0, "monitor needs no privileges");
    assert_eq!(agent.run("stop").code, 0);
}

#[test]
fn exit_reason_prefix_and_logfile_follow_the_environment() {
    let pair = Pair::new("env");
    // In the namespace's run directory, which goes with the namespace (stop logs there too).
    std::fs::create_dir_all(pair.node.run_dir()).unwrap();
    let log = pair.node.run_dir().join("agent.log");
    let agent = Agent::new(
        &pair.node,
        "vip",
        &[("ip", "192.0.2.10"), ("arp_count", "0")],
    )
    .env("HA_LOGFILE", log.to_str().unwrap())
    .env("HA_LOGFACILITY", "none");
    assert_eq!(agent.run("start").code, 0);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("INFO: added 192.0.2.10/24 to vip0"),
        "log file: {text:?}"
    );
    let bad = Agent::new(&pair.node, "vip", &[("ip", "x")]).env("OCF_EXIT_REASON_PREFIX", "why:");
    let run = bad.run("validate-all");
    assert_eq!(run.code, 6);
    assert!(
        run.stderr
            .lines()
            .any(|l| l == "why:parameter ip=\"x\" is not an IPv4 or IPv6 address"),
        "{}",
        run.stderr
    );
    assert_eq!(agent.run("stop").code, 0);
    must("true", &[]);
}
