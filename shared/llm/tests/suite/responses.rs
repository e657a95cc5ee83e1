//! OpenAI Responses (`provider = "openai_responses"`) against the Responses fake, which refuses what OpenAI
//! would refuse: a tool loop whole and chained by `previous_response_id` (with its fallback when the server
//! forgot the chain), streaming, broken tool arguments, retries, context-length errors, usage, images, the
//! prompt cache key and xAI's search tools.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, ChatResponse, ContentPart, LlmError, Message, ToolSpec};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn client(llm: &ScriptedLlm, extra: &str) -> std::sync::Arc<dyn ChatProvider> {
    let toml = format!(
        "[llm]\nprovider = \"openai_responses\"\nbase_url = \"{}\"\napi_key = \"sk-resp-test\"\nmodel = \"gpt-5\"\n\
         retry_delay_seconds = 0.01\n{extra}",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: std::sync::Arc::new(json!({ "type": "object", "properties": { "city": { "type": "string" } } })),
    }
}

fn ask(system: &str, text: &str) -> ChatRequest {
    ChatRequest {
        model: "gpt-5".into(),
        messages: vec![Message::System(system.into()), Message::User(text.into())],
        tools: vec![tool("get_weather"), tool("get_time")],
        ..ChatRequest::default()
    }
}

/// The request after `answer`: its assistant message, then one result per tool call.
fn follow_up(request: &ChatRequest, answer: &ChatResponse) -> ChatRequest {
    let mut next = request.clone();
    next.messages.push(answer.to_message());
    for call in &answer.tool_calls {
        next.messages.push(Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("{} done", call.name),
        });
    }
    next
}

