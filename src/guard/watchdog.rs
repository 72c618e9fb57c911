//! The hardware watchdog (parameters watchdog, watchdog_device): a guard that is frozen stops
//! pinging, and the watchdog resets the node before the lease can end at etcd — the frozen
//! guard's service cannot serve on (docs/safety.md). The machine (guard::machine) decides when
//! to arm, ping and disarm; resource::watchdog chooses the device before the key is taken
//! (never the one sbd uses); this module speaks the kernel's watchdog API to it (`Dog`),
//! through the `Device` boundary so that unit tests can record the protocol.
//!
//! The protocol: arm = open (the driver starts counting) + WDIOC_SETTIMEOUT + WDIOC_GETTIMEOUT
//! (what the driver applied); ping = WDIOC_KEEPALIVE, or WDIOC_SETTIMEOUT (which pings too)
//! when the machine wants another timeout; disarm = the magic close ("V", then close). A guard
//! that dies closes without the "V": the watchdog stays armed, which is the point.

use std::fs;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::resource::watchdog::{index_of, sysfs};

/// One open watchdog device, as the kernel's API (linux/watchdog.h) offers it.
pub trait Device: Send {
    /// WDIOC_GETSUPPORT: the driver's WDIOF_* options.
    fn options(&mut self) -> io::Result<u32>;
    /// WDIOC_SETTIMEOUT (pings too); returns the timeout the driver applied.
    fn set_timeout(&mut self, secs: u32) -> io::Result<u32>;
    /// WDIOC_GETTIMEOUT.
    fn timeout(&mut self) -> io::Result<u32>;
    /// WDIOC_KEEPALIVE.
    fn keepalive(&mut self) -> io::Result<()>;
    /// Writes the magic "V", then closes: the driver stops.
    fn magic_close(self: Box<Self>) -> io::Result<()>;
}

/// Opens the device (the driver starts counting from then).
pub trait Opener: Send {
    fn open(&mut self) -> io::Result<Box<dyn Device>>;
    fn path(&self) -> &Path;
}

pub const WDIOF_SETTIMEOUT: u32 = 0x0080;
pub const WDIOF_MAGICCLOSE: u32 = 0x0100;
pub const WDIOF_KEEPALIVEPING: u32 = 0x8000;

/// struct watchdog_info.
#[repr(C)]
struct WatchdogInfo {
    options: u32,
    firmware_version: u32,
    identity: [u8; 32],
}

nix::ioctl_read!(wdioc_getsupport, b'W', 0, WatchdogInfo);
nix::ioctl_read!(wdioc_keepalive, b'W', 5, libc::c_int);
nix::ioctl_readwrite!(wdioc_settimeout, b'W', 6, libc::c_int);
nix::ioctl_read!(wdioc_gettimeout, b'W', 7, libc::c_int);

/// A /dev/watchdogN.
pub struct DevPath(pub PathBuf);

struct DevFile(fs::File);

impl Opener for DevPath {
    fn open(&mut self) -> io::Result<Box<dyn Device>> {
        // Close-on-exec (std's default): the service and systemctl never hold it.
        let f = fs::OpenOptions::new().write(true).open(&self.0)?;
        Ok(Box::new(DevFile(f)))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Device for DevFile {
    fn options(&mut self) -> io::Result<u32> {
        let mut info = WatchdogInfo {
            options: 0,
            firmware_version: 0,
            identity: [0; 32],
        };
        // SAFETY: the fd is open; info is a valid, writable watchdog_info.
        unsafe { wdioc_getsupport(self.0.as_raw_fd(), &mut info) }?;
        Ok(info.options)
    }
    fn set_timeout(&mut self, secs: u32) -> io::Result<u32> {
        let mut v = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
        // SAFETY: the fd is open; v is a valid int the kernel reads and writes back.
        unsafe { wdioc_settimeout(self.0.as_raw_fd(), &mut v) }?;
        Ok(u32::try_from(v).unwrap_or(0))
    }
    fn timeout(&mut self) -> io::Result<u32> {
        let mut v: libc::c_int = 0;
        // SAFETY: as above.
        unsafe { wdioc_gettimeout(self.0.as_raw_fd(), &mut v) }?;
        Ok(u32::try_from(v).unwrap_or(0))
    }
    fn keepalive(&mut self) -> io::Result<()> {
        let mut v: libc::c_int = 0;
        // SAFETY: as above.
        unsafe { wdioc_keepalive(self.0.as_raw_fd(), &mut v) }?;
        Ok(())
    }
    fn magic_close(mut self: Box<Self>) -> io::Result<()> {
        self.0.write_all(b"V")
        // The file closes here, after the "V".
    }
}

/// Arming failed: nothing counts, or a device that was opened could not be stopped again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmError {
    NotArmed(String),
    /// It resets the node at its timeout: nothing may be raised.
    Counting(String),
}

impl std::fmt::Display for ArmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArmError::NotArmed(w) => write!(f, "{w}"),
            ArmError::Counting(w) => write!(f, "{w}: it still counts and will reset the node"),
        }
    }
}

