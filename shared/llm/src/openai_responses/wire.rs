//! The Responses API as it travels: the request body, the response object and the streamed events
//! (<https://platform.openai.com/docs/api-reference/responses/create>,
//! <https://platform.openai.com/docs/api-reference/responses-streaming>). xAI's search tools are declared in the
//! same `tools` list (<https://docs.x.ai/docs/guides/tools/search-tools>).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub model: &'a str,
    /// The system prompt. Sent with every request: a response chained by `previous_response_id` does not carry
    /// the earlier request's instructions over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<&'a str>,
    pub input: Vec<InputItem<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_retention: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<&'static str>,
    pub store: bool,
    pub stream: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct Reasoning<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<&'a str>,
}

/// One item of `input`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum InputItem<'a> {
    Message(InputMessage<'a>),
    FunctionCall(FunctionCall<'a>),
    FunctionCallOutput(FunctionCallOutput<'a>),
    /// An item of an earlier answer sent back as the server wrote it (reasoning with its encrypted content).
    Replayed(&'a Value),
}

#[derive(Debug, Serialize)]
pub(crate) struct InputMessage<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `user`, `assistant` or `developer`.
    pub role: &'static str,
    pub content: Vec<InputPart<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum InputPart<'a> {
    InputText {
        text: &'a str,
    },
    /// What the assistant said earlier.
    OutputText {
        text: &'a str,
    },
    /// `image_url` is a `data:` URL or an https URL.
    InputImage {
        image_url: &'a str,
        detail: &'static str,
    },
}

#[derive(Debug, Serialize)]
pub(crate) struct FunctionCall<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub call_id: &'a str,
    pub name: &'a str,
    pub arguments: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct FunctionCallOutput<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub call_id: &'a str,
    pub output: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Tool<'a> {
    Function(FunctionTool<'a>),
    WebSearch(WebSearchTool<'a>),
    XSearch(XSearchTool<'a>),
}

/// A function tool, flat (not nested under `function` as in Chat Completions).
#[derive(Debug, Serialize)]
pub(crate) struct FunctionTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
    /// Responses defaults to strict schemas, which refuse optional properties; MiniBot's tools have them.
    pub strict: bool,
}

/// xAI's server-side web search: `filters.allowed_domains` / `filters.excluded_domains` (at most 5 each, not
/// both) and `enable_image_understanding`.
#[derive(Debug, Serialize)]
pub(crate) struct WebSearchTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<DomainFilters<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_image_understanding: Option<bool>,
}

#[derive(Debug, Serialize)]
pub(crate) struct DomainFilters<'a> {
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub allowed_domains: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub excluded_domains: &'a [String],
}

/// xAI's server-side X search, its filters on the tool itself (dates as `YYYY-MM-DD`).
#[derive(Debug, Serialize)]
pub(crate) struct XSearchTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub allowed_x_handles: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub excluded_x_handles: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_date: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_date: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_image_understanding: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_video_understanding: Option<bool>,
}

/// The response object, whole or as `response.completed` carries it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Response {
    pub id: Option<String>,
    /// `completed`, `incomplete`, `failed`, `in_progress`, `cancelled`.
    pub status: Option<String>,
    #[serde(default)]
    pub output: Vec<OutputItem>,
    pub usage: Option<WireUsage>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter`.
    pub reason: Option<String>,
}

/// OpenAI's error object: `{"message", "type", "code"}`; inside a failed response, or a stream's `error` event.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireError {
    pub code: Option<Value>,
    pub message: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum OutputItem {
    Message {
        #[serde(default)]
        content: Vec<OutputPart>,
    },
    FunctionCall {
        id: Option<String>,
        call_id: Option<String>,
        #[serde(default)]
        name: String,
        /// A JSON string; kept as any value so a server that sends the object itself still parses.
        arguments: Option<Value>,
    },
    Reasoning {
        #[serde(default)]
        summary: Vec<SummaryPart>,
        encrypted_content: Option<String>,
    },
    /// Server-side tool calls (web search, X search, …) and anything newer.
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum OutputPart {
    OutputText {
        text: String,
    },
    Refusal {
        refusal: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SummaryPart {
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    pub total_tokens: Option<u64>,
}

/// One streamed event (the `type` inside its data; the SSE `event:` line says the same).
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum StreamEvent {
    #[serde(rename = "response.output_text.delta")]
    TextDelta { delta: String },
    /// The model declining; shown like text.
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta { delta: String },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningDelta { delta: String },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        #[serde(default)]
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        #[serde(default)]
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone {
        #[serde(default)]
        output_index: usize,
        arguments: String,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        #[serde(default)]
        output_index: usize,
        item: OutputItem,
    },
    /// The whole response: the truth for the final answer.
    #[serde(rename = "response.completed")]
    Completed { response: Response },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Response },
    #[serde(rename = "response.failed")]
    Failed { response: Response },
    #[serde(rename = "error")]
    Error {
        code: Option<Value>,
        message: Option<String>,
        /// Some servers nest the error object.
        error: Option<WireError>,
    },
    #[serde(other)]
    Other,
}
