//! Google Gemini's generateContent (`POST …/models/{model}:generateContent`, and
//! `:streamGenerateContent?alt=sse`), as documented at <https://ai.google.dev/api/generate-content> and
//! <https://ai.google.dev/gemini-api/docs/function-calling>. The request is checked the way Gemini checks it,
//! and a violation is answered 400 `INVALID_ARGUMENT` in Gemini's error shape naming it:
//! - the key in `x-goog-api-key` (a key in the URL is refused here: URLs get logged), the path
//!   `…/models/{model}:method` (404 for `models/models/…`);
//! - `contents` not empty, roles only `user` and `model`, alternating, the first from the user, no empty turn,
//!   each part holding one kind of data;
//! - the `functionResponse` parts of a turn answer the `functionCall` parts of the model turn right before it,
//!   as many and by name, and each `response` is an object; `args` are objects;
//! - declared `parameters` hold no `additionalProperties`, no `$schema` and no type arrays;
//! - thought signatures: like Gemini 3 the fake signs the first call of each answer (`sig-<turn>-0`, `turn`
//!   counting model turns), and every model turn since the last user text must carry its signature back.
//!
//! Answers: text (signed on its last part) or function calls, whole or streamed as SSE chunks that are each a
//! whole `GenerateContentResponse` (text in three pieces; each call whole in its own chunk); a request with
//! `includeThoughts` gets a thought part first. Arguments that are not valid JSON are sent as a JSON string in
//! `args`, as Gemini-compatible servers pass broken arguments on (Gemini itself would end with
//! `MALFORMED_FUNCTION_CALL`, which a test can send as [`Reply::Raw`]). Usage: 10 in, 5 out, 2 thinking, 17 in all.

use super::{ApiCall, Reply, State, choose_for, lock, pieces, record, respond, respond_sse};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

pub(crate) async fn serve(state: &Arc<Mutex<State>>, call: ApiCall) -> Response<Full<Bytes>> {
    let key = call.headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let request: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
    record(state, &request, call.body.len(), key.clone());
    if call.query.split('&').any(|pair| pair.starts_with("key=")) {
        return invalid("the API key was sent in the URL (?key=); send it in the x-goog-api-key header");
    }
    if key.is_empty() {
        let message = "Method doesn't allow unregistered callers (callers without established identity). Please use \
                       API Key or other form of API consumer identity to call this API.";
        return error(403, "PERMISSION_DENIED", message);
    }
    if call.path.contains("/models/models/") || !call.path.contains("/models/") {
        return error(404, "NOT_FOUND", &format!("{} is not a model path (…/models/{{model}}:method)", call.path));
    }
    let streaming = call.path.contains(":streamGenerateContent");
    if streaming && !call.query.split('&').any(|pair| pair == "alt=sse") {
        return invalid("this fake streams only as server-sent events (alt=sse)");
    }
    if let Err(violation) = check(&request) {
        return invalid(&violation);
    }
    let contents = request["contents"].as_array().cloned().unwrap_or_default();
    let Some(user_index) = last_user_text(&contents) else {
        return invalid("no user text in contents");
    };
    let user_text = key_text(state, &contents[user_index]);
    let step = contents[user_index..].iter().filter(|c| c["role"] == "model").count();
    let (reply, delay) = choose_for(&mut lock(state), &user_text, step);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let turn = contents.iter().filter(|c| c["role"] == "model").count();
    let thoughts = request["generationConfig"]["thinkingConfig"]["includeThoughts"] == true;
    match reply {
        Reply::Status(status, body) => respond(status, body),
        Reply::Raw(body) if streaming => respond_sse(&body),
        Reply::Raw(body) => respond(200, body),
        Reply::Text(text) if streaming => respond_sse(&text_stream(&text, turn, thoughts)),
        Reply::Text(text) => {
            let mut parts = thought(thoughts);
            parts.push(json!({ "text": text, "thoughtSignature": format!("sig-{turn}-text") }));
            respond(200, answer(parts, Some("STOP"), 5).to_string())
        }
        Reply::ToolCalls(calls) => {
            let mut parts = thought(thoughts);
            parts.extend(calls.iter().enumerate().map(|(i, (name, args))| call_part(name, args, turn, i)));
            if streaming {
                // Each call arrives whole in its own chunk, the finish reason with the last.
                let last = parts.len().saturating_sub(1);
                let chunks: Vec<Value> = parts
                    .into_iter()
                    .enumerate()
                    .map(|(i, part)| answer(vec![part], (i == last).then_some("STOP"), i as u64 + 1))
                    .collect();
                respond_sse(&events(&chunks))
            } else {
                respond(200, answer(parts, Some("STOP"), 5).to_string())
            }
        }
    }
}

