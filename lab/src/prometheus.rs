//! A real Prometheus (Debian's package) run by a test inside a namespace, scraping targets
//! every second, with its own storage in a temporary directory; queried through its HTTP API.
//! Killed, and its directory removed, on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{http_get, unique, wait_for};

/// Where it listens inside its namespace.
pub const LISTEN: &str = "127.0.0.1:9090";

pub struct Prometheus {
    ns: String,
    child: Child,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus in namespace `ns`, scraping `targets` (host:port) every second; waits
    /// (bounded) until it is ready.
    pub fn start(ns: &str, targets: &[&str]) -> Prometheus {
        Prometheus::start_with_rules(ns, targets, None)
    }

    /// As start, with the alerting rules of the file `rules` loaded (evaluated every second).
    pub fn start_with_rules(ns: &str, targets: &[&str], rules: Option<&str>) -> Prometheus {
        let dir = std::env::temp_dir().join(unique("prom"));
        std::fs::create_dir_all(&dir).unwrap();
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let rule_files = rules
            .map(|r| format!("rule_files:\n  - {r}\n"))
            .unwrap_or_default();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
             {rule_files}scrape_configs:\n  - job_name: hamaster\n    static_configs:\n      - targets: [{list}]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "prometheus"])
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={LISTEN}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus (Debian package prometheus)");
        let p = Prometheus {
            ns: ns.to_string(),
            child,
            dir,
        };
        assert!(
            wait_for(Duration::from_secs(30), || http_get(
                &p.ns, LISTEN, "/-/ready"
            )
            .is_some_and(|(code, _)| code == 200)),
            "prometheus did not get ready: {}",
            p.log()
        );
        p
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query's single value (the first series), as Prometheus' API returns it.
    pub fn query(&self, expr: &str) -> Option<f64> {
        let path = format!("/api/v1/query?query={}", encode(expr));
        let (code, body) = http_get(&self.ns, LISTEN, &path)?;
        if code != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// The alerts pending or firing now, as (alertname, alertstate, instance), sorted; None
    /// when Prometheus does not answer.
    pub fn alerts(&self) -> Option<Vec<(String, String, String)>> {
        let path = format!("/api/v1/query?query={}", encode("ALERTS"));
        let (code, body) = http_get(&self.ns, LISTEN, &path)?;
        if code != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let mut out: Vec<(String, String, String)> = v["data"]["result"]
            .as_array()?
            .iter()
            .map(|r| {
                let m = &r["metric"];
                let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
                (s("alertname"), s("alertstate"), s("instance"))
            })
            .collect();
        out.sort();
        Some(out)
    }

    /// Waits (bounded) until `expr` has a value that satisfies `ok`; the last value seen.
    pub fn wait_value(
        &self,
        expr: &str,
        limit: Duration,
        ok: impl Fn(f64) -> bool,
    ) -> (bool, Option<f64>) {
        let mut last = None;
        let met = wait_for(limit, || {
            last = self.query(expr);
            last.is_some_and(&ok)
        });
        (met, last)
    }
}

impl Prometheus {
    /// As wait_value, failing the test with `what`, the last value and Prometheus' log.
    pub fn expect_value(&self, expr: &str, limit: Duration, ok: impl Fn(f64) -> bool, what: &str) {
        let (met, last) = self.wait_value(expr, limit, ok);
        assert!(met, "{what}: {expr} = {last:?}\n{}", self.log());
    }
}

/// Percent-encoding for a query string value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `promtool check metrics` passes `text` (an exposition), silently: else the test fails with
/// what promtool said.
pub fn check_exposition(text: &str) {
    use std::io::Write;
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .expect("promtool (Debian package prometheus)");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{text}",
        super::output_text(&out)
    );
}
