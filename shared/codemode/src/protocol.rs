//! What the script's thread and the async side that runs its tool calls say to each other.

use minibot_agent::ToolError;
use serde_json::Value;

/// From the script's thread.
pub enum Request {
    /// The script called a tool: run entry `entry` of the catalog with `args`; Monty knows the call as `id`.
    Start { id: u32, entry: usize, args: Value },
    /// Every task of the script awaits a call: answer with the calls that are done, at least one.
    Wait,
    /// The script ended.
    Finished(Ending),
}

/// To the script's thread, answering [`Request::Wait`].
pub enum Reply {
    Resolved(Vec<(u32, CallOutcome)>),
    /// No call is running, so the script would wait forever.
    Idle,
    /// The time is up.
    Timeout,
}

pub type CallOutcome = Result<Value, ToolError>;

/// How a script ended.
pub struct Ending {
    /// What it printed, already cut to `max_output_chars`.
    pub output: String,
    pub result: Result<Value, Failure>,
    /// Nested calls that raised: tool name and error code.
    pub tool_errors: Vec<(String, String)>,
    /// Failed nested calls beyond those listed.
    pub tool_errors_omitted: usize,
    /// Tool names the script used that it cannot call, for the hint.
    pub unknown: Vec<String>,
}

/// Why a script failed.
pub struct Failure {
    pub code: FailureCode,
    pub error: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
