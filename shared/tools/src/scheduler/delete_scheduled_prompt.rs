//! `delete_scheduled_prompt`: removes one of this chat's scheduled prompts, cancelling it first if it is active.

use super::cancel_scheduled_prompt::not_found;
use super::{JobIdArgs, SchedulerService, job_id, store_error, target};
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(DeleteScheduledPrompt { service: Arc<SchedulerService> });

impl Tool for DeleteScheduledPrompt {
    type Args = JobIdArgs;

    fn name(&self) -> &str {
        "delete_scheduled_prompt"
    }

    fn description(&self) -> String {
        "Delete one of this chat's scheduled prompts by its job_id: it stops (if still active) and leaves the list."
            .into()
    }

    fn parameters(&self) -> Value {
        super::job_id_parameters()
    }

    async fn call(&self, args: JobIdArgs, ctx: &ToolContext) -> ToolResult {
        let target = target(ctx)?;
        let id = job_id(&args.job_id)?;
        let Some(removed) = self.service.store.delete(&target, &id).await.map_err(store_error)? else {
            return Ok(not_found(&id));
        };
        self.service.wake.wake();
        Ok(json!({
            "job_id": id,
            "deleted": true,
            "stopped_before_delete": removed.before.status.is_active(),
            "status_before_delete": removed.before.status.as_str(),
        }))
    }
}
