//! Everything a guard needs to know, parsed from the parameter table: etcd, the service, its
//! health check and the optional VIP. Parsed once, by the agent (or takeover): the agent hands
//! it to the guard it spawns as JSON on the guard's standard input.

use crate::lease::etcd::{credentials, tls_options, LeaseError};
use crate::lease::EtcdConfig;
use crate::params::master as mp;
use crate::params::vip as vp;
use crate::params::{ConfigError, Values};
use crate::service::{HealthProbe, HealthSpec, ServiceError, ServiceSpec};
use crate::vip::VipConfig;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MasterConfig {
    pub etcd: EtcdConfig,
    pub service: ServiceSpec,
    pub health: HealthSpec,
    pub vip: Option<VipConfig>,
    /// The further VIPs under the same lease (extra_vips); only with `vip`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_vips: Vec<VipConfig>,
    /// Tell Pacemaker at once when the service fails (push_failures).
    pub push_failures: bool,
    pub watchdog: WatchdogConfig,
    /// Where the guard serves /metrics, /leader and /health (metrics_address); None: nowhere.
    #[serde(default)]
    pub metrics: Option<std::net::SocketAddr>,
    /// What a VIP claimed by another MAC does besides being reported (conflict_action).
    #[serde(default)]
    pub conflict_action: ConflictAction,
    /// How the unpromoted instances keep the service (standby).
    #[serde(default)]
    pub standby: Standby,
    /// What a takeover tells the last master's clients (tickle, repoint_neighbors).
    #[serde(default)]
    pub clients: ClientsConfig,
}

/// tickle and repoint_neighbors (guard::sessions); both on where an older agent said nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientsConfig {
    pub tickle: bool,
    pub repoint_neighbors: bool,
}

impl Default for ClientsConfig {
    fn default() -> ClientsConfig {
        ClientsConfig {
            tickle: true,
            repoint_neighbors: true,
        }
    }
}

/// standby: the service runs on the promoted node only (cold), or on every started instance
/// under a resident guard, promote handing it the role (warm).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standby {
    #[default]
    Cold,
    Warm {
        /// promote_command: run by /bin/sh -c at the hand-over; exit status 0 confirms it.
        promote_command: Option<String>,
        /// demote_command: run by /bin/sh -c when the role is taken back; exit status 0
        /// confirms it (the service is then not stopped).
        #[serde(default)]
        demote_command: Option<String>,
    },
}

impl Standby {
    fn from_values(v: &Values) -> Result<Standby, ConfigError> {
        let p = &mp::STANDBY;
        let hooks = [&mp::PROMOTE_COMMAND, &mp::DEMOTE_COMMAND].map(|h| (h, v.get(h)));
        for (param, hook) in hooks {
            if let Some(h) = hook.filter(|h| h.trim().is_empty()) {
                return Err(ConfigError::invalid(param, h, "is empty"));
            }
        }
        let [(_, promote), (_, demote)] = hooks;
        match v.required(p)? {
            "cold" => match hooks.iter().find_map(|(p, h)| h.map(|h| (*p, h))) {
                Some((param, h)) => Err(ConfigError::invalid(
                    param,
                    h,
                    "needs standby=warm (a cold standby's service starts with the role)",
                )),
                None => Ok(Standby::Cold),
            },
            "warm" => Ok(Standby::Warm {
                promote_command: promote.map(String::from),
                demote_command: demote.map(String::from),
            }),
            other => Err(ConfigError::invalid(p, other, "must be cold or warm")),
        }
    }

    pub fn is_warm(&self) -> bool {
        matches!(self, Standby::Warm { .. })
    }

    /// A warm standby's hook, if set (none when cold).
    pub fn hook(&self, which: WarmHook) -> Option<&str> {
        match (self, which) {
            (
                Standby::Warm {
                    promote_command, ..
                },
                WarmHook::Promote,
            ) => promote_command.as_deref(),
            (Standby::Warm { demote_command, .. }, WarmHook::Demote) => demote_command.as_deref(),
            (Standby::Cold, _) => None,
        }
    }
}

/// A warm standby's hooks: promote_command hands the running service the role, demote_command
/// takes it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmHook {
    Promote,
    Demote,
}

