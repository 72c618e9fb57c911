//! What runs anywhere, without root or namespaces: the agents' meta-data against
//! ra-api-1.dtd and the schema of its dialect (pcs's ocf-1.1.rng from Pacemaker 2.1,
//! resource-agents' metadata.rng before) and the golden copies, the roles it spells for the
//! installed schemas, what it advertises, the cib/ snippets loaded with cibadmin and checked by crm_verify, and
//! docs/reference.md current.

use hamaster_lab as support;

use std::io::Write;
use std::process::{Command, Stdio};

use support::OcfDir;

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
        "<parameter name=\"etcd_endpoints\" unique=\"0\" required=\"1\" reloadable=\"1\">",
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
fn cib_snippets_load_with_cibadmin_create_beside_other_resources_stopped_and_never_twice() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cib");
    for name in support::cib::TOPOLOGIES {
        assert!(
            std::path::Path::new(&format!("{dir}/{name}.sh")).exists(),
            "{name} has its pcs script"
        );
    }
    for pacemaker_2_0 in [false, true] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(support::cib::snippet_check(dir, pacemaker_2_0))
            .output()
            .unwrap();
        let text = support::output_text(&out);
        assert!(out.status.success(), "cib snippets: {text}");
        assert_eq!(
            text.lines().filter(|l| l.contains(": loaded from")).count(),
            support::cib::TOPOLOGIES.len(),
            "{text}"
        );
    }
}

/// The timeouts of an agent's actions in its meta-data (ocf/AGENT.xml).
fn meta_data_timeouts(agent: &str) -> Vec<(String, String)> {
    let xml =
        std::fs::read_to_string(format!("{}/ocf/{agent}.xml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    xml.lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("<action name=\"")?;
            let name = l.split('"').next()?.to_string();
            let timeout = l.split("timeout=\"").nth(1)?.split('"').next()?.to_string();
            Some((name, timeout))
        })
        .collect()
}

