//! hamaster: OCF agents for an active-passive master with a floating IP, guarded by an etcd
//! leader lease. The programs' entries are `main.rs` (hamaster: the master agent, the guard,
//! the operator's verbs) and `bin/hamaster-vip.rs` (ocf:hamaster:vip alone, small, so that
//! its monitor costs what any program costs to start); everything else lives here so tests
//! and benchmarks can use it.

pub mod agents;
pub mod causes;
pub mod child;
pub mod cli;
pub mod failsafe;
pub mod guard;
pub mod lease;
pub mod logging;
pub mod ocf;
pub mod params;
pub mod pem;
pub mod presence;
pub mod procfs;
pub mod reference;
pub mod resource;
pub mod rules;
pub mod runfiles;
pub mod service;
#[doc(hidden)]
pub mod splitmix;
pub mod vip;

/// Entry point of hamaster: dispatch on argv[0] (`master` as Pacemaker calls it through the
/// OCF directory's symlink; `vip` too, for a symlink an administrator made, though the vip
/// agent ships as a program of its own: vip_agent_main) or on the `hamaster` subcommands.
/// Returns the exit, which only main turns into a number.
pub fn main_with_args(args: Vec<String>) -> ocf::OcfExit {
    let argv0 = args.first().map(String::as_str).unwrap_or("hamaster");
    let base = std::path::Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("hamaster");
    match agents::by_name(base) {
        Some(agent) => {
            let instance = std::env::var("OCF_RESOURCE_INSTANCE").unwrap_or_default();
            logging::init(&format!("hamaster-{base}({instance})"));
            agents::run_ocf(agent, args.get(1).map(String::as_str))
        }
        None => cli::main(args),
    }
}

/// Entry point of the vip agent's own program (bin/hamaster-vip.rs, installed as
/// /usr/lib/ocf/resource.d/hamaster/vip): the agent's action in argv[1], or `announce`, the
/// detached half of a start burst. It reaches none of the guard, the etcd client or tokio, so
/// none of them is linked into it or paid for at every monitor.
pub fn vip_agent_main(args: Vec<String>) -> ocf::OcfExit {
    let action = args.get(1).map(String::as_str);
    if action == Some("announce") {
        return cli::vip_main(args);
    }
    let instance = std::env::var("OCF_RESOURCE_INSTANCE").unwrap_or_default();
    logging::init(&format!("hamaster-vip({instance})"));
    agents::run_ocf(&agents::vip::AGENT, action)
}
