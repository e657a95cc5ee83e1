#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The vault crate against real files and the Python `cryptography` reference.

mod suite;
