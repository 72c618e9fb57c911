//! The guard machine's clock and lock: the one part of the guard that no I/O can delay. A
//! thread of its own sleeps on a CLOCK_BOOTTIME timerfd armed at the machine's next wake-up
//! (it keeps counting through a suspend and fires at once on resume) and calls the machine
//! then: at the deadline the machine removes the VIP through this thread's netlink socket and
//! signals the service before anything else happens. The machine's other effects go out as
//! orders on a channel that never blocks, to the tokio shell (guard::lead), which performs
//! them and feeds the answers back through `Fence::handle`, under the same lock — held for one
//! short kernel call at a time, never across an await, a log write or an etcd request. The
//! thread itself never logs: a blocked log sink must not hold up the SIGKILL that follows.
//!
//! It owns: the machine (guard::machine) behind that lock, the timer, the thread, and the
//! host's side of the kernel effects (`Host`). It does not talk to etcd or write files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::unistd::Pid;
use tokio::sync::mpsc::UnboundedSender;

use super::machine::{Fault, Input, Kernel, Machine, Order};
use super::watchdog::{ArmError, Dog};
use crate::lease::clock::boottime;
use crate::service::ServiceRef;
use crate::vip::netlink::{NewAddr, Rtnl};

/// The host side of the kernel effects: the VIP through our own netlink socket, the service
/// by signal (a process group) or by `systemctl` (a unit).
pub struct Host {
    rtnl: Option<Rtnl>,
    /// The VIP as it is added: interface, prefix, flags; lifetimes are set per call.
    vip: Option<NewAddr>,
    /// The watchdog device chosen before the key was taken (guard::watchdog).
    dog: Option<Dog>,
}

impl Host {
    /// Opens the netlink socket now, in the guard's network namespace, so that fencing never
    /// has to open one.
    pub fn new(vip: Option<NewAddr>, dog: Option<Dog>) -> Result<Host, Fault> {
        let rtnl = match vip {
            Some(_) => Some(Rtnl::open().map_err(netlink)?),
            None => None,
        };
        Ok(Host { rtnl, vip, dog })
    }

    /// The watchdog device's path, when there is one.
    pub fn watchdog_device(&self) -> Option<&std::path::Path> {
        self.dog.as_ref().map(Dog::path)
    }

    fn with_lifetime(&self, secs: u32) -> Option<NewAddr> {
        self.vip.clone().map(|mut a| {
            a.valid_lft = Some(secs);
            a.preferred_lft = Some(a.preferred_lft.map_or(secs, |p| p.min(secs)));
            a
        })
    }

    /// Whether our exact address is on its interface now.
    fn present(&mut self) -> Result<bool, Fault> {
        let (Some(rtnl), Some(vip)) = (self.rtnl.as_mut(), &self.vip) else {
            return Ok(false);
        };
        let all = rtnl.addresses(vip.ip.is_ipv6()).map_err(netlink)?;
        Ok(all
            .iter()
            .any(|a| a.ip == vip.ip && a.index == vip.index && a.prefix == vip.prefix))
    }
}

/// A netlink failure, as a fault.
fn netlink(e: crate::vip::netlink::NetlinkError) -> Fault {
    Fault::Netlink(e.to_string())
}

impl Kernel for Host {
    fn add_vip(&mut self, secs: u32) -> Result<(), Fault> {
        let Some(new) = self.with_lifetime(secs) else {
            return Ok(());
        };
        let Some(rtnl) = self.rtnl.as_mut() else {
            return Ok(());
        };
        match rtnl.add_address(&new) {
            Ok(true) => Ok(()),
            // Already ours (checked when the VIP was prepared): give it the lifetime.
            Ok(false) => rtnl.replace_lifetimes(&new).map_err(netlink),
            Err(e) => Err(netlink(e)),
        }
    }

    fn extend_vip(&mut self, secs: u32) -> Result<(), Fault> {
        // NLM_F_REPLACE would add an address that someone removed: look first, so a VIP
        // removed by hand stays removed and monitor reports it.
        if !self.present()? {
            return Err(Fault::VipGone);
        }
        match (self.with_lifetime(secs), self.rtnl.as_mut()) {
            (Some(new), Some(rtnl)) => rtnl.replace_lifetimes(&new).map_err(netlink),
            _ => Ok(()),
        }
    }

    fn remove_vip(&mut self) -> Result<(), Fault> {
        let (Some(rtnl), Some(vip)) = (self.rtnl.as_mut(), &self.vip) else {
            return Ok(());
        };
        // Gone already (the kernel's lifetime, or by hand) counts as removed.
        rtnl.del_address(&vip.addr()).map(drop).map_err(netlink)
    }

    fn arm_watchdog(&mut self, timeout_s: u32) -> Result<u32, ArmError> {
        match self.dog.as_mut() {
            Some(dog) => dog.arm(timeout_s),
            None => Err(ArmError::NotArmed("no watchdog device".into())),
        }
    }

    fn ping_watchdog(&mut self, timeout_s: u32) -> Result<(u32, Duration), Fault> {
        let applied = self
            .dog
            .as_mut()
            .ok_or_else(|| Fault::Watchdog("no watchdog device".into()))?
            .ping(timeout_s)
            .map_err(Fault::Watchdog)?;
        Ok((applied, boottime()))
    }

    fn disarm_watchdog(&mut self) -> Result<(), Fault> {
        self.dog
            .as_mut()
            .map_or(Ok(()), Dog::disarm)
            .map_err(Fault::Watchdog)
    }

