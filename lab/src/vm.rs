//! A virtual machine with a real (emulated) hardware watchdog for the watchdog tests: qemu with
//! an i6300esb, Debian's kernel (scripts/fetch-vm-kernel: unpacked under /var/tmp, never
//! installed), an initramfs of busybox, hamaster and tests/vm/init (scripts/make-vm-image).
//! Its NIC is a tap device on the etcd cluster's bridge, inside the switch's namespace: etcd
//! runs outside the VM and nothing touches the host's interfaces. Software emulation (TCG):
//! nested KVM does not boot on these machines (docs/benchmarks.md says how it was tried).
//!
//! What the test sees, all on the host's wall clock (seconds since the epoch): the console's
//! lines as they arrive, qemu's QMP events (WATCHDOG carries its own time stamp), and qemu's
//! exit.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::etcd::{EtcdCluster, KeyWatch};

/// The leader key of the VM's resource (`api`, from its config file's name).
pub const KEY: &str = crate::API_KEY;

pub fn wall() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Lines with the wall-clock time they arrived at.
type Lines = Arc<Mutex<Vec<(f64, String)>>>;

pub struct Vm {
    child: Child,
    pub console: Lines,
    /// QMP events: (their own time stamp, name).
    pub events: Lines,
    /// QMP's one connection, for commands (qmp_events reads its answers and events).
    qmp: Arc<Mutex<Option<UnixStream>>>,
    pub dir: PathBuf,
    tap: String,
    switch: String,
    pub booted_at: f64,
}

