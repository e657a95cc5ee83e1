//! Anthropic Messages through `provider_for`, against the scripted fake that refuses what the real API refuses: a
//! tool loop with parallel calls and its follow-up, streaming, broken tool arguments, retries (and Retry-After),
//! the context-length error, token counts with the prompt cache, images, and signed thinking sent back in a tool
//! loop.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, ChatResponse, ContentPart, LlmError, Message, ToolSpec};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEY: &str = "sk-ant-test-key";

fn client(llm: &ScriptedLlm, extra: &str) -> std::sync::Arc<dyn ChatProvider> {
    let toml = format!(
        "[llm]\nprovider = \"claude\"\nbase_url = \"{}\"\napi_key = \"{KEY}\"\nmodel = \"claude-test\"\n\
         retry_delay_seconds = 0.01\n{extra}",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file".into(),
        parameters: std::sync::Arc::new(json!({ "type": "object", "properties": { "path": { "type": "string" } } })),
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "claude-test".into(),
        messages: vec![Message::System("You are terse.".into()), Message::User(text.into())],
        tools: vec![read_tool()],
        ..ChatRequest::default()
    }
}

/// The request that follows `answer`: its tool calls and one result per call.
fn follow_up(mut request: ChatRequest, answer: &ChatResponse) -> ChatRequest {
    request.messages.push(answer.to_message());
    for call in &answer.tool_calls {
        request.messages.push(Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("contents for {}", call.id),
        });
    }
    request
}

/// Streams `request`; the answer and the pieces shown.
async fn stream(client: &dyn ChatProvider, request: &ChatRequest) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let shown = Mutex::new(Vec::new());
    let sink = |piece: &str| shown.lock().unwrap().push(piece.to_string());
    let answer = client.stream(request, &sink).await;
    (answer, shown.into_inner().unwrap())
}

