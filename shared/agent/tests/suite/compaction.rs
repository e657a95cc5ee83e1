//! A run whose conversation outgrows its budget mid-task: the messages after the task's prompt are summarised
//! and the run goes on from the summary; when the summary fails, old tool results are shortened instead and
//! the run still ends with its answer.

use super::{Agent, COUNTER};
use minibot_agent::AgentEvent;
use minibot_agent::compaction::{COMPACT_REQUEST, CONTINUE_AFTER_SUMMARY, CompactionOutcome, SHORTENED_RESULT};
use minibot_test_support::{Reply, Script};
use serde_json::json;

fn long_text() -> String {
    "The quick brown fox jumps over the lazy dog near the river bank. ".repeat(40)
}

fn compacted(events: &[AgentEvent]) -> Vec<CompactionOutcome> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compacted(outcome) => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_run_past_its_budget_goes_on_from_a_summary() {
    let agent = Agent::start(vec![
        Script::new(
            "do the long job",
            vec![Reply::tool(COUNTER, json!({ "notes": long_text() })), Reply::text("finished without a summary")],
        ),
        Script::containing(COMPACT_REQUEST, vec![Reply::text("SUMMARY: the counter ran once with long notes.")]),
        Script::new(CONTINUE_AFTER_SUMMARY, vec![Reply::text("finished after the summary")]),
    ])
    .await;
    let (outcome, events) = agent.run_compacting("do the long job", 300).await;
    assert_eq!(outcome.unwrap().answer, "finished after the summary");
    assert_eq!(agent.calls(COUNTER), 1);
    let outcomes = compacted(&events);
    assert!(
        matches!(&outcomes[..], [CompactionOutcome::Summarised { before_tokens, after_tokens, .. }]
        if after_tokens < before_tokens),
        "{outcomes:?}"
    );

    let requests = agent.requests();
    assert_eq!(requests.len(), 3, "the task's step, the summary, the step after it");
    let summary_request = requests[1]["messages"][1]["content"].as_str().unwrap();
    assert!(
        summary_request.contains("do the long job") || summary_request.contains("called counter"),
        "{summary_request}"
    );
    assert!(requests[1].get("tools").is_none(), "the summary request offers no tools");
    let after = requests[2]["messages"].as_array().unwrap();
    let texts: Vec<&str> = after.iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(texts[1], "do the long job", "the task's prompt stays");
    assert!(texts.iter().any(|t| t.contains("SUMMARY: the counter ran once")), "{texts:?}");
    assert_eq!(*texts.last().unwrap(), CONTINUE_AFTER_SUMMARY);
    assert!(!after.iter().any(|m| m["role"] == "tool"), "the old tool result is gone from the request");
}

#[tokio::test]
async fn a_failing_summary_shortens_old_results_and_the_run_still_answers() {
    let agent = Agent::start(vec![
        Script::new(
            "do the long job",
            vec![Reply::tool(COUNTER, json!({ "notes": long_text() })), Reply::text("finished anyway")],
        ),
        Script::containing(COMPACT_REQUEST, vec![Reply::Status(500, "the summary model is down".into())]),
    ])
    .await;
    let (outcome, events) = agent.run_compacting("do the long job", 300).await;
    assert_eq!(outcome.unwrap().answer, "finished anyway");
    let outcomes = compacted(&events);
    assert!(matches!(&outcomes[..], [CompactionOutcome::Failed { shortened: 1, .. }]), "{outcomes:?}");
    let requests = agent.requests();
    let last = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    let tool = last.iter().find(|m| m["role"] == "tool").expect("the call keeps its result");
    assert_eq!(tool["content"], SHORTENED_RESULT);
}
