//! The operator side: clap commands, each its args struct with `exec()` (Verb): `status`,
//! `takeover`, `release` (the runbook's), `switchover`, `guard` (spawned by promote), `announce` (also the
//! detached half of a start burst), `ocf AGENT ACTION` (the spelled-out form of an agent
//! call) and `docs`. A failure is a CliError (its exit code: ocf::failure).

pub mod announce;
pub mod campaign;
pub mod cluster;
pub mod config;
pub mod exporter;
pub mod guard;
pub mod status;
pub mod switchover;
pub mod takeover;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::guard::GuardError;
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::resource::config::InstallError;
use crate::resource::status::ClientError;

#[derive(Debug, Parser)]
#[command(
    name = "hamaster",
    version,
    about = "Active-passive HA master with a floating IP and an etcd leader lease"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// One operator verb: its arguments (parsed by clap) and what it does with them: the exit it
/// ends with, or the failure that `main` prints as `hamaster VERB: reason`.
pub trait Verb {
    fn exec(&self) -> Result<OcfExit, Failed>;
}

/// Why an operator verb failed; crate::failure gives each its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file's contents, or the configuration they spell, are wrong.
    #[error("{}: {detail}", path.display())]
    Config { path: PathBuf, detail: String },
    /// A resource name that cannot have a run directory.
    #[error("{0}")]
    BadName(String),
    #[error(transparent)]
    Install(#[from] InstallError),
    #[error("refusing: {0}")]
    Refused(String),
    #[error("no such agent {0:?} (known: vip, master)")]
    NoAgent(String),
    #[error("unknown document {0:?} (known: reference, man-pages and the pages it names)")]
    Usage(String),
    #[error(transparent)]
    Guard(#[from] GuardError),
    #[error("announce {ip}: {detail}")]
    Announce {
        ip: std::net::IpAddr,
        detail: String,
    },
    #[error("the guard (pid {pid}) did not step down: {source}")]
    StepDown { pid: u32, source: ClientError },
    #[error("etcd: {0}")]
    Etcd(String),
    /// This node's CIB could not be read (no cluster runs here).
    #[error("the CIB: {0}")]
    CibUnreadable(String),
    /// The CIB has no ocf:hamaster:master primitive of that name.
    #[error("the CIB has no ocf:hamaster:master resource {resource:?}")]
    NotInCib { resource: String },
    /// The CIB's resource has parameters the command cannot use.
    #[error("the CIB's resource {resource:?}: {detail}")]
    CibValue { resource: String, detail: String },
    /// The command line itself (clap has said what is wrong).
    #[error("{0}")]
    Args(String),
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an OCF agent action, as Pacemaker does through /usr/lib/ocf/resource.d/hamaster/AGENT.
    Ocf(OcfArgs),
    /// Announce an address this host holds: gratuitous ARP (IPv4) or unsolicited NA (IPv6).
    Announce(announce::AnnounceArgs),
    /// The per-resource guard (spawned by the master agent's promote): holds the etcd lease,
    /// owns the VIP, supervises the service, fences itself. Its configuration comes as JSON
    /// on standard input, parsed and checked by the agent that spawns it; it reads no
    /// OCF_RESKEY_* variable.
    Guard(guard::GuardCmd),
    /// The standby's listener on metrics_address (spawned by the master agent while its
    /// instance runs unpromoted): /metrics, /leader (503), /health.
    #[command(hide = true)]
    Exporter(exporter::ExporterCmd),
    /// Show who holds a resource's leader key (etcd) and what this node's guard, VIP and
    /// service are doing.
    Status(status::StatusArgs),
    /// Cold standby, cluster stack down: take the leader key, raise the VIP, start the
    /// service and guard them in the foreground until `release` or a signal.
    Takeover(takeover::TakeoverArgs),
    /// Tell a `takeover` or `campaign` guard to step down cleanly.
    Release(takeover::ReleaseArgs),
    /// Without Pacemaker: a candidate for the leader key on every node; the holder leads
    /// (VIP, service, the guard's rules) until its leadership ends, then stands again.
    Campaign(campaign::CampaignArgs),
    /// Planned move of the master to another node (or the one Pacemaker chooses), asked of
    /// Pacemaker; waits for the new master, then removes the constraint it made.
    Switchover(switchover::SwitchoverArgs),
    /// Print generated documentation: reference (docs/reference.md), hamaster.8,
    /// ocf_hamaster_vip.7, ocf_hamaster_master.7.
    #[command(hide = true)]
    Docs(DocsArgs),
}

impl Command {
    /// The verb, and its name for error lines.
    fn verb(&self) -> (&dyn Verb, &'static str) {
        match self {
            Command::Ocf(a) => (a, "ocf"),
            Command::Announce(a) => (a, "announce"),
            Command::Guard(a) => (a, "guard"),
            Command::Exporter(a) => (a, "exporter"),
            Command::Status(a) => (a, "status"),
            Command::Takeover(a) => (a, "takeover"),
            Command::Release(a) => (a, "release"),
            Command::Campaign(a) => (a, "campaign"),
            Command::Switchover(a) => (a, "switchover"),
            Command::Docs(a) => (a, "docs"),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct OcfArgs {
    /// The agent: vip or master.
    agent: String,
    /// The OCF action (start, stop, monitor, validate-all, meta-data, ...).
    action: Option<String>,
}

impl Verb for OcfArgs {
    /// An unknown agent is told as an agent's failure is: one `ocf-exit-reason:` line.
    fn exec(&self) -> Result<OcfExit, Failed> {
        let agent = &self.agent;
        match crate::agents::by_name(agent) {
            Some(def) => {
                crate::logging::init(&format!("hamaster-{agent}"));
                Ok(crate::agents::run_ocf(def, self.action.as_deref()))
            }
            None => {
                let failed = Failed::from(CliError::NoAgent(agent.clone()));
                let prefix = std::env::var("OCF_EXIT_REASON_PREFIX")
                    .unwrap_or_else(|_| crate::ocf::reason::DEFAULT_PREFIX.into());
                crate::ocf::reason::print_reason(&prefix, &failed.reason);
                Ok(failed.exit)
            }
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct DocsArgs {
    /// What to print: reference, ocf_hamaster_vip.7, ocf_hamaster_master.7, hamaster.8 and a
    /// page per verb (hamaster-status.8, …), or man-pages: the names of those man pages.
    what: String,
}

impl Verb for DocsArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        let text = match self.what.as_str() {
            "reference" => crate::reference::markdown(),
            "man-pages" => {
                let mut names = crate::reference::man_page_names();
                names.extend(["ocf_hamaster_vip.7".into(), "ocf_hamaster_master.7".into()]);
                names.join("\n") + "\n"
            }
            "ocf_hamaster_vip.7" => crate::reference::man_agent(crate::agents::vip::AGENT.info),
            "ocf_hamaster_master.7" => {
                crate::reference::man_agent(crate::agents::master::AGENT.info)
            }
            other => match crate::reference::man_page(other) {
                Some(page) => page,
                None => return Err(CliError::Usage(other.into()).into()),
            },
        };
        print!("{text}");
        Ok(OcfExit::Success)
    }
}

/// Runs the operator CLI: a failure is printed as `hamaster VERB: reason` (unless it is in the
/// log already); returns the exit.
pub fn main(args: Vec<String>) -> OcfExit {
    match Cli::try_parse_from(args) {
        Ok(cli) => run(cli.command.verb()),
        Err(e) => refused(e),
    }
}

/// What the vip agent's own program (src/bin/hamaster-vip.rs) understands beside the agent's
/// actions: `announce`, as its start re-executes it (/proc/self/exe) for the detached half of
/// a burst. Nothing of the guard is linked into that program.
#[derive(Debug, Parser)]
#[command(name = "hamaster-vip", version)]
pub struct VipCli {
    #[command(subcommand)]
    pub command: VipCommand,
}

#[derive(Debug, Subcommand)]
pub enum VipCommand {
    /// Announce an address this host holds: gratuitous ARP (IPv4) or unsolicited NA (IPv6).
    Announce(announce::AnnounceArgs),
}

/// `hamaster-vip announce …`: the same verb, parsed and reported as `hamaster announce` is.
pub fn vip_main(args: Vec<String>) -> OcfExit {
    match VipCli::try_parse_from(args) {
        Ok(VipCli {
            command: VipCommand::Announce(a),
        }) => run((&a, "announce")),
        Err(e) => refused(e),
    }
}

/// A command line clap refused (or --help/--version, which are no failure).
fn refused(e: clap::Error) -> OcfExit {
    let _ = e.print();
    if e.use_stderr() {
        Failed::from(CliError::Args(e.to_string())).exit
    } else {
        OcfExit::Success
    }
}

/// Runs one verb; its failure is printed unless it is in the log already.
fn run((verb, name): (&dyn Verb, &str)) -> OcfExit {
    verb.exec().unwrap_or_else(|f| {
        if !f.logged {
            eprintln!("hamaster {name}: {}", f.reason);
        }
        f.exit
    })
}

impl crate::ocf::failure::Failure for CliError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            CliError::Unreadable { .. } => crate::ocf::OcfExit::ErrInstalled,
            CliError::Config { .. } | CliError::BadName(_) => crate::ocf::OcfExit::ErrConfigured,
            CliError::Install(e) => e.exit(),
            CliError::NoAgent(_) => crate::ocf::OcfExit::ErrInstalled,
            CliError::Usage(_) | CliError::Args(_) => crate::ocf::OcfExit::ErrArgs,
            CliError::Guard(e) => e.exit(),
            CliError::Refused(_) | CliError::Announce { .. } | CliError::StepDown { .. } => {
                crate::ocf::OcfExit::ErrGeneric
            }
            CliError::Etcd(_) | CliError::CibUnreadable(_) => crate::ocf::OcfExit::ErrGeneric,
            CliError::NotInCib { .. } | CliError::CibValue { .. } => {
                crate::ocf::OcfExit::ErrConfigured
            }
        }
    }
}
