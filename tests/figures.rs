//! Figures that cannot drift (issue 52, item 6). A figure measured by a lab benchmark lives in
//! docs/benchmarks.md, wrapped where it is measured: `<!--fig:KEY-->150 ms<!--/fig-->`.
//! README.md and the other docs quote it as `<!--fig:KEY-->TEXT<!--/fig-->`, TEXT exactly
//! benchmarks.md's, in a paragraph (or below one) that names docs/benchmarks.md. A figure a
//! test asserts is `<!--test:tests/FILE.rs-->300<!--/test-->`: that file holds the number (on a
//! line naming ANCHOR with `test:FILE#ANCHOR`, which a number on several lines must give).
//! Every other measurement-looking figure outside benchmarks.md (a number with ms, %, ×, an
//! `x` right after it, or a range with a unit or of four-digit numbers), outside code blocks,
//! inline code and markers, fails unless ALLOWED names it as a setting or a bound. Runs
//! anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const BENCHMARKS: &str = "docs/benchmarks.md";

/// Specification values, not measurements: the fragment of the line that holds the figure,
/// and why it is no measurement. A fragment covers the figure wherever it appears.
const ALLOWED: &[(&str, &str)] = &[
    ("token 1000 ms", "corosync's token setting of the lab"),
    (
        "token 3000 ms, token_coefficient 650 ms, so 3650 ms",
        "corosync 3's defaults, their sum",
    ),
    ("(3000 ms)", "corosync 3's default token"),
    (
        "(3650 ms effective)",
        "the effective token of corosync's defaults on 3 nodes",
    ),
    (
        "(1650 ms effective)",
        "the effective token at token 1000 on 3 nodes",
    ),
    (
        "(500 ms), consensus 600 ms",
        "the tuned profile's corosync settings",
    ),
    ("500 ms tolerates", "a token setting, what it tolerates"),
    (
        "every 20 ms",
        "a polling or retry interval (the lab's client, the guard)",
    ),
    (
        "20 ms until it is a healthy leader",
        "promote's polling interval (\"every\" on the line above)",
    ),
    ("every 50 ms", "the HAProxy test's polling interval"),
    (
        "every 100 ms",
        "the guard's look interval while systemd cannot tell",
    ),
    ("(at least 100 ms)", "the renewal attempt's lower bound"),
    (
        "at most 100 ms old",
        "how stale /leader's answer may be, by design",
    ),
    (
        "8.4 %",
        "r, chrony's largest slew (docs/safety.md, assumption 2)",
    ),
    (
        "than 20 ms before it",
        "the kernel's ADDRCONF_TIMER_FUZZ_MINUS",
    ),
    ("(200 ms before", "when the guard sends its keepalive early"),
    (
        "effect 50 ms later",
        "PING_ALLOWANCE, the watchdog ping's allowance",
    ),
    (
        "up to 60 ms later",
        "the simulation's draw of a late demote_command",
    ),
    ("20 ms per ioctl", "the simulation's slow watchdog driver"),
    (
        "(70 % of the",
        "the simulation's share of schedules with a watchdog",
    ),
    (
        "i6300esb: 0.66 %",
        "the emulated driver's two stages (1.0066 s per second)",
    ),
    (
        "at 90 % of a quota",
        "the threshold at which hamaster reports etcd's space",
    ),
];

/// A marker: `<!--fig:KEY-->TEXT<!--/fig-->` or `<!--test:PATH-->NUMBER<!--/test-->`.
#[derive(Debug)]
struct Marker {
    test: bool,
    key: String,
    text: String,
    line: usize,
}

/// The lines of a Markdown document outside fenced code blocks, each also with its inline
/// code blanked out (same byte offsets): (line number, line, masked line). A code span may
/// run over the lines of one paragraph.
fn prose(doc: &str) -> Vec<(usize, &str, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    for (i, line) in doc.lines().enumerate() {
        let t = line.trim_start();
        let fence = t.starts_with("```") || t.starts_with("~~~");
        if fence || t.is_empty() {
            out.extend(masked(&paragraph));
            paragraph.clear();
        }
        if fence {
            fenced = !fenced;
        } else if !fenced && !t.is_empty() {
            paragraph.push((i + 1, line));
        }
    }
    out.extend(masked(&paragraph));
    out
}

