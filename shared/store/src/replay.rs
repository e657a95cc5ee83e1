//! What of a stored history goes back to the model with the next turn: every call answered by its result, and
//! the tool results of turns before the latest shortened to a preview that says where the full text is.
//!
//! Providers reject an assistant tool call without its result (and a result without its call), so the history
//! is repaired on the way out whatever the rows say: an older version, a crash or a trim cannot make a chat
//! unanswerable. The rows themselves stay as stored, in full.

use crate::transcripts::{Role, StoredMessage, StoredToolCall, TurnMessage};
use crate::{Result, Store};
use std::collections::HashSet;

/// How many characters of an older tool result the model sees again.
pub const PREVIEW_CHARS: usize = 300;

impl Store {
    /// The session's history as the next request carries it ([`replayable`]). `reader` names the tool that
    /// shows a stored message by id, when the model has it.
    pub async fn replay_history(&self, session_id: &str, reader: Option<&str>) -> Result<Vec<StoredMessage>> {
        Ok(replayable(self.history(session_id).await?, reader))
    }
}

/// `rows` (oldest first) made safe to send: [`answered_calls_only`], then the tool results of every turn but
/// the latest shortened ([`shorten_result`]).
pub fn replayable(rows: Vec<StoredMessage>, reader: Option<&str>) -> Vec<StoredMessage> {
    let mut rows = answered_calls_only(rows);
    let latest_turn = rows.last().map(|row| row.turn_id);
    for row in &mut rows {
        if row.role == Role::Tool && Some(row.turn_id) != latest_turn {
            shorten_result(row, reader);
        }
    }
    rows
}

/// A transcript message, stored or about to be: what [`answered_calls_only`] looks at.
pub trait CallShaped {
    fn role(&self) -> Role;
    fn content(&self) -> &str;
    fn tool_calls_mut(&mut self) -> &mut Vec<StoredToolCall>;
    fn tool_call_id(&self) -> Option<&str>;
}

/// Stored rows and rows about to be stored have the same fields.
macro_rules! call_shaped {
    ($($kind:ty),*) => {$(
        impl CallShaped for $kind {
            fn role(&self) -> Role {
                self.role
            }
            fn content(&self) -> &str {
                &self.content
            }
            fn tool_calls_mut(&mut self) -> &mut Vec<StoredToolCall> {
                &mut self.tool_calls
            }
            fn tool_call_id(&self) -> Option<&str> {
                self.tool_call_id.as_deref()
            }
        }
    )*};
}

call_shaped!(StoredMessage, TurnMessage);

/// Keeps each assistant message's calls that a result right after it answers, and those results; drops a
/// result that answers no call of the message before it (a leading one included). An assistant message left
/// with no call and no text goes.
pub fn answered_calls_only<M: CallShaped>(rows: Vec<M>) -> Vec<M> {
    let mut kept = Vec::with_capacity(rows.len());
    let mut rows = rows.into_iter().peekable();
    while let Some(mut row) = rows.next() {
        if row.role() == Role::Tool {
            continue; // not right after the message that asked for it
        }
        if row.tool_calls_mut().is_empty() {
            kept.push(row);
            continue;
        }
        let asked: HashSet<String> = row.tool_calls_mut().iter().map(|call| call.id.clone()).collect();
        let mut answered: HashSet<String> = HashSet::new();
        let mut results = Vec::new();
        while let Some(result) = rows.next_if(|next| next.role() == Role::Tool) {
            let call_id = result.tool_call_id().unwrap_or_default().to_string();
            if asked.contains(&call_id) && answered.insert(call_id) {
                results.push(result);
            }
        }
        row.tool_calls_mut().retain(|call| answered.contains(&call.id));
        if row.tool_calls_mut().is_empty() && row.content().trim().is_empty() {
            continue;
        }
        kept.push(row);
        kept.extend(results);
    }
    kept
}

