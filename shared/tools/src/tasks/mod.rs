//! The delegation tools: `spawn_task`, `delegate`, `cancel_task`, `message_task`, `list_tasks`, `get_task` and
//! `fetch_agent_info`. They validate the model's arguments and hand the work to a [`TaskService`], which the
//! orchestrator implements over its task records and queue.

mod cancel_task;
mod fetch_agent_info;
mod get_task;
mod list_tasks;
mod message_task;
mod submit;

pub use cancel_task::CancelTask;
pub use fetch_agent_info::FetchAgentInfo;
pub use get_task::GetTask;
pub use list_tasks::ListTasks;
pub use message_task::MessageTask;
pub use submit::{Submit, SubmitArgs};

/// Where a task's result goes, and where a task stands: shared with the task records.
pub use minibot_protocol::{Delivery, TaskStatus};

use futures_util::future::BoxFuture;
use minibot_agent::{ToolContext, ToolError, ToolRegistry, dyn_tool};
use minibot_config::{Config, DelegationMode};
use serde_json::Value;
use std::sync::Arc;

/// A validated request to queue a task.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub delivery: Delivery,
    pub prompt: String,
    pub agent_name: Option<String>,
    pub context_json: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub model_provider: Option<String>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
}

impl TaskRequest {
    /// A request with only a prompt: general worker, default timeout and model.
    pub fn new(delivery: Delivery, prompt: impl Into<String>) -> Self {
        Self {
            delivery,
            prompt: prompt.into(),
            agent_name: None,
            context_json: None,
            timeout_seconds: None,
            model_provider: None,
            model: None,
            reasoning_effort: None,
        }
    }
}

/// What the orchestrator offers the delegation tools. Every method answers with the JSON the model sees, or
/// an error it can act on.
pub trait TaskService: Send + Sync {
    fn submit<'a>(&'a self, request: TaskRequest, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>>;
    fn cancel<'a>(&'a self, task_id: &'a str, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>>;
    fn message<'a>(
        &'a self,
        task_id: &'a str,
        text: &'a str,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
    fn list<'a>(
        &'a self,
        status: Option<TaskStatus>,
        limit: u32,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
    fn get<'a>(
        &'a self,
        task_id: &'a str,
        include_events: bool,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
    fn agent_info<'a>(&'a self, agent_name: &'a str) -> BoxFuture<'a, Result<Value, ToolError>>;
    /// Names and descriptions of the specialists, for tool descriptions and the system prompt.
    fn roster(&self) -> Vec<(String, String)>;
}

/// Adds the delegation tools. `spawn_task` only in `[tasks] delegation_mode = "auto"`; `fetch_agent_info` only
/// when specialists exist. `config` says which model providers a task may select.
pub fn register(registry: &mut ToolRegistry, service: Arc<dyn TaskService>, config: &Arc<Config>) {
    if config.tasks.delegation_mode == DelegationMode::Auto {
        registry.register(dyn_tool(Submit::new(Delivery::Spawn, service.clone(), config.clone())));
    }
    registry.register(dyn_tool(Submit::new(Delivery::Delegate, service.clone(), config.clone())));
    registry.register(dyn_tool(CancelTask::new(service.clone())));
    registry.register(dyn_tool(MessageTask::new(service.clone())));
    registry.register(dyn_tool(ListTasks::new(service.clone())));
    registry.register(dyn_tool(GetTask::new(service.clone())));
    if !service.roster().is_empty() {
        registry.register(dyn_tool(FetchAgentInfo::new(service, config.clone())));
    }
}

/// The providers a task may select, as the model sees them.
fn available_providers(config: &Config) -> Value {
    config
        .available_providers()
        .into_iter()
        .map(|p| serde_json::json!({ "name": p.name, "api_format": p.api_format.as_str(), "models": p.models }))
        .collect()
}

fn empty_to_none(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}
