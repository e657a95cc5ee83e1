//! A task's tool call that needs approval asks over the queue: the question arrives as an event of the task, the
//! answer goes back as a control message, and the call runs only on a yes. Silence denies.

use super::{Setup, ending, tool_results};
use minibot_protocol::{ControlKind, ControlMessage, WorkerEvent, WorkerEventKind};
use minibot_queue::TaskQueue;
use minibot_test_support::{Reply, Script};
use serde_json::json;
use std::time::{Duration, Instant};

const CLASSIFIER: &str = "[tools.safety_classifier]\nenabled = true\nmodel = \"classifier-model\"\n\
check_input = [\"calculate_expression\"]\ncheck_output = []\n";

fn scripts(prompt: &str) -> Vec<Script> {
    vec![
        Script::new(
            prompt,
            vec![Reply::tool("calculate_expression", json!({ "expression": "6*7" })), Reply::text("finished")],
        ),
        Script::containing(
            "Tool: calculate_expression",
            vec![Reply::text(r#"{"verdict": "unsafe", "reason": "the test says so"}"#)],
        ),
    ]
}

/// Events until the first approval question, which is returned.
async fn question(setup: &Setup) -> WorkerEvent {
    loop {
        let event = setup.next_event().await;
        if matches!(event.kind, WorkerEventKind::ApprovalRequest { .. }) {
            return event;
        }
        assert!(!event.is_terminal(), "the task ended without asking: {event:?}");
    }
}

fn approval_id(event: &WorkerEvent) -> String {
    match &event.kind {
        WorkerEventKind::ApprovalRequest { approval_id, .. } => approval_id.clone(),
        _ => unreachable!(),
    }
}

fn answer(event: &WorkerEvent, attempt: u32, approved: bool) -> ControlMessage {
    let kind = ControlKind::ApprovalResult { approval_id: approval_id(event), attempt, approved, reason: None };
    ControlMessage::new(&event.task_id, kind)
}

#[tokio::test]
async fn a_flagged_call_waits_for_the_chat_and_runs_once_approved() {
    let setup = Setup::start(scripts("compute with approval"), CLASSIFIER).await;
    let worker = setup.run("compute with approval", 60).await;
    let asked = question(&setup).await;
    match &asked.kind {
        WorkerEventKind::ApprovalRequest { tool, detail, reason, .. } => {
            assert_eq!((tool.as_str(), detail.as_str()), ("calculate_expression", "- expression: 6*7"));
            assert_eq!(reason.as_deref(), Some("the safety classifier flagged it: the test says so"));
        }
        _ => unreachable!(),
    }
    setup.orchestrator.control(&answer(&asked, asked.attempt, true)).await.unwrap();
    let events = setup.events_to_the_end().await;
    assert_eq!(ending(events.last().unwrap()), ("completed".into(), Some("finished".into())));
    let results = tool_results(&setup.llm);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("42"), "the approved call ran: {}", results[0]);
    worker.await.unwrap();
    setup.close().await;
}

#[tokio::test]
async fn the_users_no_stands_and_an_answer_for_another_attempt_does_not_count() {
    let setup = Setup::start(scripts("compute, but no"), CLASSIFIER).await;
    let worker = setup.run("compute, but no", 60).await;
    let asked = question(&setup).await;
    setup.orchestrator.control(&answer(&asked, asked.attempt + 1, true)).await.unwrap();
    setup.orchestrator.control(&answer(&asked, asked.attempt, false)).await.unwrap();
    let events = setup.events_to_the_end().await;
    assert_eq!(ending(events.last().unwrap()).0, "completed");
    let results = tool_results(&setup.llm);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("tool_approval:denied"), "{}", results[0]);
    assert!(results[0].contains("The user did not approve calculate_expression."), "{}", results[0]);
    worker.await.unwrap();
    setup.close().await;
}

#[tokio::test]
async fn silence_denies_when_the_approval_timeout_runs_out() {
    let config = format!("{CLASSIFIER}[tools.approval]\ntimeout_seconds = 1\n");
    let setup = Setup::start(scripts("compute, nobody answers"), &config).await;
    let worker = setup.run("compute, nobody answers", 60).await;
    question(&setup).await;
    let asked_at = Instant::now();
    let events = setup.events_to_the_end().await;
    let waited = asked_at.elapsed();
    assert!(waited >= Duration::from_millis(800) && waited < Duration::from_secs(10), "waited {waited:?}");
    assert_eq!(ending(events.last().unwrap()).0, "completed");
    let results = tool_results(&setup.llm);
    assert!(results[0].contains("tool_approval:denied") && results[0].contains("nobody answered"), "{}", results[0]);
    worker.await.unwrap();
    setup.close().await;
}

#[tokio::test]
async fn require_approval_asks_from_a_worker_too() {
    let config = "[tools.approval]\nrequire_approval = [\"calculate_expression\"]\n";
    let setup = Setup::start(scripts("compute, gated"), config).await;
    let worker = setup.run("compute, gated", 60).await;
    let asked = question(&setup).await;
    assert!(matches!(&asked.kind, WorkerEventKind::ApprovalRequest { reason: None, .. }), "{asked:?}");
    setup.orchestrator.control(&answer(&asked, asked.attempt, true)).await.unwrap();
    let events = setup.events_to_the_end().await;
    assert_eq!(ending(events.last().unwrap()).1.as_deref(), Some("finished"));
    assert!(tool_results(&setup.llm)[0].contains("42"));
    worker.await.unwrap();
    setup.close().await;
}
