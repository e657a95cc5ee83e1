//! A [`ChatRequest`] as a generateContent body (<https://ai.google.dev/api/generate-content#request-body>,
//! <https://ai.google.dev/gemini-api/docs/function-calling>):
//! - system messages, wherever they stand, go into `systemInstruction`, one part each;
//! - the other messages become `contents` with roles `user` and `model`; consecutive turns of one role are
//!   merged (Gemini wants them to alternate), empty texts are left out, and a conversation that would start
//!   with the model (or has no turn at all) gets a short user turn first, as Gemini wants the user to open;
//! - an assistant's tool calls are `functionCall` parts carrying their thought signatures ([`Signatures`]);
//!   arguments that are not a JSON object go as `{"arguments": <the text>}`, since `args` must be an object;
//! - tool results are `functionResponse` parts of a `user` turn, named after the call they answer (found by
//!   `call_id`; the result's own name when no call matches). `response` must be an object: a result that is a
//!   JSON object goes as it is, anything else as `{"result": <its JSON value, or the text>}`;
//! - images: a `data:` URL is `inlineData`; an http(s) URL is `fileData` with the MIME type guessed from the
//!   extension (`image/jpeg` when there is none to go by);
//! - `reasoning_effort` is `thinkingConfig` ([`thinking`]).

use super::signatures::Signatures;
use super::wire::{
    Content, FileData, FunctionCall, FunctionDeclaration, FunctionResponse, GenerationConfig, InlineData, Part,
    Request, ThinkingConfig, Tool,
};
use crate::types::{ChatRequest, ContentPart, Message};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The user turn put first when the conversation would not start with one.
const OPENING: &str = "(earlier messages left out)";

pub(crate) fn request_body(request: &ChatRequest) -> Request {
    let mut system = Vec::new();
    let mut contents: Vec<Content> = Vec::new();
    // The name of each call by id, for the tool results that answer it.
    let mut call_names: HashMap<&str, &str> = HashMap::new();
    for message in &request.messages {
        match message {
            Message::System(text) if !text.is_empty() => system.push(Part::text(text.as_str())),
            Message::System(_) => {}
            Message::User(text) => push(&mut contents, "user", non_empty_text(text).into_iter().collect()),
            Message::UserParts(parts) => push(&mut contents, "user", parts.iter().filter_map(user_part).collect()),
            Message::Assistant { content, tool_calls, reasoning: _, replay } => {
                let signatures = Signatures::from_replay(replay.as_ref());
                let mut parts: Vec<Part> = Vec::new();
                if let Some(mut text) = content.as_deref().and_then(non_empty_text) {
                    text.thought_signature = signatures.text.clone();
                    parts.push(text);
                }
                for (index, call) in tool_calls.iter().enumerate() {
                    call_names.insert(&call.id, &call.name);
                    parts.push(Part {
                        function_call: Some(FunctionCall {
                            name: call.name.clone(),
                            args: Some(arguments(&call.arguments)),
                        }),
                        thought_signature: signatures.call(index),
                        ..Part::default()
                    });
                }
                push(&mut contents, "model", parts);
            }
            Message::Tool { call_id, name, content } => {
                let name = call_names.get(call_id.as_str()).copied().unwrap_or(name);
                let response = FunctionResponse { name: name.to_string(), response: tool_response(content) };
                push(&mut contents, "user", vec![Part { function_response: Some(response), ..Part::default() }]);
            }
        }
    }
    if contents.first().is_none_or(|c| c.role.as_deref() != Some("user")) {
        contents.insert(0, Content { role: Some("user".into()), parts: vec![Part::text(OPENING)] });
    }
    let declarations: Vec<FunctionDeclaration> = request
        .tools
        .iter()
        .map(|tool| FunctionDeclaration {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: super::schema::parameters(&tool.parameters),
        })
        .collect();
    let config = GenerationConfig {
        temperature: request.temperature,
        max_output_tokens: request.max_tokens,
        thinking_config: request.reasoning_effort.as_deref().map(thinking),
    };
    let unset = config.temperature.is_none() && config.max_output_tokens.is_none() && config.thinking_config.is_none();
    Request {
        system_instruction: (!system.is_empty()).then_some(Content { role: None, parts: system }),
        contents,
        tools: if declarations.is_empty() { Vec::new() } else { vec![Tool { function_declarations: declarations }] },
        generation_config: (!unset).then_some(config),
    }
}