/// The turn the scripts are keyed on: the last user turn with text and no image or file (those are parts the
/// agent put into its own context, part of the turn), else the last user turn with text.
fn last_user_text(contents: &[Value]) -> Option<usize> {
    let parts = |c: &Value| c["parts"].as_array().cloned().unwrap_or_default();
    let has_text = |c: &Value| c["role"] == "user" && parts(c).iter().any(|p| p.get("text").is_some());
    let has_media = |c: &Value| parts(c).iter().any(|p| p.get("inlineData").is_some() || p.get("fileData").is_some());
    contents.iter().rposition(|c| has_text(c) && !has_media(c)).or_else(|| contents.iter().rposition(has_text))
}

/// The text of `turn` a script is keyed on. Consecutive user messages are one Gemini turn, so a plain-text
/// message and an image message after it share it: the last text part a script knows, else the last text part.
fn key_text(state: &Arc<Mutex<State>>, turn: &Value) -> String {
    let texts: Vec<&str> = turn["parts"].as_array().into_iter().flatten().filter_map(|p| p["text"].as_str()).collect();
    let state = lock(state);
    let scripted = |text: &str| {
        state.scripts.iter().any(|s| if s.contains { text.contains(&s.user_message) } else { s.user_message == text })
    };
    texts.iter().rev().find(|t| scripted(t)).or(texts.last()).copied().unwrap_or_default().to_string()
}

fn thought(wanted: bool) -> Vec<Value> {
    if wanted { vec![json!({ "text": "Thinking it over.", "thought": true })] } else { Vec::new() }
}

fn call_part(name: &str, args: &str, turn: usize, index: usize) -> Value {
    let args = serde_json::from_str::<Value>(args).unwrap_or_else(|_| Value::String(args.to_string()));
    let mut part = json!({ "functionCall": { "name": name, "args": args } });
    if index == 0 {
        part["thoughtSignature"] = json!(format!("sig-{turn}-0"));
    }
    part
}

/// One `GenerateContentResponse`; `out` is the output token count so far.
fn answer(parts: Vec<Value>, finish: Option<&str>, out: u64) -> Value {
    let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    json!({
        "candidates": [candidate],
        "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": out, "thoughtsTokenCount": 2,
                           "totalTokenCount": 12 + out },
        "modelVersion": "scripted"
    })
}

fn text_stream(text: &str, turn: usize, thoughts: bool) -> String {
    let mut chunks = Vec::new();
    if thoughts {
        chunks.push(answer(thought(true), None, 0));
    }
    let pieces = pieces(text, 3);
    let last = pieces.len().saturating_sub(1);
    for (i, piece) in pieces.into_iter().enumerate() {
        let mut part = json!({ "text": piece });
        if i == last {
            part["thoughtSignature"] = json!(format!("sig-{turn}-text"));
        }
        let out = if i == last { 5 } else { i as u64 + 1 };
        chunks.push(answer(vec![part], (i == last).then_some("STOP"), out));
    }
    events(&chunks)
}

fn events(chunks: &[Value]) -> String {
    chunks.iter().map(|chunk| format!("data: {chunk}\r\n\r\n")).collect()
}

fn invalid(message: &str) -> Response<Full<Bytes>> {
    error(400, "INVALID_ARGUMENT", message)
}

fn error(code: u16, status: &str, message: &str) -> Response<Full<Bytes>> {
    respond(code, json!({ "error": { "code": code, "message": message, "status": status } }).to_string())
}

