//! Runs that end without an answer: a fatal tool error and a provider error.

use super::{Agent, COUNTER, FATAL, limits};
use minibot_agent::AgentError;
use minibot_llm::LlmError;
use minibot_test_support::{Reply, Script};

#[tokio::test]
async fn a_fatal_tool_error_ends_the_run_and_skips_the_remaining_calls() {
    let agent = Agent::start(vec![Script::new(
        "break it",
        vec![Reply::tools_raw(&[(FATAL, "{}"), (COUNTER, r#"{"n": 1}"#)]), Reply::text("never reached")],
    )])
    .await;
    let error = agent.run("break it", limits()).await.unwrap_err();
    let AgentError::FatalTool { tool, message } = error else {
        panic!("expected a fatal tool error, got {error:?}");
    };
    assert_eq!(tool, FATAL);
    assert_eq!(message, "the test tool gave up");
    assert_eq!(agent.calls(FATAL), 1);
    assert_eq!(agent.calls(COUNTER), 0);
    assert_eq!(agent.requests().len(), 1);
}

#[tokio::test]
async fn a_provider_error_ends_the_run() {
    let agent =
        Agent::start(vec![Script::new("bad request", vec![Reply::Status(400, "{\"error\":\"nope\"}".into())])]).await;
    let error = agent.run("bad request", limits()).await.unwrap_err();
    assert!(matches!(error, AgentError::Provider(LlmError::BadRequest { status: 400, .. })), "{error:?}");
    assert_eq!(agent.requests().len(), 1);
}

/// Attacker report (#23): a provider that gives two calls one id (or none) would leave a call without its result
/// in the next request, which strict APIs refuse for the rest of the chat. Each call gets its own id.
#[tokio::test]
async fn calls_sharing_one_id_get_their_own_and_each_is_answered() {
    let raw = serde_json::json!({ "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null, "tool_calls": [
            { "id": "dup", "type": "function", "function": { "name": super::COUNTER, "arguments": "{\"n\":1}" } },
            { "id": "dup", "type": "function", "function": { "name": super::COUNTER, "arguments": "{\"n\":2}" } },
            { "id": "", "type": "function", "function": { "name": super::COUNTER, "arguments": "{\"n\":3}" } }
        ] } }] });
    let agent = super::Agent::start(vec![minibot_test_support::Script::new(
        "count thrice",
        vec![minibot_test_support::Reply::Raw(raw.to_string()), minibot_test_support::Reply::text("counted")],
    )])
    .await;
    let outcome = agent.run("count thrice", super::limits()).await.unwrap();
    assert_eq!(outcome.answer, "counted");
    assert_eq!(agent.calls(super::COUNTER), 3);
    let second = agent.requests()[1].clone();
    let messages = second["messages"].as_array().unwrap();
    let ids: Vec<String> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let answered: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids.iter().collect::<std::collections::HashSet<_>>().len(), 3, "{ids:?}");
    assert_eq!(ids, answered);
}
