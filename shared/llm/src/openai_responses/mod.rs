//! OpenAI Responses (`POST {base_url}/responses`, <https://platform.openai.com/docs/api-reference/responses>):
//! OpenAI and xAI. A request without [`ChatRequest::chain_key`] carries the whole conversation, unstored, and
//! asks for the model's reasoning in encrypted form so a tool loop can send it back ([`Replay`]). With a chain
//! key the server keeps the conversation: a follow-up sends only what is new with `previous_response_id`
//! ([`state`] decides when that is safe), and falls back to the whole conversation once when the server no
//! longer has the previous response. xAI's web and X search are added as server-side tools when `[llm.xai]`
//! enables them.

mod answer;
mod state;
mod wire;

use crate::http::{Auth, Transport};
use crate::types::{ChatRequest, ChatResponse, ContentPart, Message, Replay};
use crate::{ChatProvider, LlmError, Result, TextSink};
use answer::{API, Answer, Streamed};
use futures_util::future::BoxFuture;
use minibot_config::{EndpointOptions, LlmEndpoint};
use state::{Chains, Plan};
use wire::{
    DomainFilters, FunctionCall, FunctionCallOutput, FunctionTool, InputItem, InputMessage, InputPart, Reasoning,
    Request, StreamEvent, Tool, WebSearchTool, XSearchTool,
};

pub struct OpenAiResponses {
    transport: Transport,
    url: String,
    options: EndpointOptions,
    chains: Chains,
}

impl OpenAiResponses {
    pub fn new(endpoint: &LlmEndpoint) -> Result<Self> {
        let transport = Transport::new(endpoint)?;
        Ok(Self {
            url: format!("{}/responses", endpoint.base_url),
            transport,
            options: endpoint.options.clone(),
            chains: Chains::default(),
        })
    }

    fn auth(&self) -> Auth<'_> {
        Auth::Bearer(&self.transport.api_key)
    }

    fn quote(&self) -> impl Fn(&str) -> String + '_ {
        |text| self.transport.quote(text)
    }

    /// Sends `request` as `plan` says, whole or streamed.
    async fn send(&self, request: &ChatRequest, plan: &Plan, on_text: Option<&TextSink<'_>>) -> Result<Answer> {
        let body = request_body(request, plan, &self.options, on_text.is_some());
        let body = serde_json::to_vec(&body)
            .map_err(|e| LlmError::InvalidResponse(format!("cannot write the request: {e}")))?;
        let quote = self.quote();
        let Some(on_text) = on_text else {
            let text = self.transport.post_json(&self.url, self.auth(), &body, &request.model).await?;
            let response: wire::Response = serde_json::from_str(&text)
                .map_err(|e| LlmError::InvalidResponse(format!("{e}; body starts with {:?}", quote(&text))))?;
            return answer::from_response(response, &self.transport.shown(&self.url), &quote);
        };
        let opened = self.transport.open(&self.url, self.auth(), &body, &request.model, &[]).await?;
        let url = opened.url.clone();
        let mut streamed = Streamed::default();
        crate::sse::read_events(opened.response, &url, |event| {
            if event.data.trim() == "[DONE]" {
                return Ok(false);
            }
            let event: StreamEvent = serde_json::from_str(&event.data)
                .map_err(|e| LlmError::InvalidResponse(format!("{e}; event starts with {:?}", quote(&event.data))))?;
            streamed.add(event, on_text, &url, &quote)
        })
        .await?;
        streamed.finish(&url, &quote)
    }

    /// One call, chained when the request asks for it and the chain still holds.
    async fn call(&self, request: &ChatRequest, on_text: Option<&TextSink<'_>>) -> Result<ChatResponse> {
        let Some(key) = request.chain_key.as_deref() else {
            return Ok(self.send(request, &Plan::Whole, on_text).await?.response);
        };
        let plan = self.chains.plan(key, &request.messages);
        let answer = match self.send(request, &plan, on_text).await {
            Err(error) if plan != Plan::Whole && lost_previous(&error) => {
                tracing::info!(chain = key, "the provider no longer has the previous response; sending everything");
                self.chains.forget(key);
                self.send(request, &Plan::Whole, on_text).await?
            }
            other => other?,
        };
        match answer.id.as_deref() {
            Some(id) => self.chains.remember(key, id, &request.messages, &answer.response),
            None => self.chains.forget(key),
        }
        Ok(answer.response)
    }
}

