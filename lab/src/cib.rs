//! The cib/ snippets loaded the way cib/README.md says, with the cibadmin and crm_verify of a
//! given Pacemaker generation (the host's, or a Debian root's).

/// The topologies with snippets in cib/, and the fencing that comes before them.
pub const TOPOLOGIES: [&str; 5] = [
    "master-with-vip",
    "master-warm-two-networks",
    "vip-plus-master",
    "ipaddr2-group-baseline",
    "fence-ipmilan",
];

/// A shell script that loads every topology's snippets from the directory `dir` (a copy of
/// cib/; `pacemaker_2_0`: the hamaster topologies from its pacemaker-2.0/) into an empty CIB
/// file that already holds a resource `other` and `stonith-enabled=false` (the test's own,
/// never the snippets'), with `cibadmin --create` as cib/README.md says, and checks: both
/// loads succeed and `crm_verify` finds nothing; `other` and the property are still there;
/// every hamaster resource the snippet adds is created stopped; a second load of the same
/// resources is refused and leaves the file unchanged; a constraint snippet alone (naming
/// missing resources) is refused. Prints what failed and exits non-zero.
pub fn snippet_check(dir: &str, pacemaker_2_0: bool) -> String {
    format!(
        r#"set -u
fail() {{ echo "$*"; exit 1; }}
d={dir}
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
for topo in {topologies}; do
    src=$d
    if [ {gen20} = 1 ] && [ -e "$d/pacemaker-2.0/$topo.resources.xml" ]; then src=$d/pacemaker-2.0; fi
    export CIB_file="$t/$topo.xml"
    cibadmin --empty > "$CIB_file" || fail "cibadmin --empty"
    crm_attribute --type crm_config --name stonith-enabled --update false || fail "crm_attribute"
    cibadmin --create --scope resources \
        --xml-text '<primitive id="other" class="ocf" provider="heartbeat" type="Dummy"/>' || fail "other"
    cibadmin --create --scope resources --xml-file "$src/$topo.resources.xml" \
        || fail "$topo: cibadmin --create refused $src/$topo.resources.xml"
    if [ -e "$src/$topo.constraints.xml" ]; then
        cibadmin --create --scope constraints --xml-file "$src/$topo.constraints.xml" \
            || fail "$topo: cibadmin --create refused $src/$topo.constraints.xml"
    fi
    out=$(crm_verify --xml-file "$CIB_file" 2>&1) || fail "$topo: crm_verify: $out"
    [ -z "$out" ] || fail "$topo: crm_verify says: $out"
    cibadmin --query --xpath "//resources/primitive[@id='other']" > /dev/null \
        || fail "$topo: the CIB's own resource is gone"
    cibadmin --query --xpath "//crm_config//nvpair[@name='stonith-enabled'][@value='false']" > /dev/null \
        || fail "$topo: the CIB's own property changed"
    if [ "$topo" != ipaddr2-group-baseline ] && [ "$topo" != fence-ipmilan ]; then
        ids=$(sed -n 's/^  <[a-z]* id="\([^"]*\)".*/\1/p' "$src/$topo.resources.xml")
        [ -n "$ids" ] || fail "$topo: no resources in the snippet"
        for r in $ids; do
            cibadmin --query --xpath "//resources/*[@id='$r']/meta_attributes/nvpair[@name='target-role'][@value='Stopped']" \
                > /dev/null || fail "$topo: $r is not created stopped"
        done
    fi
    cp "$CIB_file" "$t/before.xml"
    if cibadmin --create --scope resources --xml-file "$src/$topo.resources.xml" > /dev/null 2>&1; then
        fail "$topo: the resources loaded twice"
    fi
    cmp -s "$CIB_file" "$t/before.xml" || fail "$topo: a refused load changed the CIB"
    if [ -e "$src/$topo.constraints.xml" ]; then
        export CIB_file="$t/$topo-alone.xml"
        cibadmin --empty > "$CIB_file" || fail "cibadmin --empty"
        if cibadmin --create --scope constraints --xml-file "$src/$topo.constraints.xml" > /dev/null 2>&1; then
            fail "$topo: constraints on missing resources were taken"
        fi
    fi
    echo "$topo: loaded from $src"
done
"#,
        topologies = TOPOLOGIES.join(" "),
        gen20 = u8::from(pacemaker_2_0),
    )
}