/// `reasoning_effort` as a thinking budget, in tokens: `none`/`off` 0 (no thinking; Gemini 2.5 Pro cannot turn
/// it off and refuses 0), `minimal` 512, `low` 1024, `medium` 8192, `high` 24576, `xhigh`/`max` 32768, and
/// anything else (`auto`, `dynamic`) -1, the model's own choice. Thoughts are asked for whenever thinking is on,
/// so the answer's reasoning can be shown.
pub(crate) fn thinking(effort: &str) -> ThinkingConfig {
    let budget = match effort.trim().to_ascii_lowercase().as_str() {
        "none" | "off" | "disabled" => 0,
        "minimal" => 512,
        "low" => 1024,
        "medium" => 8192,
        "high" => 24_576,
        "xhigh" | "max" => 32_768,
        _ => -1,
    };
    ThinkingConfig { thinking_budget: budget, include_thoughts: budget != 0 }
}

/// Adds a turn, or merges it into the last one when that has the same role.
fn push(contents: &mut Vec<Content>, role: &str, parts: Vec<Part>) {
    if parts.is_empty() {
        return;
    }
    match contents.last_mut() {
        Some(last) if last.role.as_deref() == Some(role) => last.parts.extend(parts),
        _ => contents.push(Content { role: Some(role.into()), parts }),
    }
}

fn non_empty_text(text: &str) -> Option<Part> {
    (!text.is_empty()).then(|| Part::text(text))
}

fn user_part(part: &ContentPart) -> Option<Part> {
    match part {
        ContentPart::Text(text) => non_empty_text(text),
        ContentPart::ImageUrl(url) => Some(image(url)),
    }
}

fn image(url: &str) -> Part {
    if let Some(rest) = url.strip_prefix("data:") {
        return match rest.split_once(";base64,") {
            Some((mime, data)) => Part {
                inline_data: Some(InlineData {
                    mime_type: if mime.is_empty() { "image/jpeg".into() } else { mime.into() },
                    data: data.into(),
                }),
                ..Part::default()
            },
            // Only base64 `data:` URLs carry an image the API can take.
            None => Part::text("[an image that could not be sent: its data: URL is not base64]"),
        };
    }
    Part {
        file_data: Some(FileData { mime_type: mime_from_extension(url).into(), file_uri: url.into() }),
        ..Part::default()
    }
}

fn mime_from_extension(url: &str) -> &'static str {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let extension = path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "pdf" => "application/pdf",
        _ => "image/jpeg",
    }
}

/// A call's arguments as the object `args` must be.
fn arguments(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => object,
        _ if text.trim().is_empty() => json!({}),
        _ => json!({ "arguments": text }),
    }
}

