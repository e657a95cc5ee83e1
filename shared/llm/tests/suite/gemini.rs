//! Google Gemini's generateContent through `provider_for`, against the scripted fake that checks each request the
//! way Gemini does: a two-tool turn and its follow-up (system instruction, declared tools, function responses
//! named after their calls, thought signatures sent back), streamed text and calls, broken arguments, retries
//! (with Gemini's `retryDelay` honoured), the context-length error, usage, images, the key header and extra
//! headers.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, ChatResponse, ContentPart, LlmError, Message, ToolSpec};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KEY: &str = "gm-test-key-123";

fn client(llm: &ScriptedLlm, extra: &str) -> Arc<dyn ChatProvider> {
    let toml = format!(
        "[llm]\nprovider = \"google\"\nbase_url = \"{}\"\napi_key = \"{KEY}\"\nmodel = \"gemini-2.5-flash\"\n\
         retry_delay_seconds = 0.01\n{extra}",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "gemini-2.5-flash".into(),
        messages: vec![Message::System("You are terse.".into()), Message::User(text.into())],
        ..ChatRequest::default()
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "weather".into(),
            description: "Current weather in a city".into(),
            parameters: std::sync::Arc::new(json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {
                    "city": { "type": "string" },
                    "units": { "type": ["string", "null"], "enum": ["metric", "imperial"], "default": "metric" }
                },
                "required": ["city"],
                "additionalProperties": false
            })),
        },
        ToolSpec {
            name: "clock".into(),
            description: "Local time".into(),
            parameters: std::sync::Arc::new(json!({ "type": "object", "properties": { "tz": { "type": "string" } },
                                "additionalProperties": false })),
        },
    ]
}

/// Streams `request`; the answer and the pieces shown.
async fn stream(client: &dyn ChatProvider, request: &ChatRequest) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let shown = Mutex::new(Vec::new());
    let sink = |piece: &str| shown.lock().unwrap().push(piece.to_string());
    let answer = client.stream(request, &sink).await;
    (answer, shown.into_inner().unwrap())
}

/// The request after `answer`: its calls answered with `results`.
fn follow_up(mut request: ChatRequest, answer: &ChatResponse, results: &[&str]) -> ChatRequest {
    request.messages.push(answer.to_message());
    for (call, result) in answer.tool_calls.iter().zip(results) {
        request.messages.push(Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: (*result).into(),
        });
    }
    request
}

fn two_calls() -> Reply {
    Reply::ToolCalls(vec![
        ("weather".into(), json!({ "city": "Oslo" }).to_string()),
        ("clock".into(), json!({ "tz": "Europe/Oslo" }).to_string()),
    ])
}

