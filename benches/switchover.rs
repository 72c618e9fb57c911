//! `make bench-switchover`: the planned switchover a client meets most often, side by side on
//! fenced 3-node lab clusters (the lab's fence agent; corosync token 1000 ms; lease_ttl 3 s):
//! hamaster's master with a cold standby (the service starts on promote) and with a warm one
//! (standby=warm: the service runs on every node, promote hands it the role through
//! promote_command), and the IPaddr2 + service group, moved by `pcs node standby` and by `pcs resource move` (pcs 0.11's, which removes
//! its constraint once the move is done), and hamaster also by `hamaster switchover`. The
//! service listens at once, then only 3 s after it starts (lab/healthz.py's start-delay). The
//! client's longest gap through the VIP (a poll every 20 ms, overlapping), from the command until it
//! has been served for 2 s, and Pacemaker's own demote and promote times.
//!
//! Writes its table into docs/benchmarks.md.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::time::{Duration, Instant};

use support::cluster::{longest_outage, HealthClient, Lab};

const MARK_START: &str = "<!-- bench:switchover:start -->";
const MARK_END: &str = "<!-- bench:switchover:end -->";

#[derive(Clone, Copy, PartialEq)]
enum How {
    Standby,
    Move,
    Switchover,
}

impl How {
    fn name(self) -> &'static str {
        match self {
            How::Standby => "`pcs node standby`",
            How::Move => "`pcs resource move`",
            How::Switchover => "`hamaster switchover`",
        }
    }
}

/// Every node's service waits `secs` before it listens, from its next start on.
fn start_delay(lab: &Lab, secs: u64) {
    for i in 0..lab.nodes.len() {
        std::fs::write(lab.run_path(i, "start-delay"), secs.to_string()).unwrap();
    }
}

fn run(lab: &Lab, i: usize, args: &[&str]) {
    let out = lab.on(i, args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        lab.crm_mon_text()
    );
}

/// How long Pacemaker says the last `op` of `api` on node `i` took (ms): its execd's
/// "api demote (call N, PID P) exited with status 0 (execution time 74ms ...)".
fn op_ms(lab: &Lab, i: usize, op: &str) -> Option<f64> {
    let log = lab.log_text(i, "pacemaker.log");
    let line = log
        .lines()
        .rfind(|l| l.contains(&format!("api {op} (call")) && l.contains("exited"))?;
    let took = line.split("execution time ").nth(1)?;
    let end = took.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let n: f64 = took[..end].parse().ok()?;
    match &took[end..] {
        t if t.starts_with("ms") => Some(n),
        t if t.starts_with('s') => Some(n * 1000.0),
        _ => None,
    }
}

