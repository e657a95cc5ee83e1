//! The orchestrator's side of a running task, with the test as the worker on the other side of the real queue:
//! a worker's approval question reaches the chat that started the task and the chat's answer goes back to the
//! worker; `cancel_task` says `cancelled: true` only when the cancel reached the queue.

use super::harness::Harness;
use super::task_support::{AskingChannel, chat, hub, register_asking};
use actix::prelude::*;
use minibot_agent::ToolContext;
use minibot_orchestrator::messages::{ApprovalDecision, AskApproval, Outbound, Progress};
use minibot_orchestrator::router;
use minibot_orchestrator::tasks::TaskHub;
use minibot_orchestrator::tasks::coordinator::TaskCoordinator;
use minibot_protocol::{TaskStatus, WorkerEvent, WorkerEventKind};
use minibot_queue::amqp::AmqpQueue;
use minibot_queue::approvals::{ApprovalAnswer, ApprovalQuestion, PendingApprovals};
use minibot_queue::sqlite::SqliteQueue;
use minibot_queue::{ClaimedTask, WorkQueue};
use minibot_tools::tasks::{Delivery, TaskRequest, TaskService};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::unbounded_channel;

async fn submit(hub: &TaskHub, ctx: &ToolContext) -> String {
    let queued = hub.submit(TaskRequest::new(Delivery::Spawn, "check the disk"), ctx).await.unwrap();
    queued["task_id"].as_str().unwrap().to_string()
}

/// Claims the task as a worker would and says it started.
async fn claim(worker: &SqliteQueue) -> ClaimedTask {
    let task = tokio::time::timeout(Duration::from_secs(10), worker.claim()).await.unwrap().unwrap();
    let started = WorkerEvent::new(&task.envelope.task_id, task.attempt, "w-test", WorkerEventKind::Started);
    worker.emit(&task, &started).await.unwrap();
    task
}

/// A channel whose user never answers.
struct SilentChannel;

impl Actor for SilentChannel {
    type Context = Context<Self>;
}

impl Handler<AskApproval> for SilentChannel {
    type Result = ResponseFuture<ApprovalDecision>;
    fn handle(&mut self, _msg: AskApproval, _ctx: &mut Context<Self>) -> Self::Result {
        Box::pin(std::future::pending())
    }
}

impl Handler<Outbound> for SilentChannel {
    type Result = ();
    fn handle(&mut self, _msg: Outbound, _ctx: &mut Context<Self>) {}
}

impl Handler<Progress> for SilentChannel {
    type Result = ();
    fn handle(&mut self, _msg: Progress, _ctx: &mut Context<Self>) {}
}

/// Asks as the worker's approver does, reading the task's control messages meanwhile.
async fn ask(worker: &Arc<SqliteQueue>, task: &ClaimedTask, approval_id: &str) -> ApprovalAnswer {
    ask_waiting(worker, task, approval_id, Duration::from_secs(20)).await
}

