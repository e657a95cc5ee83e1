//! OpenAI Chat Completions (`POST {base_url}/chat/completions`): OpenAI, OpenRouter, Ollama, vLLM, llama.cpp and
//! every other server that speaks the same shape. With the `openrouter` format the request also carries
//! OpenRouter's routing options and the model's reasoning is replayed in follow-ups.

mod wire;

use crate::http::{Auth, Transport};
use crate::types::{ChatRequest, ChatResponse, ContentPart, Message, ToolCall, Usage};
use crate::{ChatProvider, LlmError, Result, TextSink};
use futures_util::future::BoxFuture;
use minibot_config::{ApiFormat, LlmEndpoint, OpenRouterSection};
use serde_json::Value;
use wire::{
    AnswerMessage, CallFunctionOut, CallOut, Chunk, Completion, Function, ImageUrl, Part, Request, StreamOptions, Tool,
    UserContent, WireMessage, WireUsage,
};

/// MiniBot's answer budget on OpenRouter when none is configured, and the most it sends: OpenRouter reserves
/// credits for `max_tokens`, and some of its providers default to the model's whole output window.
const OPENROUTER_DEFAULT_MAX_TOKENS: u32 = 4096;
const OPENROUTER_MAX_TOKENS: u32 = 32_768;

pub struct OpenAiChat {
    transport: Transport,
    url: String,
    /// `Some` with the `openrouter` format.
    openrouter: Option<OpenRouterSection>,
}

impl OpenAiChat {
    pub fn new(endpoint: &LlmEndpoint) -> Result<Self> {
        let transport = Transport::new(endpoint)?;
        let openrouter = (endpoint.api_format == ApiFormat::OpenRouter).then(|| endpoint.options.openrouter.clone());
        Ok(Self { url: format!("{}/chat/completions", endpoint.base_url), transport, openrouter })
    }

    fn body(&self, request: &ChatRequest, stream: bool) -> Result<Vec<u8>> {
        let body = request_body(request, self.openrouter.as_ref(), stream);
        serde_json::to_vec(&body).map_err(|e| LlmError::InvalidResponse(format!("cannot write the request: {e}")))
    }

    fn auth(&self) -> Auth<'_> {
        Auth::Bearer(&self.transport.api_key)
    }
}

impl ChatProvider for OpenAiChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let body = self.body(request, false)?;
            let text = self.transport.post_json(&self.url, self.auth(), &body, &request.model).await?;
            parse_response(&text, &self.transport)
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let body = self.body(request, true)?;
            let opened = self.transport.open(&self.url, self.auth(), &body, &request.model, &[]).await?;
            let mut answer = StreamedAnswer::default();
            let url = opened.url.clone();
            crate::sse::read_events(opened.response, &url, |event| {
                if event.data.trim() == "[DONE]" {
                    return Ok(false);
                }
                let chunk: Chunk = serde_json::from_str(&event.data).map_err(|e| {
                    LlmError::InvalidResponse(format!("{e}; chunk starts with {:?}", self.transport.quote(&event.data)))
                })?;
                if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
                    let said = self
                        .transport
                        .quote(&crate::http::provider_text(&serde_json::json!({ "error": error }).to_string()));
                    return Err(LlmError::Server { url: url.clone(), status: 200, body: said });
                }
                answer.add(chunk, on_text)?;
                Ok(true)
            })
            .await?;
            answer.finish()
        })
    }
}

/// A streamed answer put together from its chunks.
#[derive(Default)]
struct StreamedAnswer {
    content: String,
    reasoning: String,
    /// By the index the stream gives each call: id, name, arguments so far.
    calls: Vec<(String, String, String)>,
    usage: Option<WireUsage>,
    finish_reason: Option<String>,
    chunks: usize,
}

