use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_store::Store;
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
pub struct Args {}

impl Tool for ChatHistoryInfo {
    type Args = Args;

    fn name(&self) -> &str {
        "chat_history_info"
    }

    fn description(&self) -> String {
        "Report how many messages the stored history of this conversation holds, and the configured limit.".into()
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {}, "required": [], "additionalProperties": false })
    }

    async fn call(&self, _args: Args, ctx: &ToolContext) -> ToolResult {
        let total = self.store.count(&ctx.session_id).await.map_err(super::store_error)?;
        Ok(json!({
            "session_id": ctx.session_id,
            "total_messages": total,
            "max_history_messages": self.store.max_history_messages(),
        }))
    }
}
