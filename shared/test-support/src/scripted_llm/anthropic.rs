//! The Anthropic Messages fake (`POST /v1/messages`, <https://docs.anthropic.com/en/api/messages>). It refuses
//! what the real API refuses, with a 400 in Anthropic's error shape naming the violation: a missing `x-api-key`,
//! `anthropic-version` or `max_tokens`, a `system` role inside `messages`, a conversation that does not open with
//! the user or whose roles do not alternate, a `tool_result` that answers no `tool_use` of the message before, a
//! `tool_use` left unanswered, an `input` that is not an object, more than four cache marks, a thinking budget
//! out of bounds, and (with thinking on) a tool loop whose last answer does not come back opening with its signed
//! thinking block unchanged.
//!
//! Scripted replies are rendered whole or as Anthropic's event stream (the text in three `text_delta`s, each tool
//! input in three `partial_json` parts). With thinking on, every answer opens with a signed thinking block, as
//! Claude's do. Broken tool arguments: streamed, their `partial_json` parts do not parse, as when the model is cut
//! off; whole, `input` is the raw text as a string, as relays that pass the model's output on unparsed send it.

use super::{ApiCall, Reply, State, choose_for, lock, pieces, record, respond, respond_sse};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use hyper::header::HeaderValue;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Token counts every answer reports: the prompt split into its uncached part and the cache's read and written
/// parts, as Anthropic reports them.
const USAGE_INPUT: u64 = 10;
const USAGE_CACHE_WRITE: u64 = 20;
const USAGE_CACHE_READ: u64 = 30;
const USAGE_OUTPUT: u64 = 5;

