//! The guard machine's clock and its only owner: the one part of the guard that no I/O can
//! delay. A thread of its own owns the machine (no lock: nothing else touches it) and waits on
//! two descriptors: a CLOCK_BOOTTIME timerfd armed at the machine's next wake-up (it keeps
//! counting through a suspend and fires at once on resume), and an eventfd that says inputs
//! are queued. At the deadline the machine removes the VIP through this thread's netlink
//! socket and signals the service before anything else happens. The machine's other effects
//! go out as orders on a channel that never blocks, to the tokio shell (guard::lead), which
//! performs them and feeds the answers back through `Fence::handle`: a send on a channel and a
//! write to the eventfd, never a wait. What the rest of the guard may see of the machine is
//! published after every step, before the step's orders go out, as a `View` in an ArcSwap (a
//! lock-free load). The thread itself
//! never logs: a blocked log sink must not hold up the SIGKILL that follows.
//!
//! It owns: the machine (guard::machine), the timer, the thread, and the host's side of the
//! kernel effects (`Host`). It does not talk to etcd or write files.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use arc_swap::ArcSwap;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::sync::mpsc::UnboundedSender;

use super::machine::{Fault, Input, Kernel, Machine, Order, View};
use super::watchdog::{ArmError, Dog};
use crate::lease::clock::boottime;
use crate::service::ServiceRef;
use crate::vip::netlink::{NewAddr, Rtnl};

/// The host side of the kernel effects: the VIP through our own netlink socket, the service
/// by signal (a process group) or by `systemctl` (a unit).
pub struct Host {
    rtnl: Option<Rtnl>,
    /// The VIPs as they are added: interface, prefix, flags; lifetimes are set per call.
    vips: Vec<NewAddr>,
    /// The watchdog device chosen before the key was taken (guard::watchdog).
    dog: Option<Dog>,
    /// Whether the machine still stands by what it raised (Kernel::lowering clears it).
    standing: Arc<AtomicBool>,
}

impl Host {
    /// Opens the netlink socket now, in the guard's network namespace, so that fencing never
    /// has to open one.
    pub fn new(vips: Vec<NewAddr>, dog: Option<Dog>) -> Result<Host, Fault> {
        let rtnl = match vips.is_empty() {
            false => Some(Rtnl::open().map_err(netlink)?),
            true => None,
        };
        Ok(Host {
            rtnl,
            vips,
            dog,
            standing: Arc::new(AtomicBool::new(true)),
        })
    }

    /// The watchdog device's path, when there is one.
    pub fn watchdog_device(&self) -> Option<&std::path::Path> {
        self.dog.as_ref().map(Dog::path)
    }

    fn with_lifetime(&self, secs: u32) -> Vec<NewAddr> {
        let mut vips = self.vips.clone();
        for a in &mut vips {
            a.valid_lft = Some(secs);
            a.preferred_lft = Some(a.preferred_lft.map_or(secs, |p| p.min(secs)));
        }
        vips
    }
}

/// A netlink failure, as a fault.
fn netlink(e: crate::vip::netlink::NetlinkError) -> Fault {
    Fault::Netlink(e.to_string())
}

impl Kernel for Host {
    fn now(&mut self) -> Duration {
        boottime()
    }

    /// Every address, in order; the first failure fails the add (the machine removes them
    /// all).
    fn add_vip(&mut self, secs: u32) -> Result<(), Fault> {
        let vips = self.with_lifetime(secs);
        let Some(rtnl) = self.rtnl.as_mut() else {
            return Ok(());
        };
        for new in &vips {
            match rtnl.add_address(new) {
                Ok(true) => {}
                // Already ours (checked when the VIP was prepared): give it the lifetime.
                Ok(false) => rtnl.replace_lifetimes(new).map_err(netlink)?,
                Err(e) => return Err(netlink(e)),
            }
        }
        Ok(())
    }

