//! The watchdog on a real (emulated) device, in a virtual machine (lab/src/vm.rs): qemu
//! with an i6300esb, Debian's kernel, busybox and hamaster; etcd is a three-member cluster
//! outside the VM, on the same bridge. The master is taken with `hamaster takeover` at the
//! default lease settings (lease_ttl follows corosync: none in the VM, so 10 s; margin 2 s).
//! - A frozen guard (SIGSTOP): the watchdog powers the VM off (qemu's QMP WATCHDOG event)
//!   before etcd deletes the key, seen from etcd's side.
//! - An orderly step-down (`hamaster release`): the watchdog is disarmed; the VM stays up for
//!   twice its timeout and more, and no WATCHDOG event comes.
//!
//! `make check-watchdog` (part of `make check`); root, qemu-system-x86 and busybox-static.

use hamaster_lab as support;

use std::time::Duration;

use support::etcd::{EtcdCluster, KeyWatch};
use support::vm::{freeze_trial, wall, Vm, KEY};

#[test]
#[ignore = "root, qemu and a kernel package: make check-watchdog"]
fn a_frozen_guard_is_reset_by_the_watchdog_before_etcd_drops_its_key() {
    // Between two renewals (every 3.3 s): the watchdog was last pinged a while ago.
    let f = freeze_trial("wf", Duration::from_millis(2500));
    let lead = f.deleted - f.watchdog;
    eprintln!(
        "watchdog timeout {} s; freeze -> WATCHDOG {:.3} s; WATCHDOG -> key deleted at etcd {:.3} s",
        f.timeout_s,
        f.watchdog - f.frozen,
        lead
    );
    assert!(
        f.watchdog > f.frozen && f.watchdog - f.frozen <= f64::from(f.timeout_s) + 0.5,
        "the reset came {:.3} s after the freeze, the timeout is {} s",
        f.watchdog - f.frozen,
        f.timeout_s
    );
    assert!(
        lead > 0.0,
        "etcd deleted the key {:.3} s before the watchdog reset the node",
        -lead
    );
}

#[test]
#[ignore = "root, qemu and a kernel package: make check-watchdog"]
fn an_orderly_step_down_disarms_the_watchdog() {
    let mut etcd = EtcdCluster::new("wd");
    let watch = KeyWatch::start(&etcd, KEY, || ());
    // The VM stays up this long after the release: twice the timeout (at most 9 s at these
    // settings) and then some.
    let survive = 20;
    let mut vm = Vm::boot(
        &mut etcd,
        "wd",
        &format!("hm.scenario=demote hm.survive={survive}"),
    );
    let timeout = u64::from(vm.wait_leader());
    assert!(2 * timeout < survive, "timeout {timeout} s");
    let before = wall();
    let (released, line) = vm
        .wait_line("HM:RELEASED", Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no release:\n{}", vm.transcript()));
    assert!(
        line.contains("rc=0") && line.contains("state=inactive"),
        "{line}\n{}",
        vm.transcript()
    );
    assert!(
        watch
            .first(Duration::from_secs(10), |e| {
                e.kind == "DELETE" && e.wall >= before
            })
            .is_some(),
        "the key was not released (etcd's side)"
    );
    vm.wait_line("HM:ALIVE", Duration::from_secs(survive + 20))
        .unwrap_or_else(|| panic!("the VM did not stay up:\n{}", vm.transcript()));
    let exit = vm.wait_exit(Duration::from_secs(30));
    assert!(exit.is_some(), "qemu did not end:\n{}", vm.transcript());
    assert_eq!(
        vm.event("WATCHDOG", Duration::from_secs(2)),
        None,
        "a WATCHDOG event after the release at {released:.3}:\n{}",
        vm.transcript()
    );
}

/// One TICK line of the pause scenario: (boot clock s, RTC s, VIP present).
fn tick(line: &str) -> Option<(f64, u64, bool)> {
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .map(str::to_string)
    };
    Some((
        field("up=")?.parse().ok()?,
        field("rtc=")?.parse().ok()?,
        field("vip=")? != "0",
    ))
}

