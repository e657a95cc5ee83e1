//! Progress and the usage a task reports carry the tokens the run has used, read from the model's responses.

use super::{Setup, ending};
use minibot_protocol::{ControlKind, ControlMessage, TaskOutcome, WorkerEventKind};
use minibot_queue::TaskQueue;
use minibot_test_support::scripted_llm::estimated_tokens;
use minibot_test_support::{Reply, Script};
use serde_json::Value;
use std::time::Duration;

const ARGUMENTS: &str = r#"{"expression":"6*7"}"#;

/// The tokens the fake reports for a response to `request` that wrote `answer_bytes` of text or tool call: it
/// sizes its usage like the request and the answer.
fn tokens(request: &Value, answer_bytes: usize) -> u64 {
    let (prompt, completion) = estimated_tokens(request.to_string().len(), answer_bytes);
    prompt + completion
}

/// The tokens of the response that asked for the calculation.
fn first_response_tokens(setup: &Setup) -> u64 {
    tokens(&setup.llm.requests()[0], "calculate_expression".len() + ARGUMENTS.len())
}

fn calculating(prompt: &str) -> Script {
    let arguments: Value = serde_json::from_str(ARGUMENTS).unwrap();
    Script::new(prompt, vec![Reply::tool("calculate_expression", arguments), Reply::text("42")])
        // Slower than the progress interval, so the progress after the first response is not rate-limited away.
        .delay(Duration::from_millis(1500))
}

#[tokio::test]
async fn progress_reports_the_tokens_used_so_far() {
    let setup = Setup::start(vec![calculating("compute slowly")], "").await;
    let worker = setup.run("compute slowly", 60).await;
    let events = setup.events_to_the_end().await;
    let progress: Vec<(u32, Vec<String>, u64)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            WorkerEventKind::Progress { step, tool_names, total_tokens } => {
                Some((*step, tool_names.clone(), *total_tokens))
            }
            _ => None,
        })
        .collect();
    let first = first_response_tokens(&setup);
    assert!(
        progress.contains(&(1, vec!["calculate_expression".into()], first)),
        "the progress of the tool call counts the response that asked for it: {progress:?}"
    );
    assert!(progress.windows(2).all(|w| w[0].2 <= w[1].2), "{progress:?}");
    match &events.last().unwrap().kind {
        WorkerEventKind::Finished { outcome, total_tokens, .. } => {
            let second = tokens(&setup.llm.requests()[1], "42".len());
            assert_eq!((*outcome, *total_tokens), (TaskOutcome::Done, first + second));
        }
        other => panic!("{other:?}"),
    }
    worker.await.unwrap();
    setup.close().await;
}

#[tokio::test]
async fn a_cancelled_run_reports_the_tokens_it_used() {
    let setup = Setup::start(vec![calculating("compute, then be cancelled")], "").await;
    let worker = setup.run("compute, then be cancelled", 60).await;
    // Cancel once the first response is in and the second request is on its way.
    loop {
        if let WorkerEventKind::Progress { total_tokens, .. } = setup.next_event().await.kind
            && total_tokens > 0
        {
            assert_eq!(total_tokens, first_response_tokens(&setup));
            break;
        }
    }
    setup.orchestrator.control(&ControlMessage::new("t1", ControlKind::Cancel)).await.unwrap();
    let events = setup.events_to_the_end().await;
    let last = events.last().unwrap();
    assert_eq!(ending(last).0, "cancelled");
    match &last.kind {
        WorkerEventKind::Finished { total_tokens, steps, tool_calls, .. } => {
            assert_eq!((*steps, *tool_calls, *total_tokens), (2, 1, first_response_tokens(&setup)));
        }
        other => panic!("{other:?}"),
    }
    worker.await.unwrap();
    setup.close().await;
}
