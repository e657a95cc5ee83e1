//! The request body of one Messages call: MiniBot's conversation turned into Anthropic's shape. System prompts go
//! to the top-level `system`; the rest becomes strictly alternating user/assistant messages of content blocks
//! (tool results are user blocks, tool calls assistant `tool_use` blocks, signed thinking goes back first in its
//! assistant message); prompt-cache marks close the tools, the system prompt and the conversation so far; a
//! reasoning effort becomes an extended-thinking budget.

use super::wire::{Block, EPHEMERAL, ImageSource, Request, Role, SystemBlock, Thinking, Tool, WireMessage};
use crate::types::{ChatRequest, ContentPart, Message, Replay};
use serde_json::Value;

/// The API name written into [`Replay::api`] and read back from it.
pub(crate) const REPLAY_API: &str = "anthropic";

/// `max_tokens` when none is configured. The Messages API requires the field (other APIs default to the model's
/// limit); 4096 is a whole answer for a chat turn or a tool call, and stays within every Claude model's output
/// limit, so a missing setting never turns into a rejected request.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// Where the conversation starts when the history given begins with an answer: the API wants a user message
/// first, and this says truthfully what happened without inventing anything the user said.
const HISTORY_CUT: &str = "(earlier messages of this conversation are not included)";

/// The extended-thinking budget for a reasoning effort. The steps follow Anthropic's guidance (start at the 1024
/// minimum, grow for harder work; past 32k the model rarely uses it all). `none` or an effort this build does not
/// know sends no thinking: the request still succeeds, only without extended thinking.
fn thinking_budget(effort: Option<&str>) -> Option<u32> {
    match effort?.trim().to_ascii_lowercase().as_str() {
        "minimal" => Some(MIN_THINKING_BUDGET),
        "low" => Some(2_048),
        "medium" => Some(8_192),
        "high" => Some(16_384),
        "xhigh" | "max" => Some(32_000),
        _ => None,
    }
}

/// `max_tokens` and the thinking budget. `max_tokens` counts thinking too and must exceed the budget. Without a
/// configured cap the answer keeps the default room on top of the budget; a configured cap is kept (it may be the
/// model's own output limit), thinking gets at most half of it, and none when that half is below the minimum.
fn token_limits(max_tokens: Option<u32>, effort: Option<&str>) -> (u32, Option<u32>) {
    let budget = thinking_budget(effort);
    match (max_tokens, budget) {
        (None, None) => (DEFAULT_MAX_TOKENS, None),
        (None, Some(budget)) => (budget + DEFAULT_MAX_TOKENS, Some(budget)),
        (Some(max), budget) => {
            let max = max.max(1);
            (max, budget.map(|b| b.min(max / 2)).filter(|b| *b >= MIN_THINKING_BUDGET))
        }
    }
}

/// The request body. `cache` puts prompt-cache marks on the tools, the system prompt and the newest user turn
/// (three of the four marks the API allows): a tool loop then reads the whole conversation so far from the cache
/// at every step.
pub(crate) fn request_body(request: &ChatRequest, cache: bool, stream: bool) -> Request<'_> {
    let (max_tokens, budget) = token_limits(request.max_tokens, request.reasoning_effort.as_deref());
    let mark = cache.then_some(EPHEMERAL);
    let mut system: Vec<SystemBlock<'_>> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System(text) if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        })
        .map(|text| SystemBlock { kind: "text", text, cache_control: None })
        .collect();
    if let Some(last) = system.last_mut() {
        last.cache_control = mark;
    }
    let mut tools: Vec<Tool<'_>> = request
        .tools
        .iter()
        .map(|tool| Tool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.parameters,
            cache_control: None,
        })
        .collect();
    if let Some(last) = tools.last_mut() {
        last.cache_control = mark;
    }
    let mut messages = conversation(&request.messages);
    if cache {
        mark_newest_turn(&mut messages);
    }
    Request {
        model: &request.model,
        max_tokens,
        system,
        messages,
        tools,
        // The API refuses a temperature other than 1 while thinking.
        temperature: request.temperature.filter(|_| budget.is_none()),
        thinking: budget.map(|budget_tokens| Thinking { kind: "enabled", budget_tokens }),
        stream,
    }
}

