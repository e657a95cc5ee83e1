#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The SQLite queue against real database files, with two "workers" sharing one file.

mod support;

use minibot_protocol::*;
use minibot_queue::sqlite::SqliteQueue;
use minibot_queue::{QueueError, TaskQueue, WorkQueue};
use std::time::{Duration, Instant};

/// The shared test envelope with the given task timeout (0 makes the lease expire right after the grace).
fn task(id: &str, timeout: u64, max_attempts: u32) -> TaskEnvelope {
    let mut envelope = support::task(id, max_attempts);
    envelope.limits.timeout_seconds = timeout;
    envelope
}

async fn open(dir: &tempfile::TempDir, who: &str, lease: Duration) -> SqliteQueue {
    SqliteQueue::open(&dir.path().join("tasks.db"), who, lease).await.unwrap()
}

async fn next(queue: &SqliteQueue) -> WorkerEvent {
    let delivery = tokio::time::timeout(Duration::from_secs(5), queue.next_event()).await.unwrap().unwrap();
    queue.ack_event(&delivery).await.unwrap();
    delivery.event
}

#[tokio::test]
async fn a_task_goes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_secs(60)).await;
    let worker = open(&dir, "w1", Duration::from_secs(60)).await;
    let claiming = tokio::spawn(async move {
        let started = Instant::now();
        let claimed = worker.claim().await.unwrap();
        (worker, claimed, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let published = Instant::now();
    orchestrator.publish(&task("t1", 30, 3)).await.unwrap();
    let (worker, claimed, _) = claiming.await.unwrap();
    let pickup = published.elapsed();
    assert!(pickup < Duration::from_millis(100), "idle worker picked up after {pickup:?}");
    assert_eq!(claimed.attempt, 1);
    let progress =
        WorkerEvent::new("t1", 1, "w1", WorkerEventKind::Progress { step: 1, tool_names: vec![], total_tokens: 3 });
    worker.emit(&claimed, &progress).await.unwrap();
    orchestrator.control(&ControlMessage::new("t1", ControlKind::Steer { text: "hurry".into() })).await.unwrap();
    let controls = worker.controls(&claimed).await.unwrap();
    assert_eq!(controls.len(), 1);
    assert!(worker.controls(&claimed).await.unwrap().is_empty(), "a control message is read once");
    worker.settle(&claimed).await.unwrap();
    assert_eq!(next(&orchestrator).await, progress);
    assert_eq!(orchestrator.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn expired_lease_is_reclaimed_and_the_old_holder_is_shut_out() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_millis(1)).await;
    let w1 = open(&dir, "w1", Duration::from_millis(1)).await;
    let w2 = open(&dir, "w2", Duration::from_millis(1)).await;
    orchestrator.publish(&task("t1", 0, 3)).await.unwrap();
    let first = w1.claim().await.unwrap();
    // w1 dies silently; its lease (0 s timeout + 10 s grace) is released by the supervisor.
    assert_eq!(orchestrator.release_worker("w1").await.unwrap(), 1);
    let second = w2.claim().await.unwrap();
    assert_eq!(second.attempt, 2, "a redelivery counts as an attempt");
    let late = WorkerEvent::new("t1", 1, "w1", WorkerEventKind::Started);
    assert!(matches!(w1.emit(&first, &late).await, Err(QueueError::LeaseLost { .. })));
}

#[tokio::test]
async fn a_task_that_keeps_dying_is_failed_after_max_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_millis(1)).await;
    let worker = open(&dir, "w", Duration::from_millis(1)).await;
    orchestrator.publish(&task("t1", 0, 2)).await.unwrap();
    for attempt in 1..=2 {
        let claimed = worker.claim().await.unwrap();
        assert_eq!(claimed.attempt, attempt);
        orchestrator.release_worker("w").await.unwrap();
    }
    let third = tokio::time::timeout(Duration::from_millis(300), worker.claim()).await;
    assert!(third.is_err(), "a dead task is never handed out again");
    let event = next(&orchestrator).await;
    match event.kind {
        WorkerEventKind::Finished { outcome, stop_reason, error, .. } => {
            assert_eq!(outcome, TaskOutcome::Failed);
            assert_eq!(stop_reason, "worker_error");
            assert!(error.unwrap().contains("2 times"));
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(orchestrator.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn garbage_on_the_queue_is_dead_lettered_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_secs(60)).await;
    let worker = open(&dir, "w", Duration::from_secs(60)).await;
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", dir.path().join("tasks.db").display())).await.unwrap();
    sqlx::query("INSERT INTO queue_tasks (task_id, envelope, status, max_attempts, lease_ms, created_at) VALUES ('bad', x'c1ff00', 'pending', 3, 1000, 0)")
        .execute(&pool)
        .await
        .unwrap();
    orchestrator.publish(&task("good", 30, 3)).await.unwrap();
    let claimed = worker.claim().await.unwrap();
    assert_eq!(claimed.envelope.task_id, "good", "the worker skips the garbage and keeps working");
    let event = next(&orchestrator).await;
    assert_eq!(event.task_id, "bad");
    assert!(event.is_terminal());
}

#[tokio::test]
async fn cancelling_a_pending_task_takes_it_off_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_secs(60)).await;
    orchestrator.publish(&task("t1", 30, 3)).await.unwrap();
    orchestrator.control(&ControlMessage::new("t1", ControlKind::Cancel)).await.unwrap();
    assert_eq!(orchestrator.depth().await.unwrap(), 0);
}
