//! Anthropic Messages as it travels: the request body, the whole answer and the streamed events
//! (<https://docs.anthropic.com/en/api/messages>, <https://docs.anthropic.com/en/api/messages-streaming>,
//! prompt caching: <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>, extended thinking:
//! <https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking>).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemBlock<'a>>,
    pub messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    pub stream: bool,
}

/// Marks the end of a prefix the API should cache (`{"type": "ephemeral"}`, five minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct CacheControl {
    #[serde(rename = "type")]
    pub kind: &'static str,
}

pub(crate) const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Debug, Serialize)]
pub(crate) struct SystemBlock<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Tool<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Thinking {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub budget_tokens: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Assistant,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    pub role: Role,
    pub content: Vec<Block<'a>>,
}

/// One content block of a request message.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// A `thinking` or `redacted_thinking` block of an earlier answer, sent back exactly as it came.
    #[serde(untagged)]
    Replayed(&'a Value),
}

impl Block<'_> {
    pub(crate) fn is_tool_result(&self) -> bool {
        matches!(self, Self::ToolResult { .. })
    }

    /// Sets the cache mark on a block that can carry one (thinking and tool-use blocks cannot).
    pub(crate) fn mark_cached(&mut self) -> bool {
        match self {
            Self::Text { cache_control, .. }
            | Self::Image { cache_control, .. }
            | Self::ToolResult { cache_control, .. } => {
                *cache_control = Some(EPHEMERAL);
                true
            }
            Self::ToolUse { .. } | Self::Replayed(_) => false,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

/// A whole answer. `kind`/`error` are set when a server answers 200 with an error object inside.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageResponse {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub content: Vec<AnswerBlock>,
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub usage: WireUsage,
    pub error: Option<ErrorBody>,
}

/// One content block of an answer. Thinking blocks serialize back to exactly what came, for the replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum AnswerBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        /// Absent at the start of a streamed block; `signature_delta` brings it.
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    /// Blocks MiniBot does not use (server tool results, citations' containers, …).
    #[serde(other)]
    Other,
}

/// Token counts; the cache fields are absent or null when the prompt touched no cache. In a stream,
/// `message_start` carries the input side and `message_delta` the output side, so every field is optional there.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct WireUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// This usage with the fields `later` reports replaced (a stream's counts are cumulative).
    pub(crate) fn updated(self, later: Self) -> Self {
        Self {
            input_tokens: later.input_tokens.or(self.input_tokens),
            output_tokens: later.output_tokens.or(self.output_tokens),
            cache_creation_input_tokens: later.cache_creation_input_tokens.or(self.cache_creation_input_tokens),
            cache_read_input_tokens: later.cache_read_input_tokens.or(self.cache_read_input_tokens),
        }
    }
}

/// `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`'s inner object.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub message: String,
}

/// One streamed event (the SSE `data:`; its `type` repeats the `event:` name).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum StreamEvent {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: AnswerBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop,
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorBody,
    },
    /// Events added to the API later are skipped, as its versioning policy asks.
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct StartedMessage {
    #[serde(default)]
    pub usage: WireUsage,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageDeltaBody {
    pub stop_reason: Option<String>,
}
