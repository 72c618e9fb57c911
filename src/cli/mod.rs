//! The operator side: clap commands. `hamaster ocf AGENT ACTION` is the spelled-out form of
//! an agent call; `announce` sends announcements for an address this host holds.

pub mod announce;
pub mod config;
pub mod guard;
pub mod status;
pub mod takeover;

use clap::{Parser, Subcommand};

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

/// One operator verb: its arguments (parsed by clap) and what it does with them, ending in the
/// process's exit code.
pub trait Verb {
    fn exec(&self) -> i32;
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an OCF agent action, as Pacemaker does through /usr/lib/ocf/resource.d/hamaster/AGENT.
    Ocf(OcfArgs),
    /// Announce an address this host holds: gratuitous ARP (IPv4) or unsolicited NA (IPv6).
    Announce(announce::AnnounceArgs),
    /// The per-resource guard (spawned by the master agent's promote): holds the etcd lease,
    /// owns the VIP, supervises the service, fences itself. Parameters come from the OCF
    /// environment (OCF_RESKEY_*).
    Guard(guard::GuardCmd),
    /// Show who holds a resource's leader key (etcd) and what this node's guard, VIP and
    /// service are doing.
    Status(status::StatusArgs),
    /// Cold standby, cluster stack down: take the leader key, raise the VIP, start the
    /// service and guard them in the foreground until `release` or a signal.
    Takeover(takeover::TakeoverArgs),
    /// Tell a `takeover` guard to step down cleanly.
    Release(takeover::ReleaseArgs),
    /// Print generated documentation: reference (docs/reference.md), hamaster.8,
    /// ocf_hamaster_vip.7, ocf_hamaster_master.7.
    #[command(hide = true)]
    Docs(DocsArgs),
}

impl Command {
    fn verb(&self) -> &dyn Verb {
        match self {
            Command::Ocf(a) => a,
            Command::Announce(a) => a,
            Command::Guard(a) => a,
            Command::Status(a) => a,
            Command::Takeover(a) => a,
            Command::Release(a) => a,
            Command::Docs(a) => a,
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
    fn exec(&self) -> i32 {
        let agent = &self.agent;
        match crate::agents::by_name(agent) {
            Some(def) => {
                crate::logging::init(&format!("hamaster-{agent}"));
                crate::agents::run_ocf(def, self.action.as_deref())
            }
            None => {
                let prefix = std::env::var("OCF_EXIT_REASON_PREFIX")
                    .unwrap_or_else(|_| crate::ocf::reason::DEFAULT_PREFIX.into());
                crate::ocf::reason::print_reason(
                    &prefix,
                    &format!("no such agent {agent:?} (known: vip, master)"),
                );
                crate::ocf::OcfExit::ErrInstalled.code()
            }
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct DocsArgs {
    /// What to print: reference, hamaster.8, ocf_hamaster_vip.7, ocf_hamaster_master.7.
    what: String,
}

impl Verb for DocsArgs {
    fn exec(&self) -> i32 {
        let text = match self.what.as_str() {
            "reference" => crate::reference::markdown(),
            "hamaster.8" => crate::reference::man_hamaster(),
            "ocf_hamaster_vip.7" => crate::reference::man_agent(crate::agents::vip::AGENT.info),
            "ocf_hamaster_master.7" => {
                crate::reference::man_agent(crate::agents::master::AGENT.info)
            }
            other => {
                eprintln!("hamaster docs: unknown document {other:?} (known: reference, hamaster.8, ocf_hamaster_vip.7, ocf_hamaster_master.7)");
                return crate::ocf::OcfExit::ErrArgs.code();
            }
        };
        print!("{text}");
        0
    }
}

/// Runs the operator CLI and returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                crate::ocf::OcfExit::ErrArgs.code()
            } else {
                0
            };
        }
    };
    cli.command.verb().exec()
}
