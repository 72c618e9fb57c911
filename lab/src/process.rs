//! Host processes and waits: the repository, unique names, commands run with their output,
//! bounded waits, a real-time sampler thread.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::*;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The repository's root: the lab crate lives in its lab/ folder.
pub fn repo() -> &'static str {
    static REPO: OnceLock<String> = OnceLock::new();
    REPO.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the lab crate sits in the repository")
            .display()
            .to_string()
    })
}

/// A name unique to this process and call, short enough for interface names too.
pub fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("hmt-{tag}-{}-{n}", std::process::id() % 100_000)
}

pub fn sh(cmd: &str, args: &[&str]) -> Output {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    out
}

/// A command's standard output and error, one after the other, as text.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn must(cmd: &str, args: &[&str]) -> String {
    let out = sh(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn run_command(mut cmd: Command) -> Run {
    let started = Instant::now();
    let out = cmd.output().expect("spawn agent");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Gives the calling thread a real-time priority, so that a sampler keeps its cadence on a
/// loaded 2-core machine (a dozen cluster daemons compete with it). Best effort.
pub fn realtime_thread() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: pid 0 = the calling thread; param is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}

/// Polls `cond` every 10 ms until it holds or `limit` passes.
/// Every file under `path`, recursively (`path` itself when it is a file; none when it is
/// missing).
pub fn files_under(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|e| files_under(&e.path()))
        .collect()
}

pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