/// A tool result as the object `functionResponse.response` must be.
fn tool_response(content: &str) -> Value {
    match serde_json::from_str::<Value>(content) {
        Ok(object @ Value::Object(_)) => object,
        Ok(other) => json!({ "result": other }),
        Err(_) => json!({ "result": content }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Replay, ToolCall, ToolSpec};

    fn body(request: &ChatRequest) -> Value {
        serde_json::to_value(request_body(request)).unwrap()
    }

    #[test]
    fn a_tool_turn_has_the_documented_shape() {
        let signed = Signatures { calls: vec![Some("sig-1".into()), None], text: None };
        let request = ChatRequest {
            model: "gemini-2.5-flash".into(),
            messages: vec![
                Message::System("be brief".into()),
                Message::User("weather?".into()),
                Message::Assistant {
                    content: Some("Looking.".into()),
                    tool_calls: vec![
                        ToolCall {
                            id: "call_0_0".into(),
                            name: "weather".into(),
                            arguments: r#"{"city":"Oslo"}"#.into(),
                        },
                        ToolCall { id: "call_0_1".into(), name: "clock".into(), arguments: "{\"tz\": ".into() },
                    ],
                    reasoning: None,
                    replay: signed.into_replay(),
                },
                Message::Tool { call_id: "call_0_0".into(), name: String::new(), content: r#"{"temp":3}"#.into() },
                Message::Tool { call_id: "call_0_1".into(), name: "clock".into(), content: "12:00".into() },
            ],
            tools: vec![ToolSpec {
                name: "weather".into(),
                description: "Weather now".into(),
                parameters: std::sync::Arc::new(
                    json!({ "type": "object", "properties": { "city": { "type": "string" } },
                                    "additionalProperties": false }),
                ),
            }],
            temperature: Some(0.2),
            max_tokens: Some(100),
            ..ChatRequest::default()
        };
        assert_eq!(
            body(&request),
            json!({
                "systemInstruction": { "parts": [{ "text": "be brief" }] },
                "contents": [
                    { "role": "user", "parts": [{ "text": "weather?" }] },
                    { "role": "model", "parts": [
                        { "text": "Looking." },
                        { "functionCall": { "name": "weather", "args": { "city": "Oslo" } }, "thoughtSignature": "sig-1" },
                        { "functionCall": { "name": "clock", "args": { "arguments": "{\"tz\": " } } }
                    ] },
                    { "role": "user", "parts": [
                        { "functionResponse": { "name": "weather", "response": { "temp": 3 } } },
                        { "functionResponse": { "name": "clock", "response": { "result": "12:00" } } }
                    ] }
                ],
                "tools": [{ "functionDeclarations": [{ "name": "weather", "description": "Weather now",
                    "parameters": { "type": "OBJECT", "properties": { "city": { "type": "STRING" } } } }] }],
                "generationConfig": { "temperature": 0.2, "maxOutputTokens": 100 }
            })
        );
    }

    #[test]
    fn turns_alternate_and_the_user_opens() {
        let request = ChatRequest {
            messages: vec![
                Message::assistant_text("earlier answer"),
                Message::User("one".into()),
                Message::User(String::new()),
                Message::User("two".into()),
                Message::assistant_text(""),
                Message::User("three".into()),
            ],
            ..ChatRequest::default()
        };
        let body = body(&request);
        let roles: Vec<&str> =
            body["contents"].as_array().unwrap().iter().map(|c| c["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "model", "user"]);
        assert_eq!(body["contents"][2]["parts"], json!([{ "text": "one" }, { "text": "two" }, { "text": "three" }]));
        assert!(body.get("generationConfig").is_none() && body.get("tools").is_none());
    }

    #[test]
    fn images_and_other_apis_replays() {
        let request = ChatRequest {
            messages: vec![
                Message::UserParts(vec![
                    ContentPart::Text("what is this".into()),
                    ContentPart::ImageUrl("data:image/png;base64,iVBORw0K".into()),
                    ContentPart::ImageUrl("https://example.org/cat.webp?size=2".into()),
                    ContentPart::ImageUrl("https://example.org/photo".into()),
                ]),
                Message::Assistant {
                    content: Some("a cat".into()),
                    tool_calls: Vec::new(),
                    reasoning: None,
                    replay: Some(Replay { api: "anthropic".into(), items: json!([{ "type": "thinking" }]) }),
                },
            ],
            ..ChatRequest::default()
        };
        let body = body(&request);
        assert_eq!(
            body["contents"][0]["parts"],
            json!([
                { "text": "what is this" },
                { "inlineData": { "mimeType": "image/png", "data": "iVBORw0K" } },
                { "fileData": { "mimeType": "image/webp", "fileUri": "https://example.org/cat.webp?size=2" } },
                { "fileData": { "mimeType": "image/jpeg", "fileUri": "https://example.org/photo" } }
            ])
        );
        assert_eq!(body["contents"][1]["parts"], json!([{ "text": "a cat" }]));
    }

    #[test]
    fn reasoning_effort_is_a_thinking_budget() {
        assert_eq!(thinking("high"), ThinkingConfig { thinking_budget: 24_576, include_thoughts: true });
        assert_eq!(thinking("none"), ThinkingConfig { thinking_budget: 0, include_thoughts: false });
        assert_eq!(thinking("auto").thinking_budget, -1);
        let request = ChatRequest {
            messages: vec![Message::User("hi".into())],
            reasoning_effort: Some("low".into()),
            ..ChatRequest::default()
        };
        assert_eq!(
            body(&request)["generationConfig"],
            json!({ "thinkingConfig": { "thinkingBudget": 1024, "includeThoughts": true } })
        );
    }
}
