//! The RPM spec against the source, without building it (tests/rpm.rs builds it): the License
//! and bundled() lines are the ones scripts/rpm-crates derives from Cargo.lock, each bundled
//! crate is one Cargo.lock locks at that version, and every document the README names is
//! shipped. Runs anywhere cargo runs.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn spec() -> String {
    std::fs::read_to_string(root().join("packaging/hamaster.spec")).unwrap()
}

#[test]
fn the_specs_license_and_bundled_crates_are_cargo_locks() {
    let out = Command::new(root().join("scripts/rpm-crates"))
        .output()
        .expect("scripts/rpm-crates runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = String::from_utf8(out.stdout).unwrap();
    let spec = spec();
    let start = spec
        .find("# BEGIN scripts/rpm-crates")
        .expect("the spec's BEGIN line");
    let end = spec
        .find("# END scripts/rpm-crates")
        .expect("the spec's END line");
    let have = &spec[start..end + "# END scripts/rpm-crates".len()];
    assert_eq!(
        have.trim(),
        want.trim(),
        "packaging/hamaster.spec's crate lines are stale: run scripts/rpm-crates --write"
    );
    // Read Cargo.lock itself: every bundled crate is locked at the version the spec names.
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let bundled: Vec<(&str, &str)> = have
        .lines()
        .filter_map(|l| l.strip_prefix("Provides:       bundled(crate("))
        .map(|l| {
            let (name, rest) = l.split_once("))").unwrap();
            (name, rest.trim_start_matches(" = "))
        })
        .collect();
    assert!(bundled.len() > 50, "{} bundled crates", bundled.len());
    for (name, version) in &bundled {
        let entry = format!("name = \"{name}\"\nversion = \"{version}\"");
        assert!(
            lock.contains(&entry),
            "{name} {version} is not in Cargo.lock"
        );
    }
    for linked in [
        "tokio",
        "rustls",
        "ring",
        "etcd-client",
        "netlink-packet-route",
    ] {
        assert!(
            bundled.iter().any(|(n, _)| *n == linked),
            "{linked} is linked"
        );
    }
    assert!(
        !bundled
            .iter()
            .any(|(n, _)| *n == "clap_derive" || *n == "thiserror-impl"),
        "proc-macro crates run at build time and are not linked"
    );
    let license = have
        .lines()
        .find_map(|l| l.strip_prefix("License:"))
        .unwrap();
    for id in ["MIT", "Apache-2.0", "ISC", "BSD-3-Clause"] {
        assert!(license.contains(id), "{id} in {license}");
    }
    // rpmlint knows every identifier the tag uses (packaging/rpmlint.toml's ValidLicenses).
    let lint = std::fs::read_to_string(root().join("packaging/rpmlint.toml")).unwrap();
    let valid = lint
        .lines()
        .find_map(|l| l.strip_prefix("ValidLicenses = "))
        .expect("ValidLicenses in packaging/rpmlint.toml");
    for id in license
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| !w.is_empty() && !matches!(*w, "AND" | "OR" | "WITH"))
    {
        assert!(
            valid.contains(&format!("\"{id}\"")),
            "{id} (License tag) is not in rpmlint's ValidLicenses: {valid}"
        );
    }
}

#[test]
fn every_document_the_readme_names_is_shipped() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let spec = spec();
    let docs: Vec<&str> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("%doc "))
        .flat_map(str::split_whitespace)
        .collect();
    let mut named: Vec<String> = readme
        .split(|c: char| c.is_whitespace() || "()`,;:".contains(c))
        .filter(|w| w.starts_with("docs/") && w.ends_with(".md"))
        .map(|w| w.trim_end_matches('.').to_string())
        .collect();
    named.sort();
    named.dedup();
    assert!(named.len() > 5, "{named:?}");
    for doc in &named {
        assert!(
            docs.contains(&doc.as_str()),
            "README names {doc}; the spec ships {docs:?}"
        );
    }
    assert!(
        readme.contains("cib/") && docs.contains(&"cib"),
        "cib/ is shipped"
    );
}

/// The vip agent runs at every monitor: the loader maps libc alone for it, not libgcc_s as
/// well (src/bin/hamaster-vip.rs links GCC's unwinder statically; docs/benchmarks.md, "Where a
/// monitor's time goes").
#[test]
fn the_vip_agent_loads_libc_alone() {
    let out = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_hamaster-vip")])
        .output()
        .expect("readelf (binutils) runs");
    assert!(out.status.success());
    let needed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect();
    assert!(needed.iter().any(|l| l == "libc.so.6"), "{needed:?}");
    assert!(
        needed
            .iter()
            .all(|l| l == "libc.so.6" || l.starts_with("ld-linux")),
        "the vip agent loads more than libc: {needed:?}"
    );
}
