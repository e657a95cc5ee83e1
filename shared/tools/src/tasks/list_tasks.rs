use super::{TaskService, TaskStatus};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(ListTasks { service: Arc<dyn TaskService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

impl Tool for ListTasks {
    type Args = Args;

    fn name(&self) -> &str {
        "list_tasks"
    }

    fn description(&self) -> String {
        "List background tasks, newest first, with status, progress and a preview of the result.".into()
    }

    fn parameters(&self) -> Value {
        let statuses = std::iter::once(Value::Null).chain(TaskStatus::ALL.iter().map(|s| json!(s.as_str())));
        json!({
            "type": "object",
            "properties": {
                "status": { "type": ["string", "null"], "enum": statuses.collect::<Vec<_>>() },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": 100 }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let status = match args.status.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(name) => Some(name.parse::<TaskStatus>().map_err(|_| {
                let names: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
                ToolError::invalid_arguments(format!("status must be one of {}", names.join(", ")))
            })?),
        };
        let limit = args.limit.unwrap_or(20).clamp(1, 100) as u32;
        self.service.list(status, limit, ctx).await
    }
}
