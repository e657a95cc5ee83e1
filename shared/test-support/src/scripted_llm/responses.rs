//! The OpenAI Responses fake (`POST /v1/responses`). It checks a request as OpenAI would
//! (<https://platform.openai.com/docs/api-reference/responses/create>): a Bearer key, `model` and `input`, flat
//! function tools, known item types and roles, every `function_call_output` answering a function call of the
//! conversation and every function call answered, reasoning items carrying their encrypted content, and a
//! `previous_response_id` that it has stored. It refuses with 400 and OpenAI's error body. Responses to requests
//! with `store` (OpenAI's default) are kept by id, so a chained request is resolved to its whole conversation:
//! the scripts are keyed on that, exactly as for a request that sent everything. It answers whole or as the
//! Responses event stream, with a reasoning item before tool calls (encrypted when the request `include`s it).

use super::{ApiCall, Reply, ScriptedLlm, State, choose_for, lock, pieces, record, respond, respond_sse};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Responses the fake produced with `store`, by id: the whole conversation up to and including each one's output.
#[derive(Default)]
pub(crate) struct Stored {
    conversations: HashMap<String, Vec<Value>>,
    /// Responses served so far, for unique ids (also across [`ScriptedLlm::forget_responses`]).
    served: usize,
}

impl ScriptedLlm {
    /// Forgets every stored response, as a restarted server or an expired response would: a later
    /// `previous_response_id` naming one of them is refused with `previous_response_not_found`.
    pub fn forget_responses(&self) {
        lock(&self.state).responses.conversations.clear();
    }
}

pub(crate) async fn serve(state: &Arc<Mutex<State>>, call: ApiCall) -> Response<Full<Bytes>> {
    let authorization = call.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let request: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
    record(state, &request, call.body.len(), authorization.clone());
    if !call.path.ends_with("/responses") {
        return error(404, &format!("Invalid URL (POST {})", call.path), "invalid_request_error", None);
    }
    if authorization.strip_prefix("Bearer ").is_none_or(|key| key.trim().is_empty()) {
        let message = "You didn't provide an API key. You need to provide your API key in an Authorization header \
                       using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
        return error(401, message, "invalid_request_error", None);
    }
    let conversation = {
        let state = lock(state);
        match check(&request, &state.responses) {
            Ok(conversation) => conversation,
            Err(refusal) => return respond(400, refusal.to_string()),
        }
    };
    let Some((user_text, step)) = turn_of(&conversation) else {
        return error(400, "The conversation has no user message.", "invalid_request_error", None);
    };
    let (reply, delay) = choose_for(&mut lock(state), &user_text, step);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let streamed = request["stream"] == true;
    let (text, calls) = match reply {
        Reply::Status(status, body) => return with_retry_after(respond(status, body), state),
        Reply::Raw(body) if streamed => return respond_sse(&body),
        Reply::Raw(body) => return respond(200, body),
        Reply::Text(text) => (Some(text), Vec::new()),
        Reply::ToolCalls(calls) => (None, calls),
    };
    let encrypted = request["include"].as_array().is_some_and(|i| i.iter().any(|x| x == "reasoning.encrypted_content"));
    let id = {
        let mut state = lock(state);
        state.responses.served += 1;
        format!("resp_{}", state.responses.served)
    };
    let output = output_items(&id, text.as_deref(), &calls, encrypted);
    if request["store"] != false {
        let mut whole = conversation;
        whole.extend(output.iter().cloned());
        lock(state).responses.conversations.insert(id.clone(), whole);
    }
    let response = json!({
        "id": id, "object": "response", "created_at": 1_700_000_000, "status": "completed", "model": request["model"],
        "output": output, "previous_response_id": request["previous_response_id"], "store": request["store"] != false,
        "error": null, "incomplete_details": null,
        "usage": { "input_tokens": 10, "output_tokens": 5, "total_tokens": 15 }
    });
    if streamed { respond_sse(&event_stream(&response, text.as_deref())) } else { respond(200, response.to_string()) }
}

/// A 429 carries `retry-after` when the test set one, as OpenAI's rate limiter does.
fn with_retry_after(mut response: Response<Full<Bytes>>, state: &Arc<Mutex<State>>) -> Response<Full<Bytes>> {
    let seconds = lock(state).retry_after.clone();
    if response.status() == 429
        && let Some(value) = seconds.and_then(|s| hyper::header::HeaderValue::from_str(&s).ok())
    {
        response.headers_mut().insert("retry-after", value);
    }
    response
}

/// OpenAI's error body.
fn error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Response<Full<Bytes>> {
    respond(status, json!({ "error": { "message": message, "type": kind, "param": null, "code": code } }).to_string())
}

