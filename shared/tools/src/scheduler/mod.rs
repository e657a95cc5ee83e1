//! Scheduled prompts (`[scheduler.prompts]`): `schedule_prompt`, `list_scheduled_prompts`,
//! `cancel_scheduled_prompt`, `delete_scheduled_prompt`. Every tool works on the calling chat's own jobs (owner,
//! channel and chat); the orchestrator's scheduler fires them.

mod cancel_scheduled_prompt;
mod delete_scheduled_prompt;
mod list_scheduled_prompts;
mod schedule_prompt;

pub use cancel_scheduled_prompt::CancelScheduledPrompt;
pub use delete_scheduled_prompt::DeleteScheduledPrompt;
pub use list_scheduled_prompts::ListScheduledPrompts;
pub use schedule_prompt::SchedulePrompt;

use crate::ToolServices;
use minibot_agent::{ToolContext, ToolError, ToolRegistry, dyn_tool};
use minibot_scheduler::time_text::iso;
use minibot_scheduler::{Job, SchedulerStore, Target, Wake};
use serde_json::{Value, json};
use std::sync::Arc;

/// What the scheduler tools share: the job store, the scheduler's wake-up, and the config's limits.
pub struct SchedulerService {
    pub store: SchedulerStore,
    pub wake: Wake,
    /// `[scheduler.prompts] min_recurrence_interval_seconds`.
    pub min_interval_seconds: u64,
    /// `[scheduler.prompts] max_attempts`, given to each new job.
    pub max_attempts: u32,
}

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    if let Some(service) = &services.scheduler {
        registry.register(dyn_tool(SchedulePrompt::new(Arc::clone(service))));
        registry.register(dyn_tool(ListScheduledPrompts::new(Arc::clone(service))));
        registry.register(dyn_tool(CancelScheduledPrompt::new(Arc::clone(service))));
        registry.register(dyn_tool(DeleteScheduledPrompt::new(Arc::clone(service))));
    }
}

/// The calling chat, whose jobs the tools see. A call from outside a chat (a task worker) has none.
fn target(ctx: &ToolContext) -> Result<Target, ToolError> {
    let chat_id = ctx.chat_id.ok_or_else(|| {
        ToolError::respond("scheduler:no_chat", "scheduled prompts belong to a chat, and this call comes from none")
    })?;
    Ok(Target { owner_id: ctx.owner_id.clone(), channel: ctx.channel.clone(), chat_id, user_id: ctx.user_id })
}

fn store_error(error: minibot_scheduler::StoreError) -> ToolError {
    ToolError::respond("scheduler:store_failed", format!("the scheduled prompts database failed: {error}"))
}

/// A job as the model reads it in results.
fn describe(job: &Job) -> Value {
    json!({
        "job_id": job.id,
        "status": job.status.as_str(),
        "run_at": iso(job.run_at),
        "recurrence": job.recurrence_kind,
        "recurrence_interval_seconds": job.interval_seconds,
        "recurrence_cron_expression": job.cron_expression,
        "time_zone": job.time_zone,
        "recurrence_end_at": job.end_at.map(iso),
        "text": job.content,
        "last_error": job.last_error,
    })
}

/// The arguments of the tools that act on one job.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobIdArgs {
    job_id: String,
}

fn job_id_parameters() -> Value {
    json!({
        "type": "object",
        "properties": { "job_id": { "type": "string", "description": "From list_scheduled_prompts." } },
        "required": ["job_id"],
        "additionalProperties": false
    })
}

/// A job id as the model wrote it: MiniBot's ids are 32 hex digits.
fn job_id(raw: &str) -> Result<String, ToolError> {
    let id = raw.trim().to_ascii_lowercase();
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(ToolError::invalid_arguments(format!(
            "job_id `{}` is not a job id; list_scheduled_prompts shows them",
            minibot_agent::excerpt(raw)
        )));
    }
    Ok(id)
}
