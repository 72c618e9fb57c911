//! The source's own rules, checked by reading it (what a reviewer would grep for): `unsafe`
//! only in the modules of a kernel interface, each with its SAFETY line; no decision taken on
//! an error's words; one `Presence`; one frames module that opens packet sockets and knows
//! ARP's and NDP's layout; the leader key written by the library only; functions short enough
//! to read (at most 8 over 80 lines, none over 120). Runs anywhere.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every file of src/, with its production part: the text before its `mod tests` (the
/// simulation and the machine's tests are test code as a whole).
fn production() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    files.sort();
    assert!(files.len() > 50, "src/ read: {} files", files.len());
    files
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root).unwrap().display().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            (name, code)
        })
        .filter(|(name, _)| {
            !name.starts_with("src/guard/sim/") && name != "src/guard/machine/tests.rs"
        })
        .collect()
}

/// Lines of code (comments left out) that contain `needle`: (file, line number, line).
fn lines_with<'a>(files: &'a [(String, String)], needle: &str) -> Vec<(&'a str, usize, &'a str)> {
    files
        .iter()
        .flat_map(|(name, code)| {
            code.lines()
                .enumerate()
                .filter(move |(_, l)| !l.trim_start().starts_with("//") && l.contains(needle))
                .map(move |(i, l)| (name.as_str(), i + 1, l))
        })
        .collect()
}

#[test]
fn unsafe_lives_in_the_kernel_interfaces_each_with_its_safety_line() {
    let files = production();
    // One module per kernel interface: children (fork/exec, close_range), pidfds, the packet
    // socket and its BPF filter, the watchdog's ioctls, the scheduler and mlockall, tokio's
    // registration of the wire watch's sockets, and libc's local time for HA_DATEFMT; and the
    // vip agent's program, whose entry is the C runtime's `main` (no_mangle), which ignores
    // SIGPIPE as std's start-up would, and which links GCC's static unwinder (an empty extern
    // block).
    let allowed = [
        "src/bin/hamaster-vip.rs",
        "src/child.rs",
        "src/procfs.rs",
        "src/vip/frames.rs",
        "src/guard/watchdog.rs",
        "src/guard/sched.rs",
        "src/guard/wire.rs",
        "src/logging.rs",
    ];
    let mut found = 0;
    for (name, code) in &files {
        let lines: Vec<&str> = code.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let unsafe_here =
                l.contains("unsafe ") || l.contains("unsafe{") || l.contains("unsafe(");
            if l.trim_start().starts_with("//") || !unsafe_here {
                continue;
            }
            found += 1;
            assert!(
                allowed.contains(&name.as_str()),
                "{name}:{}: unsafe outside a kernel interface: {l}",
                i + 1
            );
            let above = &lines[i.saturating_sub(4)..i];
            assert!(
                above.iter().any(|a| a.contains("// SAFETY")),
                "{name}:{}: unsafe without a SAFETY line above it: {l}",
                i + 1
            );
        }
    }
    assert!(
        found >= 10,
        "the scan saw {found} unsafe blocks: it reads the source"
    );
}

#[test]
fn no_decision_is_taken_on_an_errors_words() {
    let files = production();
    for pattern in [
        "to_string().contains(",
        "to_string().starts_with(",
        "why.contains(",
        "why.starts_with(",
        "err.contains(",
        "reason.contains(",
        "message().contains(",
        // An error's whole chain (crate::causes) or a text made of it, searched for words:
        // etcd's refusals are told by their status (lease/etcd.rs, Refusal::of).
        "causes(e).contains(",
        "causes(&e).contains(",
        "text.contains(\"",
        // The resident standby's answers (guard::resident::Answer is their one reader).
        "starts_with(\"standby ",
        "starts_with(\"cannot tell",
        "== \"leading\"",
        "!= \"leading\"",
        "== \"stopped\"",
        // etcd-client's own words for a lease etcd does not know.
        "LeaseKeepAliveError(m) if",
    ] {
        let hits = lines_with(&files, pattern);
        assert!(hits.is_empty(), "matching an error's text: {hits:#?}");
    }
    // The scan can fail: lines the agent and the keepalive had before are caught.
    let before = [
        (
            "src/agents/master.rs".to_string(),
            "Ok(s) if s.starts_with(\"standby \") || s == \"leading\" => {}".to_string(),
        ),
        (
            "src/lease/etcd.rs".to_string(),
            "etcd_client::Error::LeaseKeepAliveError(m) if m == LEASE_NOT_FOUND => {".to_string(),
        ),
    ];
    assert_eq!(lines_with(&before, "starts_with(\"standby ").len(), 1);
    assert_eq!(lines_with(&before, "LeaseKeepAliveError(m) if").len(), 1);
}

