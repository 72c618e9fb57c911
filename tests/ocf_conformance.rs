//! What OCF tools check: ocf-tester on the vip agent (IPv4 and IPv6) inside a namespace,
//! meta-data against ra-api-1.dtd and the schema of its dialect (pcs's ocf-1.1.rng from Pacemaker 2.1,
//! resource-agents' metadata.rng before), `crm_resource --validate` with the agent
//! bind-mounted into a private mount namespace, and every bad-input case with its exit code
//! and reason line.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

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

fn meta_data(agent: &str) -> String {
    let out = Command::new(OcfDir::get().agent(agent))
        .arg("meta-data")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8(out.stdout).unwrap()
}

const AGENTS: [(&str, &[hamaster::params::Param]); 2] = [
    ("vip", &hamaster::params::vip::VIP_AGENT),
    ("master", &hamaster::params::master::MASTER_AGENT),
];

fn xmllint(args: &[&str], input: &str, dir: &str) -> std::process::Output {
    let mut child = Command::new("xmllint")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// ocf-tester's check: `xmllint --valid` against ra-api-1.dtd, from its directory.
fn assert_dtd_valid(xml: &str, what: &str) {
    let dtd = xmllint(
        &["--noout", "--valid", "-"],
        xml,
        "/usr/share/resource-agents",
    );
    assert!(
        dtd.status.success(),
        "{what} DTD: {}",
        String::from_utf8_lossy(&dtd.stderr)
    );
}

#[test]
fn meta_data_validates_against_the_dtd_and_the_relaxng_schema() {
    for (agent, params) in AGENTS {
        let xml = meta_data(agent);
        assert_dtd_valid(&xml, agent);
        // Pacemaker 2.1+ (this host): OCF 1.1, as pcs validates it.
        let rng = xmllint(
            &[
                "--noout",
                "--relaxng",
                "/usr/share/pcs/data/ocf-1.1.rng",
                "-",
            ],
            &xml,
            "/",
        );
        assert!(
            rng.status.success(),
            "{agent} OCF 1.1 RNG: {}",
            String::from_utf8_lossy(&rng.stderr)
        );
        assert!(
            xml.contains("<action name=\"reload-agent\" timeout=\"10s\"/>")
                && xml.contains(" reloadable=\"1\">"),
            "{agent}: {xml}"
        );
        for p in params.iter() {
            assert!(
                xml.contains(&format!("<parameter name=\"{}\"", p.name)),
                "{} in {agent} meta-data",
                p.name
            );
        }
    }
    let master = meta_data("master");
    for needle in [
        "<action name=\"promote\" timeout=\"60s\"/>",
        "<action name=\"monitor\" timeout=\"20s\" interval=\"10s\" role=\"Promoted\"/>",
        "<parameter name=\"etcd_endpoints\" unique=\"0\" required=\"1\">",
        "<parameter name=\"ip\" unique=\"1\" required=\"0\">",
    ] {
        assert!(master.contains(needle), "master meta-data lacks {needle}");
    }
}

/// The master's monitor roles follow the Pacemaker whose CIB schemas are installed:
/// Master/Slave where the newest schema is older than pacemaker-3.7 (Pacemaker 2.0, RHEL
/// 8.0-8.4: pcs copies the roles into the CIB, which that schema would refuse),
/// Promoted/Unpromoted from it on. The schemas are found where Pacemaker looks for them.
#[test]
fn master_meta_data_spells_the_roles_the_installed_schema_knows() {
    let dir = std::env::temp_dir().join(format!("hm-schemas-{}", std::process::id()));
    let roles_with = |schemas: &[&str]| {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for s in schemas {
            std::fs::write(dir.join(s), "").unwrap();
        }
        let out = Command::new(OcfDir::get().agent("master"))
            .arg("meta-data")
            .env("PCMK_schema_directory", &dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout).unwrap()
    };
    // Pacemaker 2.0.5's schemas end at 3.5; 2.1.5's at 3.9.
    let old = roles_with(&["pacemaker-3.0.rng", "pacemaker-3.5.rng", "upgrade-2.10.xsl"]);
    assert!(old.contains("interval=\"10s\" role=\"Master\""), "{old}");
    assert!(old.contains("interval=\"11s\" role=\"Slave\""), "{old}");
    assert!(!old.contains("Promoted"), "{old}");
    // Pacemaker 2.0 knows no reload-agent: OCF 1.0.
    assert!(
        !old.contains("<action name=\"reload-agent\"") && !old.contains("reloadable="),
        "{old}"
    );
    assert_dtd_valid(&old, "the Pacemaker 2.0 dialect");
    // resource-agents' metadata.rng of that generation (4.7) checks it in the bullseye root
    // (tests/generations.rs); this host's 4.12 knows only the new role names.
    let new = roles_with(&[
        "pacemaker-3.5.rng",
        "pacemaker-3.7.rng",
        "pacemaker-3.9.rng",
    ]);
    assert!(new.contains("role=\"Promoted\"") && new.contains("role=\"Unpromoted\""));
    // No schemas found at all (no Pacemaker here): today's names.
    let none = roles_with(&[]);
    assert!(none.contains("role=\"Promoted\""), "{none}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn meta_data_matches_the_golden_copies_in_ocf() {
    for (agent, _) in AGENTS {
        let path = format!("{}/ocf/{agent}.xml", env!("CARGO_MANIFEST_DIR"));
        let golden = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            meta_data(agent),
            golden,
            "{path} is stale: run `make golden`"
        );
    }
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
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    // And it reports our configuration errors, with our reason.
    let bad = script.replace("--option ip=192.0.2.10", "--option ip=192.0.2.300");
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.node.name, "sh", "-c", &bad])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn cib_topologies_pass_crm_verify_and_a_broken_one_does_not() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cib");
    for name in [
        "master-with-vip",
        "vip-plus-master",
        "ipaddr2-group-baseline",
    ] {
        let xml = format!("{dir}/{name}.xml");
        let out = Command::new("crm_verify")
            .args(["--xml-file", &xml])
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.trim().is_empty(),
            "crm_verify {name}: {text}"
        );
        assert!(
            std::path::Path::new(&format!("{dir}/{name}.sh")).exists(),
            "{name} has its pcs script"
        );
    }
    let broken = std::fs::read_to_string(format!("{dir}/vip-plus-master.xml"))
        .unwrap()
        .replace("with-rsc=\"api-clone\"", "with-rsc=\"no-such-clone\"");
    let path = std::env::temp_dir().join(format!("hamaster-broken-cib-{}.xml", std::process::id()));
    std::fs::write(&path, broken).unwrap();
    let out = Command::new("crm_verify")
        .arg("--xml-file")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        !out.status.success(),
        "crm_verify must reject a constraint on a missing resource"
    );
}

