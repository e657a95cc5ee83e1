//! Between a chat's stored transcript and the model's messages. A finished turn becomes the rows to store: the
//! user's messages, the assistant messages that asked for tool calls, their results and the answer, so the next
//! turn knows which tools ran and what they returned. Stored rows become the history the next request carries,
//! with older tool results shortened ([`minibot_store::replay`]).

use minibot_agent::AgentOutcome;
use minibot_llm::{Message, ToolCall};
use minibot_store::{Role, StoredMessage, StoredToolCall, TurnMessage, replay};
use std::collections::VecDeque;

/// The tool that shows a stored message by id; a shortened result points at it when the model has it.
pub const HISTORY_READER: &str = "chat_history_info";

/// The stored history as the messages of the next request. `reader_available`: the model has
/// [`HISTORY_READER`], so a shortened result may tell it to read the rest there.
pub fn history_messages(rows: Vec<StoredMessage>, reader_available: bool) -> Vec<Message> {
    replay::replayable(rows, reader_available.then_some(HISTORY_READER)).into_iter().map(to_message).collect()
}

/// The stored rows as messages with every tool result whole (for the summary model), calls without results
/// left out.
pub fn history_messages_whole(rows: Vec<StoredMessage>) -> Vec<Message> {
    replay::answered_calls_only(rows).into_iter().map(to_message).collect()
}

fn to_message(row: StoredMessage) -> Message {
    match row.role {
        Role::User => Message::User(row.content),
        Role::Assistant if row.tool_calls.is_empty() => Message::assistant_text(row.content),
        Role::Assistant => {
            let calls = row
                .tool_calls
                .into_iter()
                .map(|call| ToolCall { id: call.id, name: call.name, arguments: call.arguments })
                .collect();
            Message::assistant_calls(Some(row.content).filter(|text| !text.is_empty()), calls)
        }
        Role::Tool => Message::Tool {
            call_id: row.tool_call_id.unwrap_or_default(),
            name: row.tool_name.unwrap_or_default(),
            content: row.content,
        },
    }
}

/// What a finished turn stores: the user's message once, the messages steered into the turn where the model
/// read them, every assistant message that asked for tool calls with its results, then the answer.
///
/// Left out: the loop's own nudges to the model, images and files the agent put into its context, the text of
/// a step the answer superseded, reasoning and provider replay data (valid within one run only). The store
/// drops a call the run stopped before answering.
pub fn turn_messages(user_text: &str, outcome: &AgentOutcome) -> Vec<TurnMessage> {
    let mut steered: VecDeque<&str> = outcome.steered.iter().map(|s| s.text.as_str()).collect();
    let mut rows = vec![TurnMessage::user(user_text)];
    // The run's first message is the user's, stored above.
    for message in outcome.messages.iter().skip(1) {
        match message {
            Message::User(text) if steered.front() == Some(&text.as_str()) => {
                steered.pop_front();
                rows.push(TurnMessage::user(text.as_str()));
            }
            Message::Assistant { content, tool_calls, .. } if !tool_calls.is_empty() => {
                let calls = tool_calls
                    .iter()
                    .map(|c| StoredToolCall { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() })
                    .collect();
                rows.push(TurnMessage::assistant_calls(content.clone().unwrap_or_default(), calls));
            }
            Message::Tool { call_id, name, content } => {
                rows.push(TurnMessage::tool_result(call_id.as_str(), name.as_str(), content.as_str()));
            }
            Message::System(_) | Message::User(_) | Message::UserParts(_) | Message::Assistant { .. } => {}
        }
    }
    // Read by a run whose messages were replaced (the guardrail ran the turn again): after the user's message.
    for (i, text) in steered.into_iter().enumerate() {
        rows.insert(1 + i, TurnMessage::user(text));
    }
    rows.push(TurnMessage::assistant(outcome.answer.as_str()));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use minibot_agent::{ReplyKind, Steer, StopReason};

    fn outcome(messages: Vec<Message>, steered: &[&str]) -> AgentOutcome {
        AgentOutcome {
            answer: "done".into(),
            stop_reason: StopReason::Completed,
            reply_kind: ReplyKind::Markdown,
            disable_link_preview: false,
            usage: Default::default(),
            steps: 2,
            tool_calls: 1,
            tools_used: Vec::new(),
            steered: steered.iter().map(|t| Steer { id: format!("id-{t}"), text: (*t).into() }).collect(),
            attachments: Vec::new(),
            messages,
            elapsed: Default::default(),
            context_tokens: None,
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "bash".into(), arguments: "{}".into() }
    }

    fn shape(rows: &[TurnMessage]) -> Vec<(Role, &str)> {
        rows.iter().map(|r| (r.role, r.content.as_str())).collect()
    }

    #[test]
    fn a_turn_stores_the_users_words_the_calls_and_results_and_the_answer_but_not_the_loops_nudges() {
        let messages = vec![
            Message::User("list files".into()),
            Message::assistant_text("<tool_call>bash</tool_call>"),
            Message::User("Please use the tool calling interface instead of embedding tool calls in text.".into()),
            Message::assistant_calls(Some("Looking.".into()), vec![call("c1")]),
            Message::Tool { call_id: "c1".into(), name: "bash".into(), content: "a.txt".into() },
            Message::User("and hidden ones".into()),
            Message::UserParts(Vec::new()),
        ];
        let rows = turn_messages("list files", &outcome(messages, &["and hidden ones"]));
        use Role::{Assistant as A, Tool as T, User as U};
        assert_eq!(
            shape(&rows),
            [(U, "list files"), (A, "Looking."), (T, "a.txt"), (U, "and hidden ones"), (A, "done")]
        );
        assert_eq!(rows[1].tool_calls[0].id, "c1");
        assert_eq!(rows[2].tool_call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn steered_messages_a_replaced_run_read_follow_the_users_message() {
        let rows = turn_messages(
            "what time is it?",
            &outcome(vec![Message::User("what time is it?".into())], &["and the date"]),
        );
        assert_eq!(
            shape(&rows),
            [(Role::User, "what time is it?"), (Role::User, "and the date"), (Role::Assistant, "done")]
        );
    }
}
