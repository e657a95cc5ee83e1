//! `list_scheduled_prompts`: this chat's scheduled prompts, soonest first.

use super::{SchedulerService, describe, store_error, target};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_scheduler::ListQuery;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

const DEFAULT_LIMIT: i64 = 20;
const MAX_LIMIT: i64 = 100;

tool_struct!(ListScheduledPrompts { service: Arc<SchedulerService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    active_only: Option<bool>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    offset: Option<i64>,
}

impl Tool for ListScheduledPrompts {
    type Args = Args;

    fn name(&self) -> &str {
        "list_scheduled_prompts"
    }

    fn description(&self) -> String {
        "List the scheduled prompts of this chat, soonest first: id, status, next run, recurrence and text. By \
         default only active ones (pending, or firing now); `active_only: false` includes completed, failed and \
         cancelled ones."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "active_only": { "type": ["boolean", "null"], "description": "Default true." },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT, "description": "Default 20." },
                "offset": { "type": ["integer", "null"], "minimum": 0 }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let target = target(ctx)?;
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ToolError::invalid_arguments(format!("limit must be between 1 and {MAX_LIMIT}, got {limit}")));
        }
        let offset = args.offset.unwrap_or(0);
        let offset = u32::try_from(offset).map_err(|_| {
            ToolError::invalid_arguments(format!("offset must be between 0 and {}, got {offset}", u32::MAX))
        })?;
        let active_only = args.active_only.unwrap_or(true);
        let query = ListQuery { target: &target, active_only, limit: limit.unsigned_abs() as u32, offset };
        let (jobs, total) = self.service.store.list(&query).await.map_err(store_error)?;
        Ok(json!({
            "active_only": active_only,
            "count": jobs.len(),
            "total": total,
            "limit": limit,
            "offset": offset,
            "jobs": jobs.iter().map(describe).collect::<Vec<_>>(),
        }))
    }
}
