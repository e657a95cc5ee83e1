#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Integration tests for skills: real folders, real archives, a real HTTP server on 127.0.0.1.

mod suite;