/// The messages after the system prompt, as alternating user/assistant messages.
fn conversation(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut wire: Vec<WireMessage<'_>> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::System(_) => continue,
            Message::User(text) => (Role::User, text_block(text).into_iter().collect()),
            Message::UserParts(parts) => (Role::User, parts.iter().filter_map(part).collect()),
            Message::Assistant { content, tool_calls, reasoning: _, replay } => {
                let replayed = Replay::items_for(replay.as_ref(), REPLAY_API).and_then(Value::as_array);
                let mut blocks: Vec<Block<'_>> = replayed.into_iter().flatten().map(Block::Replayed).collect();
                blocks.extend(content.as_deref().and_then(text_block));
                blocks.extend(tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                }));
                (Role::Assistant, blocks)
            }
            Message::Tool { call_id, name: _, content } => {
                (Role::User, vec![Block::ToolResult { tool_use_id: call_id, content, cache_control: None }])
            }
        };
        // An empty message is refused; the turns around it still alternate once merged.
        if blocks.is_empty() {
            continue;
        }
        match wire.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => wire.push(WireMessage { role, content: blocks }),
        }
    }
    for message in wire.iter_mut().filter(|m| m.role == Role::User) {
        // Tool results must open the user message that answers the calls (a stable sort keeps their order).
        message.content.sort_by_key(|block| !block.is_tool_result());
    }
    if wire.first().is_some_and(|m| m.role == Role::Assistant) {
        let opening = Block::Text { text: HISTORY_CUT, cache_control: None };
        wire.insert(0, WireMessage { role: Role::User, content: vec![opening] });
    }
    wire
}

/// A text block, or none for blank text (the API refuses blocks without visible text).
fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.trim().is_empty()).then_some(Block::Text { text, cache_control: None })
}

fn part(part: &ContentPart) -> Option<Block<'_>> {
    match part {
        ContentPart::Text(text) => text_block(text),
        ContentPart::ImageUrl(url) => Some(Block::Image { source: image_source(url), cache_control: None }),
    }
}

/// A `data:<mime>;base64,<data>` URL travels inline; any other URL is fetched by Anthropic.
fn image_source(url: &str) -> ImageSource<'_> {
    match url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,")) {
        Some((media_type, data)) => ImageSource::Base64 { media_type, data },
        None => ImageSource::Url { url },
    }
}

/// A tool call's arguments as the `input` object the API requires. Arguments that are not a JSON object go back as
/// `{}`: the API refuses anything else, and the tool result that follows already tells the model its arguments
/// did not parse (the agent loop reports that), so it can resend the call. Carrying the broken text in an invented
/// field instead would show the model a call shape its tool does not have, which it tends to copy.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => Value::Object(serde_json::Map::new()),
    }
}