impl ChatProvider for OpenAiResponses {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(self.call(request, None))
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(self.call(request, Some(on_text)))
    }
}

/// Whether a chained request may have been refused because the server does not have the previous response
/// (expired, deleted, another organisation, a server that restarted): OpenAI's 400 `previous_response_not_found`,
/// or any 404 or "not found" (xAI's wording is not documented). A refusal for another reason costs one more
/// request, which fails the same way.
fn lost_previous(error: &LlmError) -> bool {
    let (status, body) = match error {
        LlmError::BadRequest { status, body, .. } | LlmError::ModelNotFound { status, body, .. } => (*status, body),
        _ => return false,
    };
    let lower = body.to_ascii_lowercase();
    status == 404 || (status == 400 && (lower.contains("previous_response") || lower.contains("not found")))
}

fn request_body<'a>(
    request: &'a ChatRequest,
    plan: &'a Plan,
    options: &'a EndpointOptions,
    stream: bool,
) -> Request<'a> {
    let (instructions, rest) = match request.messages.split_first() {
        Some((Message::System(text), rest)) => (Some(text.as_str()), rest),
        _ => (None, request.messages.as_slice()),
    };
    let (previous_response_id, new) = match plan {
        Plan::Whole => (None, rest),
        Plan::Continue { previous, from } => {
            (Some(previous.as_str()), request.messages.get(*from..).unwrap_or_default())
        }
    };
    let chained = request.chain_key.is_some();
    let mut tools: Vec<Tool<'a>> = request
        .tools
        .iter()
        .map(|tool| {
            Tool::Function(FunctionTool {
                kind: "function",
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
                strict: false,
            })
        })
        .collect();
    tools.extend(xai_tools(options));
    let cache = options.prompt_cache_enabled;
    let reasoning = (request.reasoning_effort.is_some() || options.reasoning_summary.is_some()).then_some(Reasoning {
        effort: request.reasoning_effort.as_deref(),
        summary: options.reasoning_summary.as_deref(),
    });
    Request {
        model: &request.model,
        instructions,
        input: new.iter().flat_map(input_items).collect(),
        previous_response_id,
        tools,
        temperature: request.temperature,
        max_output_tokens: request.max_tokens,
        reasoning,
        prompt_cache_key: request.cache_key.as_deref().filter(|_| cache),
        prompt_cache_retention: options.prompt_cache_retention.as_deref().filter(|_| cache),
        // An unstored conversation keeps its reasoning only by carrying it, encrypted, from answer to request.
        include: if chained { Vec::new() } else { vec!["reasoning.encrypted_content"] },
        store: chained,
        stream,
    }
}

/// `[llm.xai]` web and X search as xAI's server-side tools (<https://docs.x.ai/docs/guides/tools/search-tools>).
fn xai_tools(options: &EndpointOptions) -> Vec<Tool<'_>> {
    let xai = &options.xai;
    let mut tools = Vec::new();
    if xai.web_search_enabled {
        let web = &xai.web_search;
        let filtered = !web.allowed_domains.is_empty() || !web.excluded_domains.is_empty();
        tools.push(Tool::WebSearch(WebSearchTool {
            kind: "web_search",
            filters: filtered.then_some(DomainFilters {
                allowed_domains: &web.allowed_domains,
                excluded_domains: &web.excluded_domains,
            }),
            enable_image_understanding: web.enable_image_understanding,
        }));
    }
    if xai.x_search_enabled {
        let x = &xai.x_search;
        tools.push(Tool::XSearch(XSearchTool {
            kind: "x_search",
            allowed_x_handles: &x.allowed_x_handles,
            excluded_x_handles: &x.excluded_x_handles,
            from_date: x.from_date.as_deref(),
            to_date: x.to_date.as_deref(),
            enable_image_understanding: x.enable_image_understanding,
            enable_video_understanding: x.enable_video_understanding,
        }));
    }
    tools
}

fn text_message<'a>(role: &'static str, part: InputPart<'a>) -> InputItem<'a> {
    InputItem::Message(InputMessage { kind: "message", role, content: vec![part] })
}

