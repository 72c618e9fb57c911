//! `make bench-clients` (issue 53): a failover as the VIP's clients live it, side by side on
//! 3-node lab clusters — hamaster's master (fencing on, cold standby, its defaults: tickle and
//! repoint_neighbors on), the IPaddr2 + service group (fencing on) and keepalived at its
//! defaults (advert 1 s, a track_script). Clients on a host of the switch that drops
//! gratuitous ARP and unsolicited NA (as many hosts, switches and firewalls do) but answers
//! requests for its own address: two idle connections (a long poll nothing answers, a silent
//! session) and a poll of /healthz every 20 ms. For a crash of the VIP's holder, its partition
//! (cut off, carrier kept) and a planned move: from the VIP being up on the new holder, when
//! each idle connection failed (or that it still waited CLIENT_WAIT later), and when the host
//! ignoring gratuitous ARP was served again (it keeps sending to the old MAC until then). And
//! hamaster's record of the sessions in etcd: its writes and size.
//!
//! Writes its table into docs/benchmarks.md.

use hamaster_lab as support;
use hamaster_lab::bench as common;

use std::time::{Duration, Instant};

use support::clients::{IdleClients, Kind};
use support::cluster::{create_topology_with, first_ok_since, Etcd, HealthClient, Lab, VIP};
use support::peers::Peer;

const MARK_START: &str = "<!-- bench:clients:start -->";
const MARK_END: &str = "<!-- bench:clients:end -->";
/// How long an idle client is watched after the fault.
const CLIENT_WAIT: Duration = Duration::from_secs(60);
/// How long the holder stays cut off.
const PARTITION: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tool {
    Hamaster,
    Group,
    Keepalived,
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::Hamaster => "hamaster (master-with-vip, fencing on)",
            Tool::Group => "IPaddr2 + service group (fencing on)",
            Tool::Keepalived => "keepalived (defaults: advert 1 s)",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    Crash,
    Partition,
    Planned,
}

impl Fault {
    fn label(self, tool: Tool) -> String {
        match (self, tool) {
            (Fault::Crash, _) => "crash of the holder".into(),
            (Fault::Partition, _) => {
                format!("holder cut off {} s (carrier kept)", PARTITION.as_secs())
            }
            (Fault::Planned, Tool::Hamaster) => "planned: `hamaster switchover`".into(),
            (Fault::Planned, Tool::Group) => "planned: `pcs resource move`".into(),
            (Fault::Planned, Tool::Keepalived) => "planned: keepalived stopped (SIGTERM)".into(),
        }
    }
}

/// One trial's figures, from the VIP up on the new holder.
struct Row {
    fault: Fault,
    vip_up: Option<Duration>,
    /// Each idle client's connection: ms from the VIP up until it failed (negative: before,
    /// as a service stopped while the VIP is still there sends its FIN), and how.
    long_poll: Option<(i64, String)>,
    silent: Option<(i64, String)>,
    served: Option<Duration>,
    /// How long after the VIP was up the stubborn host's polls were watched.
    watched: Option<Duration>,
}

fn ms(d: Option<Duration>, cap: &str) -> String {
    d.map_or(cap.to_string(), |d| {
        format!("{:.0}", d.as_secs_f64() * 1000.0)
    })
}

fn ended(e: &Option<(i64, String)>, cap: &str) -> String {
    e.as_ref()
        .map_or(cap.to_string(), |(ms, how)| format!("{ms} ({how})"))
}

/// The lab with `tool` serving the VIP, and the holder.
fn lab_for(tool: Tool) -> Lab {
    let tag = match tool {
        Tool::Hamaster => "kh",
        Tool::Group => "kg",
        Tool::Keepalived => "kk",
    };
    let mut lab = Lab::new(tag, 3, Etcd::OnNodes);
    match tool {
        Tool::Hamaster => {
            lab.enable_fencing();
            create_topology_with(&lab, "master-with-vip", false, "");
        }
        Tool::Group => {
            lab.enable_fencing();
            create_topology_with(&lab, "ipaddr2-group-baseline", false, "");
        }
        Tool::Keepalived => {
            for i in 0..3 {
                Peer::Keepalived { advert_ms: 1000 }.start_on(&mut lab, i);
            }
        }
    }
    lab
}

