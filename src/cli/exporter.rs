//! `hamaster exporter`: the standby's listener on metrics_address (guard::exporter), spawned
//! by the master agent while this node's instance runs unpromoted. Internal: not for hands.

use clap::Args;

use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;

#[derive(Debug, Args)]
pub struct ExporterCmd {
    /// Resource name (without clone suffix).
    #[arg(long)]
    pub resource: String,
    /// This node's name, as the metrics label it.
    #[arg(long)]
    pub node: String,
    /// metrics_address, as the agent parsed it.
    #[arg(long)]
    pub address: std::net::SocketAddr,
}

impl super::Verb for ExporterCmd {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init(&format!("hamaster-exporter({})", self.resource));
        match crate::guard::exporter::run(
            &self.resource,
            &self.node,
            self.address,
            crate::runfiles::root(),
        ) {
            Ok(()) => Ok(OcfExit::Success),
            Err(e) => {
                log::error!("standby listener {}: {e}", self.resource);
                Err(Failed {
                    exit: OcfExit::ErrGeneric,
                    reason: e,
                    logged: true,
                })
            }
        }
    }
}
