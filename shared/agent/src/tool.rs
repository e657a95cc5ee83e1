//! The tool traits. A tool is written against [`Tool`] (typed arguments, a JSON schema); the registry holds the
//! object-safe [`DynTool`] twin, which MCP bindings implement directly.

use crate::approval::Approver;
use crate::channel::ChannelCapabilities;
use futures_util::future::BoxFuture;
use minibot_llm::ToolSpec;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// Who is calling: the conversation and turn the call belongs to.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    /// `"{channel}:{chat_id}"`.
    pub session_id: String,
    pub channel: String,
    pub chat_id: Option<i64>,
    pub user_id: Option<i64>,
    pub owner_id: String,
    /// The id of this call, as the model gave it.
    pub call_id: String,
    /// The turn (inbound message id) this call belongs to; empty inside task workers.
    pub turn_id: String,
    /// How many delegated results led to this turn (0 for a turn the user started).
    pub task_depth: u32,
    /// What the turn's channel can do; tools whose effect it cannot carry out refuse instead of pretending.
    pub capabilities: ChannelCapabilities,
    /// How this turn asks the user to approve a call; `None`: it cannot ask, so what needs approval is denied.
    pub approver: Option<Approver>,
    /// The names of the tools the calling agent has, set by the agent loop; `None` outside a run. A wrapper that
    /// points the model at another tool (the output spill) names only tools it can really call.
    pub agent_tools: Option<Arc<[String]>>,
}

/// A failed call. `RespondToModel` goes back to the model as an error result and the turn continues; `Fatal`
/// ends the turn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    #[error("{message}")]
    RespondToModel { code: String, message: String },
    #[error("{0}")]
    Fatal(String),
}

impl ToolError {
    /// An error the model should read and act on, with a stable `error_code`.
    pub fn respond(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::RespondToModel { code: code.into(), message: message.into() }
    }

    /// Rejected arguments.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::respond("invalid_arguments", message)
    }
}

pub type ToolResult = Result<Value, ToolError>;

/// A tool with typed arguments.
pub trait Tool: Send + Sync + 'static {
    type Args: DeserializeOwned + Send;
    fn name(&self) -> &str;
    fn description(&self) -> String;
    /// JSON schema of `Args`.
    fn parameters(&self) -> Value;
    fn call(&self, args: Self::Args, ctx: &ToolContext) -> impl Future<Output = ToolResult> + Send;
}

/// The type-erased tool the registry holds.
pub trait DynTool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn name(&self) -> &str;
    fn call_json<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult>;
    /// A result limit of the tool's own (MCP bindings: `inline_result_chars`). The tool then returns results
    /// whole and leaves it to the spill wrapper: spilled past `max(global spill_after_chars, this)`, cut to this
    /// when spill is not active (reference §3.17).
    fn spill_after_chars(&self) -> Option<usize> {
        None
    }
}

struct Typed<T>(T);

impl<T: Tool> DynTool for Typed<T> {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: self.0.name().to_string(), description: self.0.description(), parameters: self.0.parameters() }
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn call_json<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let args: T::Args = serde_json::from_value(args)
                .map_err(|e| ToolError::invalid_arguments(format!("invalid arguments for `{}`: {e}", self.0.name())))?;
            self.0.call(args, ctx).await
        })
    }
}

/// Wraps a typed tool for the registry.
pub fn dyn_tool<T: Tool>(tool: T) -> Arc<dyn DynTool> {
    Arc::new(Typed(tool))
}