fn run(lab: &Lab, i: usize, args: &[&str]) {
    let out = lab.on(i, args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The fault on holder `h`, and the lab made whole again after it (the holder back).
fn inject(lab: &mut Lab, tool: Tool, fault: Fault, h: usize) {
    let from = (h + 1) % 3;
    match fault {
        Fault::Crash => lab.crash(h),
        Fault::Partition => lab.detach(h),
        Fault::Planned => match tool {
            Tool::Hamaster => {
                let bin = support::OcfDir::get().root.join("hamaster");
                run(lab, from, &[bin.to_str().unwrap(), "switchover", "api"]);
            }
            Tool::Group => run(lab, from, &["pcs", "resource", "move", "base", "--wait=60"]),
            Tool::Keepalived => {
                let pid = lab.nodes[h].dir.join("peer/keepalived.pid");
                let pid = std::fs::read_to_string(pid).expect("keepalived's pid");
                lab.sh(h, &format!("kill -TERM {}", pid.trim()));
            }
        },
    }
}

fn recover(lab: &mut Lab, tool: Tool, fault: Fault, h: usize, since_unix: u64) {
    match fault {
        Fault::Crash => {
            lab.restart(h);
            if tool == Tool::Keepalived {
                Peer::Keepalived { advert_ms: 1000 }.start_on(lab, h);
            }
        }
        Fault::Partition => {
            lab.reattach(h);
            let name = lab.nodes[h].name.clone();
            if lab
                .fenced()
                .iter()
                .any(|f| f.node == name && f.at_unix_ms >= since_unix)
            {
                lab.bring_back(h);
                if tool == Tool::Keepalived {
                    Peer::Keepalived { advert_ms: 1000 }.start_on(lab, h);
                }
            }
        }
        // keepalived stays stopped there: the planned move is its last trial.
        Fault::Planned => {
            if tool == Tool::Group {
                let _ = lab.on((h + 1) % 3, &["pcs", "resource", "clear", "base"]);
            }
        }
    }
    if tool != Tool::Keepalived {
        assert!(
            lab.wait_online(&lab.node_names(), Duration::from_secs(180)),
            "cluster whole again:\n{}",
            lab.crm_mon_text()
        );
        let _ = lab.pcs(0, &["resource", "cleanup"]);
    }
}

/// Each fault once for `tool`, on a lab of its own: a row per fault, and for hamaster what its
/// record of the sessions cost in etcd.
fn trials(tool: Tool) -> (Vec<Row>, Option<String>) {
    let mut lab = lab_for(tool);
    let stubborn = support::clients::stubborn_host(&lab.switch, &format!("k{:?}", tool)[..3]);
    let obs = lab.observe_vip();
    let poll = HealthClient::start_in(&stubborn.name, VIP, 8443, true);
    assert!(
        poll.wait_ok(Duration::from_secs(120)),
        "{}: served",
        tool.label()
    );
    let idle = IdleClients::start(&stubborn.name, VIP, 8443);
    let started = Instant::now();
    let mut windows = Vec::new();
    let mut etcd_cost = None;
    for fault in [Fault::Crash, Fault::Partition, Fault::Planned] {
        let h = lab
            .vip_holder(Duration::from_secs(120), None)
            .expect("a VIP holder");
        // Clients connected to this holder, idle for a few seconds (hamaster records a
        // connection seen twice, a second apart).
        idle.reconnect();
        let t0 = Instant::now();
        assert!(idle.wait_connected_since(t0, Duration::from_secs(60)));
        assert!(poll.wait_ok(Duration::from_secs(60)));
        std::thread::sleep(Duration::from_secs(4));
        let t = Instant::now();
        let since_unix = hamaster::lease::clock::unix_ms();
        inject(&mut lab, tool, fault, h);
        let n = lab.vip_holder(Duration::from_secs(90), Some(h));
        let ended = idle.wait_ended_since(t, CLIENT_WAIT);
        if fault == Fault::Partition {
            let left = PARTITION.saturating_sub(t.elapsed());
            std::thread::sleep(left);
        }
        eprintln!(
            "{} {fault:?}: new holder {n:?}, ended {:?}",
            tool.label(),
            ended
                .iter()
                .map(|e| (e.kind, e.how.clone(), e.at - t))
                .collect::<Vec<_>>()
        );
        windows.push((fault, t, n, ended));
        recover(&mut lab, tool, fault, h, since_unix);
    }
    // The record's writes over the whole run, every leadership's, seen from etcd's side.
    if tool == Tool::Hamaster {
        let key = support::API_KEY.replace("/leader", "/sessions");
        if let Some((writes, bytes)) = lab.etcd.version(&key) {
            let secs = started.elapsed().as_secs_f64();
            etcd_cost = Some(format!(
                "{writes} writes of `{key}` in {secs:.0} s (etcd's version of the key: every \
                 leadership's, the crash's, the partition's and the switchover's takeovers \
                 included), {:.3} a second, with the 20 ms poll's 50 connections a second coming \
                 and going throughout; the last record {bytes} bytes for the two idle clients",
                writes as f64 / secs
            ));
        }
    }
    let samples = poll.finish();
    idle.finish();
    let seen = obs.finish();
    let rows = windows
        .into_iter()
        .map(|(fault, t, n, ended)| {
            let up = n.and_then(|n| {
                seen.holds[n]
                    .iter()
                    .find(|h| h.began.1 >= t)
                    .map(|h| h.began.0)
            });
            let after = |kind: Kind| {
                let up = up?;
                ended
                    .iter()
                    .find(|e| e.kind == kind && e.connected < t && e.how != "left")
                    .map(|e| {
                        let ms = if e.at >= up {
                            (e.at - up).as_millis() as i64
                        } else {
                            -((up - e.at).as_millis() as i64)
                        };
                        (ms, e.how.clone())
                    })
            };
            Row {
                fault,
                vip_up: up.map(|u| u.saturating_duration_since(t)),
                long_poll: after(Kind::LongPoll),
                silent: after(Kind::Silent),
                served: up.and_then(|u| first_ok_since(&samples, u).map(|f| f - u)),
                watched: up.and_then(|u| {
                    let next = samples.iter().map(|s| s.0).filter(|s| *s > u).max()?;
                    Some(next - u)
                }),
            }
        })
        .collect();
    (rows, etcd_cost)
}

fn main() {
    let mut table = String::new();
    let mut cost = String::new();
    let waited = format!("> {} s", CLIENT_WAIT.as_secs());
    for tool in [Tool::Hamaster, Tool::Group, Tool::Keepalived] {
        let (rows, etcd) = trials(tool);
        for r in rows {
            table.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                tool.label(),
                r.fault.label(tool),
                ms(r.vip_up, "never"),
                ended(&r.long_poll, &waited),
                ended(&r.silent, &waited),
                ms(
                    r.served,
                    &format!(
                        "not within {:.0} s (watched)",
                        r.watched.unwrap_or_default().as_secs_f64()
                    )
                ),
            ));
        }
        if let Some(e) = etcd {
            cost = e;
        }
    }
    let section = format!(
        "{MARK_START}\n## The clients' side of a failover\n\nCommand: `make bench-clients`. \
         Measured {} on this machine, one trial of each. A fresh 3-node lab per tool (corosync \
         token 1000 ms; hamaster's lease 3/1 s, its defaults otherwise: tickle and \
         repoint_neighbors on, a cold standby; the group and hamaster fenced by the lab's agent). \
         The clients sit on a host of the switch that drops gratuitous ARP and unsolicited NA \
         (`drop_gratuitous_arp`, `drop_unsolicited_na`): a long poll nothing answers and a \
         silent TCP session, both idle for 4 s on the holder before the fault, and a poll of \
         /healthz every 20 ms. From the VIP being up on the new holder (the observer's earliest \
         bound): when each idle connection failed and how (\"{waited}\": it still waited, as it \
         would until its own timeout; negative: before the VIP was up), and when the host was served again (it sends to the old MAC \
         until then). A crash sends nothing (the link goes first).\n\n\
         | tool | fault | VIP up after the fault (ms) | long poll failed (ms after VIP up) | silent \
         session failed (ms) | stubborn host served (ms) |\n|---|---|---|---|---|---|\n\
         {table}\nhamaster's record of the sessions in etcd during these trials: {cost}.\n{MARK_END}\n",
        common::now_utc()
    );
    print!("{section}");
    common::write_section(MARK_START, MARK_END, &section);
}
