//! The Telegram channel: a bot on the Bot API, by long polling or by webhook. Each chat is its own conversation
//! actor, so chats never wait for each other. An update is acknowledged to Telegram only after its turn is on
//! disk ([`updates`]), so a restart neither loses a message nor answers one twice.
//!
//! [`api`] is the HTTP client (retries, 429), [`access`] who may talk to the bot, [`inbound`] turns a message
//! (text, caption, reply, media) into the model's text, [`markdown`] renders answers as MarkdownV2,
//! [`outbound`] sends them, [`draft`] shows an answer live while the model writes it, [`approvals`] asks with
//! inline buttons, [`actor`] is the channel actor the router
//! talks to, and [`polling`] / [`webhook`] bring the updates in.

pub mod access;
pub mod actor;
pub mod api;
pub mod approvals;
pub mod capabilities;
pub mod draft;
pub mod inbound;
pub mod markdown;
pub mod outbound;
pub mod polling;
pub mod start;
pub mod updates;
pub mod webhook;

pub use actor::Telegram;
pub use capabilities::{CAPABILITIES, CHANNEL};
pub use start::{StartError, TelegramChannel};