/// A paragraph's lines with its code spans (a run of backticks to the next run as long; a
/// run without one is literal) blanked out.
fn masked<'a>(paragraph: &[(usize, &'a str)]) -> Vec<(usize, &'a str, String)> {
    let joined: Vec<&str> = paragraph.iter().map(|(_, l)| *l).collect();
    let joined = joined.join("\n");
    let b = joined.as_bytes();
    let mut m = b.to_vec();
    let run = |at: usize| b[at..].iter().take_while(|c| **c == b'`').count();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        while j < b.len() && !(b[j] == b'`' && run(j) == n) {
            j += if b[j] == b'`' { run(j) } else { 1 };
        }
        if j < b.len() {
            for c in &mut m[i..j + n] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
            i = j + n;
        } else {
            i += n;
        }
    }
    let m = String::from_utf8(m).unwrap();
    let mut at = 0;
    paragraph
        .iter()
        .map(|(n, l)| {
            let line = (*n, *l, m[at..at + l.len()].to_string());
            at += l.len() + 1;
            line
        })
        .collect()
}

/// The markers of one line (inline code already blanked), with their byte ranges.
fn line_markers(
    line: &str,
    number: usize,
    at: &str,
    errors: &mut Vec<String>,
) -> Vec<(Marker, usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let rest = &line[from..];
        let open = ["<!--fig:", "<!--test:"]
            .iter()
            .filter_map(|o| rest.find(o).map(|p| (p, *o)))
            .min();
        let stray = ["<!--/fig-->", "<!--/test-->"]
            .iter()
            .filter_map(|c| rest.find(c))
            .min();
        if let Some(s) = stray {
            if open.is_none_or(|(p, _)| s < p) {
                errors.push(format!(
                    "{at}:{number}: a closing marker without its opening one: {line}\n  \
                     → open it with <!--fig:KEY--> or <!--test:PATH--> on the same line"
                ));
                return out;
            }
        }
        let Some((p, open)) = open else { return out };
        let test = open == "<!--test:";
        let start = from + p;
        let after_open = start + open.len();
        let Some(k) = line[after_open..].find("-->") else {
            errors.push(format!(
                "{at}:{number}: `{open}` is not closed by `-->`: {line}"
            ));
            return out;
        };
        let key = &line[after_open..after_open + k];
        let body = after_open + k + 3;
        let close = if test { "<!--/test-->" } else { "<!--/fig-->" };
        let Some(c) = line[body..].find(close) else {
            errors.push(format!(
                "{at}:{number}: {open}{key}--> has no {close} on the same line: {line}\n  \
                 → close the marker right after its figure"
            ));
            return out;
        };
        let text = &line[body..body + c];
        let key_ok = if test {
            !key.is_empty() && !key.contains(char::is_whitespace)
        } else {
            !key.is_empty()
                && !key.starts_with('-')
                && !key.ends_with('-')
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if !key_ok {
            errors.push(format!(
                "{at}:{number}: `{key}` is no marker key (lowercase words with dashes, or a \
                 file path for test:): {line}"
            ));
        } else if text.contains("<!--") || text.trim().is_empty() {
            errors.push(format!(
                "{at}:{number}: {open}{key}--> wraps `{text}`, not one figure: {line}"
            ));
        } else {
            out.push((
                Marker {
                    test,
                    key: key.to_string(),
                    text: text.to_string(),
                    line: number,
                },
                start,
                body + c + close.len(),
            ));
        }
        from = body + c + close.len();
    }
}

/// Every marker of a document, and what is wrong with its markers.
fn markers(at: &str, doc: &str) -> (Vec<Marker>, Vec<String>) {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for (n, _, line) in prose(doc) {
        out.extend(
            line_markers(&line, n, at, &mut errors)
                .into_iter()
                .map(|(m, _, _)| m),
        );
    }
    (out, errors)
}

/// Whether the file holds `number` as a token (a Rust literal's `_` and suffix aside).
fn holds_number(source: &str, number: &str) -> bool {
    source
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map(|t| t.trim_end_matches('.').replace('_', ""))
        .any(|t| {
            let t = [
                "u8", "u16", "u32", "u64", "u128", "usize", "i32", "i64", "f64", "f32",
            ]
            .iter()
            .find_map(|s| t.strip_suffix(s).filter(|n| !n.is_empty()))
            .unwrap_or(&t);
            t == number
        })
}

