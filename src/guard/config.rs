//! Everything a guard needs to know, parsed from the parameter table: etcd, the service, its
//! health check and the optional VIP. Parsed once, by the agent (or takeover): the agent hands
//! it to the guard it spawns as JSON on the guard's standard input.

use crate::lease::etcd::{tls_options, LeaseError};
use crate::lease::EtcdConfig;
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
    /// Tell Pacemaker at once when the service fails (push_failures).
    pub push_failures: bool,
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
        Ok(MasterConfig {
            etcd,
            service,
            health,
            vip,
            push_failures: v.boolean(&crate::params::master::PUSH_FAILURES)?,
        })
    }

    /// The configuration as the agent hands it to its guard.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The configuration the agent handed over; Err says why it is not one.
    pub fn from_json(text: &str) -> Result<MasterConfig, String> {
        serde_json::from_str(text).map_err(|e| format!("not a guard configuration: {e}"))
    }

    /// Reads every file the configuration names and checks the service can run here.
    pub fn check_installed(&self) -> Result<(), InstallError> {
        tls_options(&self.etcd)?;
        self.service.check_installed()?;
        HealthProbe::new(&self.health)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocf::OcfEnv;
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
        let env = OcfEnv::from_vars(
            vars.iter()
                .map(|(k, v)| (format!("OCF_RESKEY_{k}"), v.to_string())),
        );
        let cfg = MasterConfig::from_values(&Values::from_ocf(&MASTER_AGENT, &env)).unwrap();
        let back = MasterConfig::from_json(&cfg.to_json()).unwrap();
        assert_eq!(back, cfg);
        assert!(MasterConfig::from_json("").is_err());
        assert!(MasterConfig::from_json("{}")
            .unwrap_err()
            .contains("not a guard configuration"));
    }
}
