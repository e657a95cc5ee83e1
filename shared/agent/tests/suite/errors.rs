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
