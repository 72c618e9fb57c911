//! The cib/ scripts as an administrator runs them: by this host's real pcs (0.11.5, Pacemaker
//! 2.1's generation) against an empty CIB file, with the agents installed in a private mount
//! namespace (an overlay on /usr/lib/ocf/resource.d that the host never sees), so that pcs
//! reads their meta-data as on a cluster node. Each hamaster topology's script, with the
//! example values, creates exactly what its snippet holds; the master's script takes every
//! value from a variable (resource id, netmask, interface, TLS, authentication, a systemd
//! unit), creates the resource stopped unless told, and refuses what is missing with exit 6
//! and the variable's name. (tests/generations.rs runs them under pcs 0.10.8 against the
//! pacemaker-2.0/ snippets; the live clusters of make check-cluster run them started.)

use hamaster_lab as support;

use std::process::{Command, Output};

use support::cib::{canonical, example, load_snippet, run_script, SCRIPTED};
use support::OcfDir;

const CIB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cib");

/// `script` run by sh in a private mount namespace in which the agents are installed under
/// /usr/lib/ocf/resource.d/hamaster (an overlay on a tmpfs: nothing reaches the host).
fn with_agents(script: &str) -> Output {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("hm-cib-scripts-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let inner = dir.join("script.sh");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::write(&inner, script).unwrap();
    let wrapped = format!(
        r#"set -eu
m={mnt}
mount -t tmpfs none "$m"
mkdir "$m/u" "$m/w" "$m/u/hamaster"
cp -a {provider}/. "$m/u/hamaster/"
mount -t overlay overlay -o lowerdir=/usr/lib/ocf/resource.d,upperdir="$m/u",workdir="$m/w" /usr/lib/ocf/resource.d
exec sh {inner}"#,
        mnt = mnt.display(),
        provider = OcfDir::get().provider().display(),
        inner = inner.display(),
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &wrapped])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// The sections a script creates with `vars`, canonical; panics with its output when it fails.
fn created(topology: &str, vars: &str) -> String {
    let out = with_agents(&run_script(CIB, topology, vars));
    assert!(
        out.status.success(),
        "{topology}.sh {vars}: {}",
        support::output_text(&out)
    );
    canonical(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn each_topology_script_with_the_example_values_creates_what_its_snippet_holds() {
    for topology in SCRIPTED {
        let script = created(topology, &example(topology));
        let out = with_agents(&load_snippet(CIB, topology));
        assert!(out.status.success(), "{}", support::output_text(&out));
        let snippet = canonical(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(
            script, snippet,
            "cib/{topology}.sh with the example values (left) and its snippet (right) differ"
        );
        // Stopped, with README.md's monitors.
        assert!(
            script.contains(r#"name="target-role" value="Stopped""#),
            "{script}"
        );
        assert!(
            script.contains(r#"interval="10s" name="monitor" role="Promoted""#),
            "{script}"
        );
        assert!(
            script.contains(r#"interval="11s" name="monitor" role="Unpromoted""#),
            "{script}"
        );
    }
}

#[test]
fn the_master_script_takes_every_value_from_a_variable_and_starts_only_when_told() {
    let vars = "ETCD_ENDPOINTS=https://198.51.100.1:2379 VIP=198.51.100.10 RESOURCE=db \
                CIDR_NETMASK=26 NIC=eth1 SERVICE_UNIT=db-server.service \
                ETCD_CACERT=/etc/pki/etcd/ca.crt ETCD_CERT=/etc/pki/etcd/c.crt \
                ETCD_KEY=/etc/pki/etcd/c.key ETCD_USER=hamaster \
                ETCD_PASSWORD_FILE=/etc/hamaster/etcd.password ENABLE=yes";
    let cib = created("master-with-vip", vars);
    for want in [
        r#"<clone id="db-clone">"#,
        r#"<primitive class="ocf" id="db" provider="hamaster" type="master">"#,
        r#"name="cidr_netmask" value="26""#,
        r#"name="nic" value="eth1""#,
        r#"name="service" value="db-server.service""#,
        r#"name="etcd_cacert" value="/etc/pki/etcd/ca.crt""#,
        r#"name="etcd_cert" value="/etc/pki/etcd/c.crt""#,
        r#"name="etcd_key" value="/etc/pki/etcd/c.key""#,
        r#"name="etcd_user" value="hamaster""#,
        r#"name="etcd_password_file" value="/etc/hamaster/etcd.password""#,
        r#"interval="10s" name="monitor" role="Promoted""#,
    ] {
        assert!(cib.contains(want), "{want} in:\n{cib}");
    }
    for absent in ["target-role", r#"name="command""#, r#"name="args""#] {
        assert!(!cib.contains(absent), "no {absent} in:\n{cib}");
    }

    // The VIP as a resource of its own: its netmask and interface there, the master without.
    let cib = created("vip-plus-master", vars);
    for want in [
        r#"<primitive class="ocf" id="db-vip" provider="hamaster" type="vip">"#,
        r#"id="db-vip-instance_attributes-nic" name="nic" value="eth1""#,
        r#"id="db-vip-instance_attributes-cidr_netmask" name="cidr_netmask" value="26""#,
        r#"rsc="db-vip""#,
        r#"with-rsc="db-clone""#,
        r#"first="db-clone""#,
    ] {
        assert!(cib.contains(want), "{want} in:\n{cib}");
    }
    assert!(!cib.contains(r#"id="db-instance_attributes-ip""#), "{cib}");
    // Enabled (ENABLE=yes) only after its constraints: no target-role is left on either.
    assert!(!cib.contains("target-role"), "{cib}");
}

#[test]
fn the_master_script_refuses_what_is_missing_with_the_variables_name() {
    let full = "ETCD_ENDPOINTS=https://198.51.100.1:2379 VIP=198.51.100.10 SERVICE=/usr/bin/db";
    let cases = [
        (
            "VIP=198.51.100.10 SERVICE=/usr/bin/db",
            "set ETCD_ENDPOINTS",
        ),
        (
            "ETCD_ENDPOINTS=https://198.51.100.1:2379 SERVICE=/usr/bin/db",
            "set VIP",
        ),
        (
            "ETCD_ENDPOINTS=https://198.51.100.1:2379 VIP=198.51.100.10",
            "set SERVICE_UNIT (a systemd unit) or SERVICE",
        ),
        (
            &format!("{full} SERVICE_UNIT=db.service")[..],
            "SERVICE_UNIT (a systemd unit) or SERVICE (a program), not both",
        ),
        (
            &format!("{full} ENABLE=no")[..],
            "ENABLE is yes or unset, not 'no'",
        ),
    ];
    for (vars, reason) in cases {
        for topology in ["master-with-vip", "vip-plus-master"] {
            let out = with_agents(&run_script(CIB, topology, vars));
            let text = support::output_text(&out);
            assert_eq!(out.status.code(), Some(6), "{topology}.sh {vars}: {text}");
            assert!(
                text.contains(reason),
                "{topology}.sh {vars}: {reason} in {text}"
            );
            assert!(!text.contains("<primitive"), "nothing created: {text}");
        }
    }
}
