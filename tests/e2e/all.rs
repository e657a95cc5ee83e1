#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The real binaries, end to end.

mod bad_input;
mod console;
mod mcp;
mod rabbitmq;
mod tasks;