    fn signal_service(&mut self, service: &ServiceRef, kill: bool) -> Result<(), Fault> {
        match service {
            ServiceRef::Group(pid) if *pid > 1 => {
                let sig = if kill {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                match killpg(Pid::from_raw(*pid as i32), sig) {
                    Ok(()) | Err(Errno::ESRCH) => Ok(()),
                    Err(errno) => Err(Fault::Signal { pid: *pid, errno }),
                }
            }
            ServiceRef::Group(pid) => Err(Fault::NoGroup(*pid)),
            ServiceRef::Unit(unit) => {
                // systemd stops the unit its own way (ExecStop, TimeoutStopSec); --no-block
                // also cancels a start job under way. The KILL later does not wait for it.
                let args: &[&str] = if kill {
                    &["kill", "--signal=SIGKILL", "--", unit]
                } else {
                    &["stop", "--no-block", "--", unit]
                };
                let mut child = std::process::Command::new("systemctl")
                    .args(args)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| Fault::Systemd(format!("systemctl {}: {e}", args.join(" "))))?;
                // Reaped by a thread of its own: the fencing thread never waits on it (and
                // never panics for want of a thread: the child is then left a zombie).
                let _ = std::thread::Builder::new()
                    .name("systemctl".into())
                    .spawn(move || child.wait());
                Ok(())
            }
        }
    }

    /// Only the fencing side signals the service, so reaping here never races a signal.
    fn forget_service(&mut self, service: &ServiceRef) {
        if let ServiceRef::Group(pid) = service {
            crate::service::process::reap(*pid);
        }
    }
}

struct Shared {
    machine: Mutex<Machine<Host>>,
    timer: TimerFd,
    stop: AtomicBool,
    orders: UnboundedSender<Order>,
}

/// The handle the shell holds.
#[derive(Clone)]
pub struct Fence {
    shared: Arc<Shared>,
}

impl Fence {
    /// Starts the fencing thread for a machine; its orders go to `orders`. The machine is
    /// looked at once at once (the raise begins).
    pub fn start(machine: Machine<Host>, orders: UnboundedSender<Order>) -> std::io::Result<Fence> {
        let timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC)?;
        let shared = Arc::new(Shared {
            machine: Mutex::new(machine),
            timer,
            stop: AtomicBool::new(false),
            orders,
        });
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("fence".into())
            .spawn(move || fencing_thread(thread_shared))?;
        let fence = Fence { shared };
        fence.handle(Input::Tick);
        Ok(fence)
    }

    /// One input for the machine, now.
    pub fn handle(&self, input: Input) {
        step(&self.shared, input);
    }

    /// A look at the machine (status, state.json).
    pub fn view<T>(&self, f: impl FnOnce(&Machine<Host>) -> T) -> T {
        f(&lock(&self.shared))
    }

    pub fn deadline(&self) -> Duration {
        lock(&self.shared).deadline()
    }

    /// Whether announcements may go on: asked between frames by the raise.
    pub fn may_announce(&self) -> bool {
        lock(&self.shared).may_announce(boottime())
    }

    /// Whether the VIP may be defended with an announcement now (Machine::may_defend).
    pub fn may_defend(&self) -> bool {
        lock(&self.shared).may_defend(boottime())
    }

    /// Ends the fencing thread (the machine has exited).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _machine = lock(&self.shared);
        arm(&self.shared.timer, Some(Duration::from_nanos(1)));
    }
}

/// The lock is never held across anything that can block; a panic elsewhere while holding it
/// must not keep the fencing thread from its work.
fn lock(shared: &Shared) -> MutexGuard<'_, Machine<Host>> {
    shared.machine.lock().unwrap_or_else(|p| p.into_inner())
}

fn step(shared: &Shared, input: Input) {
    let mut machine = lock(shared);
    machine.handle(boottime(), input);
    while let Some(order) = machine.poll_order() {
        // Unbounded: never blocks. A shell that is gone has nothing left to do.
        let _ = shared.orders.send(order);
    }
    arm(&shared.timer, machine.next_wake());
}

/// Arms the timer at boot-clock time `at` (None: disarmed). Called with the lock held, so the
/// timer always matches the machine.
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
        step(&shared, Input::Tick);
    }
}

/// A real-time priority for the fencing thread, so a busy machine does not make it late. It
/// sleeps but for a few system calls at each wake-up. Without the privilege (or in a cgroup
/// with no real-time budget) it takes nice −10 instead, never less than the shell's; without
/// that either it keeps the normal priority (the guard runs as root under Pacemaker, so it
/// has both). SCHED_RESET_ON_FORK: the systemctl it spawns runs at the normal priority.
fn raise_priority() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler(0, …) changes the calling thread only; param is a valid
    // sched_param that lives across the call. nix has no wrapper for it.
    let fifo = unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param)
    };
    if fifo != 0 {
        let normal = libc::sched_param { sched_priority: 0 };
        // SAFETY: as above; then plain integers (PRIO_PROCESS 0: the calling thread on Linux).
        unsafe {
            let _ =
                libc::sched_setscheduler(0, libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK, &normal);
            // Never lower than it is (the guard's own nice, if an administrator set one).
            let now = libc::getpriority(libc::PRIO_PROCESS, 0);
            let _ = libc::setpriority(libc::PRIO_PROCESS, 0, now.min(-10));
        }
    }
}
