use super::TaskService;
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

pub const MAX_MESSAGE_CHARS: usize = 8_000;

tool_struct!(MessageTask { service: Arc<dyn TaskService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    task_id: String,
    message: String,
}

impl Tool for MessageTask {
    type Args = Args;

    fn name(&self) -> &str {
        "message_task"
    }

    fn description(&self) -> String {
        format!(
            "Send a message to a running background task, to correct or steer it; the worker reads it before \
             its next step. At most {MAX_MESSAGE_CHARS} characters."
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "task_id": { "type": "string" }, "message": { "type": "string" } },
            "required": ["task_id", "message"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let text = args.message.trim();
        if text.is_empty() {
            return Err(ToolError::invalid_arguments("message must not be empty"));
        }
        if text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ToolError::respond(
                "task:message_too_long",
                format!("message is longer than {MAX_MESSAGE_CHARS} characters"),
            ));
        }
        self.service.message(args.task_id.trim(), text, ctx).await
    }
}
