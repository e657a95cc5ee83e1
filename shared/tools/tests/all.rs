#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Integration tests for the built-in tools: real temp folders, real child processes, a local HTTP server.

mod suite;