#[tokio::test]
async fn a_two_tool_turn_and_its_follow_up_have_gemini_s_shape() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "weather and time in Oslo?",
        vec![two_calls(), Reply::text("3°C, noon.")],
    )])
    .await;
    let client = client(&llm, "[llm.extra_headers]\nx-team = \"bots\"\n");
    let first = ChatRequest { tools: tools(), ..ask("weather and time in Oslo?") };
    let answer = client.complete(&first).await.unwrap();
    let calls: Vec<(&str, &str)> = answer.tool_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("weather", r#"{"city":"Oslo"}"#), ("clock", r#"{"tz":"Europe/Oslo"}"#)]);
    assert_ne!(answer.tool_calls[0].id, answer.tool_calls[1].id, "each call has its own id");
    assert_eq!(answer.replay.as_ref().map(|r| r.api.as_str()), Some("gemini"), "the signature is kept");

    let second = follow_up(first, &answer, &[r#"{"temp_c": 3}"#, "12:00"]);
    let done = client.complete(&second).await.unwrap();
    assert_eq!(done.content.as_deref(), Some("3°C, noon."));

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[1];
    assert_eq!(body["systemInstruction"], json!({ "parts": [{ "text": "You are terse." }] }));
    let declared: Vec<&Value> = body["tools"][0]["functionDeclarations"].as_array().unwrap().iter().collect();
    assert_eq!(declared[0]["name"], "weather");
    assert_eq!(
        declared[0]["parameters"]["properties"]["units"],
        json!({ "type": "STRING", "enum": ["metric", "imperial"], "nullable": true })
    );
    assert_eq!(declared[1]["name"], "clock");
    assert_eq!(
        body["contents"],
        json!([
            { "role": "user", "parts": [{ "text": "weather and time in Oslo?" }] },
            { "role": "model", "parts": [
                { "functionCall": { "name": "weather", "args": { "city": "Oslo" } }, "thoughtSignature": "sig-0-0" },
                { "functionCall": { "name": "clock", "args": { "tz": "Europe/Oslo" } } }
            ] },
            { "role": "user", "parts": [
                { "functionResponse": { "name": "weather", "response": { "temp_c": 3 } } },
                { "functionResponse": { "name": "clock", "response": { "result": "12:00" } } }
            ] }
        ])
    );
    for headers in llm.headers() {
        assert_eq!(headers.get("x-goog-api-key").map(String::as_str), Some(KEY), "the key goes in its header");
        assert!(!headers.contains_key("authorization"));
        assert_eq!(headers.get("x-team").map(String::as_str), Some("bots"), "extra_headers reach the server");
    }
    assert_eq!(llm.authorizations(), [KEY, KEY]);
}

#[tokio::test]
async fn a_follow_up_without_the_thought_signature_is_refused_by_gemini() {
    let llm = ScriptedLlm::start(vec![Script::new("both", vec![two_calls(), Reply::text("ok")])]).await;
    let client = client(&llm, "retry_attempts = 0\n");
    let first = ChatRequest { tools: tools(), ..ask("both") };
    let mut answer = client.complete(&first).await.unwrap();
    answer.replay = None;
    let error = client.complete(&follow_up(first, &answer, &["a", "b"])).await.unwrap_err();
    assert!(matches!(error, LlmError::BadRequest { status: 400, .. }), "{error:?}");
    assert!(error.to_string().contains("thought_signature"), "{error}");
}

#[tokio::test]
async fn a_model_named_as_a_path_is_called_once_under_models() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let request = ChatRequest { model: "models/gemini-2.5-flash".into(), ..ask("hi") };
    let answer = client(&llm, "").complete(&request).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("hello"));
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_and_streamed_calls_come_out_whole() {
    let llm = ScriptedLlm::start(vec![
        Script::new("tell me", vec![Reply::text("Gemini streams whole chunks of text.")]),
        Script::new("two tools", vec![two_calls()]),
    ])
    .await;
    let client = client(&llm, "");
    let (answer, shown) =
        stream(&*client, &ChatRequest { reasoning_effort: Some("low".into()), ..ask("tell me") }).await;
    let answer = answer.unwrap();
    assert!(shown.len() >= 3, "{shown:?}");
    assert_eq!(shown.concat(), "Gemini streams whole chunks of text.");
    assert_eq!(answer.content.as_deref(), Some("Gemini streams whole chunks of text."));
    assert_eq!(answer.reasoning.as_deref(), Some("Thinking it over."), "thoughts are reasoning, not answer text");
    assert_eq!((answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens), (10, 7, 17));
    assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        llm.requests()[0]["generationConfig"]["thinkingConfig"],
        json!({ "thinkingBudget": 1024, "includeThoughts": true })
    );

    let (answer, shown) = stream(&*client, &ChatRequest { tools: tools(), ..ask("two tools") }).await;
    let answer = answer.unwrap();
    assert!(shown.is_empty(), "a tool call shows no text: {shown:?}");
    let calls: Vec<(&str, &str)> = answer.tool_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("weather", r#"{"city":"Oslo"}"#), ("clock", r#"{"tz":"Europe/Oslo"}"#)]);
    assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn broken_arguments_reach_the_call_as_text_and_go_back_as_an_object() {
    let broken = r#"{"cmd": "ls -l"#;
    let llm = ScriptedLlm::start(vec![Script::new(
        "list files",
        vec![Reply::tools_raw(&[("bash", broken)]), Reply::tools_raw(&[("bash", broken)]), Reply::text("done")],
    )])
    .await;
    let client = client(&llm, "");
    let first = ask("list files");
    let answer = client.complete(&first).await.unwrap();
    assert_eq!(answer.tool_calls.len(), 1, "the call is not dropped");
    assert_eq!(answer.tool_calls[0].arguments, broken);
    let second = follow_up(first, &answer, &["error: arguments are not valid JSON"]);
    let (again, _) = stream(&*client, &second).await;
    let again = again.unwrap();
    assert_eq!(again.tool_calls[0].arguments, broken, "streamed too");
    let third = follow_up(second, &again, &["error: arguments are not valid JSON"]);
    assert_eq!(client.complete(&third).await.unwrap().content.as_deref(), Some("done"));
    let sent = &llm.requests()[2]["contents"][1]["parts"][0]["functionCall"];
    assert_eq!(sent["args"], json!({ "arguments": broken }), "Gemini takes only objects as args");
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_and_gemini_s_retry_delay_is_honoured() {
    let busy =
        r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#;
    let quota = r#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED",
        "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.4s"}]}}"#;
    let llm = ScriptedLlm::start(vec![
        Script::new("busy", vec![Reply::text("made it")])
            .fail_first(vec![Reply::Status(503, busy.into()), Reply::Status(429, quota.into())]),
    ])
    .await;
    let answer = client(&llm, "").complete(&ask("busy")).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("made it"));
    let arrivals = llm.arrivals();
    assert_eq!(arrivals.len(), 3);
    assert!(arrivals[1] - arrivals[0] < Duration::from_millis(300), "a 503 waits the configured delay");
    assert!(arrivals[2] - arrivals[1] >= Duration::from_millis(400), "the 429 waits its retryDelay");
}

