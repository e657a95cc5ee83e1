//! The RabbitMQ backend, over lapin.
//!
//! Topology (declared by both sides on every (re)connect, so either may start first):
//! - `exchange_name`: durable fanout exchange tasks are published to (MiniBot 0.36 declares it the same way);
//! - `queue_name`: durable quorum queue bound to it. The broker counts deliveries in `x-delivery-count`, which
//!   is how attempts survive a worker dying; `x-delivery-limit` is only a backstop, the envelope's
//!   `max_attempts` decides: a worker reports a task past it failed and rejects it, so it dead-letters to
//!   `<queue_name>.dead` (kept for an operator), as does a message that does not decode;
//! - `<queue_name>.events`: durable queue the workers publish [`WorkerEvent`]s to through the default exchange;
//! - `<queue_name>.agent.<name>`: one more quorum queue like it per specialist (its route,
//!   [`minibot_protocol::route_for`]), declared by whoever publishes or consumes it first; tasks go there
//!   through the default exchange, and only workers that have the specialist (and the labels it requires)
//!   consume it, so a worker never sees a task it cannot run;
//! - `<exchange_name>.control`: fanout exchange for cancel and steer; every connection binds its own
//!   exclusive, auto-delete queue to it and buffers what arrives per task;
//! - `<exchange_name>.workers`: fanout exchange for workers' announcements and heartbeats
//!   ([`minibot_protocol::WorkerStatus`], transient); an orchestrator binds its own exclusive queue to it.
//!
//! Every publish waits for its publisher confirm (many publishes are pipelined on one channel), except a
//! worker's terminal event: [`WorkQueue::emit`] returns once it is sent, and [`WorkQueue::settle`] hands the
//! task's acknowledgement to a background task that sends it only after that confirm arrives, so a worker
//! goes on to its next task without waiting a confirm round trip. A task is never acknowledged before its
//! terminal event is confirmed: a negative confirm (or a return) puts the task back on the queue (another
//! attempt), a lost connection leaves it to the broker to redeliver; the duplicate filter below keeps the
//! first terminal event. [`TaskQueue::ack_event`] likewise sends the event's ack in the background.
//!
//! Broker restarts: a supervisor task per [`AmqpQueue`] notices a dead connection (its control consumer ends,
//! or any operation reports a failure), reconnects with exponential backoff and redeclares everything.
//! Publishes that were not confirmed are published again on the new connection (at least once). A claim made
//! on a connection that is gone is stale: the broker has already put the task back, so [`WorkQueue::emit`] and
//! [`WorkQueue::settle`] answer `LeaseLost` and the worker drops it; the redelivery counts as another attempt.
//! Because a confirmed terminal event may still be followed by a redelivery (the ack was lost with the
//! connection), [`TaskQueue::next_event`] remembers which task attempts already delivered a terminal event
//! (by task, attempt and worker) and drops later events of theirs, and a worker acknowledges without running
//! a redelivery of a task whose terminal event it already published.
//!
//! Cancel before claim: every worker remembers cancelled task ids (bounded), and a claim of such a task
//! reports it cancelled and settles it instead of returning it. A cancel sent while no worker is connected
//! reaches nobody (fanout); the coordinator's own record still says cancelled.
//!
//! Limits: control messages are transient and auto-acknowledged, so one in flight while the broker restarts is
//! lost (a cancel then takes effect at the coordinator only). A publish keeps retrying across reconnects for
//! `PUBLISH_WINDOW` (60 s) and then fails, so the caller can mark the task failed. One events queue serves
//! the one orchestrator of a deployment.
//!
//! Modules: `link` keeps a connection up (supervisor, reconnect, consumers), `topology` names and declares the
//! exchanges and queues, `publisher` is the confirm pipeline, `orchestrator` and `worker` implement the two
//! sides, `background` sends acknowledgements off the caller's path, `buffers` holds the bounded bookkeeping
//! (remembered ids, control messages per task).
//!
//! [`WorkerEvent`]: minibot_protocol::WorkerEvent
//! [`WorkQueue::emit`]: crate::WorkQueue::emit
//! [`WorkQueue::settle`]: crate::WorkQueue::settle
//! [`TaskQueue::ack_event`]: crate::TaskQueue::ack_event
//! [`TaskQueue::next_event`]: crate::TaskQueue::next_event

mod background;
mod buffers;
mod link;
pub mod migrate;
mod orchestrator;
mod publisher;
mod topology;
mod trust;
mod worker;

use crate::{QueueError, Result};
use background::{Background, Held, run_background};
use buffers::{ControlBuffer, Remembered};
use link::{LinkState, supervise};
use minibot_protocol::{MessageKey, TaskEnvelope};
use publisher::{Outgoing, Target};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use topology::{Names, open_link};
use worker::Claim;

/// First and longest pause between reconnect (and republish) attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A confirm slower than this is taken as a dead connection.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the queue lives; filled from `[rabbitmq]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpSettings {
    pub broker_url: String,
    pub queue_name: String,
    pub exchange_name: String,
    pub prefetch_count: u16,
    /// The routes ([`minibot_protocol::route_for`]) whose tasks this side takes: a worker's generic route
    /// `""` and its specialists'. Empty for an orchestrator, which takes none.
    pub routes: Vec<String>,
    /// PEM certificate authority for an `amqps://` broker the system trust store does not know.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Signs what this side publishes and checks what it receives (`[rabbitmq] message_key`).
    pub message_key: MessageKey,
}

impl AmqpSettings {
    /// MiniBot's defaults (`minibot`, `minibot.tasks`, prefetch 1) for `broker_url`, signing with `message_key`.
    pub fn new(broker_url: &str, message_key: MessageKey) -> Self {
        Self {
            broker_url: broker_url.to_string(),
            queue_name: "minibot".into(),
            exchange_name: "minibot.tasks".into(),
            prefetch_count: 1,
            routes: vec![String::new()],
            tls_ca_file: None,
            message_key,
        }
    }
}