#[test]
fn one_presence_one_frames_module_one_leader_key() {
    let files = production();
    let defined = lines_with(&files, "pub enum Presence");
    assert_eq!(defined.len(), 1, "{defined:?}");
    assert_eq!(defined[0].0, "src/presence.rs");
    for needle in [
        "AddressFamily::Packet",
        "AF_PACKET",
        "ETH_P_ARP",
        "SO_ATTACH_FILTER",
    ] {
        let at: Vec<_> = lines_with(&files, needle)
            .into_iter()
            .filter(|(name, _, _)| *name != "src/vip/frames.rs")
            .collect();
        assert!(at.is_empty(), "{needle} outside vip/frames.rs: {at:?}");
    }
    // The one address look: nobody dumps addresses to search for the VIP by hand.
    let by_hand = lines_with(&files, ".addresses(");
    let owners: Vec<_> = by_hand.iter().map(|(n, _, _)| *n).collect();
    assert!(
        owners.iter().all(|n| [
            "src/vip/netlink.rs",
            "src/vip/mod.rs",
            "src/guard/placement.rs"
        ]
        .contains(n)),
        "{by_hand:?}"
    );
    let keys = lines_with(&files, "/leader\"");
    let (defined, elsewhere): (Vec<_>, Vec<_>) = keys
        .into_iter()
        .filter(|(n, _, l)| {
            // The HTTP path of the guard's and the standby's listeners, not the key.
            !(["src/guard/status.rs", "src/guard/exporter.rs"].contains(n)
                && l.contains("\"/leader\" =>"))
        })
        .partition(|(n, _, _)| *n == "src/lease/mod.rs");
    assert_eq!(
        defined.len(),
        1,
        "lease::leader_key writes the key: {defined:?}"
    );
    assert!(
        elsewhere.is_empty(),
        "a leader key written outside lease::leader_key: {elsewhere:?}"
    );
    // One stop path: systemctl stop and kill are sent by service::stop only.
    let stops: Vec<_> = lines_with(&files, "\"--no-block\"")
        .into_iter()
        .filter(|(n, _, _)| *n != "src/service/stop.rs")
        .collect();
    assert!(stops.is_empty(), "{stops:?}");
}

/// Every input the machine takes from the shell is made by guard::answers, which the
/// simulation's shell calls too: no other production file names an input (the fencing
/// thread's own Tick aside), and the simulation names them only to read them (patterns).
#[test]
fn every_input_from_the_shell_is_made_by_the_answers() {
    let files = production();
    let made: Vec<_> = lines_with(&files, "Input::")
        .into_iter()
        .filter(|(n, _, l)| {
            !n.starts_with("src/guard/machine/")
                && *n != "src/guard/answers.rs"
                && !(*n == "src/guard/fence.rs" && l.contains("Input::Tick"))
        })
        .collect();
    assert!(
        made.is_empty(),
        "inputs made outside guard::answers: {made:?}"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sim = Vec::new();
    sources(&root.join("src/guard/sim"), &mut sim);
    let mut read = 0;
    for path in sim {
        let text = std::fs::read_to_string(&path).unwrap();
        for l in text.lines().filter(|l| l.contains("Input::")) {
            let shown = path.display();
            assert!(
                reads_an_input(l),
                "{shown}: an input made by the simulation: {l}"
            );
            read += 1;
        }
    }
    assert!(read > 5, "the rule reads the simulation ({read} lines)");
    // The rule can fail: the lines the simulation had before.
    assert!(!reads_an_input("                Input::VipGone {"));
    assert!(!reads_an_input("Ev::Deliver(Input::KeyLost(Some(99)))"));
    assert!(reads_an_input(
        "if let Input::Renewed { sent, ttl } = &input {"
    ));
}

/// A line that reads an input (a pattern), or the fencing thread's Tick.
fn reads_an_input(l: &str) -> bool {
    l.contains("if let ")
        || l.contains("matches!(")
        || l.trim_end().ends_with("=> true,")
        || l.contains("..") && l.contains("=>")
        || l.contains("Input::Tick")
}

/// Every file of src/ and lab/src/ is named in docs/architecture.md (its path, or its name on
/// a line that names its folder; the machine's files in the machine's own table).
#[test]
fn the_architecture_document_names_every_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("lab/src"), &mut files);
    let mut missing = Vec::new();
    for p in files {
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let (dir, name) = rel.rsplit_once('/').unwrap();
        let named = doc.contains(&format!("`{rel}`"))
            || doc
                .lines()
                .any(|l| l.contains(&format!("`{dir}/")) && l.contains(&format!("`{name}`")))
            || (dir == "src/guard/machine" && doc.contains(&format!("| `{name}` |")));
        if !named {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not say where these are: {missing:?}"
    );
}

