//! docs/runbook.md's etcd restore, run as written against a real etcd cluster (etcd 3.5's
//! etcdutl: `make check-etcd-fixed`): the master promoted, a snapshot taken, the key taken
//! again a few times (the tokens rise past the snapshot's revision), the master stopped; then
//! etcd restored from the snapshot twice — as it was, and with the runbook's flags — each
//! followed by the runbook's cleanup commands and a promotion. Restored as it was, etcd hands
//! the next master a token below one already used; with the runbook's bump, above every one.

use hamaster_lab as support;

use support::etcd::{etcd_version, EtcdCluster};
use support::master::Node;

const KEY: &str = support::API_KEY;

fn runbook() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/runbook.md")).unwrap()
}

/// The runbook's `$ etcdutl snapshot restore` flags that are not one member's own (its name,
/// the cluster's members and token, its peer URL and data directory are the lab's).
fn restore_flags(text: &str) -> Vec<String> {
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("$ etcdutl snapshot restore "))
        .expect("the runbook's etcdutl snapshot restore");
    let words = shell_words::split(line).unwrap();
    let own = [
        "--name",
        "--initial-cluster",
        "--initial-cluster-token",
        "--initial-advertise-peer-urls",
        "--data-dir",
    ];
    let mut flags = Vec::new();
    let mut words = words.into_iter().skip(1).peekable();
    while let Some(w) = words.next() {
        let takes_value = words.peek().is_some_and(|n| !n.starts_with("--"));
        if own.contains(&w.as_str()) {
            words.next();
        } else if takes_value {
            flags.push(format!("{w}={}", words.next().unwrap()));
        } else {
            flags.push(w);
        }
    }
    flags
}

/// The runbook's `$ etcdctl del …` lines, as etcdctl arguments, its cluster (`prod`) the lab's.
fn cleanup(text: &str) -> Vec<Vec<String>> {
    let lab = format!("/hamaster/{}/", support::CLUSTER_NAME);
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("$ etcdctl del "))
        .map(|l| {
            assert!(
                l.starts_with("/hamaster/prod/"),
                "the runbook's cluster: {l}"
            );
            let mut args = vec!["del".to_string()];
            args.extend(shell_words::split(&l.replace("/hamaster/prod/", &lab)).unwrap());
            args
        })
        .collect()
}

/// The restore's steps 3 and 4: the cleanup commands, then a promotion; the new token.
fn clean_and_promote(etcd: &EtcdCluster, agent: &support::Agent, commands: &[Vec<String>]) -> i64 {
    for args in commands {
        let out = etcd.etcdctl(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let (holder, _, token) = etcd.get(KEY).expect("the new master's key");
    assert_eq!(holder, "na");
    token
}

#[test]
#[ignore = "needs etcd 3.5's etcdutl: make check-etcd-fixed"]
fn an_etcd_restored_from_a_snapshot_with_the_runbooks_bump_never_hands_out_a_lower_token() {
    let version = etcd_version();
    assert!(
        !version.starts_with("3.4") && version != "unknown",
        "etcd {version}: the restore needs 3.5's etcdutl (HAMASTER_TEST_ETCD)"
    );
    let text = runbook();
    let flags = restore_flags(&text);
    assert!(
        flags.iter().any(|f| f.starts_with("--bump-revision="))
            && flags.contains(&"--mark-compacted".to_string()),
        "the runbook bumps the revision: {flags:?}"
    );
    let commands = cleanup(&text);
    assert_eq!(
        commands.len(),
        2,
        "the leader key and the failsafe record: {commands:?}"
    );

    let mut etcd = EtcdCluster::new("rst");
    let a = Node::new(&mut etcd, "na");
    let agent = a.agent(&etcd);
    assert_eq!(agent.run("start").code, 0);
    let promote = agent.run("promote");
    assert_eq!(promote.code, 0, "{}", promote.stderr);
    let snapshot = a.state.join("etcd.db");
    let save = etcd
        .etcdctl_through(
            Some(&[0]),
            &["snapshot", "save", snapshot.to_str().unwrap()],
        )
        .output()
        .unwrap();
    assert!(
        save.status.success(),
        "{}",
        String::from_utf8_lossy(&save.stderr)
    );
    // Leadership moves on after the snapshot: the tokens rise past its revision.
    for _ in 0..3 {
        assert_eq!(agent.run("demote").code, 0);
        assert_eq!(agent.run("promote").code, 0);
    }
    let (_, _, used) = etcd.get(KEY).unwrap();
    // Step 1: every master stopped.
    assert_eq!(agent.run("demote").code, 0);
    assert!(etcd.get(KEY).is_none() && !a.holds_vip());

    // Restored as it was: the snapshot's leadership is back, and the next token is lower.
    etcd.restore(&snapshot, &[]);
    assert_eq!(
        etcd.get(KEY).map(|k| k.0).as_deref(),
        Some("na"),
        "the snapshot's leader key restored"
    );
    let low = clean_and_promote(&etcd, &agent, &commands);
    eprintln!("tokens: {used} used before the restore; {low} after a restore without the bump");
    assert!(
        low < used,
        "without the bump the next token ({low}) is below one already used ({used})"
    );
    assert_eq!(agent.run("demote").code, 0);

    // The runbook's restore.
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    etcd.restore(&snapshot, &flags);
    let token = clean_and_promote(&etcd, &agent, &commands);
    eprintln!("after the runbook's restore ({flags:?}): {token}");
    assert!(token > used, "the next token {token} is above {used}");
    assert!(a.holds_vip());
    assert_eq!(agent.run("demote").code, 0);
    assert_eq!(agent.run("stop").code, 0);
}
