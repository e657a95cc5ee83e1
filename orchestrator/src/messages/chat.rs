//! A chat's traffic: user messages in, answers and progress out, `/stop`.

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
    /// Set when this turn reports a delegated task's result to the main agent.
    #[serde(default)]
    pub source: Option<TaskSource>,
}

/// The task whose result started a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSource {
    pub task_id: String,
    /// How many delegated results led here (1 for the result of a task the user's turn delegated).
    pub depth: u32,
}

impl Inbound {
    pub fn new(channel: &str, chat_id: i64, user_id: Option<i64>, text: impl Into<String>) -> Self {
        Self {
            event_id: uuid::Uuid::new_v4().simple().to_string(),
            channel: channel.to_string(),
            chat_id,
            user_id,
            text: text.into(),
            source: None,
        }
    }

    /// A message from a user can be steered into a running turn; a task result waits for its own turn.
    pub fn is_steerable(&self) -> bool {
        self.source.is_none()
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
    pub role: OutboundRole,
    /// The background task this message is about: its result, its progress, or the turn its result started.
    pub task_id: Option<String>,
    /// Tasks the turn behind this reply handed off; their results come later.
    pub task_handoff: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboundRole {
    /// The main agent's reply to a turn.
    Answer,
    /// A note on a background task's progress.
    Progress,
    /// A background task's result (spawn_task) or failure, sent straight to the chat.
    TaskResult,
}

impl Outbound {
    pub fn text(channel: &str, chat_id: i64, text: impl Into<String>, role: OutboundRole) -> Self {
        Self {
            channel: channel.to_string(),
            chat_id,
            text: text.into(),
            kind: ReplyKind::Text,
            answers: Vec::new(),
            is_error: false,
            role,
            task_id: None,
            task_handoff: Vec::new(),
        }
    }
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
