#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The real binaries, end to end.

mod approvals;
mod bad_input;
mod broker_trust;
mod console;
mod files;
mod fleet;
mod guarded;
mod mcp;
mod private_files;
mod rabbitmq;
mod redteam;
mod sandbox;
mod scaleout;
mod secrets;
mod tasks;
mod telegram;
mod worker_approvals;
