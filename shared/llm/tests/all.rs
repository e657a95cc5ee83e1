#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The OpenAI-compatible client against the scripted server: what it sends, byte for byte where it matters.

mod suite;
