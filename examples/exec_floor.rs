//! The exec floor of a Rust program: `fn main() {}` built with the same toolchain and release
//! profile as hamaster (dynamically linked, PIE, std's start-up). `make bench` runs it beside
//! /bin/true and the vip agent's monitor, so that what the agent costs above any Rust program
//! is told apart from what every Rust program costs to start.

fn main() {}
