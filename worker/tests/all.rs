#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The worker in-process: a real SQLite queue file, the scripted model over real HTTP, and the test as the
//! orchestrator on the other side of the queue.

mod suite;
