#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The real binaries, end to end.

mod approvals;
mod bad_input;
mod broker_trust;
mod console;
mod docs_examples;
mod doctor;
mod errors;
mod files;
mod fleet;
mod guarded;
mod init;
mod install;
mod lazy_workers;
mod mcp;
mod private_files;
mod rabbitmq;
mod redteam;
mod sandbox;
mod scaleout;
mod secrets;
mod streaming;
mod tasks;
mod telegram;
mod worker_approvals;
