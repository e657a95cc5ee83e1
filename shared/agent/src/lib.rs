//! The agent: the loop that turns a user message into an answer by calling the model and tools ([`AgentRun`]),
//! the tool traits and registry ([`Tool`], [`DynTool`], [`ToolRegistry`]), allow/deny tool policy
//! ([`ToolPolicy`]) and system prompt composition ([`PromptLibrary`], [`PromptBuilder`]).
//!
//! Nothing here knows about actors, channels or queues: the orchestrator runs the loop inside a conversation
//! actor, the worker inside a task.

pub mod approval;
mod approval_detail;
mod approval_gate;
pub mod channel;
pub mod compaction;
pub mod directives;
mod guards;
mod nested;
mod outcome;
pub mod policy;
pub mod prompt;
mod registry;
mod run;
pub mod safety;
pub mod spill;
mod tool;

pub use approval::{APPROVAL_DENIED_CODE, ApprovalDecision, ApprovalPrompt, ApprovalRequest, Approver};
pub use approval_detail::{approval_detail, display_tool_name, escape_capped};
pub use approval_gate::{ApprovalGate, GateConfigError, ask_approval, denial_message, is_denial, lazy_remote_name};
pub use channel::{ChannelCapabilities, TextFormat};
pub use directives::OutgoingFile;
pub use guards::{parse_arguments, sha256_hex};
pub use nested::NestedCalls;
pub use outcome::{AgentError, AgentEvent, AgentOutcome, ReplyKind, Steer, StopReason};
pub use policy::{Patterns, ToolPolicy};
pub use prompt::{PromptBuilder, PromptLibrary};
pub use registry::ToolRegistry;
pub use run::{
    AgentRun, CONTINUE_CUT_ANSWER, EMPTY_ANSWER_REPLY, Limits, MAX_STEPS_REPLY, MAX_TOOL_CALLS_REPLY, ModelSettings,
    REPEATED_ITERATION_REPLY, RequestKeys, STILL_CUT_NOTE, TIMEOUT_REPLY, TRUNCATED_REPLY, error_result,
};
pub use safety::{SafetyClassifier, SafetyConfigError};
pub use spill::{SpillStore, SpillTool, SpilledFile, wrap_with_spill};
pub use tool::{
    ARGUMENT_EXCERPT_CHARS, DynTool, MAX_ERROR_CHARS, Tool, ToolContext, ToolError, ToolResult, cap_error_message,
    dyn_tool, excerpt,
};
