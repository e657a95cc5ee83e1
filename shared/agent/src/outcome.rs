use minibot_llm::{LlmError, Usage};
use std::time::Duration;

/// Why a run ended. The names are the task stop reasons of MiniBot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Completed,
    MaxSteps,
    MaxToolCalls,
    Timeout,
    Cancelled,
    ProviderError,
    RepeatedToolFailure,
    RepeatedIteration,
    TruncatedToolCall,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::MaxSteps => "max_steps",
            Self::MaxToolCalls => "max_tool_calls",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::ProviderError => "provider_error",
            Self::RepeatedToolFailure => "repeated_tool_failure",
            Self::RepeatedIteration => "repeated_iteration",
            Self::TruncatedToolCall => "truncated_tool_call",
        }
    }
}

/// How the answer should be rendered, as the last `pre_response` call declared it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyKind {
    Text,
    Html,
    #[default]
    Markdown,
}

/// The end of a run that produced an answer for the user.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    pub answer: String,
    pub stop_reason: StopReason,
    pub reply_kind: ReplyKind,
    pub disable_link_preview: bool,
    pub usage: Usage,
    pub steps: u32,
    pub tool_calls: u32,
    /// Tool names in the order they ran.
    pub tools_used: Vec<String>,
    /// Messages that were steered into the run and read by it, in order.
    pub steered: Vec<Steer>,
    /// Files to deliver with the answer (the last `pre_response` call's `attachments`).
    pub attachments: Vec<crate::directives::OutgoingFile>,
    /// The run's conversation from the user message on, as the model saw it: steered messages, the assistant
    /// messages that asked for tool calls and their results, nudges the loop added. Not the answer. A run that
    /// stopped mid-step (a limit, the time limit) may end with calls that have no result.
    pub messages: Vec<minibot_llm::Message>,
    pub elapsed: Duration,
    /// The conversation's size at the end of the run as the provider counted it (its last request and answer,
    /// plus a bound on anything added after): what the next turn's request starts from. `None` when the
    /// provider reported no usage, or the run compacted its own work.
    pub context_tokens: Option<u64>,
}

/// A message that arrives while a run works: read before the next provider call. `id` lets the sender tell which
/// of its messages the run read (the rest become later turns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steer {
    pub id: String,
    pub text: String,
}

/// A run that could not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("LLM error: {0}")]
    Provider(#[from] LlmError),
    #[error("tool `{tool}` failed fatally: {message}")]
    FatalTool { tool: String, message: String },
}

/// What a run reports while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    StepStarted {
        step: u32,
    },
    /// A tool call began. `parent_call_id` is the `run_tools_script` call whose script made it; `None` for a
    /// call the model made.
    ToolStarted {
        call_id: String,
        name: String,
        parent_call_id: Option<String>,
    },
    ToolFinished {
        call_id: String,
        name: String,
        ok: bool,
        duration: Duration,
        parent_call_id: Option<String>,
    },
    /// `send_file` asked for this file to reach the user now; the caller hands it to the chat's channel.
    SendFile(crate::directives::OutgoingFile),
    /// A piece of the model's text as it streams in, during step `step` (runs with `stream` only). The text of
    /// one step may end in tool calls rather than the answer: a new step starts a new text.
    AnswerText {
        step: u32,
        text: String,
    },
    /// The run's conversation reached its budget and was compacted (runs with `compaction` only).
    Compacted(crate::compaction::CompactionOutcome),
}