/// The kernel folder and a fresh image with the test's own build of hamaster and `init` (None:
/// tests/vm/init).
fn image(dir: &Path, init: Option<&Path>) -> (PathBuf, PathBuf) {
    let repo = super::repo();
    let out = Command::new(format!("{repo}/scripts/fetch-vm-kernel"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/fetch-vm-kernel");
    assert!(out.status.success(), "scripts/fetch-vm-kernel failed");
    let kernel = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let initrd = dir.join("initramfs.cpio.gz");
    let st = Command::new(format!("{repo}/scripts/make-vm-image"))
        .arg(&kernel)
        .arg(super::hamaster_bin())
        .arg(&initrd)
        .args(init)
        .status()
        .expect("run scripts/make-vm-image");
    assert!(st.success(), "scripts/make-vm-image failed");
    let vmlinuz = std::fs::read_dir(kernel.join("boot"))
        .expect("kernel boot/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .expect("boot/vmlinuz-*");
    (vmlinuz, initrd)
}

impl Vm {
    /// Boots the VM on the cluster's bridge; `args` go on the kernel command line
    /// (hm.scenario=freeze, hm.survive=20).
    pub fn boot(etcd: &mut EtcdCluster, tag: &str, args: &str) -> Vm {
        let dir = std::env::temp_dir().join(super::unique(&format!("vm-{tag}")));
        std::fs::create_dir_all(&dir).unwrap();
        let (vmlinuz, initrd) = image(&dir, None);
        let guest = etcd.guest_address();
        let first_etcd = etcd
            .endpoints()
            .split(',')
            .next()
            .and_then(|e| e.strip_prefix("http://"))
            .and_then(|e| e.split(':').next())
            .unwrap()
            .to_string();
        let cmdline = format!(
            "console=ttyS0 panic=-1 loglevel=4 hm.ip={guest}/24 \
             hm.etcd={first_etcd} hm.vip={} {args}",
            super::etcd::vm_vip()
        );
        let qemu = Qemu {
            tag,
            dir,
            vmlinuz,
            initrd,
            cmdline,
            memory_mb: 256,
            cpus: 1,
            limit_s: 300,
            extra: vec!["-device".into(), "i6300esb".into()],
        };
        qemu.start(etcd.switch())
    }

    /// A node of `lab`'s cluster (Lab::with_guest) in a VM on the lab's switch: the host's
    /// corosync, Pacemaker and programs (read-only over 9p), Debian's sbd (scripts/fetch-sbd)
    /// in watchdog-only mode on an emulated i6300esb, and with `watchdogs` = 2 a second one for
    /// hamaster beside it (tests/vm/cluster-init, tests/vm/cluster-node). `args` go on the
    /// kernel command line (hm.sbd_timeout=5). Its logs land in `dir`.
    pub fn boot_node(lab: &super::cluster::Lab, tag: &str, watchdogs: u32, args: &str) -> Vm {
        let repo = super::repo();
        let dir = std::env::temp_dir().join(super::unique(&format!("vm-{tag}")));
        std::fs::create_dir_all(&dir).unwrap();
        // Pacemaker's daemons write their logs here as hacluster, through the 9p share.
        super::must("chmod", &["1777", dir.to_str().unwrap()]);
        let (vmlinuz, initrd) = image(
            &dir,
            Some(Path::new(&format!("{repo}/tests/vm/cluster-init"))),
        );
        std::fs::write(dir.join("corosync.conf"), lab.corosync_conf()).unwrap();
        std::fs::copy(
            format!("{repo}/tests/vm/cluster-node"),
            dir.join("cluster-node"),
        )
        .unwrap();
        let out = Command::new(format!("{repo}/scripts/fetch-sbd"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/fetch-sbd");
        assert!(out.status.success(), "scripts/fetch-sbd failed");
        let sbd = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let ocf_root = super::OcfDir::get().root();
        let name = lab.guest_name();
        let cmdline = format!(
            "console=ttyS0 panic=-1 loglevel=4 hm.name={name} hm.ip={}/24 hm.vip={} \
             hm.sbd={sbd} hm.ocfroot={} hm.watchdogs={watchdogs} {args}",
            lab.guest_ip(),
            super::cluster::VIP,
            ocf_root.display()
        );
        let mut extra: Vec<String> = vec!["-device".into(), "i6300esb".into()];
        if watchdogs == 2 {
            extra.extend(["-device".into(), "i6300esb".into()]);
        }
        for (share, path, ro) in [
            ("host", "/".to_string(), ",readonly=on"),
            ("hm", dir.display().to_string(), ""),
        ] {
            extra.push("-virtfs".into());
            extra.push(format!(
                "local,path={path},mount_tag={share},security_model=none,id={share}{ro}"
            ));
        }
        let qemu = Qemu {
            tag,
            dir,
            vmlinuz,
            initrd,
            cmdline,
            memory_mb: 768,
            // A cluster node has more than one CPU: with one, corosync's and Pacemaker's
            // real-time work after a lost quorum, emulated, held the guard's fencing thread up
            // past its watchdog's lead, and the lease's renewals past their deadline.
            cpus: 2,
            limit_s: 900,
            extra,
        };
        qemu.start(&lab.switch)
    }
}

/// One qemu run: TCG (multi-threaded with more than one CPU), a serial console, QMP, a NIC on
/// a tap device of `switch`'s bridge.
struct Qemu<'a> {
    tag: &'a str,
    dir: PathBuf,
    vmlinuz: PathBuf,
    initrd: PathBuf,
    cmdline: String,
    memory_mb: u32,
    /// Virtual CPUs, each a host thread where there is more than one (multi-threaded TCG).
    cpus: u32,
    /// qemu ends by itself after this many seconds (the test's own limit).
    limit_s: u32,
    extra: Vec<String>,
}

impl Qemu<'_> {
    fn start(self, switch: &super::Switch) -> Vm {
        let Qemu {
            tag,
            dir,
            vmlinuz,
            initrd,
            cmdline,
            memory_mb,
            cpus,
            limit_s,
            extra,
        } = self;
        let tap = format!("tap{tag}");
        switch.ip(&["tuntap", "add", "dev", &tap, "mode", "tap"]);
        switch.ip(&["link", "set", &tap, "master", "br0", "up"]);
        let switch = switch.name.clone();
        let qmp = dir.join("qmp.sock");
        // Bounded: qemu ends by itself at the latest after limit_s.
        let mut child = Command::new("ip")
            .args(["netns", "exec", &switch, "timeout", &limit_s.to_string()])
            .arg("qemu-system-x86_64")
            .args(["-accel", if cpus > 1 { "tcg,thread=multi" } else { "tcg" }])
            .args(["-cpu", "max", "-smp", &cpus.to_string()])
            .args(["-m", &memory_mb.to_string()])
            .args(["-nodefaults", "-no-user-config", "-display", "none"])
            .args(["-monitor", "none", "-serial", "stdio", "-no-reboot"])
            .arg("-kernel")
            .arg(&vmlinuz)
            .arg("-initrd")
            .arg(&initrd)
            .args(["-append", &cmdline])
            .args(&extra)
            .args(["-action", "watchdog=poweroff"])
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .args([
                "-netdev",
                &format!("tap,id=n0,ifname={tap},script=no,downscript=no"),
            ])
            .args(["-device", "virtio-net-pci,netdev=n0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // A group of its own: `timeout` and the qemu it runs are ended together.
            .process_group(0)
            .spawn()
            .expect("start qemu-system-x86_64");
        let booted_at = wall();
        let console: Lines = Arc::default();
        let stdout = child.stdout.take().unwrap();
        let sink = console.clone();
        let log = dir.join("console.log");
        std::thread::spawn(move || {
            let mut file = std::fs::File::create(log).ok();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let line = line.trim_end_matches('\r').to_string();
                let t = wall();
                if let Some(f) = file.as_mut() {
                    let _ = writeln!(f, "{t:.3} {line}");
                }
                sink.lock().unwrap().push((t, line));
            }
        });
        let events: Lines = Arc::default();
        let sink = events.clone();
        let commands = Arc::new(Mutex::new(None));
        let writer = commands.clone();
        std::thread::spawn(move || qmp_events(&qmp, sink, writer));
        Vm {
            child,
            console,
            events,
            qmp: commands,
            dir,
            tap,
            switch,
            booted_at,
        }
    }
}

impl Vm {
    /// The first console line that starts with `prefix`, waiting up to `limit`.
    pub fn wait_line(&self, prefix: &str, limit: Duration) -> Option<(f64, String)> {
        self.first_line(limit, |_, l| l.starts_with(prefix))
    }

    /// The first console line (its time stamp and text) that `pick` accepts, waiting up to
    /// `limit` for it.
    pub fn first_line(
        &self,
        limit: Duration,
        pick: impl Fn(f64, &str) -> bool,
    ) -> Option<(f64, String)> {
        let until = Instant::now() + limit;
        loop {
            if let Some(l) = self
                .console
                .lock()
                .unwrap()
                .iter()
                .find(|(t, l)| pick(*t, l))
            {
                return Some(l.clone());
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The first QMP event of this name (its time stamp), waiting up to `limit` for the
    /// reader to pass it on.
    pub fn event(&self, name: &str, limit: Duration) -> Option<f64> {
        let until = Instant::now() + limit;
        loop {
            if let Some((t, _)) = self.events.lock().unwrap().iter().find(|(_, e)| e == name) {
                return Some(*t);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// qemu's exit, waiting up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<(f64, ExitStatus)> {
        let until = Instant::now() + limit;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some((wall(), st));
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the guard to lead with its watchdog armed (sysfs: active); the timeout the
    /// driver has.
    pub fn wait_leader(&self) -> u32 {
        let (_, leader) = self
            .wait_line("HM:LEADER", Duration::from_secs(120))
            .unwrap_or_else(|| panic!("no leader in the VM:\n{}", self.transcript()));
        assert!(
            leader.contains("state=active"),
            "the watchdog is not armed while leading: {leader}\n{}",
            self.transcript()
        );
        leader
            .rsplit("timeout=")
            .next()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("no timeout in {leader}"))
    }

    /// A QMP command without arguments ("stop", "cont"), once QMP is connected (bounded);
    /// false when it could not be sent. Its effect shows as QMP's event (STOP, RESUME).
    pub fn qmp(&self, command: &str) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(w) = self.qmp.lock().unwrap().as_mut() {
                return w
                    .write_all(format!("{{\"execute\":\"{command}\"}}\n").as_bytes())
                    .is_ok();
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The console so far, for failure messages.
    pub fn transcript(&self) -> String {
        self.console
            .lock()
            .unwrap()
            .iter()
            .map(|(t, l)| format!("{:.3} {l}", t - self.booted_at))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // SIGTERM to the group (timeout passes it on to qemu), then SIGKILL to what is left.
        let group = self.child.id() as i32;
        // SAFETY: killpg with the group this Vm started; signals only its own processes.
        unsafe { libc::killpg(group, libc::SIGTERM) };
        let _ = self.wait_exit(Duration::from_secs(5));
        // SAFETY: as above.
        unsafe { libc::killpg(group, libc::SIGKILL) };
        let _ = self.child.wait();
        let _ = Command::new("ip")
            .args(["-n", &self.switch, "link", "del", &self.tap])
            .output();
    }
}

/// Reads QMP's events (name and time stamp) until qemu closes the socket; leaves the
/// connection's writing half in `commands` for Vm::qmp.
fn qmp_events(path: &Path, sink: Lines, commands: Arc<Mutex<Option<UnixStream>>>) {
    let until = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        match UnixStream::connect(path) {
            Ok(s) => break s,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return,
        }
    };
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let _ = writer.write_all(b"{\"execute\":\"qmp_capabilities\"}\n");
    *commands.lock().unwrap() = Some(writer);
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(name) = v["event"].as_str() {
            let ts = &v["timestamp"];
            let t = ts["seconds"].as_f64().unwrap_or(0.0)
                + ts["microseconds"].as_f64().unwrap_or(0.0) / 1e6;
            sink.lock().unwrap().push((t, name.to_string()));
        }
    }
}

/// One freeze trial at the default lease settings: the master taken in the VM, its guard
/// SIGSTOPped `delay` after it leads; when the watchdog powered the VM off, when etcd deleted the key.
pub struct Freeze {
    /// The watchdog timeout in force when the guard froze.
    pub timeout_s: u32,
    pub frozen: f64,
    pub watchdog: f64,
    pub deleted: f64,
}

pub fn freeze_trial(tag: &str, delay: Duration) -> Freeze {
    let mut etcd = EtcdCluster::new(tag);
    let watch = KeyWatch::start(&etcd, KEY, || ());
    let args = format!("hm.scenario=freeze hm.delay={:.1}", delay.as_secs_f64());
    let mut vm = Vm::boot(&mut etcd, tag, &args);
    vm.wait_leader();
    let (frozen, line) = vm
        .wait_line("HM:FROZEN", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("not frozen:\n{}", vm.transcript()));
    // The timeout the reset counts down from: the one in force when the guard froze (it is set
    // anew at every ping, shorter as the lease's end nears; the leader line's is an earlier one).
    let timeout_s = line
        .rsplit("timeout=")
        .next()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no timeout in {line}"));
    let exit = vm.wait_exit(Duration::from_secs(30));
    let watchdog = vm
        .event("WATCHDOG", Duration::from_secs(5))
        .unwrap_or_else(|| {
            panic!(
                "no WATCHDOG event within 30 s of the freeze (exit {exit:?}):\n{}",
                vm.transcript()
            )
        });
    assert!(
        exit.is_some(),
        "qemu did not power off:\n{}",
        vm.transcript()
    );
    let deleted = watch
        .first(Duration::from_secs(20), |e| {
            e.kind == "DELETE" && e.wall >= frozen
        })
        .map(|e| e.wall)
        .unwrap_or_else(|| panic!("etcd never deleted the key:\n{}", vm.transcript()));
    Freeze {
        timeout_s,
        frozen,
        watchdog,
        deleted,
    }
}
