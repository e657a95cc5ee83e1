//! Chat Completions streamed: the answer's text arrives in pieces, tool calls that stream in parts come out
//! whole, usage is counted, and a stream that already showed text is never retried (the user would read it
//! twice) while one that failed before any text is.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, LlmError, Message};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::json;
use std::sync::Mutex;

fn client(llm: &ScriptedLlm) -> std::sync::Arc<dyn ChatProvider> {
    let toml = format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nmodel = \"m\"\nretry_delay_seconds = 0.01\n",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest { model: "m".into(), messages: vec![Message::User(text.into())], ..ChatRequest::default() }
}

/// Streams `request`; the answer and the pieces shown.
async fn stream(
    client: &dyn ChatProvider,
    request: &ChatRequest,
) -> (Result<minibot_llm::ChatResponse, LlmError>, Vec<String>) {
    let shown = Mutex::new(Vec::new());
    let sink = |piece: &str| shown.lock().unwrap().push(piece.to_string());
    let answer = client.stream(request, &sink).await;
    (answer, shown.into_inner().unwrap())
}

#[tokio::test]
async fn text_arrives_in_pieces_and_adds_up_to_the_answer() {
    let llm = ScriptedLlm::start(vec![Script::new("hello", vec![Reply::text("Hello there, how are you?")])]).await;
    let (answer, shown) = stream(&*client(&llm), &ask("hello")).await;
    let answer = answer.unwrap();
    assert!(shown.len() >= 3, "{shown:?}");
    assert_eq!(shown.concat(), "Hello there, how are you?");
    assert_eq!(answer.content.as_deref(), Some("Hello there, how are you?"));
    let body = &llm.requests()[0];
    // The usage chunk that ends the stream is read: the fake sizes it like the request and the answer.
    let (prompt, completion) =
        minibot_test_support::scripted_llm::estimated_tokens(body.to_string().len(), "Hello there, how are you?".len());
    assert_eq!(
        (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens),
        (prompt, completion, prompt + completion)
    );
    assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({ "include_usage": true }));
}

#[tokio::test]
async fn tool_calls_streamed_in_parts_come_out_whole_even_when_their_arguments_are_broken() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "files",
        vec![Reply::tools_raw(&[("read_file", r#"{"path": "notes/today.md"}"#), ("bash", r#"{"cmd": "ls -l"#)])],
    )])
    .await;
    let (answer, shown) = stream(&*client(&llm), &ask("files")).await;
    let answer = answer.unwrap();
    assert!(shown.is_empty(), "a tool call shows no text: {shown:?}");
    let calls: Vec<(&str, &str)> = answer.tool_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("read_file", r#"{"path": "notes/today.md"}"#), ("bash", r#"{"cmd": "ls -l"#)]);
    assert_ne!(answer.tool_calls[0].id, answer.tool_calls[1].id);
    assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn a_stream_that_fails_before_any_text_is_retried_and_one_that_showed_text_is_not() {
    let llm = ScriptedLlm::start(vec![
        Script::new("busy", vec![Reply::text("finally")]).fail_first(vec![Reply::Status(503, "overloaded".into())]),
        Script::new(
            "cut",
            vec![Reply::Raw(
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Half an ans\"}}]}\n\n\
                 data: {\"error\":{\"message\":\"upstream went away\"}}\n\n"
                    .into(),
            )],
        ),
    ])
    .await;
    let client = client(&llm);
    let (answer, shown) = stream(&*client, &ask("busy")).await;
    assert_eq!(answer.unwrap().content.as_deref(), Some("finally"));
    assert_eq!(shown.concat(), "finally");
    assert_eq!(llm.requests().len(), 2);

    let (answer, shown) = stream(&*client, &ask("cut")).await;
    let error = answer.unwrap_err();
    assert!(error.to_string().contains("upstream went away"), "{error}");
    assert_eq!(shown.concat(), "Half an ans");
    assert_eq!(llm.requests().len(), 3, "the cut stream was not sent again");
}

#[tokio::test]
async fn a_context_length_error_is_not_retried_when_streaming() {
    let too_long = json!({ "error": { "message": "This model's maximum context length is 8192 tokens.",
                                      "type": "invalid_request_error", "code": "context_length_exceeded" } });
    let llm = ScriptedLlm::start(vec![Script::new("long", vec![Reply::Status(400, too_long.to_string())])]).await;
    let (answer, _) = stream(&*client(&llm), &ask("long")).await;
    assert!(matches!(answer, Err(LlmError::ContextLength(_))), "{answer:?}");
    assert_eq!(llm.requests().len(), 1);
}

/// Attacker report (#23): one streamed event naming tool call 100,000,000,000 made the client allocate for it and
/// abort the process. Such an index is refused as an invalid answer.
#[tokio::test]
async fn a_stream_naming_a_far_tool_call_index_is_refused_not_allocated() {
    let event = r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":100000000000,"id":"x","function":{"name":"a","arguments":"{}"}}]}}]}"#;
    let llm =
        ScriptedLlm::start(vec![Script::new("far", vec![Reply::Raw(format!("{event}\n\ndata: [DONE]\n\n"))])]).await;
    let (answer, _) = stream(&*client(&llm), &ask("far")).await;
    let error = answer.unwrap_err();
    assert!(matches!(error, LlmError::InvalidResponse(_)), "{error:?}");
    assert!(error.to_string().contains("tool call 100000000000"), "{error}");
}

/// Attacker report (#23): a stream without line ends was scanned from its start at every chunk (minutes of CPU
/// for 16 MiB). One event is capped, and the error comes as soon as the cap is passed.
#[tokio::test]
async fn a_stream_without_line_ends_fails_at_the_event_cap() {
    let body = format!("data: {}", "a".repeat(6 << 20));
    let llm = ScriptedLlm::start(vec![Script::new("endless", vec![Reply::Raw(body)])]).await;
    let started = std::time::Instant::now();
    let (answer, _) = stream(&*client(&llm), &ask("endless")).await;
    let error = answer.unwrap_err();
    assert!(error.to_string().contains("longer than 4 MiB"), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}
