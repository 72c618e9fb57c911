//! Everything a guard needs to know, parsed from the parameter table: etcd, the service, its
//! health check and the optional VIP.

use crate::lease::etcd::{tls_options, LeaseError};
use crate::lease::EtcdConfig;
use crate::params::vip as vp;
use crate::params::{ConfigError, Values};
use crate::service::{HealthProbe, HealthSpec, ServiceError, ServiceSpec};
use crate::vip::VipConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
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

    /// Reads every file the configuration names and checks the service can run here.
    pub fn check_installed(&self) -> Result<(), InstallError> {
        tls_options(&self.etcd)?;
        self.service.check_installed()?;
        HealthProbe::new(&self.health)?;
        Ok(())
    }
}