pub(crate) async fn serve(state: &Arc<Mutex<State>>, call: ApiCall) -> Response<Full<Bytes>> {
    let header = |name: &str| call.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let key = header("x-api-key");
    let request: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
    record(state, &request, call.body.len(), key.clone());
    if call.path != "/v1/messages" {
        return error(404, "not_found_error", &format!("Not found: {}", call.path));
    }
    if key.is_empty() {
        return error(401, "authentication_error", "x-api-key header is required");
    }
    if header("anthropic-version").is_empty() {
        return error(400, "invalid_request_error", "anthropic-version: header is required");
    }
    if let Err(problem) = validate(&request) {
        return error(400, "invalid_request_error", &problem);
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let Some((user_text, step)) = turn(&messages) else {
        return error(400, "invalid_request_error", "scripted fake: no user message with plain text");
    };
    let (reply, delay) = choose_for(&mut lock(state), &user_text, step);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let thinking = (request["thinking"]["type"] == "enabled").then(|| format!("Thinking about: {user_text}"));
    let answer = |text: Option<&str>, calls: &[(String, String)]| Answer {
        id: format!("msg_scripted_{}", messages.len()),
        model: request["model"].as_str().unwrap_or_default().to_string(),
        thinking: thinking.clone(),
        text: text.map(str::to_string),
        calls: calls.to_vec(),
        turn: messages.len(),
    };
    let stream = request["stream"] == true;
    match reply {
        Reply::Text(text) if stream => respond_sse(&answer(Some(&text), &[]).events()),
        Reply::Text(text) => respond(200, answer(Some(&text), &[]).whole().to_string()),
        Reply::ToolCalls(calls) if stream => respond_sse(&answer(None, &calls).events()),
        Reply::ToolCalls(calls) => respond(200, answer(None, &calls).whole().to_string()),
        Reply::Status(status, body) => {
            let mut response = respond(status, body);
            let retry_after = lock(state).retry_after.clone();
            let header = retry_after.filter(|_| status == 429).and_then(|s| HeaderValue::from_str(&s).ok());
            if let Some(value) = header {
                response.headers_mut().insert("retry-after", value);
            }
            response
        }
        Reply::Raw(body) if stream => respond_sse(&body),
        Reply::Raw(body) => respond(200, body),
    }
}

/// Anthropic's error answer.
fn error(status: u16, kind: &str, message: &str) -> Response<Full<Bytes>> {
    respond(status, json!({ "type": "error", "error": { "type": kind, "message": message } }).to_string())
}

/// The signature the fake puts on a thinking block; a block sent back with other text fails it.
fn signature(thinking: &str) -> String {
    format!("scripted-signature:{}", thinking.len())
}

/// The text of the last user message written as plain text, and how many answers followed it. A user message
/// carrying tool results, or ending with an image, is part of the turn, not a new one (as the Chat Completions
/// fake counts); an image followed by text in one message (the client merges consecutive user messages) is keyed
/// on that text.
fn turn(messages: &[Value]) -> Option<(String, usize)> {
    let plain = |message: &Value| -> Option<String> {
        if message["role"] != "user" {
            return None;
        }
        match &message["content"] {
            Value::String(text) => Some(text.clone()),
            Value::Array(blocks) if !blocks.iter().any(|b| b["type"] == "tool_result") => {
                blocks.last().filter(|b| b["type"] == "text").and_then(|b| b["text"].as_str()).map(str::to_string)
            }
            _ => None,
        }
    };
    let index = messages.iter().rposition(|m| plain(m).is_some())?;
    let step = messages[index..].iter().filter(|m| m["role"] == "assistant").count();
    Some((plain(&messages[index])?, step))
}

/// A message's content as blocks (a plain string is one text block).
fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(text) => vec![json!({ "type": "text", "text": text })],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

fn ids_of(blocks: &[Value], kind: &str, field: &str) -> Vec<String> {
    blocks.iter().filter(|b| b["type"] == kind).filter_map(|b| b[field].as_str()).map(str::to_string).collect()
}

/// Checks a request against the documented shape; the message names the first violation in Anthropic's words.
fn validate(request: &Value) -> Result<(), String> {
    if !request.is_object() {
        return Err("the request body is not a JSON object".into());
    }
    if request["model"].as_str().is_none_or(str::is_empty) {
        return Err("model: Field required".into());
    }
    let Some(max_tokens) = request["max_tokens"].as_u64().filter(|n| *n >= 1) else {
        return Err("max_tokens: Field required".into());
    };
    validate_system(&request["system"])?;
    validate_tools(&request["tools"])?;
    let Some(messages) = request["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("messages: Field required (at least one message)".into());
    };
    for (i, message) in messages.iter().enumerate() {
        validate_message(i, message, i.checked_sub(1).map(|p| &messages[p]), messages.get(i + 1))?;
    }
    let marks = request.to_string().matches("\"cache_control\"").count();
    if marks > 4 {
        return Err(format!("A maximum of 4 blocks with cache_control may be provided. Found {marks}."));
    }
    if let Some(thinking) = request.get("thinking") {
        validate_thinking(request, thinking, max_tokens, messages)?;
    } else if let Some(temperature) = request.get("temperature")
        && temperature.as_f64().is_none_or(|t| !(0.0..=1.0).contains(&t))
    {
        return Err("temperature: Input should be less than or equal to 1".into());
    }
    Ok(())
}

fn validate_system(system: &Value) -> Result<(), String> {
    match system {
        Value::Null | Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (j, block) in blocks.iter().enumerate() {
                if block["type"] != "text" || block["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                    return Err(format!("system.{j}: system blocks must be text blocks with non-empty text"));
                }
            }
            Ok(())
        }
        _ => Err("system: Input should be a valid string or list of text blocks".into()),
    }
}

fn validate_tools(tools: &Value) -> Result<(), String> {
    let Some(tools) = tools.as_array() else {
        return if tools.is_null() { Ok(()) } else { Err("tools: Input should be a valid list".into()) };
    };
    for (i, tool) in tools.iter().enumerate() {
        let name = tool["name"].as_str().unwrap_or_default();
        let valid = !name.is_empty()
            && name.len() <= 64
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!("tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"));
        }
        if !tool["input_schema"].is_object() {
            return Err(format!("tools.{i}.input_schema: Field required"));
        }
    }
    Ok(())
}