async fn ask_waiting(
    worker: &Arc<SqliteQueue>,
    task: &ClaimedTask,
    approval_id: &str,
    wait: Duration,
) -> ApprovalAnswer {
    let pending = Arc::new(PendingApprovals::new(task));
    let reader = {
        let (worker, task, pending) = (worker.clone(), task.clone(), pending.clone());
        tokio::spawn(async move {
            loop {
                for message in worker.controls(&task).await.unwrap() {
                    pending.route(message);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let question = ApprovalQuestion {
        approval_id: approval_id.into(),
        tool: "bash".into(),
        detail: "- command: df -h".into(),
        reason: Some("the safety classifier flagged it: reads the disk".into()),
    };
    let answer = pending.ask(worker.as_ref(), task, "w-test", question, wait).await;
    reader.abort();
    answer
}

#[actix::test]
async fn a_workers_question_reaches_the_tasks_chat_and_its_answer_goes_back() {
    let h = Harness::start("http://127.0.0.1:9/v1", "").await;
    let hub = hub(&h);
    TaskCoordinator::new(hub.clone(), router::task_routes(&h.router)).start();
    let (asked_tx, mut asked) = unbounded_channel();
    let channel = AskingChannel { asked: asked_tx, answer: ApprovalDecision::Approved }.start();
    register_asking(&h, "asking", channel).await;

    let task_id = submit(&hub, &chat("asking", 42)).await;
    let db = minibot_queue::backend::tasks_db_path(&hub.config).unwrap();
    let worker = Arc::new(SqliteQueue::open(&db, "w-test", Duration::from_secs(60)).await.unwrap());
    let task = claim(&worker).await;
    assert_eq!(task.envelope.task_id, task_id);

    assert_eq!(ask(&worker, &task, "q1").await, ApprovalAnswer::Approved);
    let question = asked.recv().await.unwrap();
    assert_eq!((question.channel.as_str(), question.chat_id), ("asking", 42), "asked in the task's own chat");
    assert_eq!(question.request.approval_id, "q1");
    assert_eq!(question.request.tool, "bash");
    assert_eq!(question.request.detail, "- command: df -h");
    assert_eq!(question.request.reason.as_deref(), Some("the safety classifier flagged it: reads the disk"));
    let events: Vec<String> = hub.store.events(&task_id).await.unwrap().into_iter().map(|(kind, _, _)| kind).collect();
    assert!(events.ends_with(&["approval_requested".into(), "approval_answered".into()]), "{events:?}");

    worker.close().await;
}

#[actix::test]
async fn the_chat_stops_asking_when_the_worker_stops_waiting() {
    // `[tools.approval] timeout_seconds` is 90 s; the worker waits 2 s. The orchestrator must give up with the
    // worker, not 88 s later, so no yes is ever recorded for a call the worker already denied.
    let h = Harness::start("http://127.0.0.1:9/v1", "").await;
    let hub = hub(&h);
    TaskCoordinator::new(hub.clone(), router::task_routes(&h.router)).start();
    let channel = SilentChannel.start();
    register_asking(&h, "silent", channel).await;
    let task_id = submit(&hub, &chat("silent", 5)).await;
    let db = minibot_queue::backend::tasks_db_path(&hub.config).unwrap();
    let worker = Arc::new(SqliteQueue::open(&db, "w-test", Duration::from_secs(60)).await.unwrap());
    let task = claim(&worker).await;

    let answer = ask_waiting(&worker, &task, "q1", Duration::from_secs(2)).await;
    assert!(matches!(answer, ApprovalAnswer::Unanswered(_)), "{answer:?}");
    // The relay gave up a little before the worker and noted a no.
    let answered = hub
        .store
        .events(&task_id)
        .await
        .unwrap()
        .into_iter()
        .find(|(kind, _, _)| kind == "approval_answered")
        .map(|(_, payload, _)| payload);
    let answered = answered.expect("the relay noted its answer before the worker gave up");
    assert_eq!(answered["approved"], false);
    assert!(answered["reason"].as_str().unwrap().contains("nobody answered"), "{answered}");
    worker.close().await;
}

#[actix::test]
async fn a_chat_that_cannot_ask_and_a_task_that_ended_answer_no_at_once() {
    // The harness's `test` channel registers without a way to ask.
    let h = Harness::start("http://127.0.0.1:9/v1", "").await;
    let hub = hub(&h);
    TaskCoordinator::new(hub.clone(), router::task_routes(&h.router)).start();
    let task_id = submit(&hub, &chat("test", 1)).await;
    let db = minibot_queue::backend::tasks_db_path(&hub.config).unwrap();
    let worker = Arc::new(SqliteQueue::open(&db, "w-test", Duration::from_secs(60)).await.unwrap());
    let task = claim(&worker).await;
    assert_eq!(
        ask(&worker, &task, "q1").await,
        ApprovalAnswer::Unanswered("the test channel cannot ask for approval".into())
    );

    let cancelled = hub.cancel(&task_id, &chat("test", 1)).await.unwrap();
    assert_eq!(cancelled["cancelled"], true);
    let answer = ask(&worker, &task, "q2").await;
    assert_eq!(answer, ApprovalAnswer::Unanswered("the task already ended (cancelled)".into()));
    worker.close().await;
}

#[actix::test]
async fn cancel_says_so_when_the_sqlite_queue_cannot_take_it() {
    let h = Harness::start("http://127.0.0.1:9/v1", "").await;
    let hub = hub(&h);
    let ctx = chat("test", 1);
    let task_id = submit(&hub, &ctx).await;
    hub.queue.close().await;
    let error = hub.cancel(&task_id, &ctx).await.unwrap_err().to_string();
    assert!(error.starts_with("the cancel could not be sent to the task queue ("), "{error}");
    assert!(error.ends_with("the task keeps running"), "{error}");
    let record = hub.store.get(&task_id).await.unwrap().unwrap();
    assert_eq!(record.status, TaskStatus::Pending, "the record does not claim a cancel that did not happen");
}

fn broker_url() -> String {
    std::env::var("MINIBOT_TEST_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

#[actix::test]
async fn cancel_says_so_when_the_broker_connection_is_closed() {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let config = format!(
        "[tasks]\nbackend = \"rabbitmq\"\n[rabbitmq]\nbroker_url = \"{}\"\nqueue_name = \"test-{id}\"\n\
         exchange_name = \"test-{id}.tasks\"\nmessage_key = \"test-message-key-0123456789abcdef0123456789\"\n",
        broker_url()
    );
    let h = Harness::start("http://127.0.0.1:9/v1", &config).await;
    let hub = hub(&h);
    let ctx = chat("test", 1);

    let first = submit(&hub, &ctx).await;
    let cancelled: Value = hub.cancel(&first, &ctx).await.unwrap();
    assert_eq!(cancelled["cancelled"], true, "{cancelled}");
    assert_eq!(hub.store.get(&first).await.unwrap().unwrap().status, TaskStatus::Cancelled);

    let second = submit(&hub, &ctx).await;
    hub.queue.close().await;
    let error = hub.cancel(&second, &ctx).await.unwrap_err().to_string();
    assert!(error.starts_with("the cancel could not be sent to the task queue ("), "{error}");
    assert_eq!(hub.store.get(&second).await.unwrap().unwrap().status, TaskStatus::Pending);

    let settings = minibot_queue::backend::amqp_settings(&hub.config, &[]).unwrap();
    let cleanup = AmqpQueue::connect(&settings, "cleanup").await.unwrap();
    cleanup.delete_topology().await.unwrap();
    cleanup.close().await;
}
