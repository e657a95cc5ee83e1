#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The orchestrator in-process: real actors, a real SQLite file, a scripted model over real HTTP.

mod suite;