#[tokio::test]
async fn a_blocked_prompt_or_a_malformed_call_is_a_clear_error() {
    let blocked = json!({ "promptFeedback": { "blockReason": "PROHIBITED_CONTENT" },
                          "usageMetadata": { "promptTokenCount": 10, "totalTokenCount": 10 } });
    let malformed = json!({ "candidates": [{ "finishReason": "MALFORMED_FUNCTION_CALL",
                                             "finishMessage": "Malformed function call: bash(cmd=" }] });
    let llm = ScriptedLlm::start(vec![
        Script::new("blocked", vec![Reply::Raw(blocked.to_string())]),
        Script::new("malformed", vec![Reply::text("second try")]).fail_first(vec![Reply::Raw(malformed.to_string())]),
    ])
    .await;
    let client = client(&llm, "");
    let error = client.complete(&ask("blocked")).await.unwrap_err();
    assert!(error.to_string().contains("Gemini blocked the prompt (PROHIBITED_CONTENT)"), "{error}");
    assert_eq!(llm.requests().len(), 1, "the same prompt is blocked again: not retried");
    let answer = client.complete(&ask("malformed")).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("second try"), "a malformed call is retried");
    assert_eq!(llm.requests().len(), 3);
}

#[tokio::test]
async fn a_context_length_error_is_not_retried() {
    let too_long = r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#;
    let llm = ScriptedLlm::start(vec![Script::new("long", vec![Reply::Status(400, too_long.into())])]).await;
    let error = client(&llm, "").complete(&ask("long")).await.unwrap_err();
    assert!(matches!(error, LlmError::ContextLength(_)), "{error:?}");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn usage_counts_thinking_as_output() {
    let llm = ScriptedLlm::start(vec![Script::new("count", vec![Reply::text("one two three")])]).await;
    let answer = client(&llm, "").complete(&ask("count")).await.unwrap();
    assert_eq!((answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens), (10, 7, 17));
}

#[tokio::test]
async fn images_become_inline_data_and_file_data() {
    let llm = ScriptedLlm::start(vec![Script::new("what is this?", vec![Reply::text("a red dot")])]).await;
    let png: &[u8] = b"\x89PNG\r\n\x1a\nfake";
    let request = ChatRequest {
        messages: vec![
            Message::User("what is this?".into()),
            Message::UserParts(vec![
                ContentPart::Text("dot.png:".into()),
                ContentPart::image_data("image/png", png),
                ContentPart::ImageUrl("https://example.org/pics/dot.webp".into()),
            ]),
        ],
        ..ask("")
    };
    let answer = client(&llm, "").complete(&request).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("a red dot"));
    assert_eq!(
        llm.requests()[0]["contents"],
        json!([{ "role": "user", "parts": [
            { "text": "what is this?" },
            { "text": "dot.png:" },
            { "inlineData": { "mimeType": "image/png", "data": "iVBORw0KGgpmYWtl" } },
            { "fileData": { "mimeType": "image/webp", "fileUri": "https://example.org/pics/dot.webp" } }
        ] }])
    );
}

