//! `chat_history_trim`: deletes the older part of the conversation's stored history. Every stored row counts
//! (user and assistant messages, tool-call requests, tool results); the cut never separates a tool call from
//! its results, so it may keep fewer than asked.

use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_store::Store;
use serde::Deserialize;
use serde_json::{Value, json};

pub struct ChatHistoryTrim {
    store: Store,
}

impl ChatHistoryTrim {
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    keep_latest: i64,
}

impl Tool for ChatHistoryTrim {
    type Args = Args;

    fn name(&self) -> &str {
        "chat_history_trim"
    }

    fn description(&self) -> String {
        "Delete older messages of this conversation's stored history, keeping at most the latest `keep_latest` \
         (0 clears it). Every stored message counts: user and assistant messages, tool-call requests and tool \
         results; a tool call and its results go together, so slightly fewer may remain. Use it when the user \
         asks to forget the conversation."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "keep_latest": { "type": "integer", "minimum": 0 } },
            "required": ["keep_latest"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let keep = u64::try_from(args.keep_latest)
            .map_err(|_| ToolError::invalid_arguments("keep_latest must be 0 or more"))?;
        let removed = self.store.trim(&ctx.session_id, keep).await.map_err(super::store_error)?;
        let remaining = self.store.count(&ctx.session_id).await.map_err(super::store_error)?;
        Ok(json!({
            "session_id": ctx.session_id,
            "keep_latest": keep,
            "removed_messages": removed,
            "remaining_messages": remaining,
            "max_history_messages": self.store.max_history_messages(),
        }))
    }
}
