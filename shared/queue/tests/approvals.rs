#![allow(clippy::expect_used, clippy::unwrap_used)]
//! A worker's approval question and its answer, on both backends: the real RabbitMQ at `MINIBOT_TEST_AMQP_URL`
//! and a real SQLite file shared by the two sides. The same scenario runs on each.

mod support;

use minibot_protocol::*;
use minibot_queue::approvals::{ApprovalAnswer, ApprovalQuestion, PendingApprovals};
use minibot_queue::sqlite::SqliteQueue;
use minibot_queue::{ClaimedTask, TaskQueue, WorkQueue};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn question(id: &str) -> ApprovalQuestion {
    ApprovalQuestion {
        approval_id: id.into(),
        tool: "bash".into(),
        detail: "- command: rm -rf build".into(),
        reason: Some("deletes files".into()),
    }
}

fn answer(task_id: &str, approval_id: &str, attempt: u32, approved: bool, reason: Option<&str>) -> ControlMessage {
    ControlMessage::new(
        task_id,
        ControlKind::ApprovalResult {
            approval_id: approval_id.into(),
            attempt,
            approved,
            reason: reason.map(str::to_string),
        },
    )
}

/// The worker's control reader: approval answers go to `pending`, everything else is collected.
fn read_controls(
    worker: Arc<dyn WorkQueue>,
    task: ClaimedTask,
    pending: Arc<PendingApprovals>,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<ControlMessage>>>) {
    let others = Arc::new(Mutex::new(Vec::new()));
    let collected = others.clone();
    let reader = tokio::spawn(async move {
        loop {
            for message in worker.controls(&task).await.unwrap() {
                if let Some(other) = pending.route(message) {
                    collected.lock().unwrap().push(other);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (reader, others)
}

/// The next event, acknowledged; progress and other chatter skipped.
async fn next_question(orchestrator: &dyn TaskQueue) -> WorkerEvent {
    loop {
        let delivery = tokio::time::timeout(Duration::from_secs(10), orchestrator.next_event())
            .await
            .expect("an event within 10 s")
            .unwrap();
        orchestrator.ack_event(&delivery).await.unwrap();
        if matches!(delivery.event.kind, WorkerEventKind::ApprovalRequest { .. }) {
            return delivery.event;
        }
    }
}

/// Publishes a task, claims it on the worker side and runs the question-and-answer exchange.
async fn scenario(orchestrator: Arc<dyn TaskQueue>, worker: Arc<dyn WorkQueue>) {
    orchestrator.publish(&support::task("t1", 3)).await.unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(10), worker.claim()).await.unwrap().unwrap();
    let pending = Arc::new(PendingApprovals::new(&claimed));
    let (reader, others) = read_controls(worker.clone(), claimed.clone(), pending.clone());

    // The question goes out as an event of the task and attempt.
    let asking = {
        let (worker, claimed, pending) = (worker.clone(), claimed.clone(), pending.clone());
        tokio::spawn(async move {
            pending.ask(worker.as_ref(), &claimed, "w1", question("a1"), Duration::from_secs(20)).await
        })
    };
    let event = next_question(orchestrator.as_ref()).await;
    assert_eq!((event.task_id.as_str(), event.attempt, event.worker_id.as_str()), ("t1", 1, "w1"));
    assert_eq!(
        event.kind,
        WorkerEventKind::ApprovalRequest {
            approval_id: "a1".into(),
            tool: "bash".into(),
            detail: "- command: rm -rf build".into(),
            reason: Some("deletes files".into()),
            // The orchestrator stops asking when the worker stops waiting.
            wait_ms: Some(20_000),
        }
    );

    // Approvals naming another question or another attempt do not count; a steer still gets through.
    orchestrator.control(&answer("t1", "someone-else", 1, true, None)).await.unwrap();
    orchestrator.control(&answer("t1", "a1", 2, true, None)).await.unwrap();
    let steer = ControlMessage::new("t1", ControlKind::Steer { text: "hurry".into() });
    orchestrator.control(&steer).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!asking.is_finished(), "a stale answer was taken for the real one");
    assert_eq!(pending.waiting(), 1);
    orchestrator.control(&answer("t1", "a1", 1, false, None)).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), asking).await.unwrap().unwrap();
    assert_eq!(answered, ApprovalAnswer::Denied, "the user's no, not the stale yes");
    assert_eq!(*others.lock().unwrap(), vec![steer]);
    assert_eq!(pending.waiting(), 0);

    // Approved, and "nobody could ask" with its reason.
    for (approved, reason, expected) in [
        (true, None, ApprovalAnswer::Approved),
        (false, Some("the test channel cannot ask"), ApprovalAnswer::Unanswered("the test channel cannot ask".into())),
    ] {
        let asking = {
            let (worker, claimed, pending) = (worker.clone(), claimed.clone(), pending.clone());
            tokio::spawn(async move {
                pending.ask(worker.as_ref(), &claimed, "w1", question("a2"), Duration::from_secs(20)).await
            })
        };
        next_question(orchestrator.as_ref()).await;
        orchestrator.control(&answer("t1", "a2", 1, approved, reason)).await.unwrap();
        assert_eq!(tokio::time::timeout(Duration::from_secs(10), asking).await.unwrap().unwrap(), expected);
    }

    // Silence is a no, within the wait given.
    let started = std::time::Instant::now();
    let silent = pending.ask(worker.as_ref(), &claimed, "w1", question("a3"), Duration::from_millis(400)).await;
    assert_eq!(silent, ApprovalAnswer::Unanswered("nobody answered the approval request within 400 ms".into()));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(pending.waiting(), 0, "a question that timed out is forgotten");
    // Its late answer is ignored.
    next_question(orchestrator.as_ref()).await;
    orchestrator.control(&answer("t1", "a3", 1, true, None)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(others.lock().unwrap().len() == 1);
    reader.abort();
}

#[tokio::test]
async fn sqlite_carries_a_question_out_and_its_answer_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let orchestrator = Arc::new(SqliteQueue::open(&path, "orchestrator", Duration::from_secs(60)).await.unwrap());
    let worker = Arc::new(SqliteQueue::open(&path, "w1", Duration::from_secs(60)).await.unwrap());
    scenario(orchestrator.clone(), worker.clone()).await;
    SqliteQueue::close(&orchestrator).await;
    SqliteQueue::close(&worker).await;
}

#[tokio::test]
async fn sqlite_does_not_keep_answers_for_a_task_no_worker_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let orchestrator = SqliteQueue::open(&path, "orchestrator", Duration::from_secs(60)).await.unwrap();
    orchestrator.publish(&support::task("t1", 3)).await.unwrap();
    orchestrator.control(&answer("t1", "a1", 1, true, None)).await.unwrap();
    orchestrator.control(&answer("gone", "a1", 1, true, None)).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM queue_controls").fetch_one(&pool).await.unwrap();
    assert_eq!(rows, 0, "neither a pending task nor a missing one has a worker to read the answer");
    pool.close().await;
    orchestrator.close().await;
}

#[tokio::test]
async fn rabbitmq_carries_a_question_out_and_its_answer_back() {
    let settings = support::settings(1);
    let orchestrator = Arc::new(support::connect(&settings, "orchestrator").await);
    let worker = Arc::new(support::connect(&settings, "w1").await);
    scenario(orchestrator.clone(), worker.clone()).await;
    worker.close().await;
    orchestrator.delete_topology().await.unwrap();
    orchestrator.close().await;
}