impl WarmHook {
    /// Its parameter's name.
    pub fn name(self) -> &'static str {
        match self {
            WarmHook::Promote => mp::PROMOTE_COMMAND.name,
            WarmHook::Demote => mp::DEMOTE_COMMAND.name,
        }
    }
}

/// conflict_action: a VIP conflict is logged, shown and defended; `Push` also tells Pacemaker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictAction {
    #[default]
    Report,
    Push,
}

impl ConflictAction {
    fn from_values(v: &Values) -> Result<ConflictAction, ConfigError> {
        let p = &crate::params::master::CONFLICT_ACTION;
        match v.required(p)? {
            "report" => Ok(ConflictAction::Report),
            "push" => Ok(ConflictAction::Push),
            other => Err(ConfigError::invalid(p, other, "must be report or push")),
        }
    }
}

/// extra_vips: further addresses beside `ip`, none of them twice (an address is one VIP,
/// whatever its prefix or interface).
fn extra_vips(v: &Values, first: Option<&VipConfig>) -> Result<Vec<VipConfig>, ConfigError> {
    let p = &mp::EXTRA_VIPS;
    let text = v.get(p).unwrap_or_default();
    let extra = VipConfig::list_from(p, text, mp::EXTRA_VIPS_MAX)?;
    if extra.is_empty() {
        return Ok(extra);
    }
    let Some(first) = first else {
        return Err(ConfigError::invalid(
            p,
            &crate::vip::brief(text),
            "needs ip (the first VIP)",
        ));
    };
    let mut seen = vec![first.ip];
    for x in &extra {
        if seen.contains(&x.ip) {
            return Err(ConfigError::invalid(
                p,
                &format!("ip={}", x.ip),
                "names an address twice (ip and extra_vips count together)",
            ));
        }
        seen.push(x.ip);
    }
    Ok(extra)
}

/// metrics_address: a TCP address with a port, as `host:port` or `[v6]:port`.
fn metrics_address(v: &Values) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    let p = &crate::params::master::METRICS_ADDRESS;
    match v.get(p) {
        None | Some("") => Ok(None),
        Some(text) => match text.parse::<std::net::SocketAddr>() {
            Ok(a) if a.port() != 0 => Ok(Some(a)),
            Ok(_) => Err(ConfigError::invalid(p, text, "needs a port other than 0")),
            Err(_) => Err(ConfigError::invalid(
                p,
                text,
                "must be an IP address and port (192.0.2.21:9405, [2001:db8::1]:9405)",
            )),
        },
    }
}