/// The layers of docs/architecture.md: a module imports only from its own layer or those
/// before it (the entry points may use everything; nothing uses them).
#[test]
fn modules_import_only_from_the_layers_beneath_them() {
    let layers: [&[&str]; 5] = [
        &[
            "ocf", "params", "presence", "pem", "runfiles", "procfs", "child", "causes", "logging",
            "splitmix", "rules",
        ],
        &["vip", "lease", "service", "failsafe"],
        &["resource"],
        &["guard"],
        &["agents", "cli", "lib", "main", "bin", "reference"],
    ];
    let rank = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut checked = 0;
    for (name, code) in production() {
        let top = name["src/".len()..].split(['/', '.']).next().unwrap();
        let own = rank(top).unwrap_or_else(|| panic!("{name}: module {top} is in no layer"));
        for (at, _) in code.match_indices("crate::") {
            let dep: String = code[at + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(r) = rank(&dep) {
                checked += 1;
                assert!(
                    r <= own,
                    "{name} (layer {own}) uses crate::{dep} (layer {r})"
                );
            }
        }
    }
    assert!(checked > 100, "{checked} imports read");
}

/// Each production function's length in lines, from its `fn` line to the `}` at its indent:
/// (lines, file, line number, name). rustfmt's layout makes the indent the function's end.
fn function_lengths(files: &[(String, String)]) -> Vec<(usize, String, usize, String)> {
    let mut out = Vec::new();
    for (name, code) in files {
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let Some(at) = t.find("fn ") else { continue };
            let head = &t[..at];
            let words_before = head
                .split_whitespace()
                .all(|w| ["pub", "async", "const", "unsafe"].contains(&w) || w.starts_with("pub("));
            if t.starts_with("//") || !words_before {
                continue;
            }
            let fname: String = t[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // A declaration without a body (a trait's) ends with `;` before any `{`.
            let Some(open) = (i..lines.len())
                .find(|&j| lines[j].contains('{') || lines[j].trim_end().ends_with(';'))
            else {
                continue;
            };
            if !lines[open].contains('{') {
                continue;
            }
            let indent = line.len() - t.len();
            let close = (open..lines.len()).find(|&j| {
                let l = lines[j];
                l.len() > indent && l[indent..].starts_with('}') && l[..indent].trim().is_empty()
            });
            if let Some(close) = close {
                out.push((close - i + 1, name.clone(), i + 1, fname));
            }
        }
    }
    out.sort_by(|a, b| b.cmp(a));
    out
}

#[test]
fn production_functions_stay_short_enough_to_read() {
    let lengths = function_lengths(&production());
    assert!(
        lengths.len() > 500,
        "the scan found {} functions: it reads the source",
        lengths.len()
    );
    let over = |n: usize| lengths.iter().filter(|f| f.0 > n).collect::<Vec<_>>();
    assert!(
        over(120).is_empty(),
        "functions over 120 lines: {:#?}",
        over(120)
    );
    assert!(
        over(80).len() <= 8,
        "{} functions over 80 lines (at most 8): {:#?}",
        over(80).len(),
        over(80)
    );
    // The scan can fail: a 130-line function is seen as one.
    let long = format!(
        "    pub async fn long() {{\n{}    }}\n",
        "        x();\n".repeat(128)
    );
    let found = function_lengths(&[("src/x.rs".into(), long)]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, 130);
}
