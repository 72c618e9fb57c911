//! The guard's fencing thread: the one part of the guard that no I/O can delay. It sleeps on a
//! CLOCK_BOOTTIME timerfd armed at the deadline (it keeps counting through a suspend and
//! fires at once on resume) and, when the deadline comes without a renewal, removes the VIP
//! through a netlink socket of its own, signals the service, and then tells the async side,
//! which logs. The thread itself never logs: a blocked log sink must not hold up the SIGKILL
//! that follows half a margin later. The async side (etcd, health, status, systemd) reaches
//! the leadership only through the same lock, held for one short kernel call at a time, never
//! across an await, a log write or an etcd request.
//!
//! It owns: the `FenceCore` (guard::core) behind that lock, the timer, the thread. It does not
//! talk to etcd or write files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::unistd::Pid;
use tokio::sync::Notify;

use super::core::{Cause, Effects, FenceCore, Leadership, Raise, ServiceRef};
use crate::lease::clock::boottime;
use crate::vip::netlink::{NewAddr, Rtnl};

/// The host side of the fencing orders: the VIP through our own netlink socket, the service
/// by signal (a process group) or by `systemctl` (a unit).
pub struct Kernel {
    rtnl: Option<Rtnl>,
    /// The VIP as it is added: interface, prefix, flags; lifetimes are set per call.
    vip: Option<NewAddr>,
}

impl Kernel {
    /// Opens the netlink socket now, in the guard's network namespace, so that fencing never
    /// has to open one.
    pub fn new(vip: Option<NewAddr>) -> Result<Kernel, String> {
        let rtnl = match vip {
            Some(_) => Some(Rtnl::open().map_err(|e| e.to_string())?),
            None => None,
        };
        Ok(Kernel { rtnl, vip })
    }

    fn with_lifetime(&self, secs: u32) -> Option<NewAddr> {
        self.vip.clone().map(|mut a| {
            a.valid_lft = Some(secs);
            a.preferred_lft = Some(a.preferred_lft.map_or(secs, |p| p.min(secs)));
            a
        })
    }

    /// Whether our exact address is on its interface now.
    fn present(&mut self) -> Result<bool, String> {
        let (Some(rtnl), Some(vip)) = (self.rtnl.as_mut(), &self.vip) else {
            return Ok(false);
        };
        let all = rtnl
            .addresses(vip.ip.is_ipv6())
            .map_err(|e| e.to_string())?;
        Ok(all
            .iter()
            .any(|a| a.ip == vip.ip && a.index == vip.index && a.prefix == vip.prefix))
    }
}

