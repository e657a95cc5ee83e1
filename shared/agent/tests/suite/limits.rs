//! Step, tool-call and time limits.

use super::{Agent, COUNTER, SLOW, limits, tool_results};
use minibot_agent::{Limits, MAX_STEPS_REPLY, MAX_TOOL_CALLS_REPLY, StopReason, TIMEOUT_REPLY};
use minibot_test_support::{Reply, Script};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn max_steps_ends_the_run_with_the_reference_message() {
    let agent = Agent::start(vec![Script::new(
        "keep going",
        vec![
            Reply::tool(COUNTER, json!({"n": 1})),
            Reply::tool(COUNTER, json!({"n": 2})),
            Reply::tool(COUNTER, json!({"n": 3})),
            Reply::text("never reached"),
        ],
    )])
    .await;
    let outcome = agent.run("keep going", Limits { max_steps: Some(2), ..limits() }).await.unwrap();
    assert_eq!(outcome.answer, MAX_STEPS_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::MaxSteps);
    assert_eq!(outcome.steps, 2);
    // Both allowed steps asked the model and ran their tool; no third request was made.
    let requests = agent.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(agent.calls(COUNTER), 2);
    assert_eq!(tool_results(&requests[1]), [json!({"ok": true, "echo": {"n": 1}})]);
}

#[tokio::test]
async fn max_tool_calls_stops_before_the_call_over_the_limit() {
    let agent = Agent::start(vec![Script::new(
        "three at once",
        vec![
            Reply::tools_raw(&[(COUNTER, r#"{"n":1}"#), (COUNTER, r#"{"n":2}"#), (COUNTER, r#"{"n":3}"#)]),
            Reply::text("never reached"),
        ],
    )])
    .await;
    let outcome = agent.run("three at once", Limits { max_tool_calls: Some(2), ..limits() }).await.unwrap();
    assert_eq!(outcome.answer, MAX_TOOL_CALLS_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::MaxToolCalls);
    assert_eq!(outcome.tool_calls, 2);
    assert_eq!(outcome.tools_used, [COUNTER, COUNTER]);
    assert_eq!(agent.calls(COUNTER), 2, "the third call must not run");
    assert_eq!(agent.requests().len(), 1, "the model is not asked again after the limit");
}

#[tokio::test]
async fn max_tool_calls_counts_across_steps() {
    let agent = Agent::start(vec![Script::new(
        "one at a time",
        vec![
            Reply::tool(COUNTER, json!({"n": 1})),
            Reply::tool(COUNTER, json!({"n": 2})),
            Reply::tool(COUNTER, json!({"n": 3})),
            Reply::text("never reached"),
        ],
    )])
    .await;
    let outcome = agent.run("one at a time", Limits { max_tool_calls: Some(2), ..limits() }).await.unwrap();
    assert_eq!(outcome.answer, MAX_TOOL_CALLS_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::MaxToolCalls);
    assert_eq!(agent.calls(COUNTER), 2);
    let requests = agent.requests();
    assert_eq!(requests.len(), 3, "the third step asks the model, then its call is refused");
    assert_eq!(
        tool_results(&requests[2]),
        [json!({"ok": true, "echo": {"n": 1}}), json!({"ok": true, "echo": {"n": 2}})]
    );
}

// Timing: the model (or tool) takes 60 s and the run allows 1 s; the test only asserts the run ended well before
// the slow part would have, so a busy machine has tens of seconds of margin.
#[tokio::test]
async fn a_slow_model_ends_the_run_with_the_timeout_message() {
    let agent =
        Agent::start(vec![Script::new("slow", vec![Reply::text("too late")]).delay(Duration::from_secs(60))]).await;
    let started = Instant::now();
    let outcome = agent.run("slow", Limits { timeout: Duration::from_secs(1), ..limits() }).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(outcome.answer, TIMEOUT_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::Timeout);
    assert!(elapsed >= Duration::from_secs(1), "ended before the limit: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(30), "the limit did not cut the model call short: {elapsed:?}");
    assert_eq!(outcome.steps, 1);
    assert_eq!(agent.requests().len(), 1);
}

#[tokio::test]
async fn the_time_limit_also_covers_a_running_tool() {
    let agent = Agent::start(vec![Script::new(
        "run the slow tool",
        vec![Reply::tool(SLOW, json!({"n": 1})), Reply::text("never reached")],
    )])
    .await;
    let started = Instant::now();
    let outcome = agent.run("run the slow tool", Limits { timeout: Duration::from_secs(1), ..limits() }).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(outcome.answer, TIMEOUT_REPLY);
    assert_eq!(outcome.stop_reason, StopReason::Timeout);
    assert!(elapsed < Duration::from_secs(30), "the limit did not cut the tool short: {elapsed:?}");
    assert_eq!(agent.calls(SLOW), 1, "the tool started");
    assert!(outcome.tools_used.is_empty(), "the tool never finished: {:?}", outcome.tools_used);
    assert_eq!(agent.requests().len(), 1);
}
