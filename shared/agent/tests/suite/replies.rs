//! How the model's final text is handled: empty answers and tool calls written as text.

use super::{Agent, COUNTER, last_message, limits, messages, user_texts};
use minibot_agent::{CONTINUE_CUT_ANSWER, EMPTY_ANSWER_REPLY, STILL_CUT_NOTE, StopReason};
use minibot_test_support::{Reply, Script};
use serde_json::json;

/// What the agent tells a model that wrote a `<tool_call>` into its text.
const TEXT_TOOL_CALL_NUDGE: &str = "Please use the tool calling interface instead of embedding tool calls in text.";

#[tokio::test]
async fn a_blank_answer_is_replaced() {
    let agent = Agent::start(vec![Script::new("say nothing", vec![Reply::text("  \n ")])]).await;
    let outcome = agent.run("say nothing", limits()).await.unwrap();
    assert_eq!(outcome.answer, EMPTY_ANSWER_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(agent.requests().len(), 1);
}

#[tokio::test]
async fn a_missing_content_is_an_empty_answer() {
    let body = json!({
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": null }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10 }
    });
    let agent = Agent::start(vec![Script::new("null content", vec![Reply::Raw(body.to_string())])]).await;
    let outcome = agent.run("null content", limits()).await.unwrap();
    assert_eq!(outcome.answer, EMPTY_ANSWER_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.usage.total_tokens, 10);
}

#[tokio::test]
async fn a_tool_call_written_as_text_gets_a_nudge_and_then_runs() {
    let written = r#"<tool_call>{"name": "counter", "arguments": {"n": 1}}</tool_call>"#;
    let agent = Agent::start(vec![
        Script::new("count once", vec![Reply::text(written)]),
        Script::new(TEXT_TOOL_CALL_NUDGE, vec![Reply::tool(COUNTER, json!({"n": 1})), Reply::text("counted")]),
    ])
    .await;
    let outcome = agent.run("count once", limits()).await.unwrap();
    assert_eq!(outcome.answer, "counted");
    assert_eq!(agent.calls(COUNTER), 1);
    let requests = agent.requests();
    assert_eq!(requests.len(), 3);
    // The model's text goes back as its own message, followed by the nudge as a user message.
    let sent = messages(&requests[1]);
    let tail = &sent[sent.len() - 2..];
    assert_eq!(tail[0], json!({"role": "assistant", "content": written}));
    assert_eq!(tail[1], json!({"role": "user", "content": TEXT_TOOL_CALL_NUDGE}));
}

#[tokio::test]
async fn the_text_tool_call_nudge_is_sent_at_most_twice() {
    let agent = Agent::start(vec![
        Script::new("stubborn", vec![Reply::text("<tool_call>first</tool_call>")]),
        Script::new(TEXT_TOOL_CALL_NUDGE, vec![Reply::text("<tool_call>again</tool_call>")]),
    ])
    .await;
    let outcome = agent.run("stubborn", limits()).await.unwrap();
    // After two nudges the text is taken as the answer.
    assert_eq!(outcome.answer, "<tool_call>again</tool_call>");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let requests = agent.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(user_texts(&requests[2]), ["stubborn", TEXT_TOOL_CALL_NUDGE, TEXT_TOOL_CALL_NUDGE]);
    assert_eq!(last_message(&requests[2])["content"], TEXT_TOOL_CALL_NUDGE);
    assert_eq!(agent.calls(COUNTER), 0);
}

/// An answer the model stopped at its answer-token limit.
fn cut(text: &str) -> Reply {
    let body = json!({
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "length" }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 }
    });
    Reply::Raw(body.to_string())
}

#[tokio::test]
async fn an_answer_cut_at_the_token_limit_is_continued_and_given_whole() {
    let agent = Agent::start(vec![
        Script::new("write a long poem", vec![cut("Roses are red, ")]),
        Script::new(CONTINUE_CUT_ANSWER, vec![Reply::text("violets are blue.")]),
    ])
    .await;
    let events = std::sync::Mutex::new(Vec::new());
    let record = |event: minibot_agent::AgentEvent| events.lock().unwrap().push(event);
    let outcome = agent.run_with("write a long poem", limits(), None, &record).await.unwrap();
    assert_eq!(outcome.answer, "Roses are red, violets are blue.");
    // The channels keep one stream of text: the continuation is not a new step for them.
    let steps =
        events.lock().unwrap().iter().filter(|e| matches!(e, minibot_agent::AgentEvent::StepStarted { .. })).count();
    assert_eq!(steps, 1);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let requests = agent.requests();
    assert_eq!(requests.len(), 2);
    // The model sees what it wrote, then the request to go on.
    let second = messages(&requests[1]);
    let tail: Vec<(String, String)> = second
        .iter()
        .rev()
        .take(2)
        .map(|m| (m["role"].as_str().unwrap().to_string(), m["content"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        tail,
        [("user".to_string(), CONTINUE_CUT_ANSWER.to_string()), ("assistant".into(), "Roses are red, ".into())]
    );
}

#[tokio::test]
async fn an_answer_that_keeps_being_cut_is_continued_three_times_then_given_as_it_is() {
    let agent =
        Agent::start(vec![Script::new("never stop", vec![cut("a")]), Script::new(CONTINUE_CUT_ANSWER, vec![cut("b")])])
            .await;
    let outcome = agent.run("never stop", limits()).await.unwrap();
    assert_eq!(outcome.answer, format!("abbb{STILL_CUT_NOTE}"), "the user is told the end is missing");
    assert_eq!(agent.requests().len(), 4);
}
