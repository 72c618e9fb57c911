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

/// A fencing done: which node, and when its power went (Unix ms, to compare with the times
/// guards and etcd give).
#[derive(Debug, Clone)]
pub struct Fenced {
    pub node: String,
    pub at: Instant,
    pub at_unix_ms: u64,
    /// A fabric device's fence: recorded and confirmed, nothing of the node ended.
    pub fabric: bool,
}

/// A request the desk refused on purpose: a fence device that fails (a BMC that does not
/// answer, a wrong password), and when.
#[derive(Debug, Clone)]
pub struct Refused {
    pub node: String,
    pub at: Instant,
}

/// How the device behaves: the next `fail` power-off requests are each answered with a
/// failure after `after` (a BMC that times out), then it works again.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    fail: usize,
    after: Duration,
}

/// The desk: its directory (requests/, done/, state/), and the fencings it did.
pub struct FenceDesk {
    pub dir: PathBuf,
    stop: Arc<AtomicBool>,
    done: Arc<Mutex<Vec<Fenced>>>,
    /// Power turned on by a BMC (a reboot's second half): node, when.
    powered: Arc<Mutex<Vec<(String, Instant)>>>,
    refused: Arc<Mutex<Vec<Refused>>>,
    faults: Arc<Mutex<Faults>>,
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
        let refused = Arc::new(Mutex::new(Vec::new()));
        let faults = Arc::new(Mutex::new(Faults::default()));
        let powered = Arc::new(Mutex::new(Vec::new()));
        let desk = Desk {
            dir: dir.to_path_buf(),
            nodes,
            done: done.clone(),
            powered: powered.clone(),
            refused: refused.clone(),
            faults: faults.clone(),
        };
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            // Bounded by the lab's life: the test stops it; a day at the most.
            let until = Instant::now() + Duration::from_secs(86_400);
            while !s.load(Ordering::SeqCst) && Instant::now() < until {
                serve(&desk);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        FenceDesk {
            dir: dir.to_path_buf(),
            stop,
            done,
            powered,
            refused,
            faults,
            thread: Some(thread),
        }
    }

    /// The next `n` power-off requests fail, each answered `after` it came (the device's own
    /// timeout); then the device works again.
    pub fn fail_next(&self, n: usize, after: Duration) {
        *self.faults.lock().unwrap() = Faults { fail: n, after };
    }

    /// Every request refused on purpose so far.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused.lock().unwrap().clone()
    }

    /// Every fencing so far.
    pub fn fenced(&self) -> Vec<Fenced> {
        self.done.lock().unwrap().clone()
    }

    /// The nodes whose power a BMC turned on (a reboot's second half), and when: their boot
    /// is the test's (Lab::restart).
    pub fn powered_on_by_bmc(&self) -> Vec<(String, Instant)> {
        self.powered.lock().unwrap().clone()
    }

    /// The node is on again (the test rebooted it).
    pub fn powered_on(&self, node: &str) {
        let _ = fs::write(self.dir.join("state").join(node), "on\n");
    }
}

/// The desk's thread's side.
struct Desk {
    dir: PathBuf,
    nodes: Vec<(String, String, String)>,
    done: Arc<Mutex<Vec<Fenced>>>,
    powered: Arc<Mutex<Vec<(String, Instant)>>>,
    refused: Arc<Mutex<Vec<Refused>>>,
    faults: Arc<Mutex<Faults>>,
}

impl Desk {
    /// A fault to act out for this power-off request, if one is due (and counted).
    fn fault_due(&self) -> Option<Duration> {
        let mut f = self.faults.lock().unwrap();
        (f.fail > 0).then(|| {
            f.fail -= 1;
            f.after
        })
    }
}

/// Answers the requests waiting: "off NODE" powers it off (unless the device is set to fail),
/// "on NODE" is granted only once the test has brought the node back; "fabric-off NODE" and
/// "fabric-on NODE" (a fabric device) only record and grant; "power-on NODE" (a BMC's power
/// on) marks the node on and records it, its boot left to the test.
fn serve(desk: &Desk) {
    let (dir, nodes, log) = (&desk.dir, &desk.nodes, &desk.done);
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
            ("off", Some((n, _, _))) if desk.faults.lock().unwrap().fail > 0 => {
                let after = desk.fault_due().unwrap_or_default();
                std::thread::sleep(after);
                desk.refused.lock().unwrap().push(Refused {
                    node: n.clone(),
                    at: Instant::now(),
                });
                eprintln!("fence desk: {n} NOT powered off (a failing device, on purpose)");
                format!("the device did not answer within {} ms", after.as_millis())
            }
            ("off" | "fabric-off", Some((n, ns, link))) => {
                let fabric = action == "fabric-off";
                if !fabric {
                    power_off(ns, link);
                }
                let _ = fs::write(dir.join("state").join(n), "off\n");
                log.lock().unwrap().push(Fenced {
                    node: n.clone(),
                    at: Instant::now(),
                    at_unix_ms: hamaster::lease::clock::unix_ms(),
                    fabric,
                });
                match fabric {
                    true => {
                        eprintln!("fence desk: {n} fenced off its storage (fabric: it runs on)")
                    }
                    false => eprintln!("fence desk: {n} powered off"),
                }
                "ok".to_string()
            }
            ("power-on", Some((n, _, _))) => {
                let _ = fs::write(dir.join("state").join(n), "on\n");
                desk.powered
                    .lock()
                    .unwrap()
                    .push((n.clone(), Instant::now()));
                eprintln!("fence desk: {n} powered on by its BMC (the test boots it)");
                "ok".to_string()
            }
            ("fabric-on", Some((n, _, _))) => {
                let _ = fs::write(dir.join("state").join(n), "on\n");
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

/// The node's power cut: its links down and addresses gone first (nothing more leaves it:
/// the cluster's link and any service network), then every process in its namespace killed.
fn power_off(ns: &str, link: &str) {
    let listed = super::sh("ip", &["-n", ns, "-o", "link", "show"]);
    let mut links: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .filter(|name| name != "lo")
        .collect();
    if !links.iter().any(|l| l == link) {
        links.push(link.to_string());
    }
    for l in &links {
        let _ = super::sh("ip", &["-n", ns, "link", "set", l, "down"]);
        let _ = super::sh("ip", &["-n", ns, "addr", "flush", "dev", l]);
    }
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