/// A node-local lack (program, user, file): OCF_ERR_INSTALLED, unlike configuration errors.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl MasterConfig {
    pub fn from_values(v: &Values) -> Result<MasterConfig, ConfigError> {
        let etcd = EtcdConfig::from_values(v)?;
        let service = ServiceSpec::from_values(v)?;
        let health = HealthSpec::from_values(v)?;
        let vip = if v.is_set(&vp::IP) {
            Some(VipConfig::from_values(v)?)
        } else {
            None
        };
        let extra_vips = extra_vips(v, vip.as_ref())?;
        Ok(MasterConfig {
            etcd,
            service,
            health,
            vip,
            extra_vips,
            push_failures: v.boolean(&crate::params::master::PUSH_FAILURES)?,
            watchdog: WatchdogConfig::from_values(v)?,
            metrics: metrics_address(v)?,
            conflict_action: ConflictAction::from_values(v)?,
            standby: Standby::from_values(v)?,
            clients: ClientsConfig {
                tickle: v.boolean(&crate::params::master::TICKLE)?,
                repoint_neighbors: v.boolean(&crate::params::master::REPOINT_NEIGHBORS)?,
            },
        })
    }

    /// Every VIP the master owns: `vip`, then extra_vips.
    pub fn vips(&self) -> impl Iterator<Item = &VipConfig> + Clone {
        self.vip.iter().chain(self.extra_vips.iter())
    }

    /// The configuration as the agent hands it to its guard.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The configuration the agent handed over; Err says why it is not one.
    pub fn from_json(text: &str) -> Result<MasterConfig, String> {
        serde_json::from_str(text).map_err(|e| format!("not a guard configuration: {e}"))
    }

    /// Why a running guard cannot take `new` in place of this configuration — a setting that
    /// is not reloadable (src/params/) changed — or None when only reloadable ones differ:
    /// the health check, push_failures, tickle and repoint_neighbors and the announcements.
    pub fn reload_refusal(&self, new: &MasterConfig) -> Option<String> {
        let mut kept = new.clone();
        // A lease that follows the cluster was fixed at promote: corosync changing since
        // (a node added, a new token) is no change of the resource's settings.
        if self.etcd.ttl_from_cluster && new.etcd.ttl_from_cluster {
            kept.etcd.ttl = self.etcd.ttl;
            if self.etcd.margin_derived && new.etcd.margin_derived {
                kept.etcd.margin = self.etcd.margin;
            }
        }
        // etcd is reached another way (Etcd::reconnect, by the guard that takes the reload).
        kept.etcd = kept.etcd.with_connection_of(&self.etcd);
        kept.health = self.health.clone();
        kept.push_failures = self.push_failures;
        kept.conflict_action = self.conflict_action;
        kept.clients = self.clients;
        if let (Some(k), Some(old)) = (&mut kept.vip, &self.vip) {
            k.take_announcements_of(old);
        }
        let what = if kept == *self {
            return None;
        } else if kept.etcd != self.etcd {
            "etcd and lease"
        } else if kept.service != self.service {
            "service"
        } else if kept.watchdog != self.watchdog {
            "watchdog"
        } else if kept.metrics != self.metrics {
            "metrics_address"
        } else if kept.standby != self.standby {
            "standby"
        } else {
            "VIP address"
        };
        Some(format!(
            "the {what} settings changed: that needs a restart, not a reload"
        ))
    }

    /// Reads every file the configuration names and checks the service can run here.
    pub fn check_installed(&self) -> Result<(), InstallError> {
        tls_options(&self.etcd)?;
        credentials(&self.etcd)?;
        self.service.check_installed()?;
        HealthProbe::new(&self.health)?;
        Ok(())
    }
}

/// watchdog=: whether the guard arms a watchdog while it leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchdogMode {
    Off,
    /// Arm one when a device is free; run without it (and say so) when none is.
    Auto,
    /// Promote only with an armed watchdog.
    Required,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WatchdogConfig {
    pub mode: WatchdogMode,
    /// watchdog_device; None: the first free /dev/watchdogN.
    pub device: Option<std::path::PathBuf>,
}

impl WatchdogConfig {
    pub fn from_values(v: &Values) -> Result<WatchdogConfig, ConfigError> {
        let text = v.required(&mp::WATCHDOG)?;
        let mode = match text {
            "off" => WatchdogMode::Off,
            "auto" => WatchdogMode::Auto,
            "required" => WatchdogMode::Required,
            _ => {
                return Err(ConfigError::invalid(
                    &mp::WATCHDOG,
                    text,
                    "must be off, auto or required",
                ))
            }
        };
        let device = match v.get(&mp::WATCHDOG_DEVICE) {
            None | Some("") => None,
            Some(d) if d.starts_with("/dev/") && !d.contains("/../") => {
                Some(std::path::PathBuf::from(d))
            }
            Some(d) => {
                return Err(ConfigError::invalid(
                    &mp::WATCHDOG_DEVICE,
                    d,
                    "must be a device path under /dev/",
                ))
            }
        };
        Ok(WatchdogConfig { mode, device })
    }
}