/// OpenAI's body for a 400 `invalid_request_error`.
fn invalid(message: String) -> Value {
    json!({ "error": { "message": message, "type": "invalid_request_error", "param": null, "code": null } })
}

/// The request's whole conversation (the stored one it continues, then its own input), or the body of the 400
/// that refuses it.
fn check(request: &Value, stored: &Stored) -> Result<Vec<Value>, Value> {
    if !request["model"].is_string() {
        return Err(invalid("Missing required parameter: 'model'.".into()));
    }
    let input = match &request["input"] {
        Value::String(text) => vec![json!({ "type": "message", "role": "user", "content": text })],
        Value::Array(items) => items.clone(),
        Value::Null => return Err(invalid("Missing required parameter: 'input'.".into())),
        _ => return Err(invalid("Invalid type for 'input': expected a string or an array.".into())),
    };
    for (i, tool) in request["tools"].as_array().into_iter().flatten().enumerate() {
        match tool["type"].as_str() {
            Some("function") => {
                if tool.get("function").is_some() {
                    return Err(invalid(format!("Unknown parameter: 'tools[{i}].function'.")));
                }
                if !tool["name"].is_string() {
                    return Err(invalid(format!("Missing required parameter: 'tools[{i}].name'.")));
                }
                if !tool["parameters"].is_object() {
                    return Err(invalid(format!("Missing required parameter: 'tools[{i}].parameters'.")));
                }
            }
            // xAI's server-side search tools.
            Some("web_search" | "x_search") => {}
            other => return Err(invalid(format!("Invalid value: {other:?}. Supported values are: 'function', ….",))),
        }
    }
    let mut conversation = match request["previous_response_id"].as_str() {
        Some(previous) => match stored.conversations.get(previous) {
            Some(conversation) => conversation.clone(),
            None => {
                let message = format!("Previous response with id '{previous}' not found.");
                let mut body = invalid(message);
                body["error"]["param"] = json!("previous_response_id");
                body["error"]["code"] = json!("previous_response_not_found");
                return Err(body);
            }
        },
        None => Vec::new(),
    };
    for (i, item) in input.iter().enumerate() {
        check_item(i, item).map_err(invalid)?;
    }
    conversation.extend(input);
    check_calls(&conversation).map_err(invalid)?;
    Ok(conversation)
}

fn check_item(i: usize, item: &Value) -> Result<(), String> {
    let text = |key: &str| item[key].is_string();
    match item["type"].as_str().unwrap_or("message") {
        "message" => {
            let role = item["role"].as_str().unwrap_or_default();
            let parts: &[&str] = match role {
                "user" | "system" | "developer" => &["input_text", "input_image", "input_file"],
                "assistant" => &["output_text", "refusal"],
                _ => {
                    return Err(format!(
                        "Invalid value: '{role}'. Supported values are: 'user', 'assistant', 'system', and \
                         'developer'. (input[{i}].role)"
                    ));
                }
            };
            if item["content"].is_string() {
                return Ok(());
            }
            let Some(content) = item["content"].as_array() else {
                return Err(format!("Missing required parameter: 'input[{i}].content'."));
            };
            for (j, part) in content.iter().enumerate() {
                let kind = part["type"].as_str().unwrap_or_default();
                if !parts.contains(&kind) {
                    return Err(format!(
                        "Invalid value: '{kind}'. Supported values are: {parts:?}. (input[{i}].content[{j}])"
                    ));
                }
                let complete = match kind {
                    "input_image" => {
                        part["image_url"].as_str().is_some_and(|u| u.starts_with("data:") || u.starts_with("http"))
                    }
                    "refusal" => part["refusal"].is_string(),
                    "input_file" => true,
                    _ => part["text"].is_string(),
                };
                if !complete {
                    return Err(format!("Invalid content part: 'input[{i}].content[{j}]' of type '{kind}'."));
                }
            }
            Ok(())
        }
        "function_call" if text("call_id") && text("name") && text("arguments") => Ok(()),
        "function_call_output" if text("call_id") && (text("output") || item["output"].is_array()) => Ok(()),
        "reasoning" if item["summary"].is_array() && text("encrypted_content") => Ok(()),
        "reasoning" => Err(format!(
            "Item 'input[{i}]' of type 'reasoning' has no encrypted_content; items are not persisted when `store` is \
             set to false."
        )),
        kind => Err(format!("Invalid or incomplete item 'input[{i}]' of type '{kind}'.")),
    }
}