/// A VM paused (QMP stop) for longer than the lease while its guard leads, then resumed
/// (cont): what the kernel and the guard do after it (docs/safety.md, H5). Measured: the boot
/// clock stood still through the pause while the RTC (qemu's default, the host's clock) ran
/// on; the VIP was still there after the resume — its kernel lifetime had not run either —
/// while etcd had deleted the key during the pause, so the VM served on a lease that was gone
/// until its guard heard of it.
#[test]
#[ignore = "root, qemu and a kernel package: make check-watchdog"]
fn a_paused_vm_serves_after_it_resumes_until_its_guard_learns_the_lease_is_gone() {
    let mut etcd = EtcdCluster::new("wp");
    let watch = KeyWatch::start(&etcd, KEY, || ());
    let vm = Vm::boot(&mut etcd, "wp", "hm.scenario=pause hm.survive=120");
    vm.wait_leader();
    vm.wait_line("HM:TICK", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no tick:\n{}", vm.transcript()));
    std::thread::sleep(Duration::from_secs(2));
    let pause = Duration::from_secs(20);
    let stopped = wall();
    assert!(vm.qmp("stop"), "QMP stop");
    vm.event("STOP", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no STOP event:\n{}", vm.transcript()));
    let deleted = watch
        .first(pause, |e| e.kind == "DELETE" && e.wall >= stopped)
        .map(|e| e.wall);
    std::thread::sleep(pause.saturating_sub(Duration::from_secs_f64(wall() - stopped)));
    let resumed = wall();
    assert!(vm.qmp("cont"), "QMP cont");
    let before = vm
        .console
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(t, l)| *t < stopped && l.starts_with("HM:TICK"))
        .cloned()
        .unwrap_or_else(|| panic!("no tick before the pause:\n{}", vm.transcript()));
    let after = vm
        .first_line(Duration::from_secs(20), |t, l| {
            t > resumed && l.starts_with("HM:TICK")
        })
        .unwrap_or_else(|| panic!("no tick after the resume:\n{}", vm.transcript()));
    let gone = vm.first_line(Duration::from_secs(30), |t, l| {
        t > resumed && l.starts_with("HM:TICK") && l.contains("vip=0")
    });
    let (b, a) = (tick(&before.1).unwrap(), tick(&after.1).unwrap());
    let host = after.0 - before.0;
    let (up, rtc) = (a.0 - b.0, a.1.saturating_sub(b.1) as f64);
    eprintln!(
        "paused {:.1} s: between the last tick before and the first after, the host's clock \
         ran {host:.1} s, the boot clock {up:.1} s, the RTC {rtc:.0} s; etcd deleted the key \
         {:?} s into the pause; the VIP was {} at the first tick after the resume and gone \
         {:?} s after the resume",
        pause.as_secs_f64(),
        deleted.map(|d| ((d - stopped) * 10.0).round() / 10.0),
        if a.2 { "there" } else { "gone" },
        gone.as_ref()
            .map(|g| ((g.0 - resumed) * 1000.0).round() / 1000.0),
    );
    assert!(deleted.is_some(), "etcd deleted the key during the pause");
    assert!(
        up < host - pause.as_secs_f64() + 2.0,
        "the boot clock stood still through the pause: {up:.1} s of {host:.1} s"
    );
    assert!(
        rtc >= host - 2.0,
        "the RTC ran on through the pause: {rtc} s of {host:.1} s"
    );
    let gone = gone.unwrap_or_else(|| panic!("the VIP stayed:\n{}", vm.transcript()));
    assert!(
        gone.0 - resumed < 10.0,
        "the VIP went {:.1} s after the resume",
        gone.0 - resumed
    );
}
