//! Fencing in the lab: a STONITH device the way an administrator registers fence_ipmilan
//! (`pcs stonith create lab-fence fence_lab lab_dir=... pcmk_host_list=...`), whose agent
//! (lab/fence_lab, laid over /usr/sbin inside each node's mount namespace only) asks this
//! desk to power a node off: every process in its network namespace killed, its link set down
//! and its addresses flushed — a node whose power was cut. The desk is a thread of the test
//! process answering request files in the lab's directory; the node stays off until the test
//! brings it back (Lab::restart marks it on again).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fencing done: which node, and when its power went.
#[derive(Debug, Clone)]
pub struct Fenced {
    pub node: String,
    pub at: Instant,
}

/// The desk: its directory (requests/, done/, state/), and the fencings it did.
pub struct FenceDesk {
    pub dir: PathBuf,
    stop: Arc<AtomicBool>,
    done: Arc<Mutex<Vec<Fenced>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FenceDesk {
    /// Serves `nodes` (name, network namespace, link) from `dir`, every node on.
    pub fn start(dir: &Path, nodes: Vec<(String, String, String)>) -> FenceDesk {
        for sub in ["requests", "done", "state"] {
            fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for (name, _, _) in &nodes {
            fs::write(dir.join("state").join(name), "on\n").unwrap();
        }
        // fenced runs the agent as root; the directory must be readable to it in any case.
        let _ = super::sh("chmod", &["-R", "a+rwX", dir.to_str().unwrap()]);
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(Mutex::new(Vec::new()));
        let (d, s, log) = (dir.to_path_buf(), stop.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            // Bounded by the lab's life: the test stops it; a day at the most.
            let until = Instant::now() + Duration::from_secs(86_400);
            while !s.load(Ordering::SeqCst) && Instant::now() < until {
                serve(&d, &nodes, &log);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        FenceDesk {
            dir: dir.to_path_buf(),
            stop,
            done,
            thread: Some(thread),
        }
    }

    /// Every fencing so far.
    pub fn fenced(&self) -> Vec<Fenced> {
        self.done.lock().unwrap().clone()
    }

    /// The node is on again (the test rebooted it).
    pub fn powered_on(&self, node: &str) {
        let _ = fs::write(self.dir.join("state").join(node), "on\n");
    }
}

/// Answers the requests waiting: "off NODE" powers it off, "on NODE" is granted only once the
/// test has brought the node back.
fn serve(dir: &Path, nodes: &[(String, String, String)], log: &Mutex<Vec<Fenced>>) {
    let Ok(entries) = fs::read_dir(dir.join("requests")) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let text = fs::read_to_string(e.path()).unwrap_or_default();
        let _ = fs::remove_file(e.path());
        let mut words = text.split_whitespace();
        let (action, node) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let answer = match (action, nodes.iter().find(|(n, _, _)| n == node)) {
            (_, None) => format!("no lab node {node:?}"),
            ("off", Some((n, ns, link))) => {
                power_off(ns, link);
                let _ = fs::write(dir.join("state").join(n), "off\n");
                log.lock().unwrap().push(Fenced {
                    node: n.clone(),
                    at: Instant::now(),
                });
                eprintln!("fence desk: {n} powered off");
                "ok".to_string()
            }
            ("on", Some((n, _, _))) => {
                let on = fs::read_to_string(dir.join("state").join(n)).unwrap_or_default();
                match on.trim() {
                    "on" => "ok".to_string(),
                    _ => format!("{n} is off until the test brings it back"),
                }
            }
            (other, _) => format!("unknown action {other:?}"),
        };
        let tmp = dir.join("done").join(format!(".{name}"));
        let _ = fs::write(&tmp, format!("{answer}\n"));
        let _ = fs::rename(&tmp, dir.join("done").join(&name));
    }
}

/// The node's power cut: its link down and addresses gone first (nothing more leaves it),
/// then every process in its namespace killed.
fn power_off(ns: &str, link: &str) {
    let _ = super::sh("ip", &["-n", ns, "link", "set", link, "down"]);
    let _ = super::sh("ip", &["-n", ns, "addr", "flush", "dev", link]);
    super::kill_all_in(ns);
}

impl Drop for FenceDesk {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
