//! The orchestrator: an actix actor system. Channel actors ([`channels`]) turn user input into
//! [`messages::Inbound`]; the [`router::Router`] hands each to its chat's [`conversation::Conversation`] actor,
//! which runs the main agent's turns one at a time ([`turn`]) while different chats run concurrently. The
//! [`tasks`] coordinator routes background tasks' results back. [`runtime::Runtime`] holds what all
//! conversations share; [`boot`] wires everything together at start-up.
//!
//! Dependencies run one way: `boot` → channels, router → conversation → turn → runtime → tasks' hub, with
//! [`messages`] as the only vocabulary everyone shares (a test in `tests/suite/layout.rs` keeps it so).

pub use minibot_channel::{messages, render};

pub mod backstage;
pub mod boot;
pub mod channels;
pub mod checks;
pub mod cli;
pub mod compaction;
pub mod conversation;
pub mod daemon;
pub mod doctor;
pub mod format_repair;
pub mod guardrail;
pub mod intake_ledger;
pub mod logging;
pub mod mcp_supervisor;
pub mod memory_release;
pub mod metrics;
pub mod ownership;
pub mod router;
pub mod runtime;
pub mod scheduler;
pub mod setup;
pub mod tasks;
pub mod terminal_text;
pub mod transcript;
pub mod turn;