/// Checks every marker of `files` ((path, text), benchmarks.md among them): definitions
/// unique in benchmarks.md, quotes equal to them in a paragraph that names benchmarks.md,
/// `test:` markers whose file holds the number. `read` gives a repository file's text.
fn check_markers(files: &[(String, String)], read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut defined: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let bench = files.iter().find(|(p, _)| p == BENCHMARKS);
    let (bench_markers, e) = bench.map_or((Vec::new(), Vec::new()), |(p, d)| markers(p, d));
    errors.extend(e);
    for m in bench_markers.iter().filter(|m| !m.test) {
        if let Some((_, first)) = defined.get(&m.key) {
            errors.push(format!(
                "{BENCHMARKS}:{}: fig:{} is defined twice (first at line {first})\n  \
                 → give one of them another key",
                m.line, m.key
            ));
        } else {
            defined.insert(m.key.clone(), (m.text.clone(), m.line));
        }
    }
    for (path, doc) in files {
        let (found, e) = markers(path, doc);
        errors.extend(e);
        let lines: Vec<&str> = doc.lines().collect();
        for m in found {
            if m.test {
                let number = m.text.trim();
                // test:FILE or test:FILE#ANCHOR: the number on a line that names ANCHOR.
                let (file, anchor) = match m.key.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (m.key.as_str(), None),
                };
                match read(file) {
                    None => errors.push(format!(
                        "{path}:{}: test:{file} names a file that does not exist\n  \
                         → name the test that asserts {number}",
                        m.line
                    )),
                    Some(src) => {
                        let holding: Vec<&str> =
                            src.lines().filter(|l| holds_number(l, number)).collect();
                        let on_anchor =
                            anchor.map(|a| holding.iter().filter(|l| l.contains(a)).count());
                        match (holding.len(), on_anchor) {
                            (0, _) | (_, Some(0)) => errors.push(format!(
                                "{path}:{}: {} does not hold {number}{}, which the text says \
                                 it asserts\n  → say what the test asserts now",
                                m.line,
                                file,
                                anchor
                                    .map(|a| format!(" on a line naming `{a}`"))
                                    .unwrap_or_default()
                            )),
                            (n, None) if n > 1 => errors.push(format!(
                                "{path}:{}: {number} is on {n} lines of {file}: any of them \
                                 would do\n  → name the one that asserts it: \
                                 <!--test:{file}#NAME-->{number}<!--/test-->",
                                m.line
                            )),
                            _ => {}
                        }
                    }
                }
                continue;
            }
            if path == BENCHMARKS {
                continue;
            }
            match defined.get(&m.key) {
                None => errors.push(format!(
                    "{path}:{}: fig:{} (`{}`) is not defined in {BENCHMARKS}\n  → wrap the \
                     figure there where it is measured, <!--fig:{}-->…<!--/fig--> (a `make \
                     bench*` run rewrites its section without the markers: put them back), or \
                     remove the quote",
                    m.line, m.key, m.text, m.key
                )),
                Some((text, at)) if *text != m.text => errors.push(format!(
                    "{path}:{}: `{}` quotes fig:{}, which {BENCHMARKS}:{at} gives as `{text}`\n  \
                     → write `{text}` here ({BENCHMARKS} wins; reword the sentence if the new \
                     figure changes what it says)",
                    m.line, m.text, m.key
                )),
                Some(_) => {
                    if !names_benchmarks(&lines, m.line) {
                        errors.push(format!(
                            "{path}:{}: fig:{} is quoted in a paragraph that does not name \
                             docs/benchmarks.md\n  → say there that a lab benchmark measured \
                             it and point to docs/benchmarks.md",
                            m.line, m.key
                        ));
                    }
                }
            }
        }
    }
    errors
}

