//! The task queue between the orchestrator and the workers.
//!
//! The orchestrator holds a [`TaskQueue`]: it publishes [`TaskEnvelope`]s, sends [`ControlMessage`]s (cancel,
//! steer) and consumes [`WorkerEvent`]s, acknowledging each once applied. A worker holds a [`WorkQueue`]: it
//! claims one task at a time, emits events for it, reads its control messages between steps and settles the
//! claim after emitting the terminal event. The backend removes the task only once that terminal event is
//! stored, which may happen after `settle` returned (see [`WorkQueue::settle`]).
//!
//! Tasks travel by route ([`minibot_protocol::route_for`]): a worker opens its side with the routes it serves
//! (the generic worker's and those of the specialists it has whose `requires` its labels meet) and never
//! claims a task of another route. Workers announce themselves and send heartbeats ([`WorkQueue::announce`]);
//! the orchestrator reads them with [`TaskQueue::next_status`].
//!
//! Delivery is at least once. Every claim counts as an attempt (a lease that expired and a redelivery after a
//! worker died count too); a claim past the task's `max_attempts` is not handed to the worker: the backend
//! reports the task as failed (`worker_error`) and drops it (RabbitMQ: into the dead-letter queue). A task may
//! therefore report more than one terminal event (a redelivery after its answer was stored but not its
//! settlement); the consumer of events keeps the first. Two backends: [`sqlite::SqliteQueue`] (one WAL
//! database file shared with local workers) and [`amqp::AmqpQueue`] (RabbitMQ via lapin); [`backend`] opens
//! the one the config names. [`approvals`] matches a task's approval questions (worker events) with their
//! answers (control messages) on either backend.

pub mod amqp;
pub mod approvals;
pub mod backend;
pub mod sqlite;

use futures_util::future::BoxFuture;
pub use minibot_protocol::{ControlMessage, TaskEnvelope, WorkerEvent, WorkerStatus};

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue database error: {0}")]
    Sqlite(#[from] sqlx::Error),
    /// The queue database or its folder could not be opened or created; the message names the file.
    #[error(transparent)]
    Open(#[from] minibot_sqlite::Error),
    #[error("broker error: {0}")]
    Broker(String),
    #[error(transparent)]
    Protocol(#[from] minibot_protocol::ProtocolError),
    /// A setting of the queue is unusable; the message names the key.
    #[error("{key}: {message}")]
    Setting { key: &'static str, message: String },
    /// The broker holds a queue of ours in another shape than this version declares; the text says what to do.
    #[error("{0}")]
    Topology(String),
    #[error("task {task_id}: the lease was lost to another worker")]
    LeaseLost { task_id: String },
    #[error("the queue is closed")]
    Closed,
    #[error("{key} `{url}` is not a SQLite URL")]
    NotSqliteUrl { key: &'static str, url: String },
    /// The broker did not answer at start-up; `url` has its password hidden.
    #[error("cannot reach RabbitMQ at {url} ({key}): {error}")]
    Unreachable { url: String, key: &'static str, error: Box<QueueError> },
}

pub type Result<T> = std::result::Result<T, QueueError>;

/// A worker event taken from the queue; acknowledge it with [`TaskQueue::ack_event`] once applied.
#[derive(Debug, Clone)]
pub struct EventDelivery {
    pub event: WorkerEvent,
    /// Backend-specific delivery identity.
    pub tag: u64,
}

/// A task claimed by a worker.
#[derive(Debug, Clone)]
pub struct ClaimedTask {
    pub envelope: TaskEnvelope,
    /// 1 for the first delivery.
    pub attempt: u32,
    /// Backend-specific claim identity (SQLite lease token, AMQP delivery tag).
    pub token: String,
}

/// The orchestrator's side.
pub trait TaskQueue: Send + Sync {
    /// Stores the task durably; returns once the queue has it (committed row or publisher confirm).
    fn publish<'a>(&'a self, task: &'a TaskEnvelope) -> BoxFuture<'a, Result<()>>;
    /// Delivers a control message to whichever worker runs the task.
    fn control<'a>(&'a self, message: &'a ControlMessage) -> BoxFuture<'a, Result<()>>;
    /// Waits for the next worker event.
    fn next_event(&self) -> BoxFuture<'_, Result<EventDelivery>>;
    /// Removes an applied event from the queue. May return before the backend has done so (AMQP sends the ack
    /// in the background); an event whose removal is lost is delivered again, and must be applied idempotently
    /// (the AMQP backend itself drops events that follow a task's terminal event).
    fn ack_event(&self, delivery: &EventDelivery) -> BoxFuture<'_, Result<()>>;
    /// Waits for the next worker announcement or heartbeat (the orchestrator keeps the roster from them).
    fn next_status(&self) -> BoxFuture<'_, Result<WorkerStatus>>;
    /// Closes the backend (SQLite: the pool; AMQP: the connection). Call it before the tokio runtime stops: a
    /// pooled SQLite connection dropped after that panics.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// A worker's side.
pub trait WorkQueue: Send + Sync {
    /// Waits for a task and claims it. Tasks past their attempts are failed by the backend, never returned.
    fn claim(&self) -> BoxFuture<'_, Result<ClaimedTask>>;
    /// Publishes an event of a claimed task; progress renews the claim. `LeaseLost` means stop working on it.
    ///
    /// Non-terminal events are stored when this returns. A terminal event may only be sent when this returns
    /// (AMQP: its publisher confirm is awaited by [`WorkQueue::settle`], in the background); if the broker then
    /// refuses it or the connection drops, the task is not removed but delivered again.
    fn emit<'a>(&'a self, task: &'a ClaimedTask, event: &'a WorkerEvent) -> BoxFuture<'a, Result<()>>;
    /// Control messages for the task that arrived since the last call.
    fn controls<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<Vec<ControlMessage>>>;
    /// Ends the claim after its terminal event was emitted.
    ///
    /// `Ok` means the claim is given up by this worker, not that the task is gone: the backend may complete
    /// the removal in the background and does so only once the terminal event is stored (SQLite: at once;
    /// AMQP: the ack follows the terminal event's publisher confirm). If the terminal event turns out not to
    /// be stored, the task is redelivered as another attempt and its answer comes from that run.
    fn settle<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<()>>;
    /// Tells the orchestrators this worker is up (or leaving), what it runs and how busy it is. Best effort.
    fn announce<'a>(&'a self, status: &'a WorkerStatus) -> BoxFuture<'a, Result<()>>;
    /// Closes the backend; unsettled claims go back to the queue. Call it before the tokio runtime stops.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// The text of the failure a dead task reports.
pub fn dead_task_error(attempts: u32) -> String {
    format!("the task was started {attempts} times and no worker finished it; giving up")
}