fn two_tools_then(text: &str, user: &str) -> Script {
    Script::new(
        user,
        vec![
            Reply::tools_raw(&[("get_weather", r#"{"city":"Oslo"}"#), ("get_time", r#"{"zone":"CET"}"#)]),
            Reply::text(text),
        ],
    )
}

async fn stream(client: &dyn ChatProvider, request: &ChatRequest) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let shown = Mutex::new(Vec::new());
    let sink = |piece: &str| shown.lock().unwrap().push(piece.to_string());
    let answer = client.stream(request, &sink).await;
    (answer, shown.into_inner().unwrap())
}

fn types(input: &Value) -> Vec<&str> {
    input.as_array().unwrap().iter().map(|item| item["type"].as_str().unwrap_or("?")).collect()
}

#[tokio::test]
async fn a_two_tool_turn_sends_the_whole_conversation_with_its_reasoning() {
    let llm = ScriptedLlm::start(vec![two_tools_then("Sunny, 14:00", "weather?")]).await;
    let client = client(&llm, "[llm.extra_headers]\nx-team = \"bots\"\n");
    let first = ask("You are terse.", "weather?");
    let answer = client.complete(&first).await.unwrap();
    let names: Vec<&str> = answer.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
    assert_eq!(answer.tool_calls[0].arguments, r#"{"city":"Oslo"}"#);
    assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(answer.reasoning.as_deref(), Some("Planning the tool calls."));

    let second = follow_up(&first, &answer);
    let done = client.complete(&second).await.unwrap();
    assert_eq!(done.content.as_deref(), Some("Sunny, 14:00"));

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[0];
    assert_eq!(body["instructions"], "You are terse.", "the system prompt travels as instructions");
    assert_eq!(
        body["input"],
        json!([{ "type": "message", "role": "user",
                                       "content": [{ "type": "input_text", "text": "weather?" }] }])
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "get_weather", "tools are flat: {}", body["tools"]);
    assert_eq!(body["tools"][1]["name"], "get_time");
    assert_eq!((&body["store"], &body["include"]), (&json!(false), &json!(["reasoning.encrypted_content"])));

    let body = &requests[1];
    assert!(body.get("previous_response_id").is_none(), "{body}");
    assert_eq!(
        types(&body["input"]),
        ["message", "reasoning", "function_call", "function_call", "function_call_output", "function_call_output"]
    );
    let input = &body["input"];
    assert_eq!(input[1]["encrypted_content"], "encrypted-1", "the reasoning goes back as it came");
    let ids = |kind: &str| -> Vec<Value> {
        input.as_array().unwrap().iter().filter(|i| i["type"] == kind).map(|i| i["call_id"].clone()).collect()
    };
    assert_eq!(ids("function_call"), [json!(answer.tool_calls[0].id), json!(answer.tool_calls[1].id)]);
    assert_eq!(ids("function_call_output"), ids("function_call"));
    assert_eq!(input[4]["output"], "get_weather done");

    assert_eq!(llm.authorizations(), ["Bearer sk-resp-test", "Bearer sk-resp-test"]);
    assert!(llm.headers().iter().all(|h| h.get("x-team").map(String::as_str) == Some("bots")));
}

#[tokio::test]
async fn a_chained_tool_loop_sends_only_the_tool_outputs_after_the_previous_response() {
    let llm = ScriptedLlm::start(vec![
        two_tools_then("Sunny", "weather?"),
        Script::new("thanks", vec![Reply::text("any time")]),
    ])
    .await;
    let client = client(&llm, "main_responses_state_mode = \"previous_response_id\"\n");
    let first = ChatRequest { chain_key: Some("telegram:7".into()), ..ask("You are terse.", "weather?") };
    let answer = client.complete(&first).await.unwrap();
    let second = follow_up(&first, &answer);
    let done = client.complete(&second).await.unwrap();
    assert_eq!(done.content.as_deref(), Some("Sunny"), "the fake resolved the chain to the whole conversation");

    let mut third = second.clone();
    third.messages.push(done.to_message());
    third.messages.push(Message::User("thanks".into()));
    assert_eq!(client.complete(&third).await.unwrap().content.as_deref(), Some("any time"));

    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["store"], true);
    assert!(requests[0].get("previous_response_id").is_none());
    assert_eq!(requests[1]["previous_response_id"], "resp_1");
    assert_eq!(types(&requests[1]["input"]), ["function_call_output", "function_call_output"]);
    assert_eq!(requests[1]["instructions"], "You are terse.", "instructions are not carried over by the server");
    assert_eq!(requests[2]["previous_response_id"], "resp_2");
    assert_eq!(
        requests[2]["input"],
        json!([{ "type": "message", "role": "user",
                                               "content": [{ "type": "input_text", "text": "thanks" }] }])
    );
}

#[tokio::test]
async fn a_changed_system_prompt_sends_everything_again() {
    let llm = ScriptedLlm::start(vec![two_tools_then("Sunny", "weather?")]).await;
    let client = client(&llm, "");
    let first = ChatRequest { chain_key: Some("telegram:7".into()), ..ask("You are terse.", "weather?") };
    let answer = client.complete(&first).await.unwrap();
    let mut second = follow_up(&first, &answer);
    second.messages[0] = Message::System("You are verbose now.".into());
    assert_eq!(client.complete(&second).await.unwrap().content.as_deref(), Some("Sunny"));
    let body = &llm.requests()[1];
    assert!(body.get("previous_response_id").is_none(), "{body}");
    assert_eq!(body["instructions"], "You are verbose now.");
    assert_eq!(
        types(&body["input"]),
        ["message", "function_call", "function_call", "function_call_output", "function_call_output"]
    );
}

#[tokio::test]
async fn a_forgotten_previous_response_falls_back_to_the_whole_conversation_once() {
    let llm = ScriptedLlm::start(vec![two_tools_then("Sunny", "weather?")]).await;
    let client = client(&llm, "retry_attempts = 0\n");
    let first = ChatRequest { chain_key: Some("telegram:7".into()), ..ask("You are terse.", "weather?") };
    let answer = client.complete(&first).await.unwrap();
    llm.forget_responses();
    let second = follow_up(&first, &answer);
    let (done, shown) = stream(&*client, &second).await;
    assert_eq!(done.unwrap().content.as_deref(), Some("Sunny"));
    assert_eq!(shown.concat(), "Sunny");

    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "the chained request, refused, then the whole conversation");
    assert_eq!(requests[1]["previous_response_id"], "resp_1");
    assert!(requests[2].get("previous_response_id").is_none());
    assert_eq!(
        types(&requests[2]["input"]),
        ["message", "function_call", "function_call", "function_call_output", "function_call_output"]
    );
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_and_streamed_calls_come_out_whole() {
    let llm = ScriptedLlm::start(vec![
        Script::new("hello", vec![Reply::text("Hello there, how are you?")]),
        two_tools_then("done", "weather?"),
    ])
    .await;
    let client = client(&llm, "");
    let (answer, shown) = stream(&*client, &ask("s", "hello")).await;
    let answer = answer.unwrap();
    assert!(shown.len() >= 3, "{shown:?}");
    assert_eq!(shown.concat(), "Hello there, how are you?");
    assert_eq!(answer.content.as_deref(), Some("Hello there, how are you?"));
    assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    assert_eq!((answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens), (10, 5, 15));
    assert_eq!(llm.requests()[0]["stream"], true);

    let (answer, shown) = stream(&*client, &ask("s", "weather?")).await;
    let answer = answer.unwrap();
    assert!(shown.is_empty(), "{shown:?}");
    let calls: Vec<(&str, &str)> = answer.tool_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("get_weather", r#"{"city":"Oslo"}"#), ("get_time", r#"{"zone":"CET"}"#)]);
    assert!(answer.replay.is_some(), "the completed response's reasoning is kept for the follow-up");
}

#[tokio::test]
async fn arguments_that_are_not_json_reach_the_call_as_text() {
    let broken = r#"{"city": "Oslo", "note": "unterminated"#;
    let llm = ScriptedLlm::start(vec![Script::new("write", vec![Reply::tools_raw(&[("get_weather", broken)])])]).await;
    let client = client(&llm, "");
    let whole = client.complete(&ask("s", "write")).await.unwrap();
    assert_eq!(whole.tool_calls.len(), 1);
    assert_eq!(whole.tool_calls[0].arguments, broken);
    let (streamed, _) = stream(&*client, &ask("s", "write")).await;
    assert_eq!(streamed.unwrap().tool_calls[0].arguments, broken);
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_and_retry_after_is_honoured() {
    let rate_limited = json!({ "error": { "message": "Rate limit reached for gpt-5", "type": "requests",
                                          "param": null, "code": "rate_limit_exceeded" } });
    let llm = ScriptedLlm::start(vec![Script::new("again", vec![Reply::text("made it")]).fail_first(vec![
        Reply::Status(429, rate_limited.to_string()),
        Reply::Status(503, "upstream overloaded".into()),
    ])])
    .await;
    llm.set_retry_after("0.3");
    let started = Instant::now();
    let answer = client(&llm, "").complete(&ask("s", "again")).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("made it"));
    assert_eq!(llm.requests().len(), 3);
    assert!(started.elapsed() >= Duration::from_millis(300), "waited as asked: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_context_length_error_is_not_retried() {
    let too_long = json!({ "error": { "message": "Your input exceeds the context window of this model.",
                                      "type": "invalid_request_error", "param": "input",
                                      "code": "context_length_exceeded" } });
    let llm = ScriptedLlm::start(vec![Script::new("long", vec![Reply::Status(400, too_long.to_string())])]).await;
    let error = client(&llm, "").complete(&ask("s", "long")).await.unwrap_err();
    assert!(matches!(error, LlmError::ContextLength(_)), "{error:?}");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_context_length_failure_inside_a_stream_is_not_retried() {
    let failed = json!({ "type": "response.failed", "response": { "id": "resp_x", "status": "failed", "output": [],
        "error": { "code": "context_length_exceeded", "message": "Your input exceeds the context window." } } });
    let body = format!("event: response.failed\ndata: {failed}\n\n");
    let llm = ScriptedLlm::start(vec![Script::new("long", vec![Reply::Raw(body)])]).await;
    let (answer, _) = stream(&*client(&llm, ""), &ask("s", "long")).await;
    assert!(matches!(answer, Err(LlmError::ContextLength(_))), "{answer:?}");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn an_image_becomes_an_input_image_part() {
    let llm = ScriptedLlm::start(vec![Script::new("look", vec![Reply::text("a red dot")])]).await;
    let mut request = ask("s", "look");
    request.messages.push(Message::UserParts(vec![
        ContentPart::Text("dot.png:".into()),
        ContentPart::image_data("image/png", b"\x89PNG\r\n\x1a\nfake"),
    ]));
    let answer = client(&llm, "").complete(&request).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("a red dot"));
    assert_eq!(
        llm.requests()[0]["input"][1],
        json!({ "type": "message", "role": "user", "content": [
            { "type": "input_text", "text": "dot.png:" },
            { "type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgpmYWtl", "detail": "auto" },
        ] })
    );
}

#[tokio::test]
async fn the_prompt_cache_key_and_reasoning_settings_are_sent_as_configured() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let request = ChatRequest {
        cache_key: Some("telegram:42".into()),
        reasoning_effort: Some("high".into()),
        max_tokens: Some(900),
        ..ask("s", "hi")
    };
    let extra = "reasoning_summary = \"auto\"\nprompt_cache_retention = \"24h\"\n";
    client(&llm, extra).complete(&request).await.unwrap();
    client(&llm, "prompt_cache_enabled = false\n").complete(&request).await.unwrap();
    let requests = llm.requests();
    assert_eq!(requests[0]["prompt_cache_key"], "telegram:42");
    assert_eq!(requests[0]["prompt_cache_retention"], "24h");
    assert_eq!(requests[0]["reasoning"], json!({ "effort": "high", "summary": "auto" }));
    assert_eq!(requests[0]["max_output_tokens"], 900);
    assert!(requests[1].get("prompt_cache_key").is_none(), "{}", requests[1]);
    assert_eq!(requests[1]["reasoning"], json!({ "effort": "high" }));
}

#[tokio::test]
async fn xai_search_tools_are_declared_when_enabled() {
    let llm = ScriptedLlm::start(vec![Script::new("news", vec![Reply::text("here")])]).await;
    let extra = r#"
[llm.xai]
web_search_enabled = true
x_search_enabled = true
[llm.xai.web_search]
allowed_domains = ["x.ai", "grokipedia.com"]
enable_image_understanding = true
[llm.xai.x_search]
excluded_x_handles = ["spam"]
from_date = "2025-01-01"
enable_video_understanding = true
"#;
    client(&llm, extra).complete(&ask("s", "news")).await.unwrap();
    client(&llm, "").complete(&ask("s", "news")).await.unwrap();
    let requests = llm.requests();
    let tools = requests[0]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4, "{tools:?}");
    assert_eq!(
        tools[2],
        json!({ "type": "web_search", "filters": { "allowed_domains": ["x.ai", "grokipedia.com"] },
                "enable_image_understanding": true })
    );
    assert_eq!(
        tools[3],
        json!({ "type": "x_search", "excluded_x_handles": ["spam"], "from_date": "2025-01-01",
                "enable_video_understanding": true })
    );
    let plain: Vec<&Value> = requests[1]["tools"].as_array().unwrap().iter().collect();
    assert!(plain.iter().all(|t| t["type"] == "function"), "{plain:?}");
}

/// The fake refuses what OpenAI refuses, so a client that sends a wrong shape fails the tests above.
#[tokio::test]
async fn the_fake_refuses_requests_openai_would_refuse() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let url = format!("{}/responses", llm.base_url());
    let http = reqwest::Client::new();
    let user = json!({ "role": "user", "content": [{ "type": "input_text", "text": "hi" }] });
    let call = json!({ "type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}" });
    let output = json!({ "type": "function_call_output", "call_id": "c1", "output": "r" });
    let refused = [
        (json!({ "model": "m", "input": [user, output] }), "No tool call found"),
        (json!({ "model": "m", "input": [user, call] }), "No tool output found"),
        (
            json!({ "model": "m", "input": [user], "tools": [{ "type": "function", "function": { "name": "t" } }] }),
            "tools[0].function",
        ),
        (json!({ "model": "m", "input": [user], "previous_response_id": "resp_404" }), "previous_response_not_found"),
        (json!({ "model": "m", "input": [user, { "type": "reasoning", "summary": [] }] }), "encrypted_content"),
        (json!({ "model": "m", "input": [{ "role": "tool", "content": "x" }] }), "Supported values"),
        (json!({ "model": "m" }), "'input'"),
    ];
    for (body, said) in refused {
        let response = http.post(&url).bearer_auth("k").json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 400, "{body}: {text}");
        assert!(text.contains(said) && text.contains("\"error\""), "{body}: {text}");
    }
    let no_key = http.post(&url).json(&json!({ "model": "m", "input": "hi" })).send().await.unwrap();
    assert_eq!(no_key.status().as_u16(), 401);
    let fine = http.post(&url).bearer_auth("k").json(&json!({ "model": "m", "input": [user] })).send().await.unwrap();
    assert_eq!(fine.status().as_u16(), 200);
}
