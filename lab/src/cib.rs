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