/// The input items of one message. A system message past the first (the instructions) is a developer message.
fn input_items(message: &Message) -> Vec<InputItem<'_>> {
    match message {
        Message::System(text) => vec![text_message("developer", InputPart::InputText { text })],
        Message::User(text) => vec![text_message("user", InputPart::InputText { text })],
        Message::UserParts(parts) => {
            let content = parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text(text) => InputPart::InputText { text },
                    ContentPart::ImageUrl(url) => InputPart::InputImage { image_url: url, detail: "auto" },
                })
                .collect();
            vec![InputItem::Message(InputMessage { kind: "message", role: "user", content })]
        }
        Message::Assistant { content, tool_calls, reasoning: _, replay } => {
            let mut items: Vec<InputItem<'_>> = Replay::items_for(replay.as_ref(), API)
                .and_then(|items| items.as_array())
                .map(|items| items.iter().map(InputItem::Replayed).collect())
                .unwrap_or_default();
            if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                items.push(text_message("assistant", InputPart::OutputText { text }));
            }
            items.extend(tool_calls.iter().map(|call| {
                InputItem::FunctionCall(FunctionCall {
                    kind: "function_call",
                    call_id: &call.id,
                    name: &call.name,
                    arguments: &call.arguments,
                })
            }));
            items
        }
        Message::Tool { call_id, name: _, content } => {
            vec![InputItem::FunctionCallOutput(FunctionCallOutput {
                kind: "function_call_output",
                call_id,
                output: content,
            })]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ToolCall, ToolSpec};
    use serde_json::json;

    fn conversation() -> Vec<Message> {
        vec![
            Message::System("be brief".into()),
            Message::User("u".into()),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall { id: "call_1".into(), name: "t".into(), arguments: "{}".into() }],
                reasoning: Some("r".into()),
                replay: Some(Replay {
                    api: API.into(),
                    items: json!([{ "type": "reasoning", "summary": [], "encrypted_content": "e" }]),
                }),
            },
            Message::Tool { call_id: "call_1".into(), name: "t".into(), content: "out".into() },
        ]
    }

    #[test]
    fn the_whole_conversation_has_the_documented_shape() {
        let request = ChatRequest {
            model: "m".into(),
            messages: conversation(),
            tools: vec![ToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: std::sync::Arc::new(json!({})),
            }],
            max_tokens: Some(100),
            reasoning_effort: Some("low".into()),
            cache_key: Some("telegram:1".into()),
            ..ChatRequest::default()
        };
        let options = EndpointOptions { prompt_cache_enabled: true, ..EndpointOptions::default() };
        let body = serde_json::to_value(request_body(&request, &Plan::Whole, &options, false)).unwrap();
        assert_eq!(
            body,
            json!({ "model": "m", "instructions": "be brief", "input": [
                { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "u" }] },
                { "type": "reasoning", "summary": [], "encrypted_content": "e" },
                { "type": "function_call", "call_id": "call_1", "name": "t", "arguments": "{}" },
                { "type": "function_call_output", "call_id": "call_1", "output": "out" }
            ], "tools": [{ "type": "function", "name": "t", "description": "d", "parameters": {}, "strict": false }],
              "max_output_tokens": 100, "reasoning": { "effort": "low" }, "prompt_cache_key": "telegram:1",
              "include": ["reasoning.encrypted_content"], "store": false, "stream": false })
        );
    }

    #[test]
    fn only_a_missing_previous_response_sends_everything_again() {
        let bad = |status, body: &str| LlmError::BadRequest { url: "u".into(), status, body: body.into() };
        assert!(lost_previous(&bad(400, "Previous response with id 'resp_1' not found.")));
        assert!(lost_previous(&bad(404, "Response resp_1 does not exist")));
        assert!(!lost_previous(&bad(400, "Invalid value: 'tool'.")));
        assert!(!lost_previous(&LlmError::Server { url: "u".into(), status: 500, body: "not found".into() }));
    }

    #[test]
    fn a_continued_chain_sends_only_the_new_items() {
        let request = ChatRequest {
            model: "m".into(),
            messages: conversation(),
            chain_key: Some("k".into()),
            ..ChatRequest::default()
        };
        let plan = Plan::Continue { previous: "resp_1".into(), from: 3 };
        let body = serde_json::to_value(request_body(&request, &plan, &EndpointOptions::default(), true)).unwrap();
        assert_eq!(body["previous_response_id"], "resp_1");
        assert_eq!(body["input"], json!([{ "type": "function_call_output", "call_id": "call_1", "output": "out" }]));
        assert_eq!(body["store"], true);
        assert!(body.get("include").is_none(), "{body}");
    }
}
