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

#[tokio::test]
async fn a_worker_only_claims_tasks_of_its_routes_and_announces_itself() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_secs(60)).await;
    let plain = open(&dir, "plain", Duration::from_secs(60)).await.with_routes(&[String::new()]);
    let mut gpu_task = task("gpu-1", 30, 3);
    gpu_task.agent_name = Some("renderer".into());
    orchestrator.publish(&gpu_task).await.unwrap();
    orchestrator.publish(&task("plain-1", 30, 3)).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), plain.claim()).await.unwrap().unwrap();
    assert_eq!(first.envelope.task_id, "plain-1", "the older renderer task is not this worker's");
    plain.settle(&first).await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(500), plain.claim()).await.is_err());
    let gpu =
        open(&dir, "gpu", Duration::from_secs(60)).await.with_routes(&[String::new(), route_for(Some("renderer"))]);
    let second = tokio::time::timeout(Duration::from_secs(5), gpu.claim()).await.unwrap().unwrap();
    assert_eq!((second.envelope.task_id.as_str(), second.attempt), ("gpu-1", 1));

    let mut status = WorkerStatus::new("gpu", "box-1");
    status.labels = vec!["gpu".into()];
    gpu.announce(&status).await.unwrap();
    status.load = 1;
    gpu.announce(&status).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(5), orchestrator.next_status()).await.unwrap().unwrap();
    assert_eq!((heard.worker_id.as_str(), heard.load), ("gpu", 1), "the latest status of each worker");
    assert!(tokio::time::timeout(Duration::from_millis(700), orchestrator.next_status()).await.is_err());
    status.state = WorkerState::Leaving;
    gpu.announce(&status).await.unwrap();
    let left = tokio::time::timeout(Duration::from_secs(5), orchestrator.next_status()).await.unwrap().unwrap();
    assert_eq!(left.state, WorkerState::Leaving);
}

#[tokio::test]
async fn a_queue_file_from_before_routes_gains_the_column_and_keeps_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    {
        let pool = minibot_sqlite::open_pool(&path, 1).await.unwrap();
        sqlx::raw_sql(
            "CREATE TABLE queue_tasks (task_id TEXT PRIMARY KEY, envelope BLOB NOT NULL, status TEXT NOT NULL,
                 attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, lease_token TEXT,
                 lease_expires_at INTEGER, lease_ms INTEGER NOT NULL, worker_id TEXT, created_at INTEGER NOT NULL)",
        )
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query("INSERT INTO queue_tasks VALUES ('old-1', ?1, 'pending', 0, 3, NULL, NULL, 60000, NULL, 1)")
            .bind(task("old-1", 30, 3).encode().unwrap())
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    let worker = open(&dir, "w1", Duration::from_secs(60)).await.with_routes(&[String::new()]);
    let claimed = tokio::time::timeout(Duration::from_secs(5), worker.claim()).await.unwrap().unwrap();
    assert_eq!(claimed.envelope.task_id, "old-1", "an older row is a generic task");
}

#[tokio::test]
async fn a_worker_that_stops_gives_its_task_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let orchestrator = open(&dir, "orchestrator", Duration::from_secs(60)).await;
    let first = open(&dir, "w1", Duration::from_secs(600)).await.with_routes(&[String::new()]);
    orchestrator.publish(&task("t1", 300, 3)).await.unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(5), first.claim()).await.unwrap().unwrap();
    assert_eq!(claimed.attempt, 1);
    first.close().await;
    let second = open(&dir, "w2", Duration::from_secs(600)).await.with_routes(&[String::new()]);
    let again = tokio::time::timeout(Duration::from_secs(2), second.claim()).await;
    let again = again.expect("not after the 600 s lease").unwrap();
    assert_eq!((again.envelope.task_id.as_str(), again.attempt), ("t1", 2));
}
