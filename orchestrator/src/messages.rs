//! The messages that travel between channel actors, the router and conversations.

use actix::Message;
use minibot_agent::ReplyKind;
use serde::{Deserialize, Serialize};

/// A user message from a channel (or a replayed one).
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "()")]
pub struct Inbound {
    pub event_id: String,
    pub channel: String,
    pub chat_id: i64,
    pub user_id: Option<i64>,
    pub text: String,
}

impl Inbound {
    pub fn new(channel: &str, chat_id: i64, user_id: Option<i64>, text: impl Into<String>) -> Self {
        Self {
            event_id: uuid::Uuid::new_v4().simple().to_string(),
            channel: channel.to_string(),
            chat_id,
            user_id,
            text: text.into(),
        }
    }

    pub fn session_id(&self) -> String {
        session_id(&self.channel, self.chat_id)
    }
}

pub fn session_id(channel: &str, chat_id: i64) -> String {
    format!("{channel}:{chat_id}")
}

/// An answer for a chat.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Outbound {
    pub channel: String,
    pub chat_id: i64,
    pub text: String,
    pub kind: ReplyKind,
    /// The inbound messages this reply answers (the turn's own plus any steered into it).
    pub answers: Vec<String>,
    pub is_error: bool,
}

/// Live progress of a turn, for channels that show it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Progress {
    pub channel: String,
    pub chat_id: i64,
    pub event: minibot_agent::AgentEvent,
}

/// `/stop`: cancel the running turn of a chat.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct StopTurn {
    pub channel: String,
    pub chat_id: i64,
}

pub const STOPPED_REPLY: &str = "Stopped.";
pub const NOTHING_RUNNING_REPLY: &str = "Nothing is running.";
pub const STOPPED_HISTORY_NOTE: &str = "[Stopped by the user before finishing.]";
