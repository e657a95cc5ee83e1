//! The loop's guards: identical iterations, repeated failures and tool calls whose arguments arrive cut off.

use super::{Agent, COUNTER, FAILING, last_message, limits, tool_results, user_texts};
use minibot_agent::{REPEATED_ITERATION_REPLY, StopReason, TRUNCATED_REPLY};
use minibot_test_support::{Reply, Script};
use serde_json::json;

const REPEATED_FAILURE_NUDGE: &str = "The tool `failing` just failed again with the same arguments.";

#[tokio::test]
async fn identical_iterations_stop_the_run() {
    let same = || Reply::tool(COUNTER, json!({"n": 1}));
    let agent = Agent::start(vec![Script::new("same again", vec![same(), same(), same(), same(), same()])]).await;
    let outcome = agent.run("same again", limits()).await.unwrap();
    assert_eq!(outcome.answer, REPEATED_ITERATION_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::RepeatedIteration);
    // The third identical iteration (same call, same result) ends the run.
    assert_eq!(agent.calls(COUNTER), 3);
    let requests = agent.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_results(&requests[2]), vec![json!({"ok": true, "echo": {"n": 1}}); 2]);
}

#[tokio::test]
async fn a_changed_call_resets_the_identical_iteration_count() {
    let call = |n: i64| Reply::tool(COUNTER, json!({"n": n}));
    let agent = Agent::start(vec![Script::new(
        "almost the same",
        vec![call(1), call(1), call(2), call(1), call(1), Reply::text("done")],
    )])
    .await;
    let outcome = agent.run("almost the same", limits()).await.unwrap();
    assert_eq!(outcome.answer, "done");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(agent.calls(COUNTER), 5);
    assert_eq!(agent.requests().len(), 6);
}

#[tokio::test]
async fn a_repeated_failure_tells_the_model_to_change_course() {
    let agent = Agent::start(vec![
        Script::new(
            "fail twice",
            vec![Reply::tool(FAILING, json!({"n": 1})), Reply::tool(FAILING, json!({"n": 1})), Reply::text("no nudge")],
        ),
        Script::containing(REPEATED_FAILURE_NUDGE, vec![Reply::text("That tool is broken, sorry.")]),
    ])
    .await;
    let outcome = agent.run("fail twice", limits()).await.unwrap();
    assert_eq!(outcome.answer, "That tool is broken, sorry.");
    assert_eq!(agent.calls(FAILING), 2);
    let requests = agent.requests();
    assert_eq!(requests.len(), 3);
    // The first failure goes back as an error result only; the second identical one also gets the nudge.
    assert_eq!(user_texts(&requests[1]), ["fail twice"]);
    let results = tool_results(&requests[1]);
    assert_eq!(results[0]["error_code"], "broken");
    assert!(results[0]["failure_signature"].is_string(), "{results:?}");
    let nudge = last_message(&requests[2]);
    assert_eq!(nudge["role"], "user");
    assert!(nudge["content"].as_str().unwrap().starts_with(REPEATED_FAILURE_NUDGE), "{nudge}");
}

#[tokio::test]
async fn failures_with_different_arguments_are_not_nudged() {
    let agent = Agent::start(vec![Script::new(
        "fail differently",
        vec![Reply::tool(FAILING, json!({"n": 1})), Reply::tool(FAILING, json!({"n": 2})), Reply::text("gave up")],
    )])
    .await;
    let outcome = agent.run("fail differently", limits()).await.unwrap();
    assert_eq!(outcome.answer, "gave up");
    assert_eq!(agent.calls(FAILING), 2);
    let requests = agent.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(user_texts(&requests[2]), ["fail differently"]);
}

#[tokio::test]
async fn arguments_cut_off_three_times_in_a_row_stop_as_truncated() {
    // Each is invalid JSON that the repair (closing braces) cannot save, and each differs, so only the
    // truncation guard is in play (no repeated-failure nudge, no identical iterations).
    let agent = Agent::start(vec![Script::new(
        "cut off",
        vec![
            Reply::tools_raw(&[(COUNTER, r#"{"n": 1,"#)]),
            Reply::tools_raw(&[(COUNTER, r#"{"n": 2,"#)]),
            Reply::tools_raw(&[(COUNTER, r#"{"n": 3,"#)]),
            Reply::text("never reached"),
        ],
    )])
    .await;
    let outcome = agent.run("cut off", limits()).await.unwrap();
    assert_eq!(outcome.answer, TRUNCATED_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::TruncatedToolCall);
    assert_eq!(agent.calls(COUNTER), 0, "a call with broken arguments never runs");
    let requests = agent.requests();
    assert_eq!(requests.len(), 3);
    let results = tool_results(&requests[2]);
    assert_eq!(results.len(), 2);
    for result in &results {
        assert_eq!(result["error_code"], "invalid_arguments", "{result}");
        assert!(result["error"].as_str().unwrap().contains("cut off"), "{result}");
    }
    assert_eq!(user_texts(&requests[2]), ["cut off"]);
}

#[tokio::test]
async fn a_response_with_one_valid_call_resets_the_truncation_count() {
    let agent = Agent::start(vec![Script::new(
        "partly cut off",
        vec![
            Reply::tools_raw(&[(COUNTER, r#"{"n": 1,"#)]),
            Reply::tools_raw(&[(COUNTER, r#"{"n": 2,"#)]),
            Reply::tools_raw(&[(COUNTER, r#"{"n": 3,"#), (COUNTER, r#"{"n": 4}"#)]),
            Reply::tools_raw(&[(COUNTER, r#"{"n": 5,"#)]),
            Reply::tools_raw(&[(COUNTER, r#"{"n": 6,"#)]),
            Reply::text("done"),
        ],
    )])
    .await;
    let outcome = agent.run("partly cut off", limits()).await.unwrap();
    assert_eq!(outcome.answer, "done");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(agent.calls(COUNTER), 1);
    assert_eq!(agent.requests().len(), 6);
}