impl StreamedAnswer {
    fn add(&mut self, chunk: Chunk, on_text: &TextSink<'_>) -> Result<()> {
        self.chunks += 1;
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        for choice in chunk.choices {
            let delta = choice.delta;
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                on_text(&text);
                self.content.push_str(&text);
            }
            if let Some(text) = delta.reasoning_content.or(delta.reasoning) {
                self.reasoning.push_str(&text);
            }
            for call in delta.tool_calls {
                // Calls are numbered from 0 in order: an index past the next one is refused rather than
                // allocated for (a provider must not size the client's memory).
                if call.index > self.calls.len() || call.index >= crate::sse::MAX_STREAMED_PARTS {
                    return Err(LlmError::InvalidResponse(format!(
                        "the stream named tool call {} after {} calls",
                        call.index,
                        self.calls.len()
                    )));
                }
                if self.calls.len() == call.index {
                    self.calls.push(Default::default());
                }
                let slot = &mut self.calls[call.index];
                if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                    slot.0 = id;
                }
                if let Some(function) = call.function {
                    if let Some(name) = function.name {
                        slot.1.push_str(&name);
                    }
                    if let Some(arguments) = function.arguments {
                        slot.2.push_str(&arguments);
                    }
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<ChatResponse> {
        if self.chunks == 0 {
            return Err(LlmError::EmptyResponse);
        }
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, (_, name, _))| !name.is_empty())
            .map(|(index, (id, name, arguments))| ToolCall {
                id: if id.is_empty() { format!("call_{index}") } else { id },
                name,
                arguments: if arguments.is_empty() { "{}".into() } else { arguments },
            })
            .collect();
        Ok(ChatResponse {
            content: (!self.content.is_empty()).then_some(self.content),
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            tool_calls,
            usage: self.usage.map(usage).unwrap_or_default(),
            finish_reason: self.finish_reason,
            replay: None,
        })
    }
}

fn usage(wire: WireUsage) -> Usage {
    Usage {
        prompt_tokens: wire.prompt_tokens,
        completion_tokens: wire.completion_tokens,
        total_tokens: wire.total_tokens.unwrap_or(wire.prompt_tokens + wire.completion_tokens),
    }
}

fn request_body<'a>(request: &'a ChatRequest, openrouter: Option<&'a OpenRouterSection>, stream: bool) -> Request<'a> {
    let messages = request.messages.iter().map(|m| message(m, openrouter.is_some())).collect();
    let tools = request
        .tools
        .iter()
        .map(|tool| Tool {
            kind: "function",
            function: Function { name: &tool.name, description: &tool.description, parameters: &tool.parameters },
        })
        .collect();
    let mut body = Request {
        model: &request.model,
        messages,
        stream,
        stream_options: stream.then_some(StreamOptions { include_usage: true }),
        tools,
        temperature: request.temperature,
        max_tokens: request.max_tokens,
        reasoning_effort: request.reasoning_effort.as_deref(),
        models: None,
        provider: None,
        reasoning: None,
        plugins: None,
    };
    if let Some(options) = openrouter {
        body.max_tokens = Some(request.max_tokens.unwrap_or(OPENROUTER_DEFAULT_MAX_TOKENS).min(OPENROUTER_MAX_TOKENS));
        body.models = (!options.models.is_empty()).then_some(options.models.as_slice());
        body.provider = routing(options);
        // OpenRouter takes the effort inside `reasoning`, not flat.
        let effort = body.reasoning_effort.take();
        if effort.is_some() || options.reasoning_enabled.is_some() {
            let mut reasoning = serde_json::Map::new();
            if let Some(effort) = effort {
                reasoning.insert("effort".into(), effort.into());
            }
            if let Some(enabled) = options.reasoning_enabled {
                reasoning.insert("enabled".into(), enabled.into());
            }
            body.reasoning = Some(Value::Object(reasoning));
        }
        body.plugins = (!options.plugins.is_empty()).then(|| options.plugins.iter().map(toml_to_json).collect());
    }
    body
}

/// `[llm.openrouter.provider]` as OpenRouter's `provider` object: the keys that are set, plus `provider_extra`
/// for keys OpenRouter adds later. `None` when nothing is set.
fn routing(options: &OpenRouterSection) -> Option<Value> {
    let p = &options.provider;
    let mut object = serde_json::Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            object.insert(key.to_string(), value);
        }
    };
    put("order", p.order.clone().map(Value::from));
    put("allow_fallbacks", p.allow_fallbacks.map(Value::from));
    put("require_parameters", p.require_parameters.map(Value::from));
    put("data_collection", p.data_collection.clone().map(Value::from));
    put("zdr", p.zdr.map(Value::from));
    put("enforce_distillable_text", p.enforce_distillable_text.map(Value::from));
    put("only", p.only.clone().map(Value::from));
    put("ignore", p.ignore.clone().map(Value::from));
    put("quantizations", p.quantizations.clone().map(Value::from));
    put("sort", p.sort.as_ref().map(toml_to_json));
    put("preferred_min_throughput", p.preferred_min_throughput.as_ref().map(toml_to_json));
    put("preferred_max_latency", p.preferred_max_latency.as_ref().map(toml_to_json));
    put("max_price", p.max_price.as_ref().map(toml_to_json));
    for (key, value) in &p.provider_extra {
        object.insert(key.clone(), toml_to_json(value));
    }
    (!object.is_empty()).then_some(Value::Object(object))
}

