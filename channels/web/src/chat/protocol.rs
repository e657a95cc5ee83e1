//! The chat socket's messages, as JSON text frames (reference 5.3, with the upload frames replaced by an HTTP
//! upload whose id the message names).

use serde::{Deserialize, Serialize};

/// What the browser sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClientMessage {
    Message {
        #[serde(default)]
        text: String,
        #[serde(default)]
        upload_ids: Vec<String>,
    },
    HistoryBefore {
        before_id: i64,
    },
    Approval {
        approval_id: String,
        approved: bool,
    },
    Stop,
}

/// A message of the chat as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ShownMessage {
    /// The stored row's id, for paging; `None` for a live message not read from the history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// `user` or `assistant`.
    pub role: &'static str,
    pub text: String,
    /// Sanitised HTML of an assistant message; user messages are shown as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
}

/// What the server sends.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ServerMessage {
    HistoryPage {
        initial: bool,
        messages: Vec<ShownMessage>,
        /// Ask for older messages with this id; `None` when there are none.
        before_id: Option<i64>,
    },
    Message {
        #[serde(flatten)]
        message: ShownMessage,
        /// `answer`, `progress` (a task's note) or `task_result`.
        source: &'static str,
        is_error: bool,
    },
    /// A piece of the answer as the model writes it.
    Delta {
        step: u32,
        text: String,
    },
    /// A new model step began: the text streamed so far was not the answer.
    Step {
        step: u32,
    },
    Tool {
        name: String,
        /// `started`, `ok` or `error`.
        state: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    Approval {
        approval_id: String,
        tool: String,
        detail: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    ApprovalResolved {
        approval_id: String,
        /// `approved`, `denied` or `expired`.
        outcome: &'static str,
    },
    Busy {
        busy: bool,
    },
    Error {
        error: String,
    },
}

impl ServerMessage {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| r#"{"kind":"error","error":"unencodable message"}"#.into())
    }
}