/// One planned move of whatever holds the VIP: the client's longest gap (ms) from the command
/// until it has been served for 2 s by another node, and for the master's clone the old
/// node's demote and the new one's promote as Pacemaker timed them. Undone afterwards
/// (unstandby, clear), and settled before the next.
fn trial(lab: &Lab, client: &HealthClient, how: How, resource: &str) -> (f64, Option<(f64, f64)>) {
    let h = lab
        .vip_holder(Duration::from_secs(60), None)
        .unwrap_or_else(|| panic!("nobody holds the VIP:\n{}", lab.crm_mon_text()));
    let name = lab.nodes[h].name.clone();
    let from = (h + 1) % 3;
    assert!(client.wait_ok(Duration::from_secs(30)));
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    let bin = support::OcfDir::get().root.join("hamaster");
    match how {
        How::Standby => run(lab, from, &["pcs", "node", "standby", &name]),
        How::Move if resource == "api-clone" => run(
            lab,
            from,
            &[
                "pcs",
                "resource",
                "move",
                resource,
                "--promoted",
                "--wait=60",
            ],
        ),
        How::Move => run(
            lab,
            from,
            &["pcs", "resource", "move", resource, "--wait=60"],
        ),
        How::Switchover => run(lab, from, &[bin.to_str().unwrap(), "switchover", "api"]),
    }
    let n = lab.vip_holder(Duration::from_secs(60), Some(h));
    assert!(n.is_some(), "no move off {name}:\n{}", lab.crm_mon_text());
    let ops = match (resource, n) {
        ("api-clone", Some(n)) => op_ms(lab, h, "demote").zip(op_ms(lab, n, "promote")),
        _ => None,
    };
    assert!(
        client.wait_ok(Duration::from_secs(60)),
        "served again after {}:\n{}",
        how.name(),
        lab.crm_mon_text()
    );
    std::thread::sleep(Duration::from_secs(2));
    let gap = longest_outage(&client.samples(), t, Instant::now());
    if how == How::Standby {
        run(lab, from, &["pcs", "node", "unstandby", &name]);
    }
    let _ = lab.on(from, &["pcs", "resource", "clear", resource]);
    // The unstandby'd node back as a standby; no move back (both have stickiness or scores).
    assert!(
        lab.wait_online(&lab.node_names(), Duration::from_secs(60)),
        "{}",
        lab.crm_mon_text()
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(client.wait_ok(Duration::from_secs(30)));
    (gap.as_secs_f64() * 1000.0, ops)
}

/// `n` trials of each way, for each start delay: the gaps, by (how, delay); and the
/// demote and promote times Pacemaker logged in the `pcs resource move` trials.
#[allow(clippy::type_complexity)]
fn trials(
    lab: &Lab,
    client: &HealthClient,
    ways: &[How],
    resource: &str,
    n: usize,
) -> (Vec<(How, u64, Vec<f64>)>, Vec<(f64, f64)>) {
    let (mut out, mut ops) = (Vec::new(), Vec::new());
    for delay in [0, 3] {
        start_delay(lab, delay);
        for &how in ways {
            let mut gaps = Vec::new();
            for _ in 0..n {
                let (gap, took) = trial(lab, client, how, resource);
                gaps.push(gap);
                if how == How::Move {
                    ops.extend(took);
                }
            }
            eprintln!("{} (start {delay} s): {gaps:.0?}", how.name());
            out.push((how, delay, gaps));
        }
    }
    (out, ops)
}

/// "demote D ms, promote P ms" (medians of Pacemaker's own times).
fn ops_text(ops: &[(f64, f64)]) -> String {
    let (d, p): (Vec<f64>, Vec<f64>) = ops.iter().copied().unzip();
    match ops.is_empty() {
        true => "not logged".into(),
        false => format!(
            "demote {:.0} ms, promote {:.0} ms",
            common::median(&d),
            common::median(&p)
        ),
    }
}

fn cell(rows: &[(How, u64, Vec<f64>)], how: How, delay: u64) -> String {
    rows.iter()
        .find(|(h, d, _)| *h == how && *d == delay)
        .map_or("-".into(), |(_, _, v)| {
            format!(
                "{:.0} ms ({:.0})",
                common::median(v),
                common::quantile(v, 1.0)
            )
        })
}

fn main() {
    let n: usize = std::env::var("SWITCHOVER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    // Overlapping polls: a gap ends within 20 ms of the first answer possible.
    const OVERLAPPING: bool = true;
    let (ham, ham_client) = common::served_lab_with("sw", "master-with-vip", "", OVERLAPPING);
    let (ham_rows, ham_ops) = trials(
        &ham,
        &ham_client,
        &[How::Standby, How::Move, How::Switchover],
        "api-clone",
        n,
    );
    let seen = ham_client.finish();
    drop(seen);
    drop(ham);
    let (warm, warm_client) = common::served_lab_with(
        "sww",
        "master-with-vip",
        "STANDBY=warm PROMOTE_COMMAND='echo $HAMASTER_FENCING_TOKEN >> /run/handed' \
         DEMOTE_COMMAND='echo $HAMASTER_ROLE >> /run/given-back'",
        OVERLAPPING,
    );
    let (warm_rows, warm_ops) = trials(
        &warm,
        &warm_client,
        &[How::Standby, How::Move, How::Switchover],
        "api-clone",
        n,
    );
    drop(warm_client.finish());
    drop(warm);
    let (base, base_client) =
        common::served_lab_with("sb", "ipaddr2-group-baseline", "", OVERLAPPING);
    let (base_rows, _) = trials(&base, &base_client, &[How::Standby, How::Move], "base", n);
    drop(base_client);
    drop(base);

    let mut table = String::from(
        "| planned switchover | service listens at once: hamaster cold | hamaster warm | \
         IPaddr2 group | service listens after 3 s: hamaster cold | hamaster warm | IPaddr2 \
         group |\n|---|---|---|---|---|---|---|\n",
    );
    for how in [How::Standby, How::Move, How::Switchover] {
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            how.name(),
            cell(&ham_rows, how, 0),
            cell(&warm_rows, how, 0),
            cell(&base_rows, how, 0),
            cell(&ham_rows, how, 3),
            cell(&warm_rows, how, 3),
            cell(&base_rows, how, 3),
        ));
    }
    let section = format!(
        "{MARK_START}\n## Planned switchover (`make bench-switchover`, {})\n\n\
         Fenced 3-node lab clusters (the lab's fence agent, corosync token 1000 ms, lease_ttl 3 s,\n\
         lease_margin 1 s; the host's Pacemaker 2.1.5 and pcs 0.11.5), a client polling /healthz\n\
         through the VIP: a poll begins every 20 ms, each with 150 ms timeouts, whatever the ones\n\
         before wait for (a gap ends within 20 ms of the first answer the new holder could give). The\n\
         client's longest gap from the command until it has been served for 2 s: median of {n}\n\
         (max). `pcs resource move` is pcs 0.11's (it removes its constraint once the move is\n\
         done; `--promoted` for the master's clone). `hamaster switchover` asks Pacemaker the\n\
         same way and returns once the new master holds the key. The service is lab/healthz.py,\n\
         listening at once or 3 s after it starts: a cold standby starts it on promote, a warm\n\
         one (`standby=warm`, `promote_command` appending the fencing token to a file,\n\
         `demote_command` the role given back) runs it on every node and promote hands it the\n\
         role, the group starts it on start.\n\n{table}\n\
         Where the gap goes, `pcs resource move`, as Pacemaker timed each action (medians over\n\
         both start delays): hamaster cold {}, hamaster warm {}. The gap is the old master's\n\
         demote after its VIP went (the service stopped or given back, the key released, the\n\
         score), Pacemaker's step to the promote, and the new master's promote up to its VIP\n\
         (the key, the VIP, the hand-over or the service's start). With a cold standby the\n\
         service's own start is most of hamaster's gap once it needs 3 s; the warm standby's\n\
         gap does not depend on it.\n{MARK_END}\n",
        common::now_utc(),
        ops_text(&ham_ops),
        ops_text(&warm_ops),
    );
    println!("{section}");
    common::write_section(MARK_START, MARK_END, &section);
}
