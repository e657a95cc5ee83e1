//! Envelopes no orchestrator sends, as anyone who can write to the queue (or a buggy orchestrator) could: limits
//! past any sensible value and texts past what a task may carry. The worker holds each task to its own `[tasks]`
//! settings, fails at once what it will not run, without calling the model, and goes on to the next task.

use super::{Setup, ending, envelope};
use futures_util::future::BoxFuture;
use minibot_protocol::{ControlMessage, TaskEnvelope, TaskOutcome, WorkerEvent, WorkerEventKind, WorkerStatus};
use minibot_queue::{ClaimedTask, TaskQueue, WorkQueue};
use minibot_test_support::{Reply, Script};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The worker's side of the queue, handing out each claimed task with its envelope changed as whoever wrote it
/// could have written it. The SQLite publisher cannot store some of these envelopes itself (it adds a grace
/// period to the task's timeout for the lease, which overflows at `u64::MAX`), but a message on the broker
/// carries whatever it was given.
struct Rewritten {
    inner: Arc<dyn WorkQueue>,
    rewrite: fn(&mut TaskEnvelope),
}

impl WorkQueue for Rewritten {
    fn claim(&self) -> BoxFuture<'_, minibot_queue::Result<ClaimedTask>> {
        Box::pin(async move {
            let mut task = self.inner.claim().await?;
            (self.rewrite)(&mut task.envelope);
            Ok(task)
        })
    }
    fn emit<'a>(&'a self, task: &'a ClaimedTask, event: &'a WorkerEvent) -> BoxFuture<'a, minibot_queue::Result<()>> {
        self.inner.emit(task, event)
    }
    fn controls<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, minibot_queue::Result<Vec<ControlMessage>>> {
        self.inner.controls(task)
    }
    fn settle<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, minibot_queue::Result<()>> {
        self.inner.settle(task)
    }
    fn announce<'a>(&'a self, status: &'a WorkerStatus) -> BoxFuture<'a, minibot_queue::Result<()>> {
        self.inner.announce(status)
    }
    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

fn outcome(event: &WorkerEvent) -> TaskOutcome {
    match &event.kind {
        WorkerEventKind::Finished { outcome, .. } => *outcome,
        other => panic!("not a terminal event: {other:?}"),
    }
}

#[tokio::test]
async fn huge_limits_run_under_the_workers_own_and_the_worker_takes_the_next_task() {
    let scripts = vec![
        Script::new("first", vec![Reply::text("one")]),
        Script::new("second", vec![Reply::text("two")]),
        Script::new("third", vec![Reply::text("three")]),
    ];
    let setup = Setup::start(scripts, "").await;
    // 2^63 seconds, through the real publisher: what panicked the worker and killed every restart.
    setup.orchestrator.publish(&envelope("t1", "first", 1 << 63)).await.unwrap();
    setup.orchestrator.publish(&envelope("t2", "second", 60)).await.unwrap();
    setup.orchestrator.publish(&envelope("t3", "third", 60)).await.unwrap();
    let worker = setup.serve(|queue| {
        Arc::new(Rewritten {
            inner: queue,
            rewrite: |envelope| {
                if envelope.task_id == "t2" {
                    envelope.limits.timeout_seconds = u64::MAX;
                    envelope.limits.max_steps = Some(u32::MAX);
                    envelope.limits.max_tool_calls = Some(u32::MAX);
                    envelope.max_attempts = u32::MAX;
                }
            },
        })
    });
    let endings = setup.endings(3).await;
    for (task, answer) in [("t1", "one"), ("t2", "two"), ("t3", "three")] {
        let event = &endings[task];
        assert_eq!(outcome(event), TaskOutcome::Done, "{event:?}");
        assert_eq!(ending(event), ("completed".into(), Some(answer.into())));
    }
    setup.settled().await;
    assert!(!worker.is_finished(), "the worker is still running");
    worker.abort();
    let _ = worker.await;
    setup.close().await;
}

