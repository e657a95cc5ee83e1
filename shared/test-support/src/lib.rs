#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Test helpers, used only by tests: a scripted OpenAI-compatible HTTP server ([`ScriptedLlm`]) that answers
//! each conversation from a script and records every request, a fake Telegram Bot API, a counting HTTP server,
//! and helpers to find the workspace binaries.
//!
//! A script is chosen by the text of the last user message in the request; which reply of the script is sent
//! is the number of assistant messages after that user message, so the server needs no state per turn and
//! concurrent conversations do not disturb each other.

mod binaries;
mod counting_server;
pub mod fake_telegram;
pub mod scripted_llm;

pub use binaries::binary;
pub use counting_server::counting_server;
pub use fake_telegram::FakeTelegram;
pub use scripted_llm::{Reply, Script, ScriptedLlm};