    /// Every address is given the lifetime, even after one failed (the others' lifetimes
    /// must not fall behind); the first failure is told.
    fn extend_vip(&mut self, secs: u32) -> Result<(), Fault> {
        // No look first (a dump under the fence's clock, slow beside many addresses): the
        // machine asks only while the addresses surely are there, and hears of a deletion by
        // another program from the wire watch.
        let vips = self.with_lifetime(secs);
        let Some(rtnl) = self.rtnl.as_mut() else {
            return Ok(());
        };
        let mut first = Ok(());
        for new in &vips {
            if let Err(e) = rtnl.replace_lifetimes(new) {
                first = first.and(Err(netlink(e)));
            }
        }
        first
    }

    /// Every address is tried, even after one failed: a fence takes down all it can at once.
    /// Confirmed only when every one is gone.
    fn remove_vip(&mut self) -> Result<(), Fault> {
        let Some(rtnl) = self.rtnl.as_mut() else {
            return Ok(());
        };
        let mut first = Ok(());
        for vip in &self.vips {
            // Gone already (the kernel's lifetime, or by hand) counts as removed.
            if let Err(e) = rtnl.del_address(&vip.addr()) {
                first = first.and(Err(netlink(e)));
            }
        }
        first
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
        crate::service::stop::signal(service, kill).map_err(Fault::from)
    }

    fn lowering(&mut self) {
        self.standing.store(false, Ordering::SeqCst);
    }

    /// Only the fencing side signals the service, so reaping here never races a signal.
    fn forget_service(&mut self, service: &ServiceRef) {
        if let ServiceRef::Group(pid) = service {
            crate::service::process::reap(*pid);
        }
    }
}

/// What the fencing thread shares with the rest of the guard: a way in (inputs and a wake-up)
/// and a way out (the machine's published view). The machine itself is the thread's alone.
struct Mailbox {
    inputs: mpsc::Sender<Input>,
    /// Written after each input is queued: the fencing thread's poll wakes.
    wake: EventFd,
    stop: AtomicBool,
    view: ArcSwap<View>,
    /// Told after each view is published (Fence::until).
    published: tokio::sync::Notify,
    /// Cleared by the machine (Kernel::lowering) before it takes anything down itself: a start
    /// asked right before its fork, and a watcher that sees the kernel's event, know it at
    /// once, not only once the step's view is published.
    standing: Arc<AtomicBool>,
    watchdog_device: Option<PathBuf>,
}

/// The handle the shell holds. Nothing it does can hold up the fencing thread: an input is a
/// send on a channel and a write to an eventfd, a view is a lock-free load.
#[derive(Clone)]
pub struct Fence {
    shared: Arc<Mailbox>,
}

impl Fence {
    /// Starts the fencing thread for a machine, which it owns from then on; its orders go to
    /// `orders`. A first Tick is queued at once: the raise begins.
    pub fn start(
        mut machine: Machine<Host>,
        orders: UnboundedSender<Order>,
    ) -> std::io::Result<Fence> {
        let flags = TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK;
        let timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, flags)?;
        let wake =
            EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        let (inputs, received) = mpsc::channel();
        let standing = machine.kernel.standing.clone();
        let shared = Arc::new(Mailbox {
            inputs,
            wake,
            stop: AtomicBool::new(false),
            view: ArcSwap::from_pointee(machine.view()),
            published: tokio::sync::Notify::new(),
            standing,
            watchdog_device: machine.kernel.watchdog_device().map(Into::into),
        });
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("fence".into())
            .spawn(move || fencing_thread(&mut machine, received, timer, orders, &thread_shared))?;
        let fence = Fence { shared };
        fence.handle(Input::Tick);
        Ok(fence)
    }

    /// One input for the machine: queued for the fencing thread, which handles it at once.
    pub fn handle(&self, input: Input) {
        // The thread is gone only once the machine has exited: nothing is left to tell it.
        if self.shared.inputs.send(input).is_ok() {
            let _ = self.shared.wake.write(1);
        }
    }

    /// The machine as of its last step.
    pub fn view(&self) -> Arc<View> {
        self.shared.view.load_full()
    }

    /// Ends once `done` holds of the fence, looked at again after each view the fencing
    /// thread publishes (the machine's standing is cleared before its step's view is): no
    /// poll.
    pub async fn until(&self, done: impl Fn(&Fence) -> bool) {
        loop {
            let published = self.shared.published.notified();
            tokio::pin!(published);
            // Registered before the look: a view published right after it still wakes us.
            published.as_mut().enable();
            if done(self) {
                return;
            }
            published.await;
        }
    }

    /// The watchdog device chosen for this leadership.
    pub fn watchdog_device(&self) -> Option<&std::path::Path> {
        self.shared.watchdog_device.as_deref()
    }

    /// Whether announcements may go on: asked between frames by the raise.
    pub fn may_announce(&self) -> bool {
        self.standing() && self.view().may_announce(boottime())
    }

    /// Whether the last master's clients may be told now (View::may_repoint).
    pub fn may_repoint(&self) -> bool {
        self.standing() && self.view().may_repoint(boottime())
    }

    /// Whether the VIP may be defended with an announcement now (View::may_defend).
    pub fn may_defend(&self) -> bool {
        self.standing() && self.view().may_defend(boottime())
    }

    /// Whether the service's start is still wanted, right before its spawn.
    pub fn wants_service(&self) -> bool {
        self.standing() && self.view().wants_service(boottime())
    }

    /// Whether the machine still stands by what it raised: false from the moment it begins
    /// to take anything down itself (Kernel::lowering).
    pub fn standing(&self) -> bool {
        self.shared.standing.load(Ordering::SeqCst)
    }

    /// Ends the fencing thread (the machine has exited).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = self.shared.wake.write(1);
    }
}