/// The state every part of one [`AmqpQueue`] shares: its supervisor, its background task and its callers.
struct Shared {
    settings: AmqpSettings,
    names: Names,
    worker_id: String,
    link: watch::Sender<LinkState>,
    /// Highest connection generation reported broken by an operation.
    broken: watch::Sender<u64>,
    controls: std::sync::Mutex<ControlBuffer>,
    /// Claimed tasks by token, with the connection that delivered them.
    claims: std::sync::Mutex<HashMap<String, Claim>>,
    /// Work for [`run_background`], and how many jobs it has not finished yet.
    background: mpsc::UnboundedSender<Background>,
    in_background: watch::Sender<usize>,
    /// Events handed to the orchestrator and not yet acknowledged, by our own tag.
    unacked_events: std::sync::Mutex<HashMap<u64, Held>>,
    next_event_tag: AtomicU64,
    /// Orchestrator side: task attempts (with their worker) that already delivered a terminal event.
    finished: std::sync::Mutex<Remembered>,
    /// Worker side: tasks this worker settled.
    settled: std::sync::Mutex<Remembered>,
    /// Worker side, several routes: the route to poll first next time (round robin).
    next_route: std::sync::atomic::AtomicUsize,
    /// The broker user this side logs in as, stamped on what it publishes (`user_id`, checked by RabbitMQ).
    broker_user: Option<lapin::types::ShortString>,
    /// Refusals logged, and which broker user each worker id speaks from.
    trust: std::sync::Mutex<trust::Trust>,
}

/// Both sides of the task queue over RabbitMQ. See the module docs.
pub struct AmqpQueue {
    shared: Arc<Shared>,
    supervisor: JoinHandle<()>,
    background: JoinHandle<()>,
}

impl Drop for AmqpQueue {
    fn drop(&mut self) {
        // Both own a reference to the shared state; stopping them lets the connection close.
        self.supervisor.abort();
        self.background.abort();
    }
}

fn broker(error: impl std::fmt::Display) -> QueueError {
    QueueError::Broker(error.to_string())
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these short critical sections leaves plain data behind; keep going.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AmqpQueue {
    /// Connects, declares the topology and starts the reconnect supervisor. Fails at once when the broker is
    /// unreachable; later outages are ridden out.
    pub async fn connect(config: &AmqpSettings, worker_id: &str) -> Result<AmqpQueue> {
        let names = Names::new(config)?;
        let (link_tx, _) = watch::channel(LinkState::Reconnecting);
        let (broken_tx, _) = watch::channel(0);
        let (background_tx, background_rx) = mpsc::unbounded_channel();
        let (in_background, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            settings: config.clone(),
            names,
            worker_id: worker_id.to_string(),
            link: link_tx,
            broken: broken_tx,
            controls: std::sync::Mutex::default(),
            claims: std::sync::Mutex::default(),
            background: background_tx,
            in_background,
            unacked_events: std::sync::Mutex::default(),
            next_event_tag: AtomicU64::new(1),
            finished: std::sync::Mutex::default(),
            settled: std::sync::Mutex::default(),
            next_route: std::sync::atomic::AtomicUsize::new(0),
            broker_user: topology::login_user(&config.broker_url),
            trust: std::sync::Mutex::default(),
        });
        let (link, controls) = open_link(&shared, 1).await?;
        shared.link.send_replace(LinkState::Up(link.clone()));
        let supervisor = tokio::spawn(supervise(shared.clone(), link, controls));
        let background = tokio::spawn(run_background(shared.clone(), background_rx));
        Ok(AmqpQueue { shared, supervisor, background })
    }

    /// Publishes many tasks with pipelined confirms; returns once the broker confirmed all of them.
    pub async fn publish_many(&self, tasks: &[TaskEnvelope]) -> Result<()> {
        let batch = tasks
            .iter()
            .map(|task| {
                let mut message = Outgoing::new(&task.task_id, task.encode()?);
                let route = task.route();
                if !route.is_empty() {
                    let queue = self.shared.names.route_queue(&route)?;
                    message.route = Some((route, queue));
                }
                Ok(message)
            })
            .collect::<Result<Vec<_>>>()?;
        self.shared.publish_reliably(Target::Task, &batch).await
    }

    /// Declares the task queues of `routes` now rather than at their first task: a worker whose broker user may
    /// not declare queues that dead-letter through the default exchange (docs/deploy.md, "Broker users") finds
    /// them in place.
    pub async fn declare_route_queues(&self, routes: &[String]) -> Result<()> {
        let batch = routes
            .iter()
            .filter(|route| !route.is_empty())
            .map(|route| {
                let mut message = Outgoing::new(route, Vec::new());
                message.route = Some((route.clone(), self.shared.names.route_queue(route)?));
                Ok(message)
            })
            .collect::<Result<Vec<_>>>()?;
        let link = self.shared.current().await?;
        self.shared.declare_routes(&link, &batch).await
    }

    /// Closes the connection without acknowledging anything held: unsettled tasks go back to the queue.
    /// Acknowledgements already under way in the background (settled tasks, acked events) are given up to
    /// 5 s to finish first.
    pub async fn close(&self) {
        let mut pending = self.shared.in_background.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(5), pending.wait_for(|n| *n == 0)).await;
        self.background.abort();
        self.supervisor.abort();
        let link = self.shared.link.send_replace(LinkState::Closed);
        if let LinkState::Up(link) = link {
            let _ = tokio::time::timeout(Duration::from_secs(5), link.connection.close(200, "closing".into())).await;
        }
    }
}