#[test]
fn docs_reference_is_generated_from_the_parameter_tables_and_current() {
    let file =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hamaster"))
        .args(["docs", "reference"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        file,
        "docs/reference.md is stale: run `make docs`"
    );
    for (_, params) in AGENTS {
        for p in params.iter() {
            assert!(
                file.contains(&format!("| `{}` |", p.name)),
                "{} documented",
                p.name
            );
        }
    }
}

#[test]
fn meta_data_advertises_only_what_pacemaker_calls_and_usage_still_answers() {
    let calls = [
        "start",
        "stop",
        "monitor",
        "promote",
        "demote",
        "notify",
        "reload-agent",
        "validate-all",
        "meta-data",
    ];
    for agent in ["vip", "master"] {
        let md = support::run_command({
            let mut c = Command::new(support::hamaster_bin());
            c.args(["ocf", agent, "meta-data"]);
            c
        });
        for action in md.stdout.split("<action name=\"").skip(1) {
            let name = action.split('"').next().unwrap_or_default();
            assert!(calls.contains(&name), "{agent} advertises {name}");
        }
        let usage = support::run_command({
            let mut c = Command::new(support::hamaster_bin());
            c.args(["ocf", agent, "usage"]);
            c
        });
        assert_eq!(usage.code, 0, "{agent} usage");
        assert!(usage.stdout.starts_with(&format!("usage: {agent} {{")));
    }
    // So the CIBs that pcs writes (and the copies in cib/) carry no usage op.
    for cib in ["master-with-vip", "vip-plus-master"] {
        let xml = std::fs::read_to_string(format!("{}/cib/{cib}.xml", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
        assert!(!xml.contains("name=\"usage\""), "{cib}.xml");
    }
}