impl Effects for Kernel {
    fn add_vip(&mut self, secs: u32) -> Result<(), String> {
        let Some(new) = self.with_lifetime(secs) else {
            return Ok(());
        };
        let Some(rtnl) = self.rtnl.as_mut() else {
            return Ok(());
        };
        match rtnl.add_address(&new) {
            Ok(()) => Ok(()),
            // Already ours (checked by the caller): give it the lifetime.
            Err(e) if e.errno() == Some(libc::EEXIST) => {
                rtnl.replace_lifetimes(&new).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn extend_vip(&mut self, secs: u32) -> Result<(), String> {
        // NLM_F_REPLACE would add an address that someone removed: look first, so a VIP
        // removed by hand stays removed and monitor reports it.
        if !self.present()? {
            return Err("the VIP is no longer on its interface".into());
        }
        match (self.with_lifetime(secs), self.rtnl.as_mut()) {
            (Some(new), Some(rtnl)) => rtnl.replace_lifetimes(&new).map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }

    fn remove_vip(&mut self) -> Result<(), String> {
        let (Some(rtnl), Some(vip)) = (self.rtnl.as_mut(), &self.vip) else {
            return Ok(());
        };
        let addr = crate::vip::netlink::Addr {
            index: vip.index,
            ip: vip.ip,
            prefix: vip.prefix,
            flags: netlink_packet_route::address::AddressFlags::empty(),
            label: None,
            broadcast: None,
        };
        match rtnl.del_address(&addr) {
            Ok(()) => Ok(()),
            // Gone already (the kernel's lifetime, or by hand).
            Err(e) if e.errno() == Some(libc::EADDRNOTAVAIL) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    fn signal_service(&mut self, service: &ServiceRef, kill: bool) {
        match service {
            ServiceRef::Group(pid) if *pid > 1 => {
                let sig = if kill {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                let _ = killpg(Pid::from_raw(*pid as i32), sig);
            }
            ServiceRef::Group(_) => {}
            ServiceRef::Unit(unit) => {
                // systemd stops the unit its own way (ExecStop, TimeoutStopSec); the KILL
                // half a margin later does not wait for that.
                let args: &[&str] = if kill {
                    &["kill", "--signal=SIGKILL", "--", unit]
                } else {
                    &["stop", "--no-block", "--", unit]
                };
                let spawned = std::process::Command::new("systemctl")
                    .args(args)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                // Reaped by a thread of its own: the fencing thread never waits on it.
                if let Ok(mut child) = spawned {
                    std::thread::spawn(move || child.wait());
                }
            }
        }
    }
}

struct Shared {
    core: Mutex<FenceCore<Kernel>>,
    timer: TimerFd,
    stop: AtomicBool,
    /// Told (after the fact) when the fencing thread has fenced.
    fenced: Notify,
}

/// The handle the async side holds.
#[derive(Clone)]
pub struct Fence {
    shared: Arc<Shared>,
}

impl Fence {
    /// Starts the fencing thread for a leadership, armed at its deadline.
    pub fn start(lead: Leadership, kernel: Kernel) -> std::io::Result<Fence> {
        let timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC)?;
        let shared = Arc::new(Shared {
            core: Mutex::new(FenceCore::new(lead, kernel)),
            timer,
            stop: AtomicBool::new(false),
            fenced: Notify::new(),
        });
        {
            let core = lock(&shared);
            arm(&shared.timer, core.next_wake());
        }
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("fence".into())
            .spawn(move || fencing_thread(thread_shared))?;
        Ok(Fence { shared })
    }

    fn with<T>(&self, f: impl FnOnce(&mut FenceCore<Kernel>, Duration) -> T) -> T {
        let mut core = lock(&self.shared);
        let out = f(&mut core, boottime());
        arm(&self.shared.timer, core.next_wake());
        out
    }

    pub fn deadline(&self) -> Duration {
        lock(&self.shared).lead.deadline()
    }

    /// A renewal sent at `sent` answered with `granted`: moves the deadline and the VIP's
    /// kernel lifetime. false: too late, the guard has fenced or is fencing.
    pub fn renewed(&self, sent: Duration, granted: Duration) -> bool {
        self.with(|core, now| core.renewed(now, sent, granted))
    }

    pub fn add_vip(&self) -> Result<Raise, String> {
        self.with(|core, now| core.add_vip(now))
    }

    pub fn service_started(&self, service: ServiceRef) -> Raise {
        self.with(|core, now| core.service_started(now, service))
    }

    pub fn service_gone(&self) {
        self.with(|core, _| core.service_gone());
    }

    /// Fences now: ownership is lost. Returns whether this call fenced.
    pub fn fence(&self, why: String) -> bool {
        let fenced = self.with(|core, now| core.fence(now, Cause::Lost(why)));
        if fenced {
            self.shared.fenced.notify_one();
        }
        fenced
    }

    pub fn begin_step_down(&self) {
        self.with(|core, _| core.begin_step_down());
    }

    /// When and why the guard fenced, if it has.
    pub fn fenced(&self) -> Option<(Duration, Cause)> {
        lock(&self.shared).lead.fenced().cloned()
    }

    /// Resolves once the guard has fenced (by the thread, or by `fence`).
    pub async fn wait_fenced(&self) {
        loop {
            let notified = self.shared.fenced.notified();
            if self.fenced().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// Ends the fencing thread (after the release, or once fenced and cleaned up).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _core = lock(&self.shared);
        arm(&self.shared.timer, Some(Duration::from_nanos(1)));
    }
}

/// The lock is never held across anything that can block; a panic elsewhere while holding it
/// must not keep the fencing thread from its work.
fn lock(shared: &Shared) -> MutexGuard<'_, FenceCore<Kernel>> {
    shared.core.lock().unwrap_or_else(|p| p.into_inner())
}

/// Arms the timer at boot-clock time `at` (None: disarmed). Called with the lock held, so the
/// timer always matches the core.
fn arm(timer: &TimerFd, at: Option<Duration>) {
    let result = match at {
        Some(t) => timer.set(
            // An all-zero time would disarm the timer: the earliest is 1 ns.
            Expiration::OneShot(TimeSpec::from_duration(t.max(Duration::from_nanos(1)))),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        ),
        None => timer.unset(),
    };
    // timerfd_settime fails only for an invalid descriptor or time; neither can occur here
    // (a time in the past fires at once). Nothing to log from under the lock in any case.
    let _ = result;
}

fn fencing_thread(shared: Arc<Shared>) {
    raise_priority();
    loop {
        // Blocks until the armed time; a re-arm meanwhile moves it. EINTR: look again.
        let _ = shared.timer.wait();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let fenced = {
            let mut core = lock(&shared);
            let fenced = core.on_timer(boottime());
            arm(&shared.timer, core.next_wake());
            fenced
        };
        // Only now, with the VIP down and the service signalled: tell the async side.
        if fenced {
            shared.fenced.notify_one();
        }
    }
}

/// A real-time priority for the fencing thread, so a busy machine does not make it late. It
/// sleeps but for a few system calls at each deadline; without the privilege it keeps the
/// normal priority (the guard runs as root under Pacemaker, so it has it).
fn raise_priority() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler(0, …) changes the calling thread only; param is a valid
    // sched_param that lives across the call. nix has no wrapper for it.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}
