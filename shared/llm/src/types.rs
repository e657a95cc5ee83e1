use serde::{Deserialize, Serialize};

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object. Shared: every request of every turn carries the same schemas, so a
    /// copy of the spec must not copy the schema's tree.
    pub parameters: std::sync::Arc<serde_json::Value>,
}

/// One tool call the model asked for. `arguments` is the raw JSON text the model wrote; it may be malformed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    /// A user message made of parts (text and images), as vision models take it.
    UserParts(Vec<ContentPart>),
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCall>,
        /// The model's reasoning text, when its API returns it (OpenRouter replays it in follow-ups).
        reasoning: Option<String>,
        /// What the provider needs back verbatim on the next request of this run ([`Replay`]).
        replay: Option<Replay>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
}

impl Message {
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self::Assistant { content: Some(text.into()), tool_calls: Vec::new(), reasoning: None, replay: None }
    }

    /// An assistant message asking for tool calls.
    pub fn assistant_calls(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self::Assistant { content, tool_calls, reasoning: None, replay: None }
    }
}

/// One part of a [`Message::UserParts`] message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentPart {
    Text(String),
    /// An image by URL; a `data:<mime>;base64,<data>` URL carries the image itself.
    ImageUrl(String),
}

impl ContentPart {
    /// An image part holding `bytes` inline as a base64 `data:` URL.
    pub fn image_data(mime: &str, bytes: &[u8]) -> Self {
        use base64::Engine as _;
        Self::ImageUrl(format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes)))
    }
}

/// Provider-native parts of an answer that must go back unchanged with the next request of the same run:
/// Anthropic's signed thinking blocks, Gemini's thought signatures, Responses reasoning items. Another API
/// ignores them (`api` names the one that wrote them), so a run that changes provider still works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    pub api: String,
    pub items: serde_json::Value,
}

impl Replay {
    /// The items when they were written by `api`.
    pub fn items_for<'r>(replay: Option<&'r Self>, api: &str) -> Option<&'r serde_json::Value> {
        replay.filter(|r| r.api == api).map(|r| &r.items)
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    /// Groups requests that share a prompt prefix, for providers that cache by key (Responses'
    /// `prompt_cache_key`): `"{channel}:{chat}"`, `"{channel}:{chat}:task:{id}"` for a worker.
    pub cache_key: Option<String>,
    /// Set when the caller wants the provider to keep the conversation on its side between requests
    /// (Responses' `previous_response_id`): requests with the same key continue one chain. `None`: every request
    /// carries the whole conversation.
    pub chain_key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// What the model answered in one step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    pub content: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
    /// What goes back with the next request of this run ([`Replay`]).
    pub replay: Option<Replay>,
}

impl ChatResponse {
    /// The answer as the assistant message the next request of the run carries.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            reasoning: self.reasoning.clone(),
            replay: self.replay.clone(),
        }
    }
}
