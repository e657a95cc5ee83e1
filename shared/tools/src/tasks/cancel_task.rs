use super::TaskService;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(CancelTask { service: Arc<dyn TaskService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    task_id: String,
}

impl Tool for CancelTask {
    type Args = Args;

    fn name(&self) -> &str {
        "cancel_task"
    }

    fn description(&self) -> String {
        "Cancel a queued or running background task by its id (or a unique prefix of at least 8 characters). \
         A cancelled task reports nothing. `cancelled: true` means the cancel reached the task queue; when it \
         cannot, the call fails and the task keeps running."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "task_id": { "type": "string" } },
            "required": ["task_id"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        self.service.cancel(args.task_id.trim(), ctx).await
    }
}
