//! The tool traits. A tool is written against [`Tool`] (typed arguments, a JSON schema); the registry holds the
//! object-safe [`DynTool`] twin, which MCP bindings implement directly.

use crate::approval::Approver;
use crate::channel::ChannelCapabilities;
use futures_util::future::BoxFuture;
use minibot_llm::ToolSpec;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;

/// The most characters of an error message the model reads. Applied where a [`ToolError`] becomes the tool
/// message ([`crate::error_result`]), so no tool can answer with a giant error.
pub const MAX_ERROR_CHARS: usize = 2_000;
/// The most characters of one argument an error repeats ([`excerpt`]).
pub const ARGUMENT_EXCERPT_CHARS: usize = 200;

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
    /// The call id of the `run_tools_script` call whose script made this call; `None` for a call the model made.
    /// Such a result goes to the script, not the model, so it is never spilled.
    pub parent_call_id: Option<String>,
    /// How a tool that calls other tools (`run_tools_script`) runs them the way the loop runs a direct call; set
    /// by the agent loop for every call.
    pub nested: Option<crate::nested::NestedCalls>,
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

/// An argument (or any text the caller sent) as an error may repeat it: whole when short, else its first
/// [`ARGUMENT_EXCERPT_CHARS`] characters and how many more were cut. A 10 MB URL quoted whole would make a
/// 10 MB tool message.
pub fn excerpt(text: &str) -> String {
    shorten(text, ARGUMENT_EXCERPT_CHARS, "characters")
}

/// An error message cut to [`MAX_ERROR_CHARS`], saying how much was cut.
pub fn cap_error_message(message: &str) -> String {
    shorten(message, MAX_ERROR_CHARS, "characters of this error")
}

fn shorten(text: &str, limit: usize, unit: &str) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_string(),
        Some((end, _)) => {
            let cut = text[end..].chars().count();
            format!("{}… ({cut} more {unit} cut)", &text[..end])
        }
    }
}

pub type ToolResult = Result<Value, ToolError>;

/// A tool with typed arguments.
pub trait Tool: Send + Sync + 'static {
    type Args: DeserializeOwned + Send;
    fn name(&self) -> &str;
    fn description(&self) -> String;
    /// JSON schema of `Args`. Read once per tool: a tool whose schema should change is built anew.
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

/// A typed tool behind the erased interface. Its schema is built once: every request of every turn carries it.
struct Typed<T> {
    tool: T,
    parameters: std::sync::OnceLock<Arc<Value>>,
}

impl<T: Tool> DynTool for Typed<T> {
    fn spec(&self) -> ToolSpec {
        let parameters = Arc::clone(self.parameters.get_or_init(|| Arc::new(self.tool.parameters())));
        ToolSpec { name: self.tool.name().to_string(), description: self.tool.description(), parameters }
    }

    fn name(&self) -> &str {
        self.tool.name()
    }

    fn call_json<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            // Read from a borrow: on failure the arguments are still there to word a short error.
            let typed = match T::Args::deserialize(&args) {
                Ok(typed) => typed,
                Err(error) => {
                    let reason = invalid_arguments_reason::<T::Args>(&args, &error);
                    return Err(ToolError::invalid_arguments(format!(
                        "invalid arguments for `{}`: {reason}",
                        self.tool.name()
                    )));
                }
            };
            drop(args);
            self.tool.call(typed, ctx).await
        })
    }
}

/// serde's message for arguments that do not fit, without the values it quotes whole (`invalid type: string
/// "<10 MB>"`, ``unknown field `<10 MB>` ``): past a short length the arguments are read again with every long
/// string and key cut to an [`excerpt`], which yields the same complaint about a value short enough to repeat.
fn invalid_arguments_reason<A: DeserializeOwned>(args: &Value, error: &serde_json::Error) -> String {
    let message = error.to_string();
    if message.chars().count() <= 2 * ARGUMENT_EXCERPT_CHARS {
        return message;
    }
    let shortened = excerpt_strings(args);
    match A::deserialize(&shortened) {
        Err(short) => cap_error_message(&short.to_string()),
        // Only the full length was wrong (a bounded field, say): the message itself is all there is to cut.
        Ok(_) => excerpt(&message),
    }
}

fn excerpt_strings(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(excerpt(text)),
        Value::Array(items) => Value::Array(items.iter().map(excerpt_strings).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(key, item)| (excerpt(key), excerpt_strings(item))).collect::<Map<_, _>>())
        }
        other => other.clone(),
    }
}

/// Wraps a typed tool for the registry.
pub fn dyn_tool<T: Tool>(tool: T) -> Arc<dyn DynTool> {
    Arc::new(Typed { tool, parameters: std::sync::OnceLock::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Count;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CountArgs {
        #[allow(dead_code)]
        n: u32,
    }

    impl Tool for Count {
        type Args = CountArgs;
        fn name(&self) -> &str {
            "count"
        }
        fn description(&self) -> String {
            String::new()
        }
        fn parameters(&self) -> Value {
            json!({})
        }
        async fn call(&self, _args: CountArgs, _ctx: &ToolContext) -> ToolResult {
            Ok(json!({ "ok": true }))
        }
    }

    async fn refusal(args: Value) -> String {
        match dyn_tool(Count).call_json(args, &ToolContext::default()).await {
            Err(ToolError::RespondToModel { code, message }) if code == "invalid_arguments" => message,
            other => panic!("expected invalid_arguments, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn arguments_that_do_not_fit_are_quoted_by_their_start_only() {
        let huge = "7".repeat(10_000_000);
        let message = refusal(json!({ "n": huge })).await;
        assert!(message.len() < 600, "{} bytes", message.len());
        assert!(message.contains(&format!("\"{}… (9999800 more characters cut)\"", "7".repeat(200))), "{message}");
        assert!(message.contains("expected u32"), "serde's complaint is kept: {message}");

        let message = refusal(json!({ "n": 1, huge.clone(): 1 })).await;
        assert!(message.len() < 1_000, "{} bytes", message.len());
        assert!(message.contains("unknown field"), "{message}");

        let short = refusal(json!({ "n": "seven" })).await;
        assert_eq!(short, "invalid arguments for `count`: invalid type: string \"seven\", expected u32");
    }

    #[test]
    fn excerpts_say_how_much_was_cut() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(250);
        assert_eq!(excerpt(&long), format!("{}… (50 more characters cut)", "é".repeat(200)));
        let capped = cap_error_message(&"x".repeat(MAX_ERROR_CHARS + 5));
        assert!(capped.ends_with("… (5 more characters of this error cut)"), "{capped}");
    }
}