fn validate_message(i: usize, message: &Value, previous: Option<&Value>, next: Option<&Value>) -> Result<(), String> {
    let role = message["role"].as_str().unwrap_or_default();
    match role {
        "system" => {
            return Err(format!(
                "messages.{i}.role: Unexpected role \"system\". The Messages API accepts a top-level `system` \
                 parameter, not \"system\" as an input message role."
            ));
        }
        "user" | "assistant" => {}
        _ => return Err(format!("messages.{i}.role: Input should be 'user' or 'assistant'")),
    }
    if i == 0 && role != "user" {
        return Err("messages: first message must use the \"user\" role".into());
    }
    if previous.is_some_and(|p| p["role"] == role) {
        return Err(format!(
            "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{role}\" \
             roles in a row"
        ));
    }
    let content = blocks(message);
    if content.is_empty() {
        return Err(format!("messages.{i}: all messages must have non-empty content"));
    }
    let asked = previous.map(|p| ids_of(&blocks(p), "tool_use", "id")).unwrap_or_default();
    let mut past_results = false;
    for (j, block) in content.iter().enumerate() {
        let at = format!("messages.{i}.content.{j}");
        match (block["type"].as_str().unwrap_or_default(), role) {
            ("text", _) => {
                if block["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                    return Err(format!("{at}.text: text content blocks must contain non-whitespace text"));
                }
            }
            ("image", "user") => validate_image(&at, &block["source"])?,
            ("tool_result", "user") => {
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                if past_results {
                    return Err(format!("{at}: tool_result blocks must come first in the user message"));
                }
                if !asked.iter().any(|a| a == id) {
                    return Err(format!(
                        "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` \
                         block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
                continue;
            }
            ("tool_use", "assistant") => {
                if block["id"].as_str().is_none_or(str::is_empty) || block["name"].as_str().is_none() {
                    return Err(format!("{at}: tool_use blocks need an `id` and a `name`"));
                }
                if !block["input"].is_object() {
                    return Err(format!("{at}.tool_use.input: Input should be a valid dictionary"));
                }
            }
            ("thinking" | "redacted_thinking", "assistant") => {}
            (kind, _) => return Err(format!("{at}.type: a `{kind}` block is not allowed in a {role} message")),
        }
        past_results = true;
    }
    let calls = ids_of(&content, "tool_use", "id");
    if let Some(next) = next.filter(|_| !calls.is_empty()) {
        let answered = ids_of(&blocks(next), "tool_result", "tool_use_id");
        let missing: Vec<&String> = calls.iter().filter(|id| !answered.contains(id)).collect();
        if !missing.is_empty() {
            return Err(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each \
                 `tool_use` block must have a corresponding `tool_result` block in the next message.",
                i + 1,
                missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}

fn validate_image(at: &str, source: &Value) -> Result<(), String> {
    match source["type"].as_str() {
        Some("base64") => {
            let media = source["media_type"].as_str().unwrap_or_default();
            if !["image/jpeg", "image/png", "image/gif", "image/webp"].contains(&media) {
                return Err(format!(
                    "{at}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                ));
            }
            if source["data"].as_str().is_none_or(str::is_empty) {
                return Err(format!("{at}.source.data: Field required"));
            }
            Ok(())
        }
        Some("url") if source["url"].as_str().is_some_and(|u| u.starts_with("http")) => Ok(()),
        _ => Err(format!("{at}.source: Input tag does not match any of the expected tags: 'base64', 'url'")),
    }
}

/// Extended thinking: a budget of at least 1024 below `max_tokens`, no temperature but 1, and in a tool loop the
/// last answer sent back opening with its thinking block, signature intact.
fn validate_thinking(request: &Value, thinking: &Value, max_tokens: u64, messages: &[Value]) -> Result<(), String> {
    if thinking["type"] != "enabled" {
        return Ok(());
    }
    let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
    if budget < 1024 {
        return Err("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into());
    }
    if budget >= max_tokens {
        return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
    }
    if request.get("temperature").is_some_and(|t| t.as_f64() != Some(1.0)) {
        return Err("`temperature` may only be set to 1 when thinking is enabled.".into());
    }
    for (i, message) in messages.iter().enumerate().filter(|(_, m)| m["role"] == "assistant") {
        for (j, block) in blocks(message).iter().enumerate().filter(|(_, b)| b["type"] == "thinking") {
            let text = block["thinking"].as_str().unwrap_or_default();
            if block["signature"].as_str() != Some(signature(text).as_str()) {
                return Err(format!("messages.{i}.content.{j}: Invalid `signature` in `thinking` block"));
            }
        }
    }
    let loop_goes_on = messages.last().is_some_and(|m| blocks(m).iter().any(|b| b["type"] == "tool_result"));
    let answer = messages.iter().enumerate().rev().find(|(_, m)| m["role"] == "assistant");
    if let Some((i, answer)) = answer.filter(|_| loop_goes_on) {
        let first = blocks(answer).first().and_then(|b| b["type"].as_str().map(str::to_string)).unwrap_or_default();
        if first != "thinking" && first != "redacted_thinking" {
            return Err(format!(
                "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When \
                 `thinking` is enabled, a final `assistant` message must start with a thinking block."
            ));
        }
    }
    Ok(())
}

/// One scripted answer, rendered whole or streamed.
struct Answer {
    id: String,
    model: String,
    thinking: Option<String>,
    text: Option<String>,
    calls: Vec<(String, String)>,
    turn: usize,
}

impl Answer {
    fn stop_reason(&self) -> &'static str {
        if self.calls.is_empty() { "end_turn" } else { "tool_use" }
    }

    fn call_id(&self, index: usize) -> String {
        format!("toolu_{}_{index}", self.turn)
    }

    fn usage(output: u64) -> Value {
        json!({ "input_tokens": USAGE_INPUT, "cache_creation_input_tokens": USAGE_CACHE_WRITE,
                "cache_read_input_tokens": USAGE_CACHE_READ, "output_tokens": output })
    }

    fn whole(&self) -> Value {
        let mut content = Vec::new();
        if let Some(thinking) = &self.thinking {
            content.push(json!({ "type": "thinking", "thinking": thinking, "signature": signature(thinking) }));
        }
        if let Some(text) = &self.text {
            content.push(json!({ "type": "text", "text": text }));
        }
        for (index, (name, arguments)) in self.calls.iter().enumerate() {
            let input = match serde_json::from_str::<Value>(arguments) {
                Ok(object @ Value::Object(_)) => object,
                _ => Value::String(arguments.clone()),
            };
            content.push(json!({ "type": "tool_use", "id": self.call_id(index), "name": name, "input": input }));
        }
        json!({ "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": self.stop_reason(), "stop_sequence": null, "usage": Self::usage(USAGE_OUTPUT) })
    }

    /// The answer as Anthropic streams it: `message_start` with the input side of the usage, a `ping`, each block
    /// opened, filled by deltas and closed, then `message_delta` with the stop reason and output tokens.
    fn events(&self) -> String {
        let mut events = vec![json!({ "type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": Self::usage(1) } })];
        events.push(json!({ "type": "ping" }));
        let mut blocks: Vec<(Value, Vec<Value>)> = Vec::new();
        if let Some(thinking) = &self.thinking {
            let mut deltas: Vec<Value> =
                pieces(thinking, 2).iter().map(|p| json!({ "type": "thinking_delta", "thinking": p })).collect();
            deltas.push(json!({ "type": "signature_delta", "signature": signature(thinking) }));
            blocks.push((json!({ "type": "thinking", "thinking": "" }), deltas));
        }
        if let Some(text) = self.text.as_deref().filter(|t| !t.is_empty()) {
            let deltas = pieces(text, 3).iter().map(|p| json!({ "type": "text_delta", "text": p })).collect();
            blocks.push((json!({ "type": "text", "text": "" }), deltas));
        }
        for (index, (name, arguments)) in self.calls.iter().enumerate() {
            let start = json!({ "type": "tool_use", "id": self.call_id(index), "name": name, "input": {} });
            let deltas =
                pieces(arguments, 3).iter().map(|p| json!({ "type": "input_json_delta", "partial_json": p })).collect();
            blocks.push((start, deltas));
        }
        for (index, (start, deltas)) in blocks.into_iter().enumerate() {
            events.push(json!({ "type": "content_block_start", "index": index, "content_block": start }));
            for delta in deltas {
                events.push(json!({ "type": "content_block_delta", "index": index, "delta": delta }));
            }
            events.push(json!({ "type": "content_block_stop", "index": index }));
        }
        events.push(json!({ "type": "message_delta",
                            "delta": { "stop_reason": self.stop_reason(), "stop_sequence": null },
                            "usage": { "output_tokens": USAGE_OUTPUT } }));
        events.push(json!({ "type": "message_stop" }));
        events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or_default())).collect()
    }
}
