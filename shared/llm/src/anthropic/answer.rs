//! Anthropic's answer turned into a [`ChatResponse`], whole or put together from its stream: text, tool calls,
//! thinking (its text as `reasoning`, the signed blocks kept verbatim for the replay), the stop reason and the
//! token counts. An error the API reports inside a 200 (mid-stream) becomes the [`LlmError`] its HTTP status
//! would have been.

use super::request::REPLAY_API;
use super::wire::{AnswerBlock, Delta, ErrorBody, MessageResponse, StreamEvent, WireUsage};
use crate::http::Transport;
use crate::types::{ChatResponse, Replay, ToolCall, Usage};
use crate::{LlmError, Result, TextSink};
use serde_json::Value;

/// Parses a 2xx body; provider text quoted in an error is masked.
pub(crate) fn parse_response(text: &str, url: &str, transport: &Transport) -> Result<ChatResponse> {
    let message: MessageResponse = serde_json::from_str(text)
        .map_err(|e| LlmError::InvalidResponse(format!("{e}; body starts with {:?}", transport.quote(text))))?;
    if let Some(error) = message.error.as_ref() {
        return Err(provider_error(error, url, transport));
    }
    if message.kind.as_deref() == Some("error") {
        return Err(LlmError::InvalidResponse(format!("an error without details: {:?}", transport.quote(text))));
    }
    Ok(answer(message.content, message.stop_reason, message.usage))
}

/// The response made of an answer's blocks. A tool call's `input` is the object the API parsed, or the raw JSON
/// text as a string (a streamed call, or a server that passes broken arguments on unparsed): either way
/// `arguments` is JSON text, broken text included, for the agent loop to judge.
fn answer(blocks: Vec<AnswerBlock>, stop_reason: Option<String>, usage: WireUsage) -> ChatResponse {
    let mut content = String::new();
    let mut reasoning: Vec<String> = Vec::new();
    let mut replay: Vec<Value> = Vec::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block {
            AnswerBlock::Text { text } => content.push_str(&text),
            AnswerBlock::ToolUse { id, name, input } => {
                let arguments = match input {
                    Value::String(text) if text.trim().is_empty() => "{}".to_string(),
                    Value::String(text) => text,
                    Value::Null => "{}".to_string(),
                    other => other.to_string(),
                };
                let id = if id.is_empty() { format!("toolu_{}", tool_calls.len()) } else { id };
                tool_calls.push(ToolCall { id, name, arguments });
            }
            AnswerBlock::Thinking { ref thinking, .. } => {
                if !thinking.is_empty() {
                    reasoning.push(thinking.clone());
                }
                replay.extend(serde_json::to_value(&block).ok());
            }
            AnswerBlock::RedactedThinking { .. } => replay.extend(serde_json::to_value(&block).ok()),
            AnswerBlock::Other => {}
        }
    }
    ChatResponse {
        content: (!content.is_empty()).then_some(content),
        reasoning: (!reasoning.is_empty()).then(|| reasoning.join("\n\n")),
        tool_calls,
        usage: counted(usage),
        finish_reason: stop_reason.map(|reason| finish_reason(&reason)),
        replay: (!replay.is_empty()).then(|| Replay { api: REPLAY_API.into(), items: Value::Array(replay) }),
    }
}

/// Token counts as MiniBot keeps them. `input_tokens` counts only the prompt after the last cache mark, so the
/// prompt is that plus what was read from and written to the cache: the whole prompt the model saw, as other
/// APIs report it.
fn counted(usage: WireUsage) -> Usage {
    let prompt = usage.input_tokens.unwrap_or(0)
        + usage.cache_read_input_tokens.unwrap_or(0)
        + usage.cache_creation_input_tokens.unwrap_or(0);
    let completion = usage.output_tokens.unwrap_or(0);
    Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

/// The stop reason in the Chat Completions words the rest of MiniBot uses (`stop`, `tool_calls`, `length`);
/// reasons without an equivalent (`refusal`, `pause_turn`) stay as Anthropic says them.
fn finish_reason(reason: &str) -> String {
    match reason {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        other => other,
    }
    .to_string()
}

/// An error the API reported in an answer or a stream, as the error its HTTP status would have been
/// (<https://docs.anthropic.com/en/api/errors>): `overloaded_error` (529) and `api_error` (500) can pass.
pub(crate) fn provider_error(error: &ErrorBody, url: &str, transport: &Transport) -> LlmError {
    let said = transport.quote(&format!("{} ({})", error.message, error.kind));
    let url = url.to_string();
    let server = |status| LlmError::Server { url: url.clone(), status, body: said.clone() };
    let refused = |status| LlmError::BadRequest { url: url.clone(), status, body: said.clone() };
    match error.kind.as_str() {
        "overloaded_error" => server(529),
        "api_error" => server(500),
        "timeout_error" => server(504),
        "rate_limit_error" => LlmError::RateLimited { retry_after: None, body: said },
        "billing_error" => LlmError::Quota { status: 402, body: said },
        "invalid_request_error" if too_long(&error.message) => LlmError::ContextLength(said),
        "authentication_error" => refused(401),
        "permission_error" => refused(403),
        "not_found_error" => refused(404),
        "request_too_large" => refused(413),
        _ => refused(400),
    }
}

/// Whether an error says the conversation does not fit: the prompt alone, or the prompt with `max_tokens`.
fn too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("prompt is too long") || lower.contains("exceed context limit")
}