/// The fencing thread: it alone owns the machine and makes its kernel effects. It sleeps in
/// poll on the CLOCK_BOOTTIME timerfd armed at the machine's next wake-up and on the inputs'
/// eventfd; it handles every queued input, then the timer (each a step, which publishes the
/// view before sending its orders), and re-arms the timer.
/// It never logs and never waits on anything but the kernel.
fn fencing_thread(
    machine: &mut Machine<Host>,
    inputs: mpsc::Receiver<Input>,
    timer: TimerFd,
    orders: UnboundedSender<Order>,
    shared: &Mailbox,
) {
    super::sched::realtime_thread();
    loop {
        let mut fds = [
            PollFd::new(timer.as_fd(), PollFlags::POLLIN),
            PollFd::new(shared.wake.as_fd(), PollFlags::POLLIN),
        ];
        // EINTR: look again.
        let _ = poll(&mut fds, PollTimeout::NONE);
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        // Non-blocking: EAGAIN when nothing was written since.
        let _ = shared.wake.read();
        while let Ok(input) = inputs.try_recv() {
            step_now(machine, input, &orders, shared);
        }
        // The timer has fired (EAGAIN: not yet), or its time is here.
        let due = timer.wait().is_ok() || machine.next_wake().is_some_and(|t| t <= boottime());
        if due {
            step_now(machine, Input::Tick, &orders, shared);
        }
        arm(&timer, machine.next_wake());
    }
}

/// One input handled on the fencing thread, what it gives out published and sent.
fn step_now(
    machine: &mut Machine<Host>,
    input: Input,
    orders: &UnboundedSender<Order>,
    shared: &Mailbox,
) {
    step(machine, boottime(), input, |out| match out {
        Out::View(view) => {
            shared.view.store(Arc::from(view));
            shared.published.notify_waiters();
        }
        // Unbounded: never blocks. A shell that is gone has nothing left to do.
        Out::Order(order) => {
            let _ = orders.send(order);
        }
    });
}

/// What one step gives the rest of the guard, in the order it gives it.
#[derive(Debug)]
pub(super) enum Out {
    View(Box<View>),
    Order(Order),
}

/// One input handled at `now`: the machine's view given out first, then its orders. A shell
/// that acts on an order (a start that asks whether it is still wanted, state.json written
/// from the view) sees the machine as it was when it gave the order, or later — never before.
/// The fencing thread runs it, and so does the simulation (guard::sim), in the order it gives.
pub(super) fn step<K: Kernel>(
    machine: &mut Machine<K>,
    now: Duration,
    input: Input,
    mut out: impl FnMut(Out),
) {
    machine.handle(now, input);
    out(Out::View(Box::new(machine.view())));
    while let Some(order) = machine.poll_order() {
        out(Out::Order(order));
    }
}

/// Arms the timer at boot-clock time `at` (None: disarmed).
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
    // (a time in the past fires at once).
    let _ = result;
}
