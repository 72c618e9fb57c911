//! hamaster: OCF agents for an active-passive master with a floating IP, guarded by an etcd
//! leader lease. The binary's entry is `main.rs`; everything else lives here so tests and
//! benchmarks can use it.

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

/// Entry point for the whole binary: dispatch on argv[0] (`vip` as Pacemaker calls it through
/// the OCF directory symlink) or on the `hamaster` subcommands. Returns the exit, which only
/// main turns into a number.
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