/// Whether the paragraph of line `n` (1-based), or the one right above it, names
/// benchmarks.md.
fn names_benchmarks(lines: &[&str], n: usize) -> bool {
    let blank = |i: usize| lines[i].trim().is_empty();
    let mut start = n - 1;
    let mut passed_blank = false;
    loop {
        if lines[start].contains("benchmarks.md") {
            return true;
        }
        if start == 0 {
            break;
        }
        start -= 1;
        if blank(start) {
            if passed_blank {
                break;
            }
            passed_blank = true;
            while start > 0 && blank(start) {
                start -= 1;
            }
        }
    }
    let mut end = n - 1;
    while end + 1 < lines.len() && !blank(end + 1) {
        end += 1;
        if lines[end].contains("benchmarks.md") {
            return true;
        }
    }
    false
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The end of the number that starts at `i`: digits, with `.` or `,` between digits.
fn number_end(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    let mut j = i;
    while j < b.len() {
        if b[j].is_ascii_digit()
            || ((b[j] == b'.' || b[j] == b',') && b.get(j + 1).is_some_and(u8::is_ascii_digit))
        {
            j += 1;
        } else {
            break;
        }
    }
    j
}

/// The end of a measurement unit right after the number `start..end` (ms, %, and, touching
/// the number, × or x; with `seconds`, also s), if there is one.
fn unit_end(s: &str, start: usize, end: usize, seconds: bool) -> Option<usize> {
    let rest = &s[end..];
    let word_ends = |r: &str, u: &str| r.strip_prefix(u).is_some_and(|t| !t.starts_with(is_word));
    if rest.starts_with('×') {
        return Some(end + '×'.len_utf8());
    }
    if word_ends(rest, "x") && &s[start..end] != "0" {
        return Some(end + 1);
    }
    let (gap, r) = match rest.chars().next() {
        Some(c @ (' ' | '\u{a0}' | '\u{202f}')) => (c.len_utf8(), &rest[c.len_utf8()..]),
        _ => (0, rest),
    };
    if r.starts_with('%') {
        return Some(end + gap + 1);
    }
    for u in ["ms", "s"] {
        if (u == "ms" || seconds) && word_ends(r, u) {
            return Some(end + gap + u.len());
        }
    }
    None
}

/// Byte ranges of the figures in `s` that look measured.
fn figures(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i..].chars().next().unwrap();
        if !c.is_ascii_digit() {
            i += c.len_utf8();
            continue;
        }
        let end = number_end(s, i);
        let before = s[..i].chars().next_back();
        if before.is_some_and(|b| is_word(b) || b == '.' || b == '/') {
            i = end;
            continue;
        }
        let dash = s[end..]
            .chars()
            .next()
            .filter(|d| *d == '–' || *d == '-')
            .map(char::len_utf8);
        if let Some(d) = dash.filter(|d| s[end + d..].starts_with(|c: char| c.is_ascii_digit())) {
            let end2 = number_end(s, end + d);
            let long = |a: &str| a.chars().filter(char::is_ascii_digit).count() >= 4;
            if let Some(u) = unit_end(s, end + d, end2, true) {
                out.push((i, u));
                i = u;
                continue;
            }
            if long(&s[i..end]) && long(&s[end + d..end2]) {
                out.push((i, end2));
                i = end2;
                continue;
            }
        }
        if let Some(u) = unit_end(s, i, end, false) {
            out.push((i, u));
            i = u;
        } else {
            i = end;
        }
    }
    out
}

/// The unmarked figures of one document that ALLOWED (or `allowed`) does not cover, and
/// the allowed fragments it used.
fn unmarked<'a>(
    at: &str,
    doc: &str,
    allowed: &'a [(&'a str, &'a str)],
    used: &mut BTreeSet<&'a str>,
) -> Vec<String> {
    let mut errors = Vec::new();
    for (n, original, mut line) in prose(doc) {
        for (_, from, to) in line_markers(&line.clone(), n, at, &mut Vec::new()) {
            line.replace_range(from..to, &" ".repeat(to - from));
        }
        for (from, to) in figures(&line) {
            let covered = allowed.iter().find(|(fragment, _)| {
                original
                    .match_indices(fragment)
                    .any(|(p, f)| p <= from && to <= p + f.len())
            });
            match covered {
                Some((fragment, _)) => {
                    used.insert(fragment);
                }
                None => errors.push(format!(
                    "{at}:{n}: unmarked figure `{}` in: {}\n  → a measurement: move it into \
                     {BENCHMARKS} (in a section that names its command) and quote it here as \
                     <!--fig:KEY-->…<!--/fig-->; asserted by a test: \
                     <!--test:tests/FILE.rs-->N<!--/test-->; a setting or a bound: add the \
                     fragment to ALLOWED in tests/figures.rs with its reason",
                    &original[from..to],
                    original.trim()
                )),
            }
        }
    }
    errors
}

