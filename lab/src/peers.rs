//! The tools users would pick instead of hamaster, run in the same lab on the same faults
//! (`make bench-failover`, BENCH_ONLY=peers): Debian's keepalived (VRRP) and Debian's
//! vip-manager following a leader key kept the way Patroni keeps it (lab/leader_elector.py).
//! The service is the same lab/healthz.py on port 8443, running on every node as these tools'
//! users run it: under keepalived restarted by its supervisor when it dies (systemd's
//! `Restart=always`, 100 ms), under the elector restarted by it, as Patroni restarts postgres.

use std::fs;

use super::cluster::{Lab, VIP};

/// The leader key the elector keeps and vip-manager follows (Patroni's `/service/SCOPE/leader`).
pub const LEADER_KEY: &str = "/service/lab/leader";

/// A peer and its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Peer {
    /// keepalived: every node BACKUP with `nopreempt`, priorities 150/100/50, a track_script
    /// on the service (curl, every second), adverts every `advert_ms` (1000 is its default,
    /// VRRPv2; below a second needs VRRPv3).
    Keepalived { advert_ms: u32 },
    /// vip-manager (its defaults: a look every 1000 ms) on the key the elector keeps with
    /// Patroni's defaults: ttl 30 s, loop_wait 10 s, retry_timeout 10 s.
    VipManager,
}

impl Peer {
    /// The row's name in the peers' table.
    pub fn label(&self) -> String {
        match self {
            Peer::Keepalived { advert_ms: 1000 } => {
                "keepalived 2.2.7, defaults (VRRPv2, advert_int 1)".into()
            }
            Peer::Keepalived { advert_ms } => format!(
                "keepalived 2.2.7, VRRPv3 advert_int {}",
                *advert_ms as f64 / 1000.0
            ),
            Peer::VipManager => {
                "vip-manager 1.0.2 + a Patroni-like leader key (ttl 30, loop_wait 10)".into()
            }
        }
    }

    /// Whether the tool depends on etcd (an etcd outage is one of its faults).
    pub fn uses_etcd(&self) -> bool {
        matches!(self, Peer::VipManager)
    }

    /// Starts the service and the tool on node `i` (again after a crash).
    pub fn start_on(&self, lab: &mut Lab, i: usize) {
        let repo = super::repo();
        let name = lab.nodes[i].name.clone();
        let dir = lab.nodes[i].dir.join("peer");
        fs::create_dir_all(&dir).unwrap();
        let dir_s = dir.display().to_string();
        let service = format!("{repo}/lab/healthz.py");
        match self {
            Peer::Keepalived { advert_ms } => {
                let supervised =
                    format!("while :; do python3 {service} 8443 {dir_s}; sleep 0.1; done");
                lab.daemon(i, "service.out", &["sh", "-c", &supervised]);
                let conf = dir.join("keepalived.conf");
                fs::write(&conf, keepalived_conf(&name, i, *advert_ms)).unwrap();
                let pid = |f: &str| dir.join(f).display().to_string();
                lab.daemon(
                    i,
                    "keepalived.out",
                    &[
                        "keepalived",
                        "--dont-fork",
                        "--log-console",
                        "--log-detail",
                        "--use-file",
                        conf.to_str().unwrap(),
                        "--pid",
                        &pid("keepalived.pid"),
                        "--vrrp_pid",
                        &pid("vrrp.pid"),
                        "--checkers_pid",
                        &pid("checkers.pid"),
                    ],
                );
            }
            Peer::VipManager => {
                let endpoints = lab.etcd.endpoints();
                let elector = format!("{repo}/lab/leader_elector.py");
                lab.daemon(
                    i,
                    "elector.out",
                    &[
                        "python3", &elector, &name, &endpoints, LEADER_KEY, "30", "10", "10", "--",
                        "python3", &service, "8443", &dir_s,
                    ],
                );
                lab.daemon(
                    i,
                    "vip-manager.out",
                    &[
                        "vip-manager",
                        "--ip",
                        VIP,
                        "--netmask",
                        "24",
                        "--interface",
                        "lan0",
                        "--trigger-key",
                        LEADER_KEY,
                        "--trigger-value",
                        &name,
                        "--dcs-type",
                        "etcd",
                        "--dcs-endpoints",
                        &endpoints,
                    ],
                );
            }
        }
    }
}

/// keepalived.conf for node `i`: the setting (priorities 150/100/50, nopreempt), the
/// service tracked by a script, VRRPv3 for sub-second adverts.
fn keepalived_conf(name: &str, i: usize, advert_ms: u32) -> String {
    let version = if advert_ms < 1000 { 3 } else { 2 };
    let priority = [150, 100, 50][i % 3];
    format!(
        "global_defs {{\n  router_id {name}\n  vrrp_version {version}\n  script_user root\n  \
         enable_script_security\n}}\n\
         vrrp_script service {{\n  script \"/usr/bin/curl -sf -m 1 -o /dev/null http://127.0.0.1:8443/healthz\"\n  \
         interval 1\n  timeout 1\n}}\n\
         vrrp_instance api {{\n  state BACKUP\n  nopreempt\n  interface lan0\n  virtual_router_id 51\n  \
         priority {priority}\n  advert_int {}\n  virtual_ipaddress {{\n    {VIP}/24 dev lan0\n  }}\n  \
         track_script {{\n    service\n  }}\n}}\n",
        advert_ms as f64 / 1000.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalived_is_configured_as_the_comparison_says() {
        let default = keepalived_conf("n1", 0, 1000);
        assert!(default.contains("vrrp_version 2") && default.contains("advert_int 1\n"));
        assert!(default.contains("priority 150") && default.contains("nopreempt"));
        assert!(default.contains(&format!("{VIP}/24 dev lan0")));
        let fast = keepalived_conf("n3", 2, 100);
        assert!(fast.contains("vrrp_version 3") && fast.contains("advert_int 0.1\n"));
        assert!(fast.contains("priority 50") && fast.contains("track_script"));
    }
}
