#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The agent loop against a scripted OpenAI-compatible server over real HTTP, through the real provider: every
//! limit, stop message and guard of `run.rs`, asserted on the answer and on what the agent sent to the model.

mod suite;