/// README.md and docs/*.md: (path from the repository's root, text).
fn documents() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec!["README.md".to_string()];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            paths.push(format!("docs/{name}"));
        }
    }
    paths.sort();
    assert!(paths.len() > 10, "docs read: {paths:?}");
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

fn read_repository_file(path: &str) -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if path.contains("..") || path.starts_with('/') {
        return None;
    }
    std::fs::read_to_string(root.join(path)).ok()
}

#[test]
fn every_quoted_figure_is_the_one_benchmarks_md_gives() {
    let docs = documents();
    let (defined, _) = markers(
        BENCHMARKS,
        &docs.iter().find(|(p, _)| p == BENCHMARKS).unwrap().1,
    );
    assert!(defined.len() > 20, "benchmarks.md's markers: {defined:?}");
    let errors = check_markers(&docs, &read_repository_file);
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n"));
}

#[test]
fn no_figure_outside_benchmarks_md_is_unmarked() {
    let mut used = BTreeSet::new();
    let errors: Vec<String> = documents()
        .iter()
        .filter(|(p, _)| p != BENCHMARKS && p != "docs/reference.md")
        .flat_map(|(p, d)| unmarked(p, d, ALLOWED, &mut used))
        .collect();
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n"));
    let unused: Vec<_> = ALLOWED.iter().filter(|(f, _)| !used.contains(f)).collect();
    assert!(
        unused.is_empty(),
        "ALLOWED entries that no document uses any more (remove them): {unused:?}"
    );
}

#[cfg(test)]
mod checker {
    use super::*;

    const BENCH: &str = "# Benchmarks\n\n| promote | <!--fig:promote-->150 ms<!--/fig--> |\n\n\
        Not this: `<!--fig:KEY-->TEXT<!--/fig-->`.\n";

    fn files(readme: &str) -> Vec<(String, String)> {
        vec![
            (BENCHMARKS.to_string(), BENCH.to_string()),
            ("README.md".to_string(), readme.to_string()),
        ]
    }

    fn no_file(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_quote_equal_to_its_definition_near_a_pointer_passes() {
        let readme = "Promote took <!--fig:promote-->150 ms<!--/fig--> (make bench, \
                      docs/benchmarks.md).\n";
        assert_eq!(
            check_markers(&files(readme), &no_file),
            Vec::<String>::new()
        );
        let table = "Measured by make bench (docs/benchmarks.md):\n\n| a | b |\n|---|---|\n\
                     | promote | <!--fig:promote-->150 ms<!--/fig--> |\n";
        assert_eq!(check_markers(&files(table), &no_file), Vec::<String>::new());
    }

    #[test]
    fn a_drifted_quote_fails_naming_the_figure_to_write() {
        let readme = "Promote took <!--fig:promote-->130 ms<!--/fig--> (docs/benchmarks.md).\n";
        let e = check_markers(&files(readme), &no_file);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("README.md:1: `130 ms` quotes fig:promote"),
            "{e:?}"
        );
        assert!(e[0].contains("write `150 ms` here"), "{e:?}");
    }

