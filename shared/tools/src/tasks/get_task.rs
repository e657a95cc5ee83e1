use super::TaskService;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GetTask { service: Arc<dyn TaskService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    task_id: String,
    #[serde(default)]
    include_events: Option<bool>,
}

impl Tool for GetTask {
    type Args = Args;

    fn name(&self) -> &str {
        "get_task"
    }

    fn description(&self) -> String {
        "Get one background task: its status, limits, progress, full result and recent events.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "task_id": { "type": "string", "description": "full id or a unique prefix of at least 8 characters" },
                "include_events": { "type": ["boolean", "null"] }
            },
            "required": ["task_id"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        self.service.get(args.task_id.trim(), args.include_events.unwrap_or(true), ctx).await
    }
}
