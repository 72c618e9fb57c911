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
