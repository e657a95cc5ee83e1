//! The conversation transcript of each session: user messages, assistant answers, the assistant messages that
//! asked for tool calls and the tool results, one row each, in the order the model saw them.
//!
//! A turn is written in one transaction at its end, so a crash mid-turn stores none of it. Trimming (the
//! `chat_history_trim` tool and `[memory] max_history_messages`) only cuts in front of a user or assistant row:
//! a tool result is never kept without the assistant message that asked for it.

use crate::{Result, Store, now};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
    /// The result of one tool call; the row names the call it answers.
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "user" => Some(Self::User),
            "assistant" => Some(Self::Assistant),
            "tool" => Some(Self::Tool),
            _ => None,
        }
    }
}

/// One tool call an assistant message asked for, as stored (`arguments` is the raw JSON text the model wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub id: i64,
    pub role: Role,
    pub content: String,
    /// Assistant rows: the tool calls the message asked for; empty for a plain answer.
    pub tool_calls: Vec<StoredToolCall>,
    /// Tool rows: the id and tool name of the call this result answers.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    /// The id of the first row its turn stored; `None` for rows written before tool history existed.
    pub turn_id: Option<i64>,
    /// On a turn's last row: the tokens of the context through this row as the provider counted them
    /// ([`TurnMessage::context_tokens`]); `None` when not known.
    pub context_tokens: Option<u64>,
    pub created_at: String,
}

/// A message of a finished turn, to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnMessage {
    pub role: Role,
    pub content: String,
    pub tool_calls: Vec<StoredToolCall>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    /// The tokens of the whole context through this message (system prompt, tools, history, this turn) as the
    /// provider counted them: set on a turn's last message when known, so the next turn need not count.
    pub context_tokens: Option<u64>,
}

impl TurnMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text.into())
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text.into())
    }

    /// An assistant message asking for tool calls; `content` is the text written with them (often empty).
    pub fn assistant_calls(content: impl Into<String>, tool_calls: Vec<StoredToolCall>) -> Self {
        Self { tool_calls, ..Self::text(Role::Assistant, content.into()) }
    }

    /// The result of the call `call_id` of tool `name`.
    pub fn tool_result(call_id: impl Into<String>, name: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            tool_name: Some(name.into()),
            ..Self::text(Role::Tool, content.into())
        }
    }

    fn text(role: Role, content: String) -> Self {
        Self { role, content, tool_calls: Vec::new(), tool_call_id: None, tool_name: None, context_tokens: None }
    }
}

/// How many rows of each kind a session's history holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistoryCounts {
    pub user: u64,
    /// Answers and the assistant messages that asked for tool calls.
    pub assistant: u64,
    /// Of `assistant`, those that asked for tool calls.
    pub assistant_tool_calls: u64,
    pub tool_results: u64,
}

impl HistoryCounts {
    pub fn total(&self) -> u64 {
        self.user + self.assistant + self.tool_results
    }
}

/// The id of the first row kept when a session keeps its latest `?2` rows (`-1`: all): the first user or
/// assistant row among them, so the kept rows never open with a tool result cut off from its call. Past the last
/// row when none qualifies. (A macro, so the queries that use it stay literal strings.)
macro_rules! first_kept_id {
    () => {
        "COALESCE(
            (SELECT MIN(id) FROM (SELECT id, role FROM messages WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2)
             WHERE role != 'tool'),
            (SELECT MAX(id) + 1 FROM messages WHERE session_id = ?1))"
    };
}

macro_rules! columns {
    () => {
        "id, role, content, tool_calls_json, tool_call_id, tool_name, turn_id, context_tokens, created_at"
    };
}

/// Rows per INSERT of a turn's messages: eight parameters a row, far under SQLite's 32,766.
const ROWS_PER_INSERT: usize = 1000;

impl Store {
    /// The session's messages, oldest first, full text: the latest `max_history_messages` when that is set,
    /// less any tool results at the front whose call fell outside that window.
    pub async fn history(&self, session_id: &str) -> Result<Vec<StoredMessage>> {
        self.history_after(session_id, i64::MIN).await
    }

