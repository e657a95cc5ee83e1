//! What the script's process (the child) and the daemon that runs its tool calls (the parent) say to each other,
//! one JSON line at a time: the parent first sends a [`Setup`], then the child sends [`Request`]s and the parent
//! answers each [`Request::Wait`] with a [`ToChild`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything the child needs to run one script: the first line it reads.
#[derive(Debug, Serialize, Deserialize)]
pub struct Setup {
    pub code: String,
    /// The script's whole time budget, for the error text.
    pub budget_ms: u64,
    /// What was left of it when the parent sent this.
    pub remaining_ms: u64,
    pub max_tool_calls: u32,
    pub max_memory: usize,
    pub max_output_chars: usize,
    /// The tools the script can call, as the catalog lists them.
    pub tools: Vec<ToolInfo>,
}

/// One tool a script can call, as the script sees it (no way to run it: the parent runs the calls).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The Python identifier: `tools.<ident>(...)`.
    pub ident: String,
    /// The tool's own name.
    pub name: String,
    pub description: String,
    pub parameters: Value,
    /// `ident(a: str, b: int = None)`.
    pub signature: String,
}

impl ToolInfo {
    pub fn summary(&self) -> String {
        crate::catalog::summary(&self.description)
    }
}

/// From the child.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// The script called a tool: run entry `entry` of the catalog with `args`; Monty knows the call as `id`.
    Start { id: u32, entry: usize, args: Value },
    /// Every task of the script awaits a call: answer with the calls that are done, at least one.
    Wait,
    /// The script ended.
    Finished(Ending),
}

/// To the child, answering [`Request::Wait`], with what is left of the script's time then (the parent's clock
/// stops during approvals, which the child cannot see).
#[derive(Debug, Serialize, Deserialize)]
pub struct ToChild {
    pub remaining_ms: u64,
    pub reply: Reply,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    Resolved(Vec<(u32, CallOutcome)>),
    /// No call is running, so the script would wait forever.
    Idle,
    /// The time is up.
    Timeout,
}

pub type CallOutcome = Result<Value, CallFailure>;

/// A nested call that failed: its error code and message.
#[derive(Debug, Serialize, Deserialize)]
pub struct CallFailure {
    pub code: String,
    pub message: String,
}

impl From<minibot_agent::ToolError> for CallFailure {
    fn from(error: minibot_agent::ToolError) -> Self {
        match error {
            minibot_agent::ToolError::RespondToModel { code, message } => Self { code, message },
            minibot_agent::ToolError::Fatal(message) => Self { code: "tool_execution_failed".into(), message },
        }
    }
}

/// How a script ended.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ending {
    /// What it printed, already cut to `max_output_chars`.
    pub output: String,
    /// The final value, already cut to `max_output_chars` (a string with its middle left out when too long).
    pub result: Result<Value, Failure>,
    /// Nested calls that raised: tool name and error code.
    pub tool_errors: Vec<(String, String)>,
    /// Failed nested calls beyond those listed.
    pub tool_errors_omitted: usize,
    /// Tool names the script used that it cannot call, for the hint.
    pub unknown: Vec<String>,
}

impl Ending {
    /// An ending with nothing printed: the child was stopped before it could report.
    pub fn failed(code: FailureCode, error: String) -> Self {
        Self {
            output: String::new(),
            result: Err(Failure { code, error }),
            tool_errors: Vec::new(),
            tool_errors_omitted: 0,
            unknown: Vec::new(),
        }
    }
}

/// Why a script failed.
#[derive(Debug, Serialize, Deserialize)]
pub struct Failure {
    pub code: FailureCode,
    pub error: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureCode {
    Syntax,
    Script,
    Timeout,
    Memory,
    Sandbox,
    /// Ended on an uncaught `PermissionError` from a denied approval: the tool answers as a direct call would.
    Denied,
}

impl FailureCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Syntax => "codemode:syntax_error",
            Self::Script => "codemode:script_error",
            Self::Timeout => "codemode:timeout",
            Self::Memory => "codemode:memory_limit",
            Self::Sandbox => "codemode:sandbox_failed",
            Self::Denied => minibot_agent::APPROVAL_DENIED_CODE,
        }
    }
}

/// The error code a nested call past `max_tool_calls` raises with.
pub const TOOL_CALL_LIMIT: &str = "codemode:tool_call_limit";

/// Milliseconds of `duration`, for the wire.
pub fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
