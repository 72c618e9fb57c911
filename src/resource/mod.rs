//! What every side knows about one master resource: the agent that starts and promotes it,
//! the guard process that holds it, and the CLI that shows, takes over or releases it. Its
//! configuration as parsed from the OCF parameters and handed to the guard (config), its run
//! directory with the files in it (dir), the guard's status protocol with its client
//! (status), and which watchdog device this node can arm (watchdog).

pub mod cleanup;
pub mod config;
pub mod dir;
pub mod status;
pub mod watchdog;
