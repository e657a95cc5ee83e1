//! A Responses answer turned into a [`ChatResponse`]: the `output` items (message text, function calls,
//! reasoning), the status and usage, whole or put together from a stream; and a failed response's error in
//! [`LlmError`]'s terms.

use super::wire::{OutputItem, OutputPart, Response, StreamEvent, WireError, WireUsage};
use crate::types::{ChatResponse, Replay, ToolCall, Usage};
use crate::{LlmError, TextSink};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// [`Replay::api`] of the reasoning items this API sends back.
pub(crate) const API: &str = "openai_responses";

/// An answer and the id the server gave it (for `previous_response_id`).
pub(crate) struct Answer {
    pub response: ChatResponse,
    pub id: Option<String>,
}

/// The answer a whole response object holds, or the error a failed one reports. `url` and `quote` are for
/// errors: the URL called and how provider text is masked and cut.
pub(crate) fn from_response(response: Response, url: &str, quote: &dyn Fn(&str) -> String) -> crate::Result<Answer> {
    match response.status.as_deref() {
        Some("failed") | Some("cancelled") => {
            let error = response.error.unwrap_or_default();
            let message = error.message.clone().unwrap_or_else(|| "the response failed".into());
            return Err(failure(code_text(error.code.as_ref()).as_deref(), &quote(&message), url));
        }
        _ => {}
    }
    if response.output.is_empty() && response.status.as_deref() != Some("incomplete") {
        return Err(LlmError::EmptyResponse);
    }
    let mut content = String::new();
    let mut reasoning: Vec<String> = Vec::new();
    let mut tool_calls = Vec::new();
    let mut replay = Vec::new();
    for item in response.output {
        match item {
            OutputItem::Message { content: parts } => {
                for part in parts {
                    match part {
                        OutputPart::OutputText { text } => content.push_str(&text),
                        OutputPart::Refusal { refusal } => content.push_str(&refusal),
                        OutputPart::Other => {}
                    }
                }
            }
            OutputItem::FunctionCall { id, call_id, name, arguments } => {
                let index = tool_calls.len();
                tool_calls.push(tool_call(index, call_id.or(id), name, arguments));
            }
            OutputItem::Reasoning { summary, encrypted_content } => {
                let text: Vec<String> = summary.iter().map(|s| s.text.clone()).filter(|t| !t.is_empty()).collect();
                reasoning.extend(text);
                // Without its encrypted content a reasoning item only stands for a stored one; sent back on a
                // conversation the server did not store, it is refused.
                if let Some(encrypted) = encrypted_content {
                    let summary: Vec<Value> =
                        summary.into_iter().map(|s| json!({ "type": "summary_text", "text": s.text })).collect();
                    replay.push(json!({ "type": "reasoning", "summary": summary, "encrypted_content": encrypted }));
                }
            }
            OutputItem::Other => {}
        }
    }
    let finish_reason = match (response.status.as_deref(), &response.incomplete_details) {
        (Some("incomplete"), details) => match details.as_ref().and_then(|d| d.reason.as_deref()) {
            Some("max_output_tokens") | None => "length".to_string(),
            Some(other) => other.to_string(),
        },
        _ if !tool_calls.is_empty() => "tool_calls".to_string(),
        _ => "stop".to_string(),
    };
    let response_id = response.id.filter(|id| !id.is_empty());
    Ok(Answer {
        response: ChatResponse {
            content: (!content.is_empty()).then_some(content),
            reasoning: (!reasoning.is_empty()).then(|| reasoning.join("\n\n")),
            tool_calls,
            usage: response.usage.map(usage).unwrap_or_default(),
            finish_reason: Some(finish_reason),
            replay: (!replay.is_empty()).then(|| Replay { api: API.into(), items: Value::Array(replay) }),
        },
        id: response_id,
    })
}

fn tool_call(index: usize, id: Option<String>, name: String, arguments: Option<Value>) -> ToolCall {
    let arguments = match arguments {
        Some(Value::String(text)) => text,
        Some(Value::Null) | None => String::from("{}"),
        Some(other) => other.to_string(),
    };
    let id = id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{index}"));
    ToolCall { id, name, arguments }
}