#[test]
fn cib_snippets_and_pcs_scripts_take_the_meta_datas_timeouts() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cib");
    let files = ["", "pacemaker-2.0/"].iter().flat_map(|sub| {
        [
            "master-with-vip",
            "master-warm-two-networks",
            "vip-plus-master",
        ]
        .map(|t| format!("{dir}/{sub}{t}.resources.xml"))
    });
    let mut checked = 0;
    for file in files {
        let xml = std::fs::read_to_string(&file).unwrap();
        let mut agent = String::new();
        for line in xml.lines().map(str::trim) {
            if line.starts_with("<primitive ") {
                agent = line
                    .split("type=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .into();
            }
            let Some(op) = line.strip_prefix("<op name=\"") else {
                continue;
            };
            let name = op.split('"').next().unwrap();
            let timeout = op
                .split("timeout=\"")
                .nth(1)
                .map(|t| t.split('"').next().unwrap());
            let want = meta_data_timeouts(&agent)
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t);
            match (name, timeout) {
                // A monitor takes Pacemaker's default, which the meta-data's monitor is.
                ("monitor", None) => assert_eq!(want.as_deref(), Some("20s"), "{file}"),
                (_, t) => assert_eq!(t, want.as_deref(), "{file}: {agent}'s {name}"),
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} operations checked");
    for script in [
        "master-with-vip",
        "master-warm-two-networks",
        "vip-plus-master",
        "ipaddr2-group-baseline",
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{script}.sh")).unwrap();
        assert!(
            !text.contains("timeout="),
            "{script}.sh sets a timeout: pcs takes the meta-data's"
        );
    }
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
    // So the CIBs that pcs writes (and the snippets in cib/) carry no usage op.
    for cib in [
        "master-with-vip",
        "master-warm-two-networks",
        "vip-plus-master",
    ] {
        let xml = std::fs::read_to_string(format!(
            "{}/cib/{cib}.resources.xml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert!(!xml.contains("name=\"usage\""), "{cib}.resources.xml");
    }
}

/// The fencer's own device parameters the fence-ipmilan files use (Pacemaker's, not the agent's).
const PACEMAKER_S: [&str; 2] = ["pcmk_host_list", "pcmk_reboot_action"];

/// cib/fence-ipmilan's snippet and script name only parameters fence_ipmilan has (its own
/// meta-data, Debian's fence-agents 4.12: the upstream of RHEL's) or the fencer's own, and the
/// snippet holds what the script sets.
#[test]
fn the_fence_ipmilan_snippet_and_script_use_fence_ipmilans_own_parameters() {
    let out = Command::new("fence_ipmilan")
        .args(["-o", "metadata"])
        .output()
        .expect("fence_ipmilan (fence-agents) is installed");
    let meta = String::from_utf8_lossy(&out.stdout).into_owned();
    let known: Vec<&str> = meta
        .split("<parameter name=\"")
        .skip(1)
        .filter_map(|p| p.split('"').next())
        .collect();
    assert!(
        known.contains(&"lanplus") && known.contains(&"cipher"),
        "{meta}"
    );
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cib");
    let snippet = std::fs::read_to_string(format!("{dir}/fence-ipmilan.resources.xml")).unwrap();
    let in_snippet: Vec<&str> = snippet
        .split("name=\"")
        .skip(1)
        .filter_map(|p| p.split('"').next())
        .filter(|n| *n != "monitor")
        .collect();
    assert!(in_snippet.len() >= 8, "{in_snippet:?}");
    for name in &in_snippet {
        assert!(
            known.contains(name) || PACEMAKER_S.contains(name),
            "{name} is no parameter of fence_ipmilan"
        );
    }
    let script = std::fs::read_to_string(format!("{dir}/fence-ipmilan.sh")).unwrap();
    let create = script
        .split("pcs stonith create")
        .nth(1)
        .and_then(|s| s.split("op monitor").next())
        .expect("the script's pcs stonith create");
    let set: Vec<&str> = create
        .split_whitespace()
        .filter_map(|w| w.trim_start_matches("${REBOOT_ACTION:+").split_once('='))
        .map(|(k, _)| k)
        .filter(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    assert!(set.len() >= 8, "{set:?}");
    for name in &set {
        assert!(
            known.contains(name) || PACEMAKER_S.contains(name),
            "the script sets {name}, no parameter of fence_ipmilan"
        );
        assert!(
            in_snippet.contains(name) || *name == "pcmk_reboot_action",
            "the snippet lacks {name}, which the script sets"
        );
    }
}

/// The firewalld service the RPM ships (packaging/firewalld/hamaster.xml), read by firewalld's
/// own reader (python3-firewall's service_reader, what `firewall-cmd --reload` runs): it is
/// valid and opens the port docs/metrics.md and docs/etcd-operations.md give; a copy with a
/// protocol firewalld does not know is refused, so the check can fail.
#[test]
fn the_firewalld_service_file_is_read_by_firewalds_own_reader() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/firewalld");
    let read = |dir: &str| {
        // Debian's Python, whose dist-packages python3-firewall installs into.
        Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import sys\nfrom firewall.core.io.service import service_reader\n\
                 s = service_reader('hamaster.xml', sys.argv[1])\nprint(s.short, s.ports)",
                dir,
            ])
            .output()
            .unwrap()
    };
    let out = read(dir);
    assert!(out.status.success(), "{}", support::output_text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "hamaster [('9405', 'tcp')]"
    );
    let spec = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/hamaster.spec"
    ))
    .unwrap();
    assert!(
        spec.contains("/usr/lib/firewalld/services")
            && spec.contains("packaging/firewalld/hamaster.xml"),
        "the RPM ships it"
    );
    for doc in ["docs/metrics.md", "docs/etcd-operations.md"] {
        let text =
            std::fs::read_to_string(format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(text.contains("9405/tcp"), "{doc} names the port");
    }

    let broken = std::env::temp_dir().join(support::unique("firewalld"));
    std::fs::create_dir_all(&broken).unwrap();
    let text = std::fs::read_to_string(format!("{dir}/hamaster.xml")).unwrap();
    std::fs::write(
        broken.join("hamaster.xml"),
        text.replace("protocol=\"tcp\"", "protocol=\"tcpx\""),
    )
    .unwrap();
    let out = read(broken.to_str().unwrap());
    let _ = std::fs::remove_dir_all(&broken);
    assert!(
        !out.status.success() && support::output_text(&out).contains("INVALID_PROTOCOL"),
        "{}",
        support::output_text(&out)
    );
}

/// The alerting rules shipped for Prometheus (packaging/prometheus/hamaster-alerts.yml): valid
/// for promotool's check, and each alert fires in its case and none in a healthy cluster, by
/// promtool's own rule tests (hamaster-alerts.test.yml); every metric they use is one the
/// guard exports (docs/metrics.md's table) or docs/metrics.md's textfile snippet makes.
#[test]
fn the_alert_rules_pass_promtools_check_and_their_own_tests() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/prometheus");
    for args in [
        ["check", "rules", "hamaster-alerts.yml"],
        ["test", "rules", "hamaster-alerts.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {}: {}",
            args.join(" "),
            support::output_text(&out)
        );
    }
    let rules = std::fs::read_to_string(format!("{dir}/hamaster-alerts.yml")).unwrap();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    assert!(doc.contains("packaging/prometheus/hamaster-alerts.yml"));
    let mut used: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("hamaster_"))
        .collect();
    used.sort_unstable();
    used.dedup();
    assert!(used.len() >= 8, "{used:?}");
    for metric in used {
        let base = metric.trim_end_matches("_bucket");
        assert!(
            doc.contains(&format!("`{base}`")) || doc.contains(&format!("echo \"{base}")),
            "{metric} is in docs/metrics.md"
        );
    }
}