    #[test]
    fn an_unknown_key_fails() {
        let readme = "Demote took <!--fig:demote-->22 ms<!--/fig--> (docs/benchmarks.md).\n";
        let e = check_markers(&files(readme), &no_file);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("fig:demote (`22 ms`) is not defined"),
            "{e:?}"
        );
    }

    #[test]
    fn a_quote_without_a_pointer_to_benchmarks_md_fails() {
        let readme = "Promote took <!--fig:promote-->150 ms<!--/fig-->.\n\nOther.\n";
        let e = check_markers(&files(readme), &no_file);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("does not name docs/benchmarks.md"), "{e:?}");
    }

    #[test]
    fn unpaired_markers_and_bad_keys_fail() {
        for (readme, says) in [
            (
                "a <!--fig:promote-->150 ms (docs/benchmarks.md)\n",
                "has no <!--/fig-->",
            ),
            (
                "a 150 ms<!--/fig--> (docs/benchmarks.md)\n",
                "a closing marker without",
            ),
            (
                "a <!--fig:promote-->150 ms<!--/test--> b\n",
                "has no <!--/fig-->",
            ),
            (
                "a <!--fig:Promote_1-->150 ms<!--/fig--> b\n",
                "is no marker key",
            ),
            ("a <!--fig:promote--><!--/fig--> b\n", "not one figure"),
        ] {
            let e = check_markers(&files(readme), &no_file);
            assert!(e.len() == 1 && e[0].contains(says), "{readme}: {e:?}");
        }
    }

    #[test]
    fn a_key_defined_twice_in_benchmarks_md_fails() {
        let bench = format!("{BENCH}| again | <!--fig:promote-->151 ms<!--/fig--> |\n");
        let e = check_markers(&[(BENCHMARKS.to_string(), bench)], &no_file);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("fig:promote is defined twice (first at line 3)"),
            "{e:?}"
        );
    }

    #[test]
    fn a_test_marker_needs_its_file_and_the_number_in_it() {
        let readme = "300+ set-ups (it asserts <!--test:tests/x.rs-->300<!--/test-->)\n";
        let read = |p: &str| (p == "tests/x.rs").then(|| "assert!(n >= 300_usize);".to_string());
        assert_eq!(check_markers(&files(readme), &read), Vec::<String>::new());
        let low = |p: &str| (p == "tests/x.rs").then(|| "assert!(n >= 3000);".to_string());
        let e = check_markers(&files(readme), &low);
        assert!(e.len() == 1 && e[0].contains("does not hold 300"), "{e:?}");
        let e = check_markers(&files(readme), &no_file);
        assert!(e.len() == 1 && e[0].contains("does not exist"), "{e:?}");
        // A number on several lines names its own: the anchor must be on a line with it.
        let twice = |p: &str| {
            (p == "tests/x.rs").then(|| "let a = 300;\nassert!(n >= 300, \"few\");".to_string())
        };
        let e = check_markers(&files(readme), &twice);
        assert!(e.len() == 1 && e[0].contains("is on 2 lines"), "{e:?}");
        let anchored = "it asserts <!--test:tests/x.rs#few-->300<!--/test-->\n";
        assert_eq!(
            check_markers(&files(anchored), &twice),
            Vec::<String>::new()
        );
        let elsewhere = "it asserts <!--test:tests/x.rs#let-->3<!--/test-->\n";
        let e = check_markers(&files(elsewhere), &twice);
        assert!(
            e.len() == 1 && e[0].contains("on a line naming `let`"),
            "{e:?}"
        );
    }

    #[test]
    fn the_scan_finds_measurement_looking_figures() {
        let found = |s: &str| -> Vec<String> {
            figures(s)
                .into_iter()
                .map(|(a, b)| s[a..b].to_string())
                .collect()
        };
        assert_eq!(
            found("took 203 ms, then 36.9× and 1.45x, at 0.075 %"),
            ["203 ms", "36.9×", "1.45x", "0.075 %"]
        );
        assert_eq!(
            found("3060–3368 after; 0.02–0.28 s idle; 929–1896 ms; -43 ms"),
            ["3060–3368", "0.02–0.28 s", "929–1896 ms", "43 ms"]
        );
        // Versions, addresses, dates, identifiers, hex, plain counts and formulas are no figures.
        assert!(found(
            "RHEL 8.0–8.4, 192.0.2.21–23, 2026-12-01 08:29, v0.1.0, x86_64, ipv6, 0x1f, \
             lease 0x…, 3 nodes, 1.2 × token, 5 s, steps 2–4, 1/37, 10ms_x"
        )
        .is_empty());
    }

    #[test]
    fn an_unmarked_figure_fails_unless_marked_in_code_or_allowed() {
        let allowed = [("every 20 ms", "a polling interval")];
        let doc = "Promote took 150 ms.\nA client polls every 20 ms.\n\
                   Quoted: <!--fig:promote-->150 ms<!--/fig-->. Code: `sleep 0.5 ms`.\n\
                   ```\nlatency 3 ms\n```\n";
        let mut used = BTreeSet::new();
        let e = unmarked("docs/x.md", doc, &allowed, &mut used);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("docs/x.md:1: unmarked figure `150 ms`"),
            "{e:?}"
        );
        assert!(used.contains("every 20 ms"));
        // An allowed fragment covers only the figure inside it.
        let e = unmarked(
            "d",
            "every 20 ms, and 30 ms\n",
            &allowed,
            &mut BTreeSet::new(),
        );
        assert!(e.len() == 1 && e[0].contains("`30 ms`"), "{e:?}");
    }
}
