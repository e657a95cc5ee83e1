use super::TaskService;
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

const STATUSES: &[&str] = &["pending", "running", "done", "failed", "cancelled", "timed_out"];

pub struct ListTasks {
    service: Arc<dyn TaskService>,
}

impl ListTasks {
    pub fn new(service: Arc<dyn TaskService>) -> Self {
        Self { service }
    }
}

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
        json!({
            "type": "object",
            "properties": {
                "status": { "type": ["string", "null"], "enum": [null, "pending", "running", "done", "failed", "cancelled", "timed_out"] },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": 100 }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let status = args.status.filter(|s| !s.is_empty());
        if let Some(status) = &status
            && !STATUSES.contains(&status.as_str())
        {
            return Err(ToolError::invalid_arguments(format!("status must be one of {}", STATUSES.join(", "))));
        }
        let limit = args.limit.unwrap_or(20).clamp(1, 100) as u32;
        self.service.list(status.as_deref(), limit, ctx).await
    }
}
