//! What every channel shares, and the only thing a channel crate knows of the orchestrator: the [`messages`]
//! to and from the router, the [`Channel`] lifecycle the daemon drives, [`render`] (fitting an answer to a
//! channel), [`attachments`] (the one policy for files users send), and [`HttpMount`] (routes a channel adds
//! to the daemon's one HTTP server). Channel crates depend on this crate and never on the orchestrator, so
//! Cargo keeps the dependency one way.

pub mod approval_wait;
pub mod attachments;
pub mod channel;
pub mod http;
pub mod messages;
pub mod render;
pub mod shown;

pub use channel::{Channel, ChannelStartError, HttpMount};