/// packaging/pacemaker/alert_hamaster as Pacemaker runs it (its CRM_alert_* variables), `env`
/// more; its exit code.
fn alert(recipient: &std::path::Path, env: &[(&str, &str)]) -> i32 {
    let agent = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/pacemaker/alert_hamaster"
    );
    // Under Pacemaker's umask (its daemons' 0026, which their children inherit).
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "umask 0026; exec \"$0\"", agent]);
    cmd.env("CRM_alert_recipient", recipient)
        .env("CRM_alert_timestamp_epoch", "1796500000");
    for (k, v) in env {
        cmd.env(format!("CRM_alert_{k}"), v);
    }
    cmd.status().expect("alert_hamaster").code().unwrap_or(-1)
}

#[test]
fn the_alert_agent_counts_failovers_fences_and_failures_and_never_fails_pacemaker() {
    let dir = std::env::temp_dir().join(support::unique("alert"));
    std::fs::create_dir_all(&dir).unwrap();
    let prom = dir.join("alerts.prom");
    let resource = |task: &str, node: &str, rc: &str, target: &str| {
        alert(
            &prom,
            &[
                ("kind", "resource"),
                ("rsc", "api"),
                ("task", task),
                ("node", node),
                ("rc", rc),
                ("target_rc", target),
                ("desc", "ok"),
            ],
        )
    };
    assert_eq!(resource("promote", "n2", "0", "0"), 0);
    assert_eq!(resource("promote", "n2", "0", "0"), 0);
    assert_eq!(resource("demote", "n1", "0", "0"), 0);
    assert_eq!(
        resource("monitor", "n2", "8", "8"),
        0,
        "a monitor that succeeds"
    );
    assert_eq!(
        resource("monitor", "n2", "9", "8"),
        0,
        "a failed promoted monitor"
    );
    assert_eq!(
        resource("monitor", "n3", "190", "0"),
        0,
        "a degraded standby"
    );
    assert_eq!(
        alert(
            &prom,
            &[
                ("kind", "resource"),
                ("rsc", "api"),
                ("task", "monitor"),
                ("node", "n3"),
                ("rc", "190"),
                ("target_rc", "0"),
                ("status", "1"),
            ]
        ),
        0,
        "a cancelled monitor: no event"
    );
    assert_eq!(
        alert(
            &prom,
            &[
                ("kind", "fencing"),
                ("node", "n1"),
                ("task", "st_notify_fence"),
                ("rc", "0")
            ]
        ),
        0
    );
    assert_eq!(
        alert(&prom, &[("kind", "node"), ("node", "n1"), ("desc", "lost")]),
        0
    );
    assert_eq!(
        alert(&prom, &[("kind", "attribute"), ("node", "n1")]),
        0,
        "an attribute: ignored"
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    let count = |labels: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("hamaster_cluster_events_total{{{labels}}} ")))
            .map(|v| v.trim().to_string())
    };
    let r = |task: &str, node: &str, outcome: &str| {
        format!(
            "kind=\"resource\",resource=\"api\",task=\"{task}\",node=\"{node}\",outcome=\"{outcome}\""
        )
    };
    assert_eq!(
        count(&r("promote", "n2", "ok")).as_deref(),
        Some("2"),
        "{text}"
    );
    assert_eq!(
        count(&r("demote", "n1", "ok")).as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        count(&r("monitor", "n2", "failed")).as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(count(&r("monitor", "n2", "ok")), None, "{text}");
    assert_eq!(
        count(&r("monitor", "n3", "degraded")).as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        count("kind=\"fencing\",resource=\"\",task=\"fence\",node=\"n1\",outcome=\"ok\"")
            .as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        count("kind=\"node\",resource=\"\",task=\"membership\",node=\"n1\",outcome=\"lost\"")
            .as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("hamaster_cluster_events_total{"))
            .count(),
        6,
        "{text}"
    );
    assert!(text.contains("hamaster_cluster_event_last_timestamp_seconds{kind=\"fencing\""));
    assert!(text.contains("} 1796500000\n"), "{text}");
    // node_exporter, another user, reads it: readable by all, whatever Pacemaker's umask.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&prom).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
    // And the exposition is valid.
    support::prometheus::check_exposition(&text);
    // A recipient that is no .prom file is for the log alone; one that cannot be written is
    // logged: neither fails Pacemaker.
    let other = dir.join("alerts.txt");
    assert_eq!(
        alert(
            &other,
            &[("kind", "node"), ("node", "n1"), ("desc", "member")]
        ),
        0
    );
    assert!(!other.exists());
    let nowhere = dir.join("missing/alerts.prom");
    assert_eq!(
        alert(
            &nowhere,
            &[("kind", "node"), ("node", "n1"), ("desc", "member")]
        ),
        0
    );
    assert!(!nowhere.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