fn toml_to_json(value: &toml::Value) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn message(message: &Message, replay_reasoning: bool) -> WireMessage<'_> {
    match message {
        Message::System(text) => WireMessage::System { content: text },
        Message::User(text) => WireMessage::User { content: UserContent::Text(text) },
        Message::UserParts(parts) => WireMessage::User {
            content: UserContent::Parts(
                parts
                    .iter()
                    .map(|part| match part {
                        ContentPart::Text(text) => Part::Text { text },
                        ContentPart::ImageUrl(url) => Part::ImageUrl { image_url: ImageUrl { url } },
                    })
                    .collect(),
            ),
        },
        Message::Assistant { content, tool_calls, reasoning, replay: _ } => WireMessage::Assistant {
            content: content.as_deref(),
            tool_calls: tool_calls
                .iter()
                .map(|call| CallOut {
                    id: &call.id,
                    kind: "function",
                    function: CallFunctionOut { name: &call.name, arguments: &call.arguments },
                })
                .collect(),
            reasoning: reasoning.as_deref().filter(|_| replay_reasoning),
        },
        Message::Tool { call_id, name, content } => WireMessage::Tool { tool_call_id: call_id, name, content },
    }
}

/// Parses a 2xx body; provider text quoted in an error is masked.
fn parse_response(text: &str, transport: &Transport) -> Result<ChatResponse> {
    let completion: Completion = serde_json::from_str(text)
        .map_err(|e| LlmError::InvalidResponse(format!("{e}; body starts with {:?}", transport.quote(text))))?;
    if let Some(error) = completion.error.filter(|e| !e.is_null()) {
        let said = transport.quote(&crate::http::provider_text(&serde_json::json!({ "error": error }).to_string()));
        return Err(LlmError::Server { url: String::from("the provider"), status: 200, body: said });
    }
    let choice = completion.choices.into_iter().next().ok_or(LlmError::EmptyResponse)?;
    let message: AnswerMessage =
        choice.message.ok_or_else(|| LlmError::InvalidResponse("choice without a message".into()))?;
    let tool_calls = message
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| {
            let (name, arguments) = match call.function {
                Some(function) => (function.name.unwrap_or_default(), function.arguments),
                None => (String::new(), None),
            };
            let arguments = match arguments {
                Some(Value::String(text)) => text,
                Some(Value::Null) | None => String::from("{}"),
                Some(other) => other.to_string(),
            };
            let id = call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{index}"));
            ToolCall { id, name, arguments }
        })
        .collect();
    Ok(ChatResponse {
        content: message.content,
        reasoning: message.reasoning_content.or(message.reasoning),
        tool_calls,
        usage: completion.usage.map(usage).unwrap_or_default(),
        finish_reason: choice.finish_reason,
        replay: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> Transport {
        crate::http::test_transport()
    }

    #[test]
    fn parses_parallel_tool_calls_and_usage() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
            {"id":"a","type":"function","function":{"name":"x","arguments":"{\"n\":1}"}},
            {"id":"b","type":"function","function":{"name":"y","arguments":{"n":2}}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#;
        let response = parse_response(body, &transport()).expect("parses");
        assert_eq!(response.tool_calls.len(), 2);
        assert_eq!(response.tool_calls[1].arguments, r#"{"n":2}"#);
        assert_eq!(response.usage.total_tokens, 15);
    }

    #[test]
    fn garbage_is_an_invalid_response() {
        let transport = transport();
        assert!(matches!(parse_response("<html>oops", &transport), Err(LlmError::InvalidResponse(_))));
        assert!(matches!(parse_response("{\"choices\":[]}", &transport), Err(LlmError::EmptyResponse)));
    }

    #[test]
    fn the_request_has_the_documented_shape() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message::System("s".into()),
                Message::User("u".into()),
                Message::assistant_calls(
                    None,
                    vec![ToolCall { id: "1".into(), name: "t".into(), arguments: "{}".into() }],
                ),
                Message::Tool { call_id: "1".into(), name: "t".into(), content: "r".into() },
            ],
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(request_body(&request, None, false)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({ "model": "m", "stream": false, "messages": [
                { "role": "system", "content": "s" },
                { "role": "user", "content": "u" },
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "1", "type": "function", "function": { "name": "t", "arguments": "{}" } }] },
                { "role": "tool", "tool_call_id": "1", "name": "t", "content": "r" }
            ] })
        );
    }
}
