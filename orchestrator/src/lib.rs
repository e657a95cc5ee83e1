//! The orchestrator: an actix actor system. Channel actors turn user input into [`messages::Inbound`]; the
//! [`router::Router`] hands each to its chat's [`conversation::Conversation`] actor, which runs the main agent's
//! turns one at a time ([`turn`]) while different chats run concurrently. [`runtime::Runtime`] holds what all
//! conversations share.

pub mod channels;
pub mod cli;
pub mod conversation;
pub mod guardrail;
pub mod logging;
pub mod mcp_supervisor;
pub mod messages;
pub mod ownership;
pub mod router;
pub mod runtime;
pub mod tasks;
pub mod turn;