/// Unreadable files and missing programs are this node's lack (5), malformed contents a
/// configuration error (6).
impl crate::ocf::failure::Failure for InstallError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            InstallError::Lease(e) => e.exit(),
            InstallError::Service(e) => e.exit(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_node_lacks_is_5_and_what_is_malformed_is_6() {
        use crate::ocf::failure::Failure;
        use crate::ocf::OcfExit;
        use crate::pem::PemError;
        use crate::service::ServiceError;
        let unreadable = InstallError::Lease(LeaseError::Pem(PemError::Unreadable {
            param: "etcd_cacert",
            path: "/x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        }));
        assert_eq!(unreadable.exit(), OcfExit::ErrInstalled);
        let pem = PemError::Empty {
            param: "health_cacert",
            path: "/x".into(),
            what: "PEM certificate",
        };
        assert_eq!(
            InstallError::Service(ServiceError::Pem(pem)).exit(),
            OcfExit::ErrConfigured
        );
        assert_eq!(
            InstallError::Service(ServiceError::NotInstalled("no systemctl".into())).exit(),
            OcfExit::ErrInstalled
        );
        // A start that failed now is this node's, not a reason to stop the resource
        // everywhere.
        assert_eq!(
            ServiceError::Failed("systemctl start api.service failed".into()).exit(),
            OcfExit::ErrGeneric
        );
    }
    use crate::params::master::MASTER_AGENT;

    #[test]
    fn the_configuration_handed_to_the_guard_is_the_one_the_agent_parsed() {
        let vars = [
            (
                "etcd_endpoints",
                "http://192.0.2.1:2379,http://192.0.2.2:2379",
            ),
            ("command", "/usr/bin/api"),
            ("args", "--port 8443 'a b'"),
            ("health_url", "https://127.0.0.1:8443/healthz"),
            ("ip", "192.0.2.10"),
            ("cidr_netmask", "24"),
            ("broadcast", "+"),
            ("arp_mode", "reply"),
            ("lease_ttl", "12"),
        ];
        let cfg = MasterConfig::from_values(&Values::from_reskeys(&MASTER_AGENT, &vars)).unwrap();
        let back = MasterConfig::from_json(&cfg.to_json()).unwrap();
        assert_eq!(back, cfg);
        assert!(MasterConfig::from_json("").is_err());
        assert!(MasterConfig::from_json("{}")
            .unwrap_err()
            .contains("not a guard configuration"));
    }

    #[test]
    fn extra_vips_are_each_a_vip_of_their_own_and_refused_clearly() {
        let base = [
            ("etcd_endpoints", "http://192.0.2.1:2379"),
            ("command", "/usr/bin/api"),
            ("ip", "192.0.2.10"),
            ("cidr_netmask", "24"),
            ("arp_count", "7"),
        ];
        let with = |extra: &str| {
            let mut vars = base.to_vec();
            vars.push(("extra_vips", extra));
            MasterConfig::from_values(&Values::from_reskeys(&MASTER_AGENT, &vars))
        };
        let cfg = with(
            " ip=198.51.100.10 cidr_netmask=24 nic=eth1 ;\n ip=2001:db8:2::10 cidr_netmask=64 \
             nic=eth2 arp_count=3; ",
        )
        .unwrap();
        let ips: Vec<String> = cfg.vips().map(|v| v.ip.to_string()).collect();
        assert_eq!(ips, ["192.0.2.10", "198.51.100.10", "2001:db8:2::10"]);
        let (b, c) = (&cfg.extra_vips[0], &cfg.extra_vips[1]);
        assert_eq!((b.prefix, b.nic.as_deref()), (Some(24), Some("eth1")));
        // What an entry leaves out is the parameter's default, not the first VIP's value.
        assert_eq!((b.arp_count, c.arp_count), (5, 3));
        assert_eq!(cfg.vip.as_ref().unwrap().arp_count, 7);
        let back = MasterConfig::from_json(&cfg.to_json()).unwrap();
        assert_eq!(back, cfg);
        // An old guard's configuration (no extra_vips) still reads.
        let plain = with("").unwrap();
        assert!(plain.extra_vips.is_empty() && !plain.to_json().contains("extra_vips"));
        for (text, says) in [
            ("ip=192.0.2.10", "\"ip=192.0.2.10\" names an address twice"),
            (
                "ip=198.51.100.10; ip=198.51.100.10/24",
                "\"ip=198.51.100.10/24\" is not",
            ),
            (
                "ip=198.51.100.10; ip=198.51.100.10",
                "names an address twice",
            ),
            ("cidr_netmask=24", "has no ip="),
            ("ip=198.51.100.10 cidr_netmask=33", "\"cidr_netmask=33\""),
            (
                "ip=198.51.100.10 lvs_support=true",
                "\"lvs_support=true\" is not one of the VIP's parameters",
            ),
            ("ip=198.51.100.10 nic", "\"nic\" is not name=value"),
            ("ip=198.51.100.10 nic=a nic=b", "\"nic=b\" sets nic twice"),
            ("ip=2001:db8::1 broadcast=+", "IPv4 only"),
            (&"ip=198.51.100.1;".repeat(9), "at most 8"),
        ] {
            let e = with(text).unwrap_err().to_string();
            assert!(
                e.starts_with("parameter extra_vips=") && e.contains(says),
                "{text}: {e}"
            );
            // Whole in Pacemaker's 128 characters of a reason.
            assert!(e.chars().count() <= 128, "{e}");
        }
        let mut no_ip = base.to_vec();
        no_ip.retain(|(k, _)| *k != "ip");
        no_ip.push(("extra_vips", "ip=198.51.100.10"));
        let e = MasterConfig::from_values(&Values::from_reskeys(&MASTER_AGENT, &no_ip))
            .unwrap_err()
            .to_string();
        assert!(e.contains("extra_vips") && e.contains("needs ip"), "{e}");
        // What stop needs of a list it cannot use: the entries that name an address.
        let left = VipConfig::list_for_cleanup("ip=198.51.100.10 cidr_netmask=99; nic=x; junk");
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].ip.to_string(), "198.51.100.10");
    }

    #[test]
    fn a_change_of_extra_vips_is_no_reload() {
        let vars = |extra: &'static str| {
            vec![
                ("etcd_endpoints", "http://192.0.2.1:2379"),
                ("command", "/usr/bin/api"),
                ("ip", "192.0.2.10"),
                ("extra_vips", extra),
            ]
        };
        // extra_vips is one parameter, not reloadable (Pacemaker restarts for any change of
        // it): its announcement settings too.
        let old = parse(&vars("ip=198.51.100.10 arp_count=3"));
        assert_eq!(old.reload_refusal(&old.clone()), None);
        assert!(old
            .reload_refusal(&parse(&vars("ip=198.51.100.10 arp_count=9")))
            .is_some());
        assert!(old
            .reload_refusal(&parse(&vars("ip=198.51.100.11 arp_count=3")))
            .is_some());
        assert!(old.reload_refusal(&parse(&vars(""))).is_some());
    }

    fn parse(vars: &[(&str, &str)]) -> MasterConfig {
        MasterConfig::from_values(&Values::from_reskeys(&MASTER_AGENT, vars))
            .unwrap_or_else(|e| panic!("{vars:?}: {e}"))
    }

    /// One definition: a running guard takes a change of exactly the parameters the table
    /// marks reloadable, and refuses every other one.
    #[test]
    fn a_guard_reloads_exactly_what_the_parameter_table_calls_reloadable() {
        let base = [
            ("etcd_endpoints", "https://192.0.2.1:2379"),
            ("etcd_cacert", "/etc/ssl/ca.pem"),
            ("command", "/usr/bin/api"),
            ("ip", "192.0.2.10"),
            ("cidr_netmask", "24"),
            ("health_url", "http://127.0.0.1:8443/healthz"),
        ];
        // preferred_lft applies to IPv6 only: it is compared on an IPv6 address.
        let mut base6 = base;
        base6[3] = ("ip", "2001:db8::10");
        base6[4] = ("cidr_netmask", "64");
        let mut compared = 0;
        for p in MASTER_AGENT.iter() {
            let base = if p.name == "preferred_lft" {
                base6
            } else {
                base
            };
            let before = parse(&base);
            // Another valid value for each parameter (and what it replaces).
            let (value, drop) = match p.name {
                "etcd_endpoints" => ("https://192.0.2.2:2379", ""),
                "etcd_prefix" => ("/other", ""),
                "cluster_name" => ("other", ""),
                "etcd_cacert" => ("/etc/ssl/other.pem", ""),
                "health_cacert" => ("/etc/ssl/ca.pem", ""),
                // Each needs the other: the pair is the change.
                "etcd_cert" | "etcd_key" => ("/etc/ssl/client.pem", ""),
                "etcd_user" => ("hamaster", ""),
                "etcd_password_file" => ("/etc/hamaster/etcd-password", ""),
                "lease_ttl" => ("12", ""),
                "lease_margin" => ("3", ""),
                "service" => ("api.service", "command"),
                "command" => ("/usr/bin/other", ""),
                "args" => ("--port 9", ""),
                "workdir" => ("/tmp", ""),
                "user" => ("nobody", ""),
                "health_url" => ("http://127.0.0.1:9000/h", ""),
                "health_command" => ("true", "health_url"),
                "health_timeout" => ("3000", ""),
                "health_interval" => ("5", ""),
                "health_failures" => ("4", ""),
                "ip" => ("192.0.2.11", ""),
                "cidr_netmask" => ("25", ""),
                "nic" => ("eth1", ""),
                "iflabel" => ("x", ""),
                "broadcast" => ("+", ""),
                "arp_count" => ("3", ""),
                "arp_interval" => ("100", ""),
                "arp_count_refresh" => ("2", ""),
                "arp_mode" => ("reply", ""),
                "arp_sender" => ("send_arp", ""),
                "send_arp_opts" => ("", ""),
                "preferred_lft" => ("60", ""),
                "watchdog" => ("required", ""),
                "watchdog_device" => ("/dev/watchdog1", ""),
                "metrics_address" => ("127.0.0.1:9405", ""),
                "conflict_action" => ("push", ""),
                "extra_vips" => ("ip=198.51.100.10", ""),
                "etcd_outage" => ("fence", ""),
                "standby" => ("warm", ""),
                "promote_command" => ("true", ""),
                "demote_command" => ("true", ""),
                _ if p.kind == crate::params::Kind::Boolean => (
                    if p.default == Some("true") {
                        "false"
                    } else {
                        "true"
                    },
                    "",
                ),
                other => panic!("no other value for {other}: add one here"),
            };
            let mut vars: Vec<(&str, &str)> = base
                .iter()
                .copied()
                .filter(|(k, _)| *k != drop && *k != p.name)
                .collect();
            vars.push((p.name, value));
            for (pair, other, value) in [
                ("etcd_cert", "etcd_key", "/etc/ssl/client.pem"),
                ("etcd_key", "etcd_cert", "/etc/ssl/client.pem"),
                (
                    "etcd_user",
                    "etcd_password_file",
                    "/etc/hamaster/etcd-password",
                ),
                ("etcd_password_file", "etcd_user", "hamaster"),
                ("promote_command", "standby", "warm"),
                ("demote_command", "standby", "warm"),
            ] {
                if p.name == pair {
                    vars.push((other, value));
                }
            }
            let after = parse(&vars);
            if after == before {
                // Accepted and not used (IPaddr2's arp_sender): nothing to restart for.
                assert!(
                    p.reloadable,
                    "{} changes nothing yet is not reloadable",
                    p.name
                );
                continue;
            }
            compared += 1;
            assert_eq!(
                before.reload_refusal(&after).is_none(),
                p.reloadable,
                "{}={value}: {:?}",
                p.name,
                before.reload_refusal(&after)
            );
        }
        assert!(compared >= 30, "only {compared} parameters compared");
    }

    /// corosync changing after promote (a node added, a new token) changes the TTL a lease
    /// that follows the cluster would get; a reload must not take that for a changed setting.
    #[test]
    fn a_reload_ignores_a_cluster_derived_lease_that_moved_with_corosync() {
        let base = [
            ("etcd_endpoints", "http://192.0.2.1:2379"),
            ("command", "/usr/bin/api"),
        ];
        let before = parse(&base);
        assert!(before.etcd.ttl_from_cluster && before.etcd.margin_derived);
        let mut after = parse(&[("health_interval", "5"), base[0], base[1]]);
        after.etcd.ttl += std::time::Duration::from_secs(1);
        after.etcd.margin += std::time::Duration::from_secs(1);
        assert_eq!(before.reload_refusal(&after), None);
        // A lease_ttl set by the administrator is a setting: changing it needs a restart.
        let set = parse(&[("lease_ttl", "10"), base[0], base[1]]);
        let mut moved = set.clone();
        moved.etcd.ttl += std::time::Duration::from_secs(1);
        assert!(set.reload_refusal(&moved).is_some());
        // From derived to set (the same value or not) is a change too.
        let mut explicit = before.clone();
        explicit.etcd.ttl_from_cluster = false;
        assert!(before.reload_refusal(&explicit).is_some());
    }
}
