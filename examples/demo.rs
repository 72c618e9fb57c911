//! `make demo`: a 3-node Pacemaker cluster in network namespaces on this machine, the
//! recommended topology created with pcs from cib/, then the master's node crashed: the
//! failover, the measured outage and the fencing token change. Everything is removed at the
//! end, also after a failure (which names the step that failed).

use hamaster_lab as support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::cluster::{create_topology, outage, Etcd, HealthClient, Lab, VIP};

static STEP: Mutex<String> = Mutex::new(String::new());

fn step(name: &str) {
    *STEP.lock().unwrap() = name.to_string();
    println!("\n\x1b[1m== {name}\x1b[0m");
}

fn show(title: &str, out: std::process::Output) {
    println!("--- {title}");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.trim().is_empty() {
        print!("{err}");
    }
}

fn promoted(lab: &Lab, from: usize, not: Option<&str>) -> String {
    let mut seen = Vec::new();
    let ok = support::wait_for(Duration::from_secs(90), || {
        seen = lab.promoted_seen_from(from, "api");
        seen.len() == 1 && Some(seen[0].as_str()) != not
    });
    assert!(
        ok,
        "no single promoted master (saw {seen:?}):\n{}",
        lab.crm_mon_text()
    );
    seen[0].clone()
}

fn main() {
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
            "\n\x1b[1mdemo FAILED during: {}\x1b[0m\n{info}",
            STEP.lock().map(|s| s.clone()).unwrap_or_default()
        );
    }));
    let ok = std::panic::catch_unwind(run).is_ok();
    println!("\n== cleaned up: every namespace, process and file of the lab is gone");
    std::process::exit(if ok { 0 } else { 1 });
}

fn run() {
    step("bringing up 3 nodes n1 n2 n3 (corosync + pacemaker + etcd member each, in network namespaces)");
    let t = Instant::now();
    let mut lab = Lab::new("demo", 3, Etcd::OnNodes);
    println!(
        "all 3 nodes online after {:.1} s",
        t.elapsed().as_secs_f64()
    );

    step("creating the master with its VIP: cib/master-with-vip.sh (pcs resource create ... promotable)");
    let created = create_topology(&lab, "master-with-vip", true);
    show("pcs", created);
    let master = promoted(&lab, 0, None);
    let mi = lab.index(&master);
    assert!(
        support::wait_for(Duration::from_secs(30), || lab.nodes[mi].ns.holds(VIP)),
        "VIP on {master}"
    );
    show("pcs status (on n1)", lab.pcs(0, &["status"]));

    step(&format!("hamaster status on the master {master}"));
    let toml = lab.dir.join("api.toml");
    std::fs::write(
        &toml,
        format!("etcd_endpoints = \"{}\"\n", lab.etcd.endpoints()),
    )
    .unwrap();
    let bin = support::OcfDir::get().root.join("hamaster");
    show(
        "hamaster status --config api.toml",
        lab.on(
            mi,
            &[
                bin.to_str().unwrap(),
                "status",
                "--config",
                toml.to_str().unwrap(),
            ],
        ),
    );
    let (_, token_before) = lab.leader_key(support::API_KEY).expect("leader key");

    step(&format!(
        "a client on the switch polls http://{VIP}:8443/healthz every 20 ms"
    ));
    let client = HealthClient::start(&lab, VIP, 8443);
    assert!(
        client.wait_ok(Duration::from_secs(30)),
        "the client reaches the master through the VIP"
    );
    println!("client gets 200 from {master} through the VIP");

    step(&format!(
        "crashing the master {master}: every process killed, link down"
    ));
    let crash = Instant::now();
    lab.crash(mi);
    let other = (mi + 1) % 3;
    let new_master = promoted(&lab, other, Some(&master));
    let ni = lab.index(&new_master);
    assert!(
        support::wait_for(Duration::from_secs(30), || lab.nodes[ni].ns.holds(VIP)),
        "VIP on {new_master}"
    );
    assert!(
        client.wait_ok(Duration::from_secs(30)),
        "the client is served again"
    );
    let samples = client.finish();
    let (_, token_after) = lab.leader_key(support::API_KEY).expect("leader key");
    println!(
        "{new_master} promoted {:.1} s after the crash",
        crash.elapsed().as_secs_f64()
    );
    match outage(&samples, crash) {
        Some(o) => println!(
            "client outage (last 200 before → first 200 after): {} ms",
            o.as_millis()
        ),
        None => println!("client outage: not measurable"),
    }
    println!("fencing token: {token_before} → {token_after}");
    show(
        &format!("pcs status (on {new_master})"),
        lab.pcs(ni, &["status"]),
    );
    show(
        &format!("hamaster status on {new_master}"),
        lab.on(
            ni,
            &[
                bin.to_str().unwrap(),
                "status",
                "--config",
                toml.to_str().unwrap(),
            ],
        ),
    );
    step("tearing down");
}