#[tokio::test]
async fn a_missing_key_is_refused_as_gemini_refuses_it() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let toml = format!(
        "[llm]\nprovider = \"google\"\nbase_url = \"{}\"\napi_key = \"\"\nmodel = \"gemini-2.5-flash\"\n",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    let client = minibot_llm::provider_for(&config.main_llm()).unwrap();
    let error = client.complete(&ask("hi")).await.unwrap_err();
    assert!(matches!(error, LlmError::Unauthorized { status: 403, .. }), "{error:?}");
}

/// The fake is only worth its checks: requests Gemini refuses are refused, in Gemini's error shape.
#[tokio::test]
async fn the_fake_refuses_what_gemini_refuses() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let url = format!("{}/models/gemini-2.5-flash:generateContent", llm.base_url());
    let user = json!({ "role": "user", "parts": [{ "text": "hi" }] });
    let call = json!({ "role": "model", "parts": [{ "functionCall": { "name": "a", "args": {} } }] });
    let answer = |name: &str, response: Value| json!({ "role": "user", "parts": [{ "functionResponse": { "name": name, "response": response } }] });
    let declare = |parameters: Value| json!([{ "functionDeclarations": [{ "name": "a", "parameters": parameters }] }]);
    let refused = [
        (json!({ "contents": [] }), "contents is not specified"),
        (json!({ "contents": [{ "role": "assistant", "parts": [{ "text": "x" }] }] }), "valid role"),
        (json!({ "contents": [call.clone(), user.clone()] }), "start with a user turn"),
        (json!({ "contents": [user.clone(), user.clone()] }), "alternate"),
        (json!({ "contents": [user.clone(), call.clone(), answer("b", json!({}))] }), "do not answer the calls"),
        (json!({ "contents": [user.clone(), call.clone(), answer("a", json!("text"))] }), "must be an object"),
        (
            json!({ "contents": [user.clone()], "tools": declare(json!({ "type": "object", "additionalProperties": false,
                                                                           "properties": { "x": { "type": "string" } } })) }),
            "additionalProperties",
        ),
        (
            json!({ "contents": [user.clone()], "tools": declare(json!({ "type": "object",
                                                                           "properties": { "x": { "type": ["string", "null"] } } })) }),
            "one name",
        ),
    ];
    minibot_llm::install_crypto_provider();
    let http = reqwest::Client::new();
    for (body, said) in refused {
        let response = http.post(&url).header("x-goog-api-key", KEY).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["status"], "INVALID_ARGUMENT", "{body}");
        assert!(error["error"]["message"].as_str().unwrap().contains(said), "{body}: {error}");
    }
    let ok = http.post(&url).header("x-goog-api-key", KEY).json(&json!({ "contents": [user] })).send().await.unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn an_error_inside_a_stream_before_any_text_is_retried() {
    let overloaded =
        json!({ "error": { "code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE" } });
    let llm = ScriptedLlm::start(vec![
        Script::new("again", vec![Reply::text("second time lucky")])
            .fail_first(vec![Reply::Raw(format!("data: {overloaded}\r\n\r\n"))]),
    ])
    .await;
    let (answer, shown) = stream(&*client(&llm, ""), &ask("again")).await;
    assert_eq!(answer.unwrap().content.as_deref(), Some("second time lucky"));
    assert_eq!(shown.concat(), "second time lucky");
    assert_eq!(llm.requests().len(), 2);
}