    /// [`Store::history`] after message `after_id` only (those a compaction summary does not stand in for).
    pub async fn history_after(&self, session_id: &str, after_id: i64) -> Result<Vec<StoredMessage>> {
        let limit = self.max_history_messages.map_or(-1, i64::from);
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM messages WHERE session_id = ?1 AND id > ?3 AND id >= ",
            first_kept_id!(),
            " ORDER BY id ASC"
        ))
        .bind(session_id)
        .bind(limit)
        .bind(after_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().filter_map(stored_message).collect())
    }

    /// One message of the session by id (the full text of a tool result the replayed history shortened).
    /// `None` when the session has no such message: another chat's messages are not readable from this one.
    pub async fn message(&self, session_id: &str, id: i64) -> Result<Option<StoredMessage>> {
        let row = sqlx::query(concat!("SELECT ", columns!(), " FROM messages WHERE session_id = ?1 AND id = ?2"))
            .bind(session_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().and_then(stored_message))
    }

    /// Appends the messages of one turn and removes its pending rows, in one transaction; then trims the
    /// session to `max_history_messages`.
    pub async fn finish_turn(
        &self,
        session_id: &str,
        messages: &[(Role, &str)],
        pending_event_ids: &[&str],
    ) -> Result<()> {
        self.finish_turn_answered(session_id, messages, pending_event_ids, None).await
    }

    /// As [`Store::finish_turn`]; with `answer_json`, the first pending row stays and holds the answer until
    /// [`Store::clear_pending`] says it was delivered (the other rows, messages steered into the turn, go).
    pub async fn finish_turn_answered(
        &self,
        session_id: &str,
        messages: &[(Role, &str)],
        pending_event_ids: &[&str],
        answer_json: Option<&str>,
    ) -> Result<()> {
        let messages: Vec<TurnMessage> =
            messages.iter().map(|(role, content)| TurnMessage::text(*role, (*content).to_string())).collect();
        self.store_turn(session_id, &messages, pending_event_ids, answer_json).await
    }

    /// As [`Store::finish_turn_answered`] for a turn with tool calls: the assistant messages that asked for
    /// calls and their results are stored in order with the user messages and the answer, all in one
    /// transaction. A call without its result (the run stopped between them) is not stored, nor a result
    /// without its call ([`crate::replay::answered_calls_only`]).
    pub async fn store_turn(
        &self,
        session_id: &str,
        messages: &[TurnMessage],
        pending_event_ids: &[&str],
        answer_json: Option<&str>,
    ) -> Result<()> {
        let messages = crate::replay::answered_calls_only(messages.to_vec());
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let created_at = now();
        // One INSERT for the turn's messages (in slices that stay under SQLite's bound on parameters) and one
        // UPDATE for their turn id: every statement is a round trip to the database's thread.
        let mut ids: Option<(i64, i64)> = None;
        for slice in messages.chunks(ROWS_PER_INSERT) {
            let mut insert = sqlx::QueryBuilder::new(
                "INSERT INTO messages
                     (session_id, role, content, tool_calls_json, tool_call_id, tool_name, context_tokens,
                      created_at) ",
            );
            insert.push_values(slice, |mut row, message| {
                let calls = (!message.tool_calls.is_empty()).then(|| self.calls_json(&message.tool_calls));
                row.push_bind(session_id)
                    .push_bind(message.role.as_str())
                    .push_bind(self.redactor.redact(&message.content).into_owned())
                    .push_bind(calls)
                    .push_bind(message.tool_call_id.clone())
                    .push_bind(message.tool_name.clone())
                    .push_bind(message.context_tokens.and_then(|t| i64::try_from(t).ok()))
                    .push_bind(created_at.clone());
            });
            insert.push(" RETURNING id");
            let inserted: Vec<i64> = insert.build_query_scalar().fetch_all(&mut *tx).await?;
            for id in inserted {
                ids = Some(ids.map_or((id, id), |(low, high)| (low.min(id), high.max(id))));
            }
        }
        // The transaction holds the write lock: every id in the range is one of this turn's rows.
        if let Some((first, last)) = ids {
            sqlx::query("UPDATE messages SET turn_id = ?1 WHERE id BETWEEN ?1 AND ?2")
                .bind(first)
                .bind(last)
                .execute(&mut *tx)
                .await?;
        }
        for (i, event_id) in pending_event_ids.iter().enumerate() {
            match answer_json.filter(|_| i == 0) {
                Some(answer) => {
                    sqlx::query("UPDATE pending_turns SET answer_json = ?2 WHERE event_id = ?1")
                        .bind(event_id)
                        .bind(self.redactor.redact_json_text(answer))
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    sqlx::query("DELETE FROM pending_turns WHERE event_id = ?1")
                        .bind(event_id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        if let Some(max) = self.max_history_messages {
            self.trim(session_id, u64::from(max)).await?;
        }
        Ok(())
    }

    /// The calls as stored, with known secrets masked in their arguments.
    fn calls_json(&self, calls: &[StoredToolCall]) -> String {
        let masked: Vec<StoredToolCall> = calls
            .iter()
            .map(|call| StoredToolCall {
                arguments: self.redactor.redact_json_text(&call.arguments).into_owned(),
                ..call.clone()
            })
            .collect();
        serde_json::to_string(&masked).unwrap_or_else(|_| "[]".into())
    }

    /// Starts the session afresh and keeps its conversation: its messages move to the session
    /// `{session_id}@{now}`. Returns that id and how many messages moved (none: the session was empty).
    pub async fn archive_session(&self, session_id: &str) -> Result<(String, u64)> {
        let archive = format!("{session_id}@{}", now());
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let moved = sqlx::query("UPDATE messages SET session_id = ?2 WHERE session_id = ?1")
            .bind(session_id)
            .bind(&archive)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE summaries SET session_id = ?2 WHERE session_id = ?1")
            .bind(session_id)
            .bind(&archive)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((archive, moved.rows_affected()))
    }

    /// Every stored row of the session: user messages, assistant messages (answers and tool-call requests) and
    /// tool results. This is what `max_history_messages` and [`Store::trim`] count.
    pub async fn count(&self, session_id: &str) -> Result<u64> {
        Ok(self.counts(session_id).await?.total())
    }

    /// The session's rows by kind.
    pub async fn counts(&self, session_id: &str) -> Result<HistoryCounts> {
        let row = sqlx::query(
            "SELECT COALESCE(SUM(role = 'user'), 0) AS user,
                    COALESCE(SUM(role = 'assistant'), 0) AS assistant,
                    COALESCE(SUM(role = 'assistant' AND tool_calls_json IS NOT NULL), 0) AS calls,
                    COALESCE(SUM(role = 'tool'), 0) AS tool
             FROM messages WHERE session_id = ?1",
        )
        .bind(session_id)
        .fetch_one(&self.pool)
        .await?;
        let get = |name: &str| u64::try_from(row.get::<i64, _>(name)).unwrap_or(0);
        Ok(HistoryCounts {
            user: get("user"),
            assistant: get("assistant"),
            assistant_tool_calls: get("calls"),
            tool_results: get("tool"),
        })
    }

    /// Keeps at most the latest `keep_latest` messages of the session; returns how many were removed. The cut
    /// never falls between an assistant message and the results of its tool calls: when it would, those
    /// results go too, so fewer than `keep_latest` may remain.
    pub async fn trim(&self, session_id: &str, keep_latest: u64) -> Result<u64> {
        let keep = i64::try_from(keep_latest).unwrap_or(i64::MAX);
        let summary = self.latest_summary(session_id).await?;
        let after_summary = |through: i64| {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND id > ?2")
                .bind(session_id)
                .bind(through)
                .fetch_one(&self.pool)
        };
        let before = match &summary {
            Some(summary) => after_summary(summary.through_id).await?,
            None => 0,
        };
        let result = sqlx::query(concat!("DELETE FROM messages WHERE session_id = ?1 AND id < ", first_kept_id!()))
            .bind(session_id)
            .bind(keep)
            .execute(&self.pool)
            .await?;
        // A summary stands in for the messages before those that follow it: a trim that removed some of those
        // asked for fewer messages than follow the summary, so the summary goes too.
        if let Some(summary) = summary
            && (keep_latest == 0 || after_summary(summary.through_id).await? < before)
        {
            self.drop_summaries(session_id).await?;
        }
        Ok(result.rows_affected())
    }
}

/// The row as a message; `None` for a role this version does not know (it cannot be replayed).
pub(crate) fn stored_message(row: &SqliteRow) -> Option<StoredMessage> {
    let role = Role::parse(&row.get::<String, _>("role"))?;
    let tool_calls = row
        .get::<Option<String>, _>("tool_calls_json")
        .and_then(|json| serde_json::from_str::<Vec<StoredToolCall>>(&json).ok())
        .unwrap_or_default();
    Some(StoredMessage {
        id: row.get("id"),
        role,
        content: row.get("content"),
        tool_calls,
        tool_call_id: row.get("tool_call_id"),
        tool_name: row.get("tool_name"),
        turn_id: row.get("turn_id"),
        context_tokens: row.get::<Option<i64>, _>("context_tokens").and_then(|t| u64::try_from(t).ok()),
        created_at: row.get("created_at"),
    })
}
