//! `make bench-watchdog`: the frozen guard and the hardware watchdog in figures, at the DEFAULT
//! lease settings, on a real (emulated) i6300esb in a qemu VM (lab/src/vm.rs), etcd a
//! three-member cluster outside the VM: for each trial the guard is SIGSTOPped at spread
//! moments after taking the master with `hamaster takeover`; measured are freeze → WATCHDOG (qemu's QMP event) and
//! the watchdog's lead over etcd's deletion of the key (etcdctl watch, etcd's side).
//!
//! Writes its section into docs/benchmarks.md. `WATCHDOG_TRIALS` sets N (default 5).

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::time::Duration;

use support::vm::freeze_trial;

const MARK_START: &str = "<!-- bench:watchdog:start -->";
const MARK_END: &str = "<!-- bench:watchdog:end -->";

fn main() {
    let trials: u32 = std::env::var("WATCHDOG_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut to_reset = Vec::new();
    let mut lead = Vec::new();
    let mut timeouts = Vec::new();
    for i in 0..trials {
        // Spread over the renewal cycle (lease_ttl/3 = 3.3 s).
        let delay = Duration::from_millis(u64::from(i % 5) * 700);
        let f = freeze_trial(&format!("wb{i}"), delay);
        eprintln!(
            "trial {i}: timeout {} s, freeze -> WATCHDOG {:.3} s, lead over the key's deletion {:.3} s",
            f.timeout_s,
            f.watchdog - f.frozen,
            f.deleted - f.watchdog
        );
        to_reset.push(f.watchdog - f.frozen);
        lead.push(f.deleted - f.watchdog);
        timeouts.push(f.timeout_s);
    }
    let fmt = |v: &[f64]| {
        format!(
            "{:.2} / {:.2} / {:.2}",
            common::quantile(v, 0.0),
            common::median(v),
            common::quantile(v, 1.0)
        )
    };
    timeouts.sort_unstable();
    timeouts.dedup();
    let section = format!(
        "{MARK_START}\n## The watchdog and a frozen guard (`make bench-watchdog`, {})\n\n\
         qemu (software emulation) with an emulated i6300esb, Debian's kernel, busybox and this \
         build of hamaster; etcd 3 members outside the VM on the same bridge; `hamaster takeover` \
         at the default lease settings (lease_ttl 10 s without corosync, lease_margin 2 s); the \
         guard SIGSTOPped 0, 0.7, 1.4, 2.1 or 2.8 s after taking the master (across the renewal cycle). \
         {trials} trials, min / median / max:\n\n\
         | measure | seconds |\n|---|---|\n\
         | watchdog timeout set by the guard | {} |\n\
         | freeze → WATCHDOG (qemu's QMP event, the VM powered off) | {} |\n\
         | WATCHDOG → etcd deletes the key (its lead; must be > 0) | {} |\n\n\
         The freeze falls anywhere in the renewal cycle, so freeze → WATCHDOG is the timeout less \
         the time since the last ping. The reset comes at most timeout × 1.0066 (the emulated \
         i6300esb's two stages) after the last ping, which the guard places so that this ends \
         before send time + lease_ttl / 1.084 (docs/safety.md). Software emulation because nested KVM \
         does not boot on these machines: `-cpu host` aborts (MSR 0x10a), `host,-arch-capabilities` \
         and `qemu64` stay in the kernel's decompressor for over 40 s.\n{MARK_END}\n",
        common::now_utc(),
        timeouts
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        fmt(&to_reset),
        fmt(&lead),
    );
    println!("{section}");
    assert!(
        lead.iter().all(|l| *l > 0.0),
        "etcd deleted a key before the watchdog reset its node: {lead:?}"
    );
    common::write_section(MARK_START, MARK_END, &section);
}