/// The example values the hamaster topologies' scripts are run with to make their snippets
/// (`NAME=value` words for a shell): etcd over TLS, the VIP, a supervised program; the warm
/// standby's promote_command for master-warm-two-networks.
pub fn example(topology: &str) -> String {
    let common =
        "ETCD_ENDPOINTS=https://192.0.2.21:2379,https://192.0.2.22:2379,https://192.0.2.23:2379 \
         ETCD_CACERT=/etc/hamaster/etcd/ca.crt ETCD_CERT=/etc/hamaster/etcd/client.crt \
         ETCD_KEY=/etc/hamaster/etcd/client.key VIP=192.0.2.10 SERVICE=/usr/bin/api-server \
         SERVICE_ARGS='--config /etc/api/config.yaml --port 8443' \
         HEALTH_URL=https://127.0.0.1:8443/healthz";
    match topology {
        "master-warm-two-networks" => {
            format!("{common} PROMOTE_COMMAND='kill -USR1 $(cat /run/api-server.pid)'")
        }
        _ => common.to_string(),
    }
}

/// The topologies whose snippets are their scripts' output with the example values.
pub const SCRIPTED: [&str; 3] = [
    "master-with-vip",
    "master-warm-two-networks",
    "vip-plus-master",
];

/// A shell script that runs cib/`topology`.sh from `dir` as an administrator would, with the
/// `NAME=value` words `vars`, but with the pcs on PATH writing to an empty CIB file (`pcs -f`,
/// through a wrapper that adds the flag: the real pcs does the work). It prints "---
/// resources", the resources section, "--- constraints", the constraints section, as cibadmin
/// queries them; or, when the script fails, the script's output on stderr, with its exit
/// status.
pub fn run_script(dir: &str, topology: &str, vars: &str) -> String {
    format!(
        r#"set -eu
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir "$t/bin"
printf '#!/bin/sh\nexec %s -f %s "$@"\n' "$(command -v pcs)" "$t/c.xml" > "$t/bin/pcs"
chmod +x "$t/bin/pcs"
cibadmin --empty > "$t/c.xml"
env PATH="$t/bin:$PATH" {vars} sh {dir}/{topology}.sh > "$t/log" 2>&1 || {{
    rc=$?
    cat "$t/log" >&2
    exit $rc
}}
echo '--- resources'
CIB_file="$t/c.xml" cibadmin --query --scope resources
echo '--- constraints'
CIB_file="$t/c.xml" cibadmin --query --scope constraints
"#
    )
}

/// A shell script that prints a snippet's sections as `run_script` does: each file of `dir`'s
/// `topology`.resources.xml and .constraints.xml (an empty section where there is none)
/// loaded into an empty CIB with `cibadmin --create` and queried.
pub fn load_snippet(dir: &str, topology: &str) -> String {
    format!(
        r#"set -eu
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
export CIB_file="$t/c.xml"
cibadmin --empty > "$CIB_file"
cibadmin --create --scope resources --xml-file {dir}/{topology}.resources.xml
if [ -e {dir}/{topology}.constraints.xml ]; then
    cibadmin --create --scope constraints --xml-file {dir}/{topology}.constraints.xml
fi
echo '--- resources'
cibadmin --query --scope resources
echo '--- constraints'
cibadmin --query --scope constraints
"#
    )
}

/// `run_script` or `load_snippet`'s output in a form that compares equal where the XML means
/// the same (Canonical XML by Python's xml.etree: attributes sorted, whitespace between
/// elements and comments dropped), one section after the other.
pub fn canonical(sections: &str) -> String {
    let program = r#"
import sys, xml.etree.ElementTree as ET
parts = sys.stdin.read().split("--- ")[1:]
for p in parts:
    name, _, xml = p.partition("\n")
    print(name)
    print(ET.canonicalize(xml_data=xml, strip_text=True, with_comments=False))
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sections.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", crate::output_text(&out));
    String::from_utf8(out.stdout).unwrap()
}