/// Every output answers a call made before it, and every call is answered.
fn check_calls(conversation: &[Value]) -> Result<(), String> {
    let mut open: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for item in conversation {
        let call_id = item["call_id"].as_str().unwrap_or_default();
        match item["type"].as_str() {
            Some("function_call") => {
                open.push(call_id);
                seen.insert(call_id);
            }
            Some("function_call_output") if seen.contains(call_id) => open.retain(|id| *id != call_id),
            Some("function_call_output") => {
                return Err(format!("No tool call found for function call output with call_id {call_id}."));
            }
            _ => {}
        }
    }
    match open.first() {
        Some(call_id) => Err(format!("No tool output found for function call {call_id}.")),
        None => Ok(()),
    }
}

/// The text of the last plain-text user message (images make a message part of the turn, not a new one) and how
/// many model turns followed it.
fn turn_of(conversation: &[Value]) -> Option<(String, usize)> {
    let plain = |item: &Value| -> Option<String> {
        if item["role"] != "user" {
            return None;
        }
        match &item["content"] {
            Value::String(text) => Some(text.clone()),
            Value::Array(parts) if parts.iter().all(|p| p["type"] == "input_text") => {
                Some(parts.iter().filter_map(|p| p["text"].as_str()).collect())
            }
            _ => None,
        }
    };
    let (index, text) = conversation.iter().enumerate().rev().find_map(|(i, item)| plain(item).map(|t| (i, t)))?;
    let model_item = |item: &Value| {
        matches!(item["type"].as_str(), Some("function_call" | "reasoning")) || item["role"] == "assistant"
    };
    let mut turns = 0;
    let mut in_turn = false;
    for item in &conversation[index + 1..] {
        let model = model_item(item);
        if model && !in_turn {
            turns += 1;
        }
        in_turn = model;
    }
    Some((text, turns))
}

fn output_items(id: &str, text: Option<&str>, calls: &[(String, String)], encrypted: bool) -> Vec<Value> {
    let n = id.trim_start_matches("resp_");
    if let Some(text) = text {
        return vec![json!({ "type": "message", "id": format!("msg_{n}"), "status": "completed", "role": "assistant",
                            "content": [{ "type": "output_text", "text": text, "annotations": [] }] })];
    }
    let mut reasoning = json!({ "type": "reasoning", "id": format!("rs_{n}"),
                                "summary": [{ "type": "summary_text", "text": "Planning the tool calls." }] });
    if encrypted {
        reasoning["encrypted_content"] = json!(format!("encrypted-{n}"));
    }
    let mut items = vec![reasoning];
    items.extend(calls.iter().enumerate().map(|(i, (name, arguments))| {
        json!({ "type": "function_call", "id": format!("fc_{n}_{i}"), "call_id": format!("call_{n}_{i}"),
                "name": name, "arguments": arguments, "status": "completed" })
    }));
    items
}

/// The Responses event stream for `response`: each item added, its text in three deltas or its arguments in two,
/// done, then `response.completed` with the whole response.
fn event_stream(response: &Value, text: Option<&str>) -> String {
    let mut events: Vec<Value> = Vec::new();
    let mut in_progress = response.clone();
    in_progress["status"] = json!("in_progress");
    in_progress["output"] = json!([]);
    events.push(json!({ "type": "response.created", "response": in_progress }));
    let output = response["output"].as_array().cloned().unwrap_or_default();
    for (index, item) in output.iter().enumerate() {
        let item_id = item["id"].clone();
        match item["type"].as_str() {
            Some("message") => {
                let mut empty = item.clone();
                empty["content"] = json!([]);
                events.push(json!({ "type": "response.output_item.added", "output_index": index, "item": empty }));
                for delta in pieces(text.unwrap_or_default(), 3) {
                    events.push(json!({ "type": "response.output_text.delta", "item_id": item_id,
                                        "output_index": index, "content_index": 0, "delta": delta }));
                }
                events.push(json!({ "type": "response.output_text.done", "item_id": item_id, "output_index": index,
                                    "content_index": 0, "text": text.unwrap_or_default() }));
            }
            Some("function_call") => {
                let mut empty = item.clone();
                empty["arguments"] = json!("");
                events.push(json!({ "type": "response.output_item.added", "output_index": index, "item": empty }));
                let arguments = item["arguments"].as_str().unwrap_or_default();
                for delta in pieces(arguments, 2) {
                    events.push(json!({ "type": "response.function_call_arguments.delta", "item_id": item_id,
                                        "output_index": index, "delta": delta }));
                }
                events.push(json!({ "type": "response.function_call_arguments.done", "item_id": item_id,
                                    "output_index": index, "arguments": arguments }));
            }
            _ => events.push(json!({ "type": "response.output_item.added", "output_index": index, "item": item })),
        }
        events.push(json!({ "type": "response.output_item.done", "output_index": index, "item": item }));
    }
    events.push(json!({ "type": "response.completed", "response": response }));
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, mut event)| {
            event["sequence_number"] = json!(sequence);
            format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or_default())
        })
        .collect()
}