/// The first rule of the documented request format that `request` breaks.
fn check(request: &Value) -> Result<(), String> {
    let contents = request["contents"]
        .as_array()
        .filter(|c| !c.is_empty())
        .ok_or("* GenerateContentRequest.contents: contents is not specified")?;
    if let Some(system) = request.get("systemInstruction") {
        let parts = system["parts"].as_array().ok_or("systemInstruction.parts must be a list")?;
        if parts.iter().any(|p| !p["text"].is_string()) {
            return Err("systemInstruction parts must be text".into());
        }
    }
    let mut last_user_text = 0;
    for (index, content) in contents.iter().enumerate() {
        let role = content["role"].as_str().unwrap_or_default();
        if role != "user" && role != "model" {
            return Err(format!("Please use a valid role: user, model. (contents[{index}].role is {role:?})"));
        }
        if index == 0 && role != "user" {
            return Err("Please ensure that multiturn requests start with a user turn.".into());
        }
        if index > 0 && contents[index - 1]["role"] == role {
            return Err(format!(
                "Please ensure that multiturn requests alternate between user and model (contents[{index}])."
            ));
        }
        let parts = content["parts"]
            .as_array()
            .filter(|p| !p.is_empty())
            .ok_or(format!("contents[{index}].parts must not be empty"))?;
        for (p, part) in parts.iter().enumerate() {
            check_part(part).map_err(|e| format!("contents[{index}].parts[{p}]: {e}"))?;
        }
        if role == "user" && parts.iter().any(|p| p.get("text").is_some()) {
            last_user_text = index;
        }
        let responses: Vec<&Value> = parts.iter().filter_map(|p| p.get("functionResponse")).collect();
        if !responses.is_empty() {
            check_responses(contents, index, &responses)?;
        }
    }
    // Gemini 3 checks the signatures of the current turn: every model step since the user last wrote.
    let mut turn = 0;
    for (index, content) in contents.iter().enumerate() {
        if content["role"] != "model" {
            continue;
        }
        let first_call = content["parts"].as_array().into_iter().flatten().find(|p| p.get("functionCall").is_some());
        if let Some(call) = first_call.filter(|_| index > last_user_text) {
            let expected = format!("sig-{turn}-0");
            if call["thoughtSignature"].as_str() != Some(expected.as_str()) {
                return Err(format!(
                    "Function call is missing a thought_signature in functionCall parts (contents[{index}]: expected \
                     {expected:?}, got {})",
                    call["thoughtSignature"]
                ));
            }
        }
        turn += 1;
    }
    for (t, tool) in request["tools"].as_array().into_iter().flatten().enumerate() {
        for (d, declaration) in tool["functionDeclarations"].as_array().into_iter().flatten().enumerate() {
            if declaration["name"].as_str().is_none_or(str::is_empty) {
                return Err(format!("tools[{t}].function_declarations[{d}].name: name cannot be empty"));
            }
            if let Some(parameters) = declaration.get("parameters") {
                check_schema(parameters, &format!("tools[{t}].function_declarations[{d}].parameters"))?;
            }
        }
    }
    Ok(())
}

fn check_part(part: &Value) -> Result<(), String> {
    let kinds = ["text", "inlineData", "fileData", "functionCall", "functionResponse"];
    let set: Vec<&str> = kinds.iter().copied().filter(|k| part.get(*k).is_some()).collect();
    if set.len() != 1 {
        return Err(format!("a part must hold exactly one of {kinds:?}, this one has {set:?}"));
    }
    if let Some(call) = part.get("functionCall")
        && call.get("args").is_some_and(|a| !a.is_object())
    {
        return Err("functionCall.args must be an object".into());
    }
    if let Some(data) = part.get("inlineData")
        && (!data["mimeType"].is_string() || !data["data"].is_string())
    {
        return Err("inlineData needs mimeType and data".into());
    }
    if let Some(file) = part.get("fileData")
        && (!file["mimeType"].is_string() || !file["fileUri"].is_string())
    {
        return Err("fileData needs mimeType and fileUri".into());
    }
    Ok(())
}

/// The function responses of turn `index` against the calls of the model turn before it.
fn check_responses(contents: &[Value], index: usize, responses: &[&Value]) -> Result<(), String> {
    let previous = index.checked_sub(1).map(|i| &contents[i]).filter(|c| c["role"] == "model");
    let mut calls: Vec<&str> = previous
        .and_then(|c| c["parts"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|p| p["functionCall"]["name"].as_str())
        .collect();
    let mut answered: Vec<&str> = responses.iter().filter_map(|r| r["name"].as_str()).collect();
    if responses.iter().any(|r| !r["response"].is_object()) {
        return Err(format!("contents[{index}]: functionResponse.response must be an object"));
    }
    if calls.len() != responses.len() {
        return Err(format!(
            "Please ensure that the number of function response parts is equal to the number of function call parts \
             of the function call turn (contents[{index}]: {} responses, {} calls).",
            responses.len(),
            calls.len()
        ));
    }
    calls.sort_unstable();
    answered.sort_unstable();
    if calls != answered {
        return Err(format!("contents[{index}]: function responses {answered:?} do not answer the calls {calls:?}"));
    }
    Ok(())
}

fn check_schema(schema: &Value, at: &str) -> Result<(), String> {
    let Some(object) = schema.as_object() else { return Ok(()) };
    for key in ["additionalProperties", "$schema"] {
        if object.contains_key(key) {
            return Err(format!("Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."));
        }
    }
    if object.get("type").is_some_and(|t| !t.is_string()) {
        return Err(format!("Invalid JSON payload received. Invalid value at '{at}.type': a type must be one name"));
    }
    for (name, property) in object.get("properties").and_then(Value::as_object).into_iter().flatten() {
        check_schema(property, &format!("{at}.properties[{name}]"))?;
    }
    if let Some(items) = object.get("items") {
        check_schema(items, &format!("{at}.items"))?;
    }
    for (i, option) in object.get("anyOf").and_then(Value::as_array).into_iter().flatten().enumerate() {
        check_schema(option, &format!("{at}.anyOf[{i}]"))?;
    }
    Ok(())
}
