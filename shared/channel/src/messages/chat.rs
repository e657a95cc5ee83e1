//! A chat's traffic: user messages in, answers and progress out, `/stop`.

use actix::Message;
use minibot_agent::ReplyKind;
pub use minibot_agent::{ApprovalDecision, ApprovalRequest};
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
    /// The channel's id of the user's message, so the answer can reply to it (Telegram).
    #[serde(default)]
    pub message_id: Option<i64>,
    /// Set when a scheduled prompt started this turn: the job's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_job: Option<String>,
    /// Its pending row is already written (with the update that carried it, [`super::AcceptUpdates`]), so the
    /// conversation does not write it again.
    #[serde(skip)]
    pub recorded: bool,
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
            message_id: None,
            scheduled_job: None,
            recorded: false,
        }
    }

    /// A message from a user can be steered into a running turn; a task result or a scheduled prompt waits for
    /// its own turn.
    pub fn is_steerable(&self) -> bool {
        self.source.is_none() && self.scheduled_job.is_none()
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
    /// The channel's id of the user message this answers (from [`Inbound::message_id`]).
    pub reply_to: Option<i64>,
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
            reply_to: None,
        }
    }
}

/// A finished turn's answer as it waits, with the turn's pending row, for its channel to confirm delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAnswer {
    pub text: String,
    /// `text`, `markdown` or `html`.
    pub kind: String,
    #[serde(default)]
    pub reply_to: Option<i64>,
    #[serde(default)]
    pub task_id: Option<String>,
}

impl PendingAnswer {
    pub fn of(message: &Outbound) -> Self {
        let kind = match message.kind {
            ReplyKind::Text => "text",
            ReplyKind::Html => "html",
            ReplyKind::Markdown => "markdown",
        };
        Self {
            text: message.text.clone(),
            kind: kind.into(),
            reply_to: message.reply_to,
            task_id: message.task_id.clone(),
        }
    }

    /// The answer again, for the chat of `session` (`channel:chat_id`), answering `event_id`.
    pub fn into_outbound(self, channel: &str, chat_id: i64, event_id: &str) -> Outbound {
        let mut message = Outbound::text(channel, chat_id, self.text, OutboundRole::Answer);
        message.kind = match self.kind.as_str() {
            "text" => ReplyKind::Text,
            "html" => ReplyKind::Html,
            _ => ReplyKind::Markdown,
        };
        message.reply_to = self.reply_to;
        message.task_id = self.task_id;
        message.answers = vec![event_id.to_string()];
        message
    }
}

/// A file for a chat: sent by `send_file` during a turn, declared by `pre_response` for the answer, or
/// attached to a background task's result. Goes to channels whose [`super::ChannelHandle::files`] is set.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct OutboundFile {
    pub channel: String,
    pub chat_id: i64,
    /// Where the file is on this machine.
    pub path: std::path::PathBuf,
    pub caption: Option<String>,
    /// The background task whose result carries it.
    pub task_id: Option<String>,
}

impl OutboundFile {
    pub fn new(channel: &str, chat_id: i64, file: minibot_agent::OutgoingFile) -> Self {
        Self { channel: channel.to_string(), chat_id, path: file.path, caption: file.caption, task_id: None }
    }

    /// `report.csv (1.2 KB) /abs/path/report.csv`, then the caption on its own line: what a text channel shows.
    pub fn describe(&self) -> String {
        let name =
            self.path.file_name().map_or_else(|| self.path.display().to_string(), |n| n.to_string_lossy().into());
        let size = match std::fs::metadata(&self.path) {
            Ok(meta) => human_size(meta.len()),
            Err(error) => format!("unreadable: {error}"),
        };
        let mut text = format!("{name} ({size}) {}", self.path.display());
        if let Some(caption) = self.caption.as_deref().filter(|c| !c.trim().is_empty()) {
            text.push('\n');
            text.push_str(caption);
        }
        text
    }
}

/// `512 B`, `1.2 KB`, `3.4 MB`, `1.0 GB` (powers of 1000, as file managers show them).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Live progress of a turn, for channels that show it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Progress {
    pub channel: String,
    pub chat_id: i64,
    /// The channel's id of the message the turn answers ([`Inbound::message_id`]): a live draft replies to it.
    pub reply_to: Option<i64>,
    pub event: minibot_agent::AgentEvent,
}

/// `/stop`: cancel the running turn of a chat.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct StopTurn {
    pub channel: String,
    pub chat_id: i64,
}

/// `/new`: the chat starts a fresh conversation after the turns it has accepted; the old one stays in the
/// history database under another session id. The chat is told with a [`OutboundRole::Progress`] note that
/// answers `event_id`.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct NewSession {
    pub channel: String,
    pub chat_id: i64,
    pub event_id: String,
}

impl NewSession {
    pub fn new(channel: &str, chat_id: i64) -> Self {
        Self { channel: channel.to_string(), chat_id, event_id: uuid::Uuid::new_v4().simple().to_string() }
    }
}

pub const STOPPED_REPLY: &str = "Stopped.";
pub const NOTHING_RUNNING_REPLY: &str = "Nothing is running.";
pub const STOPPED_HISTORY_NOTE: &str = "[Stopped by the user before finishing.]";

/// Ask the user of one chat to approve a tool call; answers with the decision.
#[derive(Debug, Clone, Message)]
#[rtype(result = "ApprovalDecision")]
pub struct AskApproval {
    pub channel: String,
    pub chat_id: i64,
    /// The user whose turn or task asks; where a chat has several people, only they may answer.
    pub requester: Option<i64>,
    pub request: ApprovalRequest,
}
