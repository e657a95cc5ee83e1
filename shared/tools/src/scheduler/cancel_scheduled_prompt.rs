//! `cancel_scheduled_prompt`: stops one of this chat's scheduled prompts; it stays listed as `cancelled`.

use super::{JobIdArgs, SchedulerService, job_id, store_error, target};
use chrono::Utc;
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_scheduler::time_text::iso;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(CancelScheduledPrompt { service: Arc<SchedulerService> });

impl Tool for CancelScheduledPrompt {
    type Args = JobIdArgs;

    fn name(&self) -> &str {
        "cancel_scheduled_prompt"
    }

    fn description(&self) -> String {
        "Cancel one of this chat's scheduled prompts by its job_id (from list_scheduled_prompts). It will not run \
         again and stays in the list as cancelled."
            .into()
    }

    fn parameters(&self) -> Value {
        super::job_id_parameters()
    }

    async fn call(&self, args: JobIdArgs, ctx: &ToolContext) -> ToolResult {
        let target = target(ctx)?;
        let id = job_id(&args.job_id)?;
        let Some(removed) = self.service.store.cancel(&target, &id, Utc::now()).await.map_err(store_error)? else {
            return Ok(not_found(&id));
        };
        self.service.wake.wake();
        let was_active = removed.before.status.is_active();
        Ok(json!({
            "job_id": id,
            "cancelled": was_active,
            "status": if was_active { "cancelled" } else { removed.before.status.as_str() },
            "run_at": iso(removed.before.run_at),
        }))
    }
}

pub(super) fn not_found(id: &str) -> Value {
    json!({
        "ok": false,
        "job_id": id,
        "error_code": "scheduler:not_found",
        "error": format!("no scheduled prompt {id} in this chat; list_scheduled_prompts shows this chat's jobs"),
    })
}
