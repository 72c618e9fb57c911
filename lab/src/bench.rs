//! What the benchmarks share: order statistics, the time stamp, and replacing one marked
//! section of docs/benchmarks.md while leaving the others alone.

use std::process::Command;

pub fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

pub fn p90(v: &[f64]) -> f64 {
    quantile(v, 0.9)
}

/// The sample at rank ⌊q·n⌋ of the sorted values (NaN for none).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

pub fn now_utc() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Replaces the section between `start` and `end` (both included in `section`) in
/// docs/benchmarks.md, or appends it.
pub fn write_section(start: &str, end: &str, section: &str) {
    let path = format!("{}/docs/benchmarks.md", super::repo());
    let old = std::fs::read_to_string(&path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let new = match (old.find(start), old.find(end)) {
        (Some(a), Some(b)) => format!("{}{}{}", &old[..a], section, &old[b + end.len() + 1..]),
        _ => format!("{old}\n{section}"),
    };
    std::fs::write(path, new).expect("write docs/benchmarks.md");
}

/// Time the process's threads have spent on a CPU (ns), from the scheduler's own accounting
/// in /proc/PID/task/*/schedstat (utime/stime in /proc/PID/stat are sampled at the tick), summed
/// over its threads (the guard's: its runtime and its fencing thread, which live as long as it).
pub fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| {
            let text = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// A fenced 3-node lab with `script` (a cib/ topology) and `extra` settings for it, served
/// through the VIP: the lab and its client.
pub fn served_lab(
    tag: &str,
    script: &str,
    extra: &str,
) -> (crate::cluster::Lab, crate::cluster::HealthClient) {
    served_lab_with(tag, script, extra, false)
}

/// served_lab, its client's polls overlapping or not (HealthClient::start_with).
pub fn served_lab_with(
    tag: &str,
    script: &str,
    extra: &str,
    overlapping: bool,
) -> (crate::cluster::Lab, crate::cluster::HealthClient) {
    use crate::cluster::{create_topology_with, Etcd, HealthClient, Lab, VIP};
    let mut lab = Lab::new(tag, 3, Etcd::OnNodes);
    lab.enable_fencing();
    create_topology_with(&lab, script, false, extra);
    let client = HealthClient::start_with(&lab, VIP, 8443, overlapping);
    assert!(
        client.wait_ok(std::time::Duration::from_secs(90)),
        "served:\n{}",
        lab.crm_mon_text()
    );
    (lab, client)
}
