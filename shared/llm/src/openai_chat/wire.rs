//! Chat Completions as it travels: the request body and the answer, whole and streamed
//! (<https://platform.openai.com/docs/api-reference/chat>). OpenRouter's extra request fields are here too: its
//! API is this one plus routing (<https://openrouter.ai/docs/api-reference/overview>).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub model: &'a str,
    pub messages: Vec<WireMessage<'a>>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<&'a str>,
    /// OpenRouter: the fallback pool tried in order when `model` fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<&'a [String]>,
    /// OpenRouter: the provider routing object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Value>,
    /// OpenRouter: `{effort, enabled}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    /// OpenRouter: plugins (web search, file parsing, …) as configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugins: Option<Vec<Value>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StreamOptions {
    pub include_usage: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct Tool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: Function<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Function<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
}

#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(crate) enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<CallOut<'a>>,
        /// OpenRouter replays the model's reasoning in follow-ups.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<&'a str>,
    },
    Tool {
        tool_call_id: &'a str,
        name: &'a str,
        content: &'a str,
    },
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Debug, Serialize)]
pub(crate) struct ImageUrl<'a> {
    pub url: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct CallOut<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: CallFunctionOut<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct CallFunctionOut<'a> {
    pub name: &'a str,
    pub arguments: &'a str,
}

/// A whole answer. `error` is set by servers that answer 200 with an error inside.
#[derive(Debug, Deserialize)]
pub(crate) struct Completion {
    #[serde(default)]
    pub choices: Vec<Choice>,
    pub usage: Option<WireUsage>,
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Choice {
    pub message: Option<AnswerMessage>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct AnswerMessage {
    pub content: Option<String>,
    /// DeepSeek, vLLM and others.
    pub reasoning_content: Option<String>,
    /// OpenRouter.
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<CallIn>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CallIn {
    pub id: Option<String>,
    pub function: Option<CallFunctionIn>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CallFunctionIn {
    pub name: Option<String>,
    /// Most servers send a JSON string; a few send the object itself.
    pub arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    pub total_tokens: Option<u64>,
}

/// One streamed chunk.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    pub usage: Option<WireUsage>,
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub delta: Delta,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    pub content: Option<String>,
    pub reasoning_content: Option<String>,
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<CallDelta>,
}

/// A piece of a tool call: the first piece of each carries its id and name, the rest add to the arguments.
#[derive(Debug, Deserialize)]
pub(crate) struct CallDelta {
    #[serde(default)]
    pub index: usize,
    pub id: Option<String>,
    pub function: Option<CallFunctionDelta>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CallFunctionDelta {
    pub name: Option<String>,
    pub arguments: Option<String>,
}