/// The magic close, then sysfs asked whether the device stopped: the kernel closes a device
/// that will not stop without an error ("watchdog did not stop!").
fn close_checked(dev: Box<dyn Device>, path: &Path) -> Result<(), String> {
    dev.magic_close().map_err(|e| format!("magic close: {e}"))?;
    match index_of(path).and_then(|n| sysfs(n, "state")) {
        Some(state) if state == "active" => {
            Err("the driver did not stop after the magic close (sysfs: active)".into())
        }
        _ => Ok(()),
    }
}

/// The guard's watchdog: the devices it may use, in order; the one armed, open while armed.
pub struct Dog {
    openers: Vec<Box<dyn Opener>>,
    chosen: usize,
    open: Option<Box<dyn Device>>,
    applied: u32,
}

impl Dog {
    pub fn new(openers: Vec<Box<dyn Opener>>) -> Dog {
        Dog {
            openers,
            chosen: 0,
            open: None,
            applied: 0,
        }
    }

    /// The device armed (before arming: the first candidate).
    pub fn path(&self) -> &Path {
        self.openers
            .get(self.chosen)
            .map_or(Path::new("/dev/watchdog"), |o| o.path())
    }

    /// Arms the first candidate that opens and takes a timeout; returns what its driver
    /// applied. Err: why none did.
    pub fn arm(&mut self, secs: u32) -> Result<u32, ArmError> {
        let mut why = Vec::new();
        for i in 0..self.openers.len() {
            match self.arm_one(i, secs) {
                Ok(applied) => {
                    self.chosen = i;
                    return Ok(applied);
                }
                Err(ArmError::NotArmed(e)) => why.push(e),
                // A device that could not be stopped again: no other is tried.
                Err(counting) => {
                    self.chosen = i;
                    return Err(counting);
                }
            }
        }
        Err(ArmError::NotArmed(if why.is_empty() {
            "no watchdog device".into()
        } else {
            why.join("; ")
        }))
    }

    /// Opens candidate `i` and sets its timeout. A driver that cannot take a timeout, or
    /// cannot be stopped by the magic close, is refused (and closed again).
    fn arm_one(&mut self, i: usize, secs: u32) -> Result<u32, ArmError> {
        let opener = &mut self.openers[i];
        let shown = opener.path().display().to_string();
        let path = opener.path().to_path_buf();
        let mut dev = opener.open().map_err(|e| {
            ArmError::NotArmed(match e.raw_os_error() {
                Some(libc::EBUSY) => format!("{shown} is held by another process (sbd?): {e}"),
                _ => format!("{shown}: {e}"),
            })
        })?;
        let checked = (|| {
            let options = dev
                .options()
                .map_err(|e| format!("WDIOC_GETSUPPORT: {e}"))?;
            let needed = WDIOF_SETTIMEOUT | WDIOF_MAGICCLOSE | WDIOF_KEEPALIVEPING;
            if options & needed != needed {
                return Err(format!(
                    "its driver lacks {}",
                    [
                        (WDIOF_SETTIMEOUT, "WDIOF_SETTIMEOUT"),
                        (WDIOF_MAGICCLOSE, "WDIOF_MAGICCLOSE"),
                        (WDIOF_KEEPALIVEPING, "WDIOF_KEEPALIVEPING"),
                    ]
                    .iter()
                    .filter(|(f, _)| options & f == 0)
                    .map(|(_, n)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
                ));
            }
            dev.set_timeout(secs)
                .map_err(|e| format!("WDIOC_SETTIMEOUT {secs}: {e}"))?;
            dev.timeout().map_err(|e| format!("WDIOC_GETTIMEOUT: {e}"))
        })();
        match checked {
            Ok(applied) => {
                self.applied = applied;
                self.open = Some(dev);
                Ok(applied)
            }
            Err(why) => match close_checked(dev, &path) {
                Ok(()) => Err(ArmError::NotArmed(format!("{shown}: {why}"))),
                Err(e) => Err(ArmError::Counting(format!("{shown}: {why}; then {e}"))),
            },
        }
    }

    /// A ping that keeps the reset `secs` away (a new timeout where it differs); returns the
    /// timeout in force. A driver that refuses a new timeout is pinged only when the one in
    /// force is not longer: a ping must never move the reset later than the machine allows.
    pub fn ping(&mut self, secs: u32) -> Result<u32, String> {
        let dev = self.open.as_mut().ok_or("not armed")?;
        if secs == self.applied {
            dev.keepalive()
                .map_err(|e| format!("WDIOC_KEEPALIVE: {e}"))?;
            return Ok(self.applied);
        }
        match dev.set_timeout(secs).and_then(|_| dev.timeout()) {
            Ok(applied) => {
                self.applied = applied;
                Ok(applied)
            }
            Err(e) if self.applied <= secs => {
                dev.keepalive()
                    .map_err(|k| format!("WDIOC_SETTIMEOUT {secs}: {e}; WDIOC_KEEPALIVE: {k}"))?;
                Ok(self.applied)
            }
            Err(e) => Err(format!("WDIOC_SETTIMEOUT {secs}: {e} (not pinged)")),
        }
    }

    /// The magic close. Err: the "V" did not go; the device is closed all the same, so the
    /// driver goes on counting and resets the node.
    pub fn disarm(&mut self) -> Result<(), String> {
        let Some(dev) = self.open.take() else {
            return Ok(());
        };
        let path = self.path().to_path_buf();
        close_checked(dev, &path)
    }
}

#[cfg(test)]
pub mod fake {
    //! A recording watchdog device: every call the guard makes, in order.
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Call {
        Open,
        Options,
        SetTimeout(u32),
        Timeout,
        Keepalive,
        MagicClose,
    }