fn usage(wire: WireUsage) -> Usage {
    Usage {
        prompt_tokens: wire.input_tokens,
        completion_tokens: wire.output_tokens,
        total_tokens: wire.total_tokens.unwrap_or(wire.input_tokens + wire.output_tokens),
    }
}

fn code_text(code: Option<&Value>) -> Option<String> {
    match code? {
        Value::String(code) => Some(code.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// A failure the server reported inside a 200 (a failed response, a stream's `error` event), by its code.
pub(crate) fn failure(code: Option<&str>, message: &str, url: &str) -> LlmError {
    let said = match code {
        Some(code) => format!("{message} ({code})"),
        None => message.to_string(),
    };
    let lower = message.to_ascii_lowercase();
    match code.unwrap_or_default() {
        "context_length_exceeded" => LlmError::ContextLength(said),
        _ if lower.contains("context window") || lower.contains("maximum context length") => {
            LlmError::ContextLength(said)
        }
        "rate_limit_exceeded" => LlmError::RateLimited { retry_after: None, body: said },
        "insufficient_quota" => LlmError::Quota { status: 200, body: said },
        "invalid_prompt" | "invalid_request_error" | "invalid_image" | "invalid_image_url" => {
            LlmError::BadRequest { url: url.to_string(), status: 200, body: said }
        }
        _ => LlmError::Server { url: url.to_string(), status: 200, body: said },
    }
}

/// A function call as its stream events build it.
#[derive(Default)]
struct PartialCall {
    call_id: Option<String>,
    name: String,
    arguments: String,
}

/// A streamed answer: text and calls as they arrive, and the whole response once `response.completed` brings it.
#[derive(Default)]
pub(crate) struct Streamed {
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, PartialCall>,
    finished: Option<Response>,
    events: usize,
}

impl Streamed {
    /// Takes one event; `Ok(false)` once the response is complete. A failure the stream reports is an error.
    pub(crate) fn add(
        &mut self,
        event: StreamEvent,
        on_text: &TextSink<'_>,
        url: &str,
        quote: &dyn Fn(&str) -> String,
    ) -> crate::Result<bool> {
        self.events += 1;
        match event {
            StreamEvent::TextDelta { delta } | StreamEvent::RefusalDelta { delta } => {
                if !delta.is_empty() {
                    on_text(&delta);
                    self.text.push_str(&delta);
                }
            }
            StreamEvent::ReasoningDelta { delta } => self.reasoning.push_str(&delta),
            StreamEvent::ItemAdded { output_index, item } | StreamEvent::ItemDone { output_index, item } => {
                if let OutputItem::FunctionCall { id, call_id, name, arguments } = item {
                    let call = self.calls.entry(output_index).or_default();
                    call.call_id = call_id.or(id).or(call.call_id.take());
                    if !name.is_empty() {
                        call.name = name;
                    }
                    if let Some(Value::String(whole)) = arguments.filter(|a| a.as_str().is_some_and(|s| !s.is_empty()))
                    {
                        call.arguments = whole;
                    }
                }
            }
            StreamEvent::ArgumentsDelta { output_index, delta } => {
                self.calls.entry(output_index).or_default().arguments.push_str(&delta);
            }
            StreamEvent::ArgumentsDone { output_index, arguments } => {
                self.calls.entry(output_index).or_default().arguments = arguments;
            }
            StreamEvent::Completed { response } | StreamEvent::Incomplete { response } => {
                self.finished = Some(response);
                return Ok(false);
            }
            StreamEvent::Failed { response } => {
                let error = response.error.unwrap_or_default();
                return Err(self.reported(error, url, quote));
            }
            StreamEvent::Error { code, message, error } => {
                let error = error.unwrap_or(WireError { code, message, kind: None });
                return Err(self.reported(error, url, quote));
            }
            StreamEvent::Other => {}
        }
        Ok(true)
    }

    fn reported(&self, error: WireError, url: &str, quote: &dyn Fn(&str) -> String) -> LlmError {
        let message = error.message.or(error.kind).unwrap_or_else(|| "the stream reported an error".into());
        failure(code_text(error.code.as_ref()).as_deref(), &quote(&message), url)
    }

    /// The answer: the completed response when it came (its output is the truth), else what the events built.
    pub(crate) fn finish(mut self, url: &str, quote: &dyn Fn(&str) -> String) -> crate::Result<Answer> {
        if let Some(response) = self.finished.take() {
            if !response.output.is_empty() || response.status.as_deref() == Some("incomplete") {
                return from_response(response, url, quote);
            }
            return Ok(self.built(response.id, response.usage));
        }
        if self.events == 0 {
            return Err(LlmError::EmptyResponse);
        }
        Ok(self.built(None, None))
    }

    fn built(self, id: Option<String>, wire_usage: Option<WireUsage>) -> Answer {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .filter(|call| !call.name.is_empty())
            .enumerate()
            .map(|(index, call)| tool_call(index, call.call_id, call.name, Some(Value::String(call.arguments))))
            .map(|call| if call.arguments.is_empty() { ToolCall { arguments: "{}".into(), ..call } } else { call })
            .collect();
        let finish_reason = if tool_calls.is_empty() { "stop" } else { "tool_calls" };
        Answer {
            response: ChatResponse {
                content: (!self.text.is_empty()).then_some(self.text),
                reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
                tool_calls,
                usage: wire_usage.map(usage).unwrap_or_default(),
                finish_reason: Some(finish_reason.into()),
                replay: None,
            },
            id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> crate::Result<Answer> {
        let response: Response = serde_json::from_str(body).unwrap();
        from_response(response, "http://x/v1/responses", &|t| t.to_string())
    }

    #[test]
    fn output_items_become_text_calls_reasoning_and_replay() {
        let answer = parse(
            r#"{"id":"resp_1","status":"completed","output":[
                {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}],
                 "encrypted_content":"gAAA"},
                {"type":"web_search_call","id":"ws_1","status":"completed"},
                {"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]},
                {"type":"function_call","id":"fc_1","call_id":"call_a","name":"x","arguments":"{\"n\":1}"},
                {"type":"function_call","id":"fc_2","call_id":"call_b","name":"y","arguments":"{oops"}],
              "usage":{"input_tokens":12,"output_tokens":7,"total_tokens":19}}"#,
        )
        .unwrap();
        let response = answer.response;
        assert_eq!(answer.id.as_deref(), Some("resp_1"));
        assert_eq!(response.content.as_deref(), Some("hi"));
        assert_eq!(response.reasoning.as_deref(), Some("think"));
        let ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_a", "call_b"]);
        assert_eq!(response.tool_calls[1].arguments, "{oops");
        assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(response.usage, Usage { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 });
        let replay = response.replay.unwrap();
        assert_eq!(replay.api, API);
        assert_eq!(replay.items[0]["encrypted_content"], "gAAA");
        assert!(replay.items[0].get("id").is_none(), "no id: the item may not be stored server-side");
    }

    #[test]
    fn an_incomplete_response_says_why_and_a_failed_one_is_an_error() {
        let cut = parse(
            r#"{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
                "output":[{"type":"message","content":[{"type":"output_text","text":"Half"}]}]}"#,
        )
        .unwrap();
        assert_eq!(cut.response.finish_reason.as_deref(), Some("length"));
        assert_eq!(cut.response.content.as_deref(), Some("Half"));
        let failed = parse(
            r#"{"id":"r","status":"failed","output":[],
                "error":{"code":"context_length_exceeded","message":"Your input exceeds the context window."}}"#,
        );
        assert!(matches!(failed, Err(LlmError::ContextLength(_))), "{:?}", failed.err());
        let busy = parse(r#"{"id":"r","status":"failed","output":[],"error":{"code":"server_error","message":"x"}}"#);
        assert!(busy.is_err_and(|e| e.is_retryable()));
        assert!(matches!(parse(r#"{"id":"r","status":"completed","output":[]}"#), Err(LlmError::EmptyResponse)));
    }
}