/// Cuts a long tool result to its first [`PREVIEW_CHARS`] characters and says how to read the rest.
fn shorten_result(row: &mut StoredMessage, reader: Option<&str>) {
    let total = row.content.chars().count();
    if total <= PREVIEW_CHARS {
        return;
    }
    let preview: String = row.content.chars().take(PREVIEW_CHARS).collect();
    let id = row.id;
    let how = match reader {
        Some(tool) => format!("call {tool} with {{\"message_id\": {id}}} to read it"),
        None => "it cannot be read from here".to_string(),
    };
    row.content = format!(
        "{preview}… [tool result of an earlier turn shortened to its first {PREVIEW_CHARS} of {total} characters; \
         the full result is stored as message {id} of this chat's history: {how}]"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcripts::StoredToolCall;

    fn row(id: i64, role: Role, content: &str) -> StoredMessage {
        StoredMessage {
            id,
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            turn_id: Some(1),
            context_tokens: None,
            created_at: String::new(),
        }
    }

    fn calls(id: i64, ids: &[&str]) -> StoredMessage {
        let tool_calls =
            ids.iter().map(|c| StoredToolCall { id: (*c).into(), name: "t".into(), arguments: "{}".into() }).collect();
        StoredMessage { tool_calls, ..row(id, Role::Assistant, "") }
    }

    fn result(id: i64, call: &str) -> StoredMessage {
        StoredMessage { tool_call_id: Some(call.into()), tool_name: Some("t".into()), ..row(id, Role::Tool, "ok") }
    }

    fn ids(rows: &[StoredMessage]) -> Vec<i64> {
        rows.iter().map(|r| r.id).collect()
    }

    #[test]
    fn an_unanswered_call_is_dropped_and_its_answered_siblings_stay() {
        let rows = vec![row(1, Role::User, "go"), calls(2, &["a", "b"]), result(3, "a"), row(4, Role::User, "next")];
        let kept = answered_calls_only(rows);
        assert_eq!(ids(&kept), [1, 2, 3, 4]);
        assert_eq!(kept[1].tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn a_call_message_with_no_answer_and_no_text_goes_and_orphan_results_go() {
        let rows = vec![result(1, "x"), row(2, Role::User, "go"), calls(3, &["a"]), row(4, Role::User, "again")];
        assert_eq!(ids(&answered_calls_only(rows)), [2, 4]);
        let rows = vec![row(1, Role::User, "go"), calls(2, &["a"]), result(3, "zzz"), result(4, "a"), result(5, "a")];
        assert_eq!(ids(&answered_calls_only(rows)), [1, 2, 4], "a result for another call and a repeat go");
    }

    #[test]
    fn only_results_before_the_latest_turn_are_shortened() {
        let long = "r".repeat(PREVIEW_CHARS * 3);
        let old = StoredMessage { content: long.clone(), ..result(3, "a") };
        let new = StoredMessage { content: long.clone(), turn_id: Some(5), ..result(7, "b") };
        let rows = vec![
            row(1, Role::User, "go"),
            calls(2, &["a"]),
            old,
            row(4, Role::Assistant, "done"),
            StoredMessage { turn_id: Some(5), ..row(5, Role::User, "more") },
            StoredMessage { turn_id: Some(5), ..calls(6, &["b"]) },
            new,
        ];
        let out = replayable(rows, Some("chat_history_info"));
        assert!(out[2].content.starts_with(&"r".repeat(PREVIEW_CHARS)), "{}", out[2].content);
        assert!(out[2].content.len() < PREVIEW_CHARS + 300, "{}", out[2].content);
        assert!(out[2].content.contains(r#"call chat_history_info with {"message_id": 3}"#), "{}", out[2].content);
        assert_eq!(out[6].content, long, "the latest turn's results stay whole");
        let without_reader = replayable(vec![row(1, Role::User, "go"), calls(2, &["a"]), result(3, "a")], None);
        assert_eq!(without_reader[2].content, "ok", "short results stay as they are");
    }
}