    #[derive(Clone, Default)]
    pub struct Recorder {
        pub calls: Arc<Mutex<Vec<Call>>>,
        /// What open fails with (EBUSY: another opener).
        pub open_error: Option<i32>,
        pub options: Option<u32>,
        /// The driver's granularity: a timeout is rounded up to a multiple of this.
        pub step: u32,
        /// set_timeout fails (a driver that cannot change it while running) after arming.
        pub refuses_new_timeout: bool,
        /// set_timeout always fails.
        pub fails_set: bool,
        /// The magic close fails.
        pub fails_close: bool,
        pub applied: Arc<Mutex<u32>>,
    }

    impl Recorder {
        pub fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
        fn record(&self, c: Call) {
            self.calls.lock().unwrap().push(c);
        }
    }

    struct Open(Recorder);

    impl Opener for Recorder {
        fn open(&mut self) -> io::Result<Box<dyn Device>> {
            self.record(Call::Open);
            if let Some(e) = self.open_error {
                return Err(io::Error::from_raw_os_error(e));
            }
            Ok(Box::new(Open(self.clone())))
        }
        fn path(&self) -> &Path {
            Path::new("/dev/watchdog-fake")
        }
    }

    impl Device for Open {
        fn options(&mut self) -> io::Result<u32> {
            self.0.record(Call::Options);
            Ok(self
                .0
                .options
                .unwrap_or(WDIOF_SETTIMEOUT | WDIOF_MAGICCLOSE | WDIOF_KEEPALIVEPING))
        }
        fn set_timeout(&mut self, secs: u32) -> io::Result<u32> {
            self.0.record(Call::SetTimeout(secs));
            if self.0.fails_set {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            let mut applied = self.0.applied.lock().unwrap();
            if self.0.refuses_new_timeout && *applied != 0 {
                return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
            }
            let step = self.0.step.max(1);
            *applied = secs.div_ceil(step) * step;
            Ok(*applied)
        }
        fn timeout(&mut self) -> io::Result<u32> {
            self.0.record(Call::Timeout);
            Ok(*self.0.applied.lock().unwrap())
        }
        fn keepalive(&mut self) -> io::Result<()> {
            self.0.record(Call::Keepalive);
            Ok(())
        }
        fn magic_close(self: Box<Self>) -> io::Result<()> {
            self.0.record(Call::MagicClose);
            if self.0.fails_close {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::{Call, Recorder};
    use super::*;

    #[test]
    fn arming_opens_sets_and_reads_back_then_pings_keep_or_change_the_timeout() {
        let rec = Recorder::default();
        let mut dog = Dog::new(vec![Box::new(rec.clone())]);
        assert_eq!(dog.arm(8), Ok(8));
        assert_eq!(dog.ping(8), Ok(8));
        assert_eq!(dog.ping(7), Ok(7));
        assert_eq!(dog.disarm(), Ok(()));
        assert_eq!(
            rec.calls(),
            [
                Call::Open,
                Call::Options,
                Call::SetTimeout(8),
                Call::Timeout,
                Call::Keepalive,
                Call::SetTimeout(7),
                Call::Timeout,
                Call::MagicClose,
            ]
        );
        // Nothing after the magic close: a ping then is refused, not sent.
        assert!(dog.ping(8).is_err());
        assert_eq!(rec.calls().len(), 8);
    }

    #[test]
    fn a_device_held_by_another_opener_is_named_and_nothing_is_armed() {
        let rec = Recorder {
            open_error: Some(libc::EBUSY),
            ..Recorder::default()
        };
        let mut dog = Dog::new(vec![Box::new(rec.clone())]);
        let e = dog.arm(8).unwrap_err().to_string();
        assert!(e.contains("held by another process"), "{e}");
        assert_eq!(rec.calls(), [Call::Open]);
        assert!(dog.ping(8).is_err());
    }

    #[test]
    fn a_driver_that_cannot_be_stopped_or_timed_is_closed_again_at_once() {
        let rec = Recorder {
            options: Some(WDIOF_KEEPALIVEPING | WDIOF_SETTIMEOUT),
            ..Recorder::default()
        };
        let mut dog = Dog::new(vec![Box::new(rec.clone())]);
        let e = dog.arm(8).unwrap_err().to_string();
        assert!(e.contains("WDIOF_MAGICCLOSE"), "{e}");
        assert_eq!(rec.calls(), [Call::Open, Call::Options, Call::MagicClose]);
    }

    #[test]
    fn the_first_candidate_that_opens_is_armed() {
        let busy = Recorder {
            open_error: Some(libc::EBUSY),
            ..Recorder::default()
        };
        let free = Recorder::default();
        let mut dog = Dog::new(vec![Box::new(busy.clone()), Box::new(free.clone())]);
        assert_eq!(dog.arm(8), Ok(8));
        assert_eq!(busy.calls(), [Call::Open]);
        assert_eq!(
            free.calls()[..3],
            [Call::Open, Call::Options, Call::SetTimeout(8)]
        );
        // Every candidate refused: each reason named.
        let mut none = Dog::new(vec![Box::new(busy.clone()), Box::new(busy)]);
        let e = none.arm(8).unwrap_err().to_string();
        assert_eq!(e.matches("held by another process").count(), 2, "{e}");
    }

    #[test]
    fn a_candidate_that_opens_but_refuses_is_closed_before_the_next_and_one_that_cannot_be_stopped_ends_it(
    ) {
        let refusing = Recorder {
            fails_set: true,
            ..Recorder::default()
        };
        let free = Recorder::default();
        let mut dog = Dog::new(vec![Box::new(refusing.clone()), Box::new(free.clone())]);
        assert_eq!(dog.arm(8), Ok(8));
        assert_eq!(
            refusing.calls(),
            [
                Call::Open,
                Call::Options,
                Call::SetTimeout(8),
                Call::MagicClose
            ]
        );
        // The magic close fails as well: that device counts on; no other is tried.
        let stuck = Recorder {
            fails_set: true,
            fails_close: true,
            ..Recorder::default()
        };
        let other = Recorder::default();
        let mut dog = Dog::new(vec![Box::new(stuck), Box::new(other.clone())]);
        assert!(matches!(dog.arm(8), Err(ArmError::Counting(_))));
        assert!(other.calls().is_empty());
    }

    #[test]
    fn a_coarse_driver_reports_what_it_applied() {
        let rec = Recorder {
            step: 4,
            ..Recorder::default()
        };
        let mut dog = Dog::new(vec![Box::new(rec)]);
        // Asked for 9, the driver took 12: the machine sees 12 and refuses it (later reset).
        assert_eq!(dog.arm(9), Ok(12));
    }

    #[test]
    fn a_driver_that_refuses_a_new_timeout_is_pinged_only_when_that_is_not_later() {
        let rec = Recorder {
            refuses_new_timeout: true,
            ..Recorder::default()
        };
        let mut dog = Dog::new(vec![Box::new(rec.clone())]);
        assert_eq!(dog.arm(8), Ok(8));
        // Longer allowed: the old 8 s stays, pinged.
        assert_eq!(dog.ping(9), Ok(8));
        // Shorter wanted: a ping would let the reset come later than allowed.
        assert!(dog.ping(7).is_err());
        assert_eq!(
            &rec.calls()[4..],
            [Call::SetTimeout(9), Call::Keepalive, Call::SetTimeout(7),]
        );
    }
}