fn ids(blocks: &Value, kind: &str, field: &str) -> Vec<String> {
    blocks
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == kind)
        .map(|b| b[field].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn parallel_tool_calls_and_their_results_travel_in_anthropics_shape() {
    let calls = Reply::tools_raw(&[("read_file", r#"{"path":"a.txt"}"#), ("read_file", r#"{"path":"b.txt"}"#)]);
    let llm = ScriptedLlm::start(vec![Script::new("read both", vec![calls, Reply::text("a and b read")])]).await;
    let client = client(&llm, "extra_headers = { \"x-trace\" = \"t-42\" }\n");
    let request = ask("read both");
    let first = client.complete(&request).await.unwrap();
    assert_eq!(first.tool_calls.len(), 2, "{first:?}");
    assert_eq!(first.tool_calls[0].name, "read_file");
    assert_eq!(first.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
    assert_eq!(first.tool_calls[1].arguments, r#"{"path":"b.txt"}"#);
    assert_eq!(first.finish_reason.as_deref(), Some("tool_calls"));
    let call_ids: Vec<String> = first.tool_calls.iter().map(|c| c.id.clone()).collect();

    let second = client.complete(&follow_up(request, &first)).await.unwrap();
    assert_eq!(second.content.as_deref(), Some("a and b read"));
    assert_eq!(second.finish_reason.as_deref(), Some("stop"));

    let bodies = llm.requests();
    assert_eq!(bodies.len(), 2);
    let body = &bodies[1];
    assert_eq!(
        body["system"],
        json!([{ "type": "text", "text": "You are terse.", "cache_control": { "type": "ephemeral" } }])
    );
    assert_eq!(body["tools"][0]["name"], "read_file");
    assert_eq!(body["tools"][0]["input_schema"], *read_tool().parameters);
    assert_eq!(body["tools"][0]["cache_control"], json!({ "type": "ephemeral" }));
    assert_eq!(body["max_tokens"], 4096);
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "system stays out of messages; results are one user turn");
    assert_eq!(ids(&messages[1]["content"], "tool_use", "id"), call_ids);
    assert_eq!(messages[1]["content"][0]["input"], json!({ "path": "a.txt" }), "input is an object");
    assert_eq!(ids(&messages[2]["content"], "tool_result", "tool_use_id"), call_ids);
    assert_eq!(messages[2]["content"][1]["content"], format!("contents for {}", call_ids[1]));

    assert_eq!(llm.authorizations(), [KEY, KEY], "the key travels in x-api-key");
    for headers in llm.headers() {
        assert_eq!(headers.get("anthropic-version").map(String::as_str), Some("2023-06-01"));
        assert_eq!(headers.get("x-trace").map(String::as_str), Some("t-42"), "extra_headers reach the server");
        assert!(!headers.contains_key("authorization"), "no bearer token: {headers:?}");
    }
}

#[tokio::test]
async fn a_streamed_answer_shows_its_text_in_pieces_and_tool_input_comes_out_whole() {
    let text = "Streaming works, piece by piece, to the end.";
    let calls = Reply::tools_raw(&[("read_file", r#"{"path":"notes/today.md"}"#), ("read_file", r#"{"path":"x"}"#)]);
    let llm = ScriptedLlm::start(vec![
        Script::new("stream text", vec![Reply::text(text)]),
        Script::new("stream calls", vec![calls]),
    ])
    .await;
    let client = client(&llm, "");
    let (answer, shown) = stream(&*client, &ask("stream text")).await;
    let answer = answer.unwrap();
    assert!(shown.len() >= 3, "{shown:?}");
    assert_eq!(shown.concat(), text);
    assert_eq!(answer.content.as_deref(), Some(text));
    assert_eq!(llm.requests()[0]["stream"], true);

    let (answer, shown) = stream(&*client, &ask("stream calls")).await;
    let answer = answer.unwrap();
    assert!(shown.is_empty(), "{shown:?}");
    let arguments: Vec<&str> = answer.tool_calls.iter().map(|c| c.arguments.as_str()).collect();
    assert_eq!(arguments, [r#"{"path":"notes/today.md"}"#, r#"{"path":"x"}"#]);
    assert!(answer.tool_calls.iter().all(|c| c.id.starts_with("toolu_") && c.name == "read_file"));
}

#[tokio::test]
async fn broken_tool_arguments_arrive_as_text_and_the_loop_can_go_on() {
    let broken = r#"{"path": "a.txt", "mode": "#;
    let llm = ScriptedLlm::start(vec![
        Script::new("whole", vec![Reply::tools_raw(&[("read_file", broken)]), Reply::text("resent")]),
        Script::new("streamed", vec![Reply::tools_raw(&[("read_file", broken)])]),
    ])
    .await;
    let client = client(&llm, "");
    let request = ask("whole");
    let answer = client.complete(&request).await.unwrap();
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].arguments, broken);
    // The next request must still be one the API accepts: the call goes back with an object as its input.
    let next = client.complete(&follow_up(request, &answer)).await.unwrap();
    assert_eq!(next.content.as_deref(), Some("resent"));
    assert_eq!(llm.requests()[1]["messages"][1]["content"][0]["input"], json!({}));

    let (answer, _) = stream(&*client, &ask("streamed")).await;
    let answer = answer.unwrap();
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].arguments, broken);
}

fn anthropic_error(kind: &str, message: &str) -> String {
    json!({ "type": "error", "error": { "type": kind, "message": message } }).to_string()
}

#[tokio::test]
async fn rate_limits_and_overload_are_retried_until_the_answer_arrives() {
    let failures = vec![
        Reply::Status(429, anthropic_error("rate_limit_error", "Number of request tokens has exceeded your limit")),
        Reply::Status(529, anthropic_error("overloaded_error", "Overloaded")),
        Reply::Status(500, anthropic_error("api_error", "Internal server error")),
    ];
    let llm = ScriptedLlm::start(vec![Script::new("retry", vec![Reply::text("made it")]).fail_first(failures)]).await;
    let answer = client(&llm, "").complete(&ask("retry")).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("made it"));
    assert_eq!(llm.requests().len(), 4);
}

#[tokio::test]
async fn an_overload_reported_mid_stream_is_retried() {
    let overloaded = format!(
        "event: message_start\ndata: {}\n\nevent: error\ndata: {}\n\n",
        json!({ "type": "message_start", "message": { "usage": { "input_tokens": 10, "output_tokens": 1 } } }),
        anthropic_error("overloaded_error", "Overloaded")
    );
    let llm = ScriptedLlm::start(vec![
        Script::new("busy", vec![Reply::text("after the overload")]).fail_first(vec![Reply::Raw(overloaded)]),
    ])
    .await;
    let (answer, shown) = stream(&*client(&llm, ""), &ask("busy")).await;
    assert_eq!(answer.unwrap().content.as_deref(), Some("after the overload"));
    assert_eq!(shown.concat(), "after the overload");
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn a_retry_after_is_waited_for() {
    let limited = Reply::Status(429, anthropic_error("rate_limit_error", "slow down"));
    let llm =
        ScriptedLlm::start(vec![Script::new("wait", vec![Reply::text("waited")]).fail_first(vec![limited])]).await;
    llm.set_retry_after("1");
    let started = Instant::now();
    let answer = client(&llm, "").complete(&ask("wait")).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("waited"));
    let arrivals = llm.arrivals();
    assert_eq!(arrivals.len(), 2);
    assert!(arrivals[1] - arrivals[0] >= Duration::from_millis(950), "{:?}", arrivals[1] - arrivals[0]);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_prompt_too_long_is_a_context_length_error_after_one_request() {
    let too_long = anthropic_error("invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum");
    let llm = ScriptedLlm::start(vec![Script::new("huge", vec![Reply::Status(400, too_long)])]).await;
    let error = client(&llm, "").complete(&ask("huge")).await.unwrap_err();
    assert!(matches!(error, LlmError::ContextLength(_)), "{error:?}");
    assert!(error.to_string().contains("prompt is too long: 215000 tokens"), "{error}");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn usage_counts_cached_prompt_tokens_whole_and_streamed() {
    let llm = ScriptedLlm::start(vec![Script::new("count", vec![Reply::text("counted")])]).await;
    let client = client(&llm, "");
    // The fake reports 10 uncached input tokens, 20 written to and 30 read from the cache, 5 output tokens.
    let whole = client.complete(&ask("count")).await.unwrap();
    assert_eq!((whole.usage.prompt_tokens, whole.usage.completion_tokens, whole.usage.total_tokens), (60, 5, 65));
    let (streamed, _) = stream(&*client, &ask("count")).await;
    let streamed = streamed.unwrap();
    assert_eq!(streamed.usage, whole.usage);
}

#[tokio::test]
async fn an_image_becomes_an_inline_image_block() {
    let llm = ScriptedLlm::start(vec![Script::new("describe", vec![Reply::text("a cat")])]).await;
    let png = b"\x89PNG\r\n\x1a\nfake";
    let mut request = ask("describe");
    request.messages.insert(
        1,
        Message::UserParts(vec![ContentPart::Text("photo.png".into()), ContentPart::image_data("image/png", png)]),
    );
    let answer = client(&llm, "").complete(&request).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("a cat"));
    let content = &llm.requests()[0]["messages"][0]["content"];
    let image = content.as_array().unwrap().iter().find(|b| b["type"] == "image").expect("an image block");
    use base64::Engine as _;
    assert_eq!(
        image["source"],
        json!({ "type": "base64", "media_type": "image/png",
                "data": base64::engine::general_purpose::STANDARD.encode(png) })
    );
    assert_eq!(content[2]["text"], "describe", "the question follows in the same user turn");
}

#[tokio::test]
async fn signed_thinking_goes_back_first_in_a_tool_loop_whole_and_streamed() {
    let calls = || Reply::tools_raw(&[("read_file", r#"{"path":"a"}"#)]);
    let llm = ScriptedLlm::start(vec![Script::new("think", vec![calls(), Reply::text("thought it through")])]).await;
    let client = client(&llm, "");
    for streamed in [false, true] {
        let mut request = ask("think");
        request.reasoning_effort = Some("low".into());
        request.temperature = Some(0.3);
        let first = if streamed { stream(&*client, &request).await.0 } else { client.complete(&request).await };
        let first = first.unwrap();
        assert_eq!(first.reasoning.as_deref(), Some("Thinking about: think"), "streamed: {streamed}");
        assert_eq!(first.replay.as_ref().map(|r| r.api.as_str()), Some("anthropic"));
        // The fake refuses the follow-up unless the signed block opens the answer, unchanged.
        let next = follow_up(request, &first);
        let second = if streamed { stream(&*client, &next).await.0 } else { client.complete(&next).await };
        assert_eq!(second.unwrap().content.as_deref(), Some("thought it through"), "streamed: {streamed}");
    }
    let body = &llm.requests()[1];
    assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 2048 }));
    assert!(body.get("temperature").is_none(), "no temperature with thinking: {body}");
    assert!(body["max_tokens"].as_u64().unwrap() > 2048);
    assert_eq!(body["messages"][1]["content"][0]["type"], "thinking");
}

#[tokio::test]
async fn the_fake_refuses_requests_the_api_would_refuse() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let url = format!("{}/messages", llm.base_url());
    let post = |body: Value, key: Option<&'static str>| {
        let url = url.clone();
        async move {
            let mut request = reqwest::Client::new().post(url).header("anthropic-version", "2023-06-01").json(&body);
            if let Some(key) = key {
                request = request.header("x-api-key", key);
            }
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.json::<Value>().await.unwrap())
        }
    };
    let user = json!({ "role": "user", "content": "hi" });
    let valid = json!({ "model": "m", "max_tokens": 10, "messages": [user] });
    assert_eq!(post(valid.clone(), Some(KEY)).await.0, 200);
    let (status, body) = post(valid.clone(), None).await;
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("authentication_error")));
    let cases = [
        (json!({ "model": "m", "messages": [user] }), "max_tokens"),
        (json!({ "model": "m", "max_tokens": 10, "messages": [{ "role": "system", "content": "s" }, user] }), "system"),
        (json!({ "model": "m", "max_tokens": 10, "messages": [user, user] }), "alternate"),
        (
            json!({ "model": "m", "max_tokens": 10, "messages": [user,
                { "role": "assistant", "content": [{ "type": "tool_use", "id": "t1", "name": "x", "input": "{}" }] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t1", "content": "r" }] }] }),
            "valid dictionary",
        ),
        (
            json!({ "model": "m", "max_tokens": 10, "messages": [user,
                { "role": "assistant", "content": [{ "type": "tool_use", "id": "t1", "name": "x", "input": {} }] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t1", "content": "r" },
                                              { "type": "tool_result", "tool_use_id": "t2", "content": "r" }] }] }),
            "unexpected `tool_use_id`",
        ),
    ];
    for (request, named) in cases {
        let (status, body) = post(request.clone(), Some(KEY)).await;
        assert_eq!(status, 400, "{request}");
        assert_eq!(body["type"], "error");
        assert!(body["error"]["message"].as_str().unwrap().contains(named), "{request}: {body}");
    }
}