#[tokio::test]
async fn the_workers_own_time_and_step_limits_bound_what_a_task_asks_for() {
    let scripts = vec![
        Script::new("slow", vec![Reply::text("too late")]).delay(Duration::from_secs(5)),
        Script::new(
            "calculate",
            vec![Reply::tool("calculate_expression", json!({ "expression": "6*7" })), Reply::text("42")],
        ),
        Script::new("after", vec![Reply::text("still here")]),
    ];
    let setup = Setup::start(scripts, "[tasks]\nworker_timeout_seconds = 1\nworker_max_steps = 1\n").await;
    setup.orchestrator.publish(&envelope("t1", "slow", 1 << 63)).await.unwrap();
    // Asks for unlimited model calls (`max_steps: None`); this worker allows one.
    setup.orchestrator.publish(&envelope("t2", "calculate", 60)).await.unwrap();
    setup.orchestrator.publish(&envelope("t3", "after", 60)).await.unwrap();
    let started = Instant::now();
    let worker = setup.serve(|queue| queue);
    let endings = setup.endings(3).await;

    let timed_out = &endings["t1"];
    assert_eq!((outcome(timed_out), ending(timed_out).0.as_str()), (TaskOutcome::TimedOut, "timeout"), "{timed_out:?}");
    let limited = &endings["t2"];
    assert_eq!((outcome(limited), ending(limited).0.as_str()), (TaskOutcome::Failed, "max_steps"), "{limited:?}");
    assert_eq!(ending(&endings["t3"]).1.as_deref(), Some("still here"));
    // The slow task was stopped at the worker's 1 s, not at the model's 5 s or the envelope's 2^63 s.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(
        setup.llm.requests().iter().filter(|r| r["messages"][1]["content"] == "calculate").count(),
        1,
        "one model call, then the step limit"
    );
    setup.settled().await;
    assert!(!worker.is_finished());
    worker.abort();
    let _ = worker.await;
    setup.close().await;
}

#[tokio::test]
async fn texts_over_the_limits_fail_at_once_naming_the_limit_and_reach_no_model() {
    let setup = Setup::start(vec![Script::new("fine", vec![Reply::text("ok")])], "").await;
    // 4 MiB of prompt (the attack was 100 MB; the check costs the same).
    setup.orchestrator.publish(&envelope("t1", &"x".repeat(4 << 20), 60)).await.unwrap();
    let mut context = envelope("t2", "short", 60);
    context.context_json = Some(json!({ "k": "y".repeat(70_000) }).to_string());
    setup.orchestrator.publish(&context).await.unwrap();
    let mut model = envelope("t3", "short", 60);
    model.model_overrides.model = Some("m".repeat(1_000_000));
    setup.orchestrator.publish(&model).await.unwrap();
    setup.orchestrator.publish(&envelope("t4", "fine", 60)).await.unwrap();
    let worker = setup.serve(|queue| queue);
    let endings = setup.endings(4).await;

    for (task, says) in [
        ("t1", "worker w1 refused the task: the prompt is longer than 32000 characters"),
        ("t2", "worker w1 refused the task: context_json is longer than 64000 characters"),
        ("t3", "worker w1 refused the task: model is longer than 256 characters"),
    ] {
        let event = &endings[task];
        assert_eq!(outcome(event), TaskOutcome::Failed, "{event:?}");
        let (stop_reason, error) = ending(event);
        let error = error.unwrap();
        assert_eq!(stop_reason, "worker_error");
        assert!(error.starts_with(says), "{task}: {error}");
        assert!(error.len() < 300, "the error names the limit, not the text: {} bytes", error.len());
    }
    assert_eq!(ending(&endings["t4"]).1.as_deref(), Some("ok"));
    let requests = setup.llm.requests();
    assert_eq!(requests.len(), 1, "only the task within the limits reached the model");
    assert_eq!(requests[0]["messages"][1]["content"], "fine");
    setup.settled().await;
    assert!(!worker.is_finished());
    worker.abort();
    let _ = worker.await;
    setup.close().await;
}