/// A streamed answer put together from its events.
pub(crate) struct StreamedAnswer<'a> {
    url: &'a str,
    transport: &'a Transport,
    /// By the index the stream gives each block. A tool call's `input` holds its JSON text so far as a string.
    blocks: Vec<AnswerBlock>,
    usage: WireUsage,
    stop_reason: Option<String>,
    started: bool,
    stopped: bool,
}

impl<'a> StreamedAnswer<'a> {
    pub(crate) fn new(url: &'a str, transport: &'a Transport) -> Self {
        Self {
            url,
            transport,
            blocks: Vec::new(),
            usage: WireUsage::default(),
            stop_reason: None,
            started: false,
            stopped: false,
        }
    }

    /// Takes one event's data; `false` once the message is complete.
    pub(crate) fn add(&mut self, data: &str, on_text: &TextSink<'_>) -> Result<bool> {
        let event: StreamEvent = serde_json::from_str(data).map_err(|e| {
            LlmError::InvalidResponse(format!("{e}; event starts with {:?}", self.transport.quote(data)))
        })?;
        match event {
            StreamEvent::MessageStart { message } => {
                self.started = true;
                self.usage = self.usage.updated(message.usage);
            }
            StreamEvent::ContentBlockStart { index, content_block } => {
                let block = match content_block {
                    // The opening `input` is an empty object; the JSON text follows in parts.
                    AnswerBlock::ToolUse { id, name, .. } => {
                        AnswerBlock::ToolUse { id, name, input: Value::String(String::new()) }
                    }
                    other => other,
                };
                *self.slot(index)? = block;
            }
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, on_text)?,
            StreamEvent::MessageDelta { delta, usage } => {
                self.stop_reason = delta.stop_reason.or(self.stop_reason.take());
                self.usage = self.usage.updated(usage);
            }
            StreamEvent::MessageStop => {
                self.stopped = true;
                return Ok(false);
            }
            StreamEvent::Error { error } => return Err(provider_error(&error, self.url, self.transport)),
            StreamEvent::ContentBlockStop | StreamEvent::Ping | StreamEvent::Other => {}
        }
        Ok(true)
    }

    /// The block at the stream's `index`. Blocks are numbered from 0 in order, so an index past the next one
    /// (or past [`crate::sse::MAX_STREAMED_PARTS`]) is refused: a provider must not make the client allocate
    /// for a number it sent.
    fn slot(&mut self, index: usize) -> Result<&mut AnswerBlock> {
        if index > self.blocks.len() || index >= crate::sse::MAX_STREAMED_PARTS {
            return Err(LlmError::InvalidResponse(format!(
                "the stream named content block {index} after {} blocks",
                self.blocks.len()
            )));
        }
        if self.blocks.len() == index {
            self.blocks.push(AnswerBlock::Other);
        }
        Ok(&mut self.blocks[index])
    }

    fn delta(&mut self, index: usize, delta: Delta, on_text: &TextSink<'_>) -> Result<()> {
        let slot = self.slot(index)?;
        match (slot, delta) {
            (slot @ AnswerBlock::Other, Delta::Text { text }) => {
                on_text(&text);
                *slot = AnswerBlock::Text { text };
            }
            (AnswerBlock::Text { text }, Delta::Text { text: piece }) => {
                if !piece.is_empty() {
                    on_text(&piece);
                }
                text.push_str(&piece);
            }
            (AnswerBlock::ToolUse { input: Value::String(json), .. }, Delta::InputJson { partial_json }) => {
                json.push_str(&partial_json);
            }
            (AnswerBlock::Thinking { thinking, .. }, Delta::Thinking { thinking: piece }) => {
                thinking.push_str(&piece);
            }
            (AnswerBlock::Thinking { signature, .. }, Delta::Signature { signature: piece }) => {
                signature.push_str(&piece);
            }
            // A delta for a block of another kind, or of a kind added later: nothing MiniBot shows or sends back.
            _ => {}
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<ChatResponse> {
        if !self.started {
            return Err(LlmError::EmptyResponse);
        }
        if !self.stopped {
            return Err(LlmError::InvalidResponse(format!(
                "{} ended the stream before `message_stop`: the answer is incomplete",
                self.url
            )));
        }
        Ok(answer(self.blocks, self.stop_reason, self.usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn transport() -> Transport {
        crate::http::test_transport()
    }

    #[test]
    fn a_whole_answer_keeps_thinking_for_the_replay_and_counts_cached_tokens_as_prompt() {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [
                { "type": "thinking", "thinking": "check the file", "signature": "EqQBCgIYAhIM" },
                { "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" },
                { "type": "text", "text": "Reading it." },
                { "type": "tool_use", "id": "toolu_01", "name": "read", "input": { "path": "a" } },
                { "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {} }
            ],
            "stop_reason": "tool_use",
            "usage": { "input_tokens": 7, "output_tokens": 5, "cache_read_input_tokens": 100,
                       "cache_creation_input_tokens": 20 }
        });
        let response = parse_response(&body.to_string(), "u", &transport()).unwrap();
        assert_eq!(response.content.as_deref(), Some("Reading it."));
        assert_eq!(response.reasoning.as_deref(), Some("check the file"));
        assert_eq!(
            response.tool_calls,
            [ToolCall { id: "toolu_01".into(), name: "read".into(), arguments: r#"{"path":"a"}"#.into() }]
        );
        assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(response.usage, Usage { prompt_tokens: 127, completion_tokens: 5, total_tokens: 132 });
        let replay = response.replay.unwrap();
        assert_eq!(replay.api, "anthropic");
        assert_eq!(replay.items, json!([body["content"][0], body["content"][1]]));
    }

    #[test]
    fn a_stream_puts_text_tool_input_and_signed_thinking_together() {
        let transport = transport();
        let mut answer = StreamedAnswer::new("u", &transport);
        let shown = std::sync::Mutex::new(Vec::new());
        let sink = |piece: &str| shown.lock().unwrap().push(piece.to_string());
        let events = [
            json!({ "type": "message_start", "message": { "usage": { "input_tokens": 10, "output_tokens": 1 } } }),
            json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "thinking", "thinking": "" } }),
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": "hm" } }),
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "signature_delta", "signature": "s1" } }),
            json!({ "type": "content_block_stop", "index": 0 }),
            json!({ "type": "ping" }),
            json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "text", "text": "" } }),
            json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "text_delta", "text": "On " } }),
            json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "text_delta", "text": "it." } }),
            json!({ "type": "content_block_start", "index": 2,
                    "content_block": { "type": "tool_use", "id": "toolu_9", "name": "read", "input": {} } }),
            json!({ "type": "content_block_delta", "index": 2,
                    "delta": { "type": "input_json_delta", "partial_json": "{\"pa" } }),
            json!({ "type": "content_block_delta", "index": 2,
                    "delta": { "type": "input_json_delta", "partial_json": "th\": \"a\"}" } }),
            json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" }, "usage": { "output_tokens": 12 } }),
            json!({ "type": "message_stop" }),
        ];
        for event in &events {
            answer.add(&event.to_string(), &sink).unwrap();
        }
        let response = answer.finish().unwrap();
        assert_eq!(shown.into_inner().unwrap(), ["On ", "it."]);
        assert_eq!(response.content.as_deref(), Some("On it."));
        assert_eq!(response.tool_calls[0].arguments, r#"{"path": "a"}"#);
        assert_eq!(
            response.replay.unwrap().items,
            json!([{ "type": "thinking", "thinking": "hm", "signature": "s1" }])
        );
        assert_eq!((response.usage.prompt_tokens, response.usage.completion_tokens), (10, 12));
    }

    #[test]
    fn errors_in_a_stream_are_classified_like_their_status() {
        let transport = transport();
        let error = |kind: &str, message: &str| {
            let mut answer = StreamedAnswer::new("u", &transport);
            let data = json!({ "type": "error", "error": { "type": kind, "message": message } }).to_string();
            answer.add(&data, &|_| {}).unwrap_err()
        };
        assert!(matches!(error("overloaded_error", "Overloaded"), LlmError::Server { status: 529, .. }));
        assert!(error("overloaded_error", "Overloaded").is_retryable());
        assert!(matches!(error("invalid_request_error", "prompt is too long: 1 > 0"), LlmError::ContextLength(_)));
        assert!(!error("invalid_request_error", "messages: bad").is_retryable());
        let cut = StreamedAnswer::new("u", &transport);
        assert!(matches!(cut.finish(), Err(LlmError::EmptyResponse)));
    }
}