/// Marks the end of the newest user turn, so the next step of a tool loop reads everything up to here from the
/// cache. An answer's last message is always a user turn; nothing is marked otherwise.
fn mark_newest_turn(messages: &mut [WireMessage<'_>]) {
    if let Some(last) = messages.last_mut().filter(|m| m.role == Role::User) {
        let _ = last.content.iter_mut().rev().any(Block::mark_cached);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ToolCall, ToolSpec};
    use serde_json::json;

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "read".into(), arguments: arguments.into() }
    }

    #[test]
    fn a_tool_loop_becomes_alternating_turns_with_results_answering_calls() {
        let thinking = json!([{ "type": "thinking", "thinking": "look first", "signature": "sig" }]);
        let request = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::System("be brief".into()),
                Message::System("tools help".into()),
                Message::User("read a and b".into()),
                Message::Assistant {
                    content: Some("reading".into()),
                    tool_calls: vec![call("t1", r#"{"path":"a"}"#), call("t2", "{\"path\": \"b")],
                    reasoning: Some("look first".into()),
                    replay: Some(Replay { api: REPLAY_API.into(), items: thinking.clone() }),
                },
                Message::Tool { call_id: "t1".into(), name: "read".into(), content: "A".into() },
                Message::Tool { call_id: "t2".into(), name: "read".into(), content: "bad arguments".into() },
            ],
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "reads".into(),
                parameters: std::sync::Arc::new(json!({})),
            }],
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(request_body(&request, true, false)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude", "max_tokens": DEFAULT_MAX_TOKENS, "stream": false,
                "system": [{ "type": "text", "text": "be brief" },
                           { "type": "text", "text": "tools help", "cache_control": { "type": "ephemeral" } }],
                "tools": [{ "name": "read", "description": "reads", "input_schema": {},
                            "cache_control": { "type": "ephemeral" } }],
                "messages": [
                    { "role": "user", "content": [{ "type": "text", "text": "read a and b" }] },
                    { "role": "assistant", "content": [
                        thinking[0],
                        { "type": "text", "text": "reading" },
                        { "type": "tool_use", "id": "t1", "name": "read", "input": { "path": "a" } },
                        { "type": "tool_use", "id": "t2", "name": "read", "input": {} }] },
                    { "role": "user", "content": [
                        { "type": "tool_result", "tool_use_id": "t1", "content": "A" },
                        { "type": "tool_result", "tool_use_id": "t2", "content": "bad arguments",
                          "cache_control": { "type": "ephemeral" } }] }
                ]
            })
        );
    }

    #[test]
    fn another_apis_replay_is_not_sent_and_a_history_opening_with_an_answer_gets_a_user_turn() {
        let request = ChatRequest {
            messages: vec![
                Message::Assistant {
                    content: Some("earlier answer".into()),
                    tool_calls: vec![],
                    reasoning: None,
                    replay: Some(Replay { api: "gemini".into(), items: json!([{ "thoughtSignature": "x" }]) }),
                },
                Message::User("next".into()),
                Message::User("  ".into()),
            ],
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(request_body(&request, false, false)).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                { "role": "user", "content": [{ "type": "text", "text": HISTORY_CUT }] },
                { "role": "assistant", "content": [{ "type": "text", "text": "earlier answer" }] },
                { "role": "user", "content": [{ "type": "text", "text": "next" }] }
            ])
        );
        assert!(body.get("system").is_none());
    }

    #[test]
    fn an_effort_buys_a_thinking_budget_below_max_tokens_and_drops_the_temperature() {
        assert_eq!(token_limits(None, None), (DEFAULT_MAX_TOKENS, None));
        assert_eq!(token_limits(None, Some("high")), (16_384 + DEFAULT_MAX_TOKENS, Some(16_384)));
        assert_eq!(token_limits(Some(8_000), Some("high")), (8_000, Some(4_000)));
        assert_eq!(token_limits(Some(1_500), Some("low")), (1_500, None), "too small a cap to think in");
        assert_eq!(token_limits(Some(64_000), Some("none")), (64_000, None));
        let request = ChatRequest {
            messages: vec![Message::User("think".into())],
            temperature: Some(0.2),
            reasoning_effort: Some("medium".into()),
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(request_body(&request, false, false)).unwrap();
        assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 8_192 }));
        assert!(body.get("temperature").is_none(), "{body}");
        let plain = ChatRequest { reasoning_effort: None, ..request };
        assert_eq!(serde_json::to_value(request_body(&plain, false, false)).unwrap()["temperature"], json!(0.2));
    }

    #[test]
    fn images_travel_inline_or_by_url() {
        let request = ChatRequest {
            messages: vec![Message::UserParts(vec![
                ContentPart::Text("what is this".into()),
                ContentPart::image_data("image/png", b"png"),
                ContentPart::ImageUrl("https://example.org/cat.jpg".into()),
            ])],
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(request_body(&request, false, false)).unwrap();
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                { "type": "text", "text": "what is this" },
                { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": "cG5n" } },
                { "type": "image", "source": { "type": "url", "url": "https://example.org/cat.jpg" } }
            ])
        );
    }
}
