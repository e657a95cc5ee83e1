//! `chat_history_info`: how much the conversation's stored history holds, by kind, and the configured limit;
//! with `message_id`, one stored message in full (an earlier tool result the replayed history shortened).

use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_store::{Role, Store};
use serde::Deserialize;
use serde_json::{Value, json};

pub struct ChatHistoryInfo {
    store: Store,
}

impl ChatHistoryInfo {
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    message_id: Option<i64>,
}

impl Tool for ChatHistoryInfo {
    type Args = Args;

    fn name(&self) -> &str {
        "chat_history_info"
    }

    fn description(&self) -> String {
        "Report how many messages the stored history of this conversation holds (user messages, assistant \
         messages including tool-call requests, and tool results), and the configured limit. With `message_id`, \
         return that stored message in full: older tool results are shortened in the conversation and name the \
         id that holds the whole text."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "message_id": {
                    "type": "integer",
                    "description": "The id of one stored message of this conversation to return in full."
                }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        if let Some(id) = args.message_id {
            return self.message(id, ctx).await;
        }
        let counts = self.store.counts(&ctx.session_id).await.map_err(super::store_error)?;
        Ok(json!({
            "session_id": ctx.session_id,
            "total_messages": counts.total(),
            "user_messages": counts.user,
            "assistant_messages": counts.assistant,
            "assistant_tool_call_messages": counts.assistant_tool_calls,
            "tool_results": counts.tool_results,
            "max_history_messages": self.store.max_history_messages(),
        }))
    }
}

impl ChatHistoryInfo {
    async fn message(&self, id: i64, ctx: &ToolContext) -> ToolResult {
        let Some(message) = self.store.message(&ctx.session_id, id).await.map_err(super::store_error)? else {
            return Err(ToolError::respond(
                "chat_history:no_such_message",
                format!("this conversation's stored history has no message {id} (it may have been trimmed)"),
            ));
        };
        let mut out = json!({
            "session_id": ctx.session_id,
            "message_id": message.id,
            "role": message.role.as_str(),
            "content": message.content,
            "created_at": message.created_at,
        });
        if message.role == Role::Tool {
            out["tool_name"] = json!(message.tool_name);
            out["tool_call_id"] = json!(message.tool_call_id);
        }
        if !message.tool_calls.is_empty() {
            out["tool_calls"] = json!(
                message
                    .tool_calls
                    .iter()
                    .map(|c| json!({
                        "id": c.id, "name": c.name, "arguments": c.arguments
                    }))
                    .collect::<Vec<_>>()
            );
        }
        Ok(out)
    }
}
