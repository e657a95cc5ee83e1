//! The RabbitMQ backend, over lapin.
//!
//! Topology (declared by both sides on every (re)connect, so either may start first):
//! - `exchange_name`: durable fanout exchange tasks are published to (MiniBot 0.36 declares it the same way);
//! - `queue_name`: durable quorum queue bound to it. The broker counts deliveries in `x-delivery-count`, which
//!   is how attempts survive a worker dying; `x-delivery-limit` is only a backstop, the envelope's
//!   `max_attempts` decides. Rejected and over-limit messages dead-letter to `<queue_name>.dead`;
//! - `<queue_name>.events`: durable queue the workers publish [`WorkerEvent`]s to through the default exchange;
//! - `<exchange_name>.control`: fanout exchange for cancel and steer; every connection binds its own
//!   exclusive, auto-delete queue to it and buffers what arrives per task.
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
//! connection), [`TaskQueue::next_event`] remembers which tasks already delivered a terminal event and drops
//! later events for them, and a worker acknowledges without running a redelivery of a task whose terminal
//! event it already published.
//!
//! Cancel before claim: every worker remembers cancelled task ids (bounded), and a claim of such a task
//! reports it cancelled and settles it instead of returning it. A cancel sent while no worker is connected
//! reaches nobody (fanout); the coordinator's own record still says cancelled.
//!
//! Limits: control messages are transient and auto-acknowledged, so one in flight while the broker restarts is
//! lost (a cancel then takes effect at the coordinator only). A publish keeps retrying across reconnects for
//! `PUBLISH_WINDOW` (60 s) and then fails, so the caller can mark the task failed. One events queue serves
//! the one orchestrator of a deployment.

use crate::{ClaimedTask, EventDelivery, QueueError, Result, TaskQueue, WorkQueue, dead_task_error};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, BasicRejectOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{
    Acker, BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer, ExchangeKind,
    PublisherConfirm,
};
use minibot_protocol::{ControlKind, ControlMessage, TaskEnvelope, TaskOutcome, WorkerEvent, WorkerEventKind};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;

/// First and longest pause between reconnect attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long an operation waits for a connection before it gives up with an error.
const LINK_WAIT: Duration = Duration::from_secs(60);
/// How long a publish keeps retrying across reconnects before the caller hears it failed.
const PUBLISH_WINDOW: Duration = Duration::from_secs(60);
/// Connecting and declaring everything; a broker still booting can accept a connection and then stall.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);
/// A confirm slower than this is taken as a dead connection.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// Publishes sent before waiting for their confirms.
const PIPELINE: usize = 512;
/// Broker-side backstop against a task that kills every worker before our own count is read.
const DELIVERY_LIMIT: i64 = 100;
/// Unacked events the orchestrator's consumer may hold.
const EVENT_PREFETCH: u16 = 256;
/// Task ids remembered as cancelled, settled or finished.
const REMEMBERED_IDS: usize = 65_536;
/// Tasks whose control messages are buffered, and messages per task.
const BUFFERED_TASKS: usize = 4_096;
const BUFFERED_PER_TASK: usize = 64;

/// Where the queue lives; filled from `[rabbitmq]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpSettings {
    pub broker_url: String,
    pub queue_name: String,
    pub exchange_name: String,
    pub prefetch_count: u16,
}

impl AmqpSettings {
    /// MiniBot's defaults (`minibot`, `minibot.tasks`, prefetch 1) for `broker_url`.
    pub fn new(broker_url: &str) -> Self {
        Self {
            broker_url: broker_url.to_string(),
            queue_name: "minibot".into(),
            exchange_name: "minibot.tasks".into(),
            prefetch_count: 1,
        }
    }
}

/// Validated AMQP names derived from the settings.
#[derive(Debug, Clone)]
struct Names {
    tasks_exchange: ShortString,
    tasks_queue: ShortString,
    dead_queue: ShortString,
    events_queue: ShortString,
    control_exchange: ShortString,
}

impl Names {
    fn new(settings: &AmqpSettings) -> Result<Self> {
        let short = |s: String| {
            ShortString::try_new(s.clone()).map_err(|_| QueueError::Broker(format!("name too long for AMQP: {s}")))
        };
        Ok(Self {
            tasks_exchange: short(settings.exchange_name.clone())?,
            tasks_queue: short(settings.queue_name.clone())?,
            dead_queue: short(format!("{}.dead", settings.queue_name))?,
            events_queue: short(format!("{}.events", settings.queue_name))?,
            control_exchange: short(format!("{}.control", settings.exchange_name))?,
        })
    }
}

fn broker(error: impl std::fmt::Display) -> QueueError {
    QueueError::Broker(error.to_string())
}

/// A set of ids that forgets the oldest beyond its capacity.
#[derive(Debug, Default)]
struct Remembered {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Remembered {
    fn insert(&mut self, id: &str) {
        if self.set.insert(id.to_string()) {
            self.order.push_back(id.to_string());
            if self.order.len() > REMEMBERED_IDS
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}

/// Control messages received on this connection, waiting for [`WorkQueue::controls`].
#[derive(Debug, Default)]
struct ControlBuffer {
    by_task: HashMap<String, VecDeque<ControlMessage>>,
    order: VecDeque<String>,
    cancelled: Remembered,
}

impl ControlBuffer {
    fn push(&mut self, message: ControlMessage) {
        if message.kind == ControlKind::Cancel {
            self.cancelled.insert(&message.task_id);
        }
        let task_id = message.task_id.clone();
        let queue = self.by_task.entry(task_id.clone()).or_insert_with(|| {
            self.order.push_back(task_id);
            VecDeque::new()
        });
        queue.push_back(message);
        if queue.len() > BUFFERED_PER_TASK {
            queue.pop_front();
        }
        while self.order.len() > BUFFERED_TASKS {
            if let Some(old) = self.order.pop_front() {
                self.by_task.remove(&old);
            }
        }
    }

    fn take(&mut self, task_id: &str) -> Vec<ControlMessage> {
        match self.by_task.remove(task_id) {
            Some(queue) => {
                self.order.retain(|id| id != task_id);
                queue.into()
            }
            None => Vec::new(),
        }
    }
}

/// One live connection and what hangs off it. Replaced wholesale on reconnect.
struct Link {
    generation: u64,
    connection: Connection,
    /// Confirm-mode channel all publishes share, so concurrent publishes pipeline.
    publisher: Channel,
    /// Started on first use: the orchestrator never consumes tasks, a worker never consumes events.
    tasks: Mutex<Option<(Channel, Consumer)>>,
    events: Mutex<Option<(Channel, Consumer)>>,
}

/// Where a message goes and how.
#[derive(Clone, Copy)]
enum Target {
    Task,
    Event,
    Control,
}

/// One message to publish: its id (task id) and body.
struct Outgoing {
    id: String,
    body: Vec<u8>,
}

/// What became of one event published on one connection.
#[derive(Debug, PartialEq, Eq)]
enum Published {
    Confirmed,
    ConnectionLost,
    /// Nacked or returned by a broker that is still connected.
    Refused(String),
}

/// Why a batch publish on one connection did not confirm everything.
struct PublishFailure {
    /// Indices (into the batch) still unconfirmed.
    unconfirmed: Vec<usize>,
    connection_lost: bool,
    reason: String,
}

#[derive(Clone)]
enum LinkState {
    Up(Arc<Link>),
    Reconnecting,
    /// [`AmqpQueue::close`] was called: waiting is pointless.
    Closed,
}

struct Held {
    generation: u64,
    acker: Acker,
}

/// A task a worker claimed, with the confirms of terminal events emitted for it and not yet awaited.
struct Claim {
    generation: u64,
    acker: Acker,
    terminal: Vec<PublisherConfirm>,
}

/// Acknowledgements sent in the background, off the caller's path.
enum Background {
    /// Acknowledge a settled task once one of its terminal events is confirmed.
    Settle { task_id: String, generation: u64, acker: Acker, terminal: Vec<PublisherConfirm> },
    /// Acknowledge an event the orchestrator applied.
    AckEvent(Held),
}

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
    /// Orchestrator side: tasks that already delivered a terminal event.
    finished: std::sync::Mutex<Remembered>,
    /// Worker side: tasks this worker settled.
    settled: std::sync::Mutex<Remembered>,
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
            .map(|task| Ok(Outgoing { id: task.task_id.clone(), body: task.encode()? }))
            .collect::<Result<Vec<_>>>()?;
        self.shared.publish_reliably(Target::Task, &batch).await
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

    /// Messages waiting in the task queue and in the events queue (ready, not delivered).
    pub async fn depths(&self) -> Result<(u32, u32)> {
        let link = self.shared.current().await?;
        let channel = link.connection.create_channel().await.map_err(broker)?;
        let passive = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
        let tasks = channel
            .queue_declare(self.shared.names.tasks_queue.clone(), passive, FieldTable::default())
            .await
            .map_err(broker)?;
        let events = channel
            .queue_declare(self.shared.names.events_queue.clone(), passive, FieldTable::default())
            .await
            .map_err(broker)?;
        let _ = channel.close(200, "done".into()).await;
        Ok((tasks.message_count(), events.message_count()))
    }

    /// Deletes the queues and exchanges this queue declared (tests and tear-down).
    pub async fn delete_topology(&self) -> Result<()> {
        let link = self.shared.current().await?;
        let channel = link.connection.create_channel().await.map_err(broker)?;
        let names = &self.shared.names;
        for queue in [&names.tasks_queue, &names.dead_queue, &names.events_queue] {
            channel.queue_delete(queue.clone(), QueueDeleteOptions::default()).await.map_err(broker)?;
        }
        for exchange in [&names.tasks_exchange, &names.control_exchange] {
            channel.exchange_delete(exchange.clone(), ExchangeDeleteOptions::default()).await.map_err(broker)?;
        }
        Ok(())
    }
}

/// Opens a connection, declares the topology, enables confirms and starts consuming control messages.
async fn open_link(shared: &Shared, generation: u64) -> Result<(Arc<Link>, Consumer)> {
    tokio::time::timeout(OPEN_TIMEOUT, open_link_untimed(shared, generation))
        .await
        .map_err(|_| broker("timed out connecting to the broker"))?
}

async fn open_link_untimed(shared: &Shared, generation: u64) -> Result<(Arc<Link>, Consumer)> {
    let names = &shared.names;
    let properties =
        ConnectionProperties::default().with_connection_name(format!("minibot {}", shared.worker_id).into());
    let connection = Connection::connect(&shared.settings.broker_url, properties).await.map_err(broker)?;
    let channel = connection.create_channel().await.map_err(broker)?;
    let durable = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    for exchange in [&names.tasks_exchange, &names.control_exchange] {
        channel
            .exchange_declare(exchange.clone(), ExchangeKind::Fanout, durable, FieldTable::default())
            .await
            .map_err(broker)?;
    }
    channel
        .queue_declare(names.dead_queue.clone(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .map_err(broker)?;
    let mut task_args = FieldTable::default();
    task_args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
    task_args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(DELIVERY_LIMIT));
    task_args.insert("x-dead-letter-exchange".into(), AMQPValue::LongString("".into()));
    task_args.insert("x-dead-letter-routing-key".into(), AMQPValue::LongString(names.dead_queue.as_str().into()));
    channel.queue_declare(names.tasks_queue.clone(), QueueDeclareOptions::durable(), task_args).await.map_err(|e| {
        QueueError::Broker(format!(
            "cannot declare the task queue {} as a quorum queue (an existing queue of another kind must be \
                 deleted first): {e}",
            names.tasks_queue
        ))
    })?;
    channel
        .queue_bind(
            names.tasks_queue.clone(),
            names.tasks_exchange.clone(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(broker)?;
    channel
        .queue_declare(names.events_queue.clone(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .map_err(broker)?;
    let control_queue = channel
        .queue_declare("".into(), QueueDeclareOptions::exclusive().auto_delete(), FieldTable::default())
        .await
        .map_err(broker)?;
    channel
        .queue_bind(
            control_queue.name().clone(),
            names.control_exchange.clone(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(broker)?;
    channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(broker)?;
    let control_channel = connection.create_channel().await.map_err(broker)?;
    let controls = control_channel
        .basic_consume(
            control_queue.name().clone(),
            "".into(),
            BasicConsumeOptions { no_ack: true, exclusive: true, ..BasicConsumeOptions::default() },
            FieldTable::default(),
        )
        .await
        .map_err(broker)?;
    let link = Arc::new(Link {
        generation,
        connection,
        publisher: channel,
        tasks: Mutex::new(None),
        events: Mutex::new(None),
    });
    Ok((link, controls))
}

/// Pumps control messages into the buffer while the connection lives, then reconnects with backoff.
async fn supervise(shared: Arc<Shared>, mut link: Arc<Link>, mut controls: Consumer) {
    loop {
        let generation = link.generation;
        let mut broken = shared.broken.subscribe();
        tokio::select! {
            () = pump_controls(&shared, &mut controls) => {}
            _ = broken.wait_for(|g| *g >= generation) => {}
        }
        shared.link.send_replace(LinkState::Reconnecting);
        tracing::warn!(
            worker_id = %shared.worker_id,
            generation,
            "lost the broker connection; reconnecting"
        );
        let _ = tokio::time::timeout(Duration::from_secs(1), link.connection.close(200, "reconnecting".into())).await;
        let mut delay = BACKOFF_MIN;
        loop {
            tokio::time::sleep(delay).await;
            match open_link(&shared, generation + 1).await {
                Ok((new_link, new_controls)) => {
                    link = new_link;
                    controls = new_controls;
                    break;
                }
                Err(error) => {
                    tracing::debug!(error = %error, ?delay, "reconnect failed");
                    delay = (delay * 2).min(BACKOFF_MAX);
                }
            }
        }
        tracing::info!(worker_id = %shared.worker_id, generation = link.generation, "reconnected to the broker");
        shared.link.send_replace(LinkState::Up(link.clone()));
    }
}

async fn pump_controls(shared: &Shared, controls: &mut Consumer) {
    while let Some(delivery) = controls.next().await {
        let Ok(delivery) = delivery else { return };
        match ControlMessage::decode(&delivery.data) {
            Ok(message) => lock(&shared.controls).push(message),
            Err(error) => {
                tracing::error!(error = %error, "control message does not decode; dropped")
            }
        }
    }
}

impl Shared {
    /// The next delivery from the consumer in `slot` of the current link, starting that consumer first when
    /// needed. A consumer that cannot start, fails or ends marks its link broken, and the wait goes on on the
    /// next link.
    async fn next_delivery(
        &self,
        slot: impl Fn(&Link) -> &Mutex<Option<(Channel, Consumer)>>,
        queue: &ShortString,
        prefetch: u16,
        what: &str,
    ) -> Result<(Arc<Link>, lapin::message::Delivery)> {
        let mut floor = 0;
        loop {
            let link = self.current_from(floor).await?;
            let next = {
                let mut consumer = slot(&link).lock().await;
                if consumer.is_none() {
                    match start_consumer(&link, queue, prefetch).await {
                        Ok(started) => *consumer = Some(started),
                        Err(error) => {
                            tracing::warn!(error = %error, "cannot consume {what}");
                            self.report_broken(link.generation);
                            floor = link.generation + 1;
                            continue;
                        }
                    }
                }
                match consumer.as_mut() {
                    Some((_, consumer)) => consumer.next().await,
                    None => None,
                }
            };
            match next {
                Some(Ok(delivery)) => return Ok((link, delivery)),
                Some(Err(_)) | None => {
                    self.report_broken(link.generation);
                    floor = link.generation + 1;
                }
            }
        }
    }

    /// The live connection, waiting (bounded) while a reconnect is under way.
    async fn current(&self) -> Result<Arc<Link>> {
        self.current_from(0).await
    }

    /// The live connection of at least `generation`. Loops that just reported their connection broken wait
    /// here for its replacement: retrying on the dead one would spin without ever yielding to the supervisor.
    async fn current_from(&self, generation: u64) -> Result<Arc<Link>> {
        let mut link = self.link.subscribe();
        let ready = |state: &LinkState| match state {
            LinkState::Up(link) => link.generation >= generation,
            LinkState::Reconnecting => false,
            LinkState::Closed => true,
        };
        match tokio::time::timeout(LINK_WAIT, link.wait_for(ready)).await {
            Ok(Ok(state)) => match &*state {
                LinkState::Up(link) => Ok(link.clone()),
                LinkState::Reconnecting | LinkState::Closed => Err(QueueError::Closed),
            },
            Ok(Err(_)) => Err(QueueError::Closed),
            Err(_) => Err(broker(format!("no connection to the broker for {} s", LINK_WAIT.as_secs()))),
        }
    }

    fn report_broken(&self, generation: u64) {
        self.broken.send_if_modified(|g| {
            let newer = *g < generation;
            if newer {
                *g = generation;
            }
            newer
        });
    }

    /// Sends one message on one connection; the confirm is the caller's to await.
    async fn send(&self, link: &Link, target: Target, message: &Outgoing) -> lapin::Result<PublisherConfirm> {
        let (exchange, routing_key, persistent, mandatory) = match target {
            Target::Task => (self.names.tasks_exchange.clone(), "".into(), true, true),
            Target::Event => ("".into(), self.names.events_queue.clone(), true, true),
            // Controls are fanned out to whoever is connected; nobody connected is not an error.
            Target::Control => (self.names.control_exchange.clone(), "".into(), false, false),
        };
        let mut properties = BasicProperties::default()
            .with_content_type("application/msgpack".into())
            .with_delivery_mode(if persistent { 2 } else { 1 });
        if let Ok(id) = ShortString::try_new(message.id.clone()) {
            properties = properties.with_message_id(id);
        }
        link.publisher
            .basic_publish(
                exchange,
                routing_key,
                BasicPublishOptions { mandatory, immediate: false },
                &message.body,
                properties,
            )
            .await
    }

    /// Publishes a batch on one connection, pipelining confirms `PIPELINE` at a time.
    async fn publish_on(
        &self,
        link: &Link,
        target: Target,
        batch: &[Outgoing],
        indices: &[usize],
    ) -> std::result::Result<(), PublishFailure> {
        let mut unconfirmed = Vec::new();
        let mut connection_lost = false;
        let mut reason = String::new();
        for chunk in indices.chunks(PIPELINE) {
            let mut confirms = Vec::with_capacity(chunk.len());
            for &index in chunk {
                if connection_lost {
                    unconfirmed.push(index);
                    continue;
                }
                let Some(message) = batch.get(index) else {
                    continue;
                };
                match self.send(link, target, message).await {
                    Ok(confirm) => confirms.push((index, confirm)),
                    Err(error) => {
                        connection_lost = true;
                        reason = error.to_string();
                        unconfirmed.push(index);
                    }
                }
            }
            let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
            for (index, confirm) in confirms {
                let Ok(confirmation) = tokio::time::timeout_at(deadline, confirm).await else {
                    connection_lost = true;
                    reason = "no publisher confirm in time".into();
                    unconfirmed.push(index);
                    continue;
                };
                match confirmation {
                    Ok(Confirmation::Ack(None)) => {}
                    Ok(Confirmation::Ack(Some(returned))) => {
                        // Routable targets we declared ourselves; a return means someone deleted them.
                        reason = format!("the broker returned the message: {}", returned.reply_text);
                        unconfirmed.push(index);
                    }
                    Ok(Confirmation::Nack(_)) => {
                        reason = "the broker refused the message (nack)".into();
                        unconfirmed.push(index);
                    }
                    Ok(Confirmation::NotRequested) => {
                        reason = "publisher confirms are off on this channel".into();
                        unconfirmed.push(index);
                    }
                    Err(error) => {
                        connection_lost = true;
                        reason = error.to_string();
                        unconfirmed.push(index);
                    }
                }
            }
        }
        if unconfirmed.is_empty() { Ok(()) } else { Err(PublishFailure { unconfirmed, connection_lost, reason }) }
    }

    /// Publishes until every message is confirmed, across reconnects, for at most `PUBLISH_WINDOW`.
    async fn publish_reliably(&self, target: Target, batch: &[Outgoing]) -> Result<()> {
        let deadline = Instant::now() + PUBLISH_WINDOW;
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        let mut delay = BACKOFF_MIN;
        let mut floor = 0;
        loop {
            let link = self.current_from(floor).await?;
            let failure = match self.publish_on(&link, target, batch, &pending).await {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            if failure.connection_lost {
                self.report_broken(link.generation);
                floor = link.generation + 1;
            }
            if Instant::now() >= deadline {
                return Err(QueueError::Broker(format!(
                    "{} of {} messages not confirmed by the broker: {}",
                    failure.unconfirmed.len(),
                    batch.len(),
                    failure.reason
                )));
            }
            tracing::warn!(
                unconfirmed = failure.unconfirmed.len(),
                reason = %failure.reason,
                "publishing again after a failed publish"
            );
            pending = failure.unconfirmed;
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(BACKOFF_MAX);
        }
    }

    /// Publishes one event on the given connection only, never on a later one.
    async fn publish_event_on(&self, link: &Link, event: &WorkerEvent) -> Result<Published> {
        let batch = [Outgoing { id: event.task_id.clone(), body: event.encode()? }];
        match self.publish_on(link, Target::Event, &batch, &[0]).await {
            Ok(()) => Ok(Published::Confirmed),
            Err(failure) => {
                tracing::warn!(task_id = %event.task_id, reason = %failure.reason, "event not confirmed");
                if failure.connection_lost {
                    self.report_broken(link.generation);
                    Ok(Published::ConnectionLost)
                } else {
                    Ok(Published::Refused(failure.reason))
                }
            }
        }
    }

    /// Hands a delivery back after its report was refused, so it is not held unacknowledged forever. When
    /// the connection is gone there is nothing to do: the broker already took it back.
    async fn give_back(&self, link: &Link, acker: &Acker, published: &Published) {
        if let Published::Refused(_) = published
            && let Err(error) = acker.reject(BasicRejectOptions { requeue: true }).await
        {
            tracing::warn!(error = %error, "requeue failed");
            self.report_broken(link.generation);
        }
    }

    fn finished_event(&self, task_id: &str, attempt: u32, outcome: TaskOutcome) -> WorkerEvent {
        let (stop_reason, error) = match outcome {
            TaskOutcome::Cancelled => ("cancelled", None),
            _ => ("worker_error", Some(dead_task_error(attempt.saturating_sub(1)))),
        };
        WorkerEvent::new(
            task_id,
            attempt,
            &self.worker_id,
            WorkerEventKind::Finished {
                outcome,
                stop_reason: stop_reason.into(),
                text: None,
                error,
                steps: 0,
                tool_calls: 0,
                total_tokens: 0,
            },
        )
    }

    /// Reports a delivery the worker will not run, then acknowledges it. On failure the broker redelivers it
    /// and the decision is taken again.
    async fn finish_unrun(&self, link: &Link, acker: &Acker, event: WorkerEvent) -> Result<()> {
        let published = self.publish_event_on(link, &event).await?;
        if published != Published::Confirmed {
            self.give_back(link, acker, &published).await;
        } else if let Err(error) = acker.ack(BasicAckOptions::default()).await {
            tracing::warn!(error = %error, "ack failed; the task will be redelivered");
            self.report_broken(link.generation);
        }
        Ok(())
    }

    /// Looks at one delivered task; `Some` when the worker should run it.
    async fn admit(&self, link: &Link, delivery: lapin::message::Delivery) -> Result<Option<ClaimedTask>> {
        let envelope = match TaskEnvelope::decode(&delivery.data) {
            Ok(envelope) => envelope,
            Err(error) => {
                let id = delivery.properties.message_id().as_ref().map(ToString::to_string);
                tracing::error!(task_id = ?id, error = %error, "queued task does not decode; dead-lettered");
                if let Some(id) = id {
                    let mut event = self.finished_event(&id, 1, TaskOutcome::Failed);
                    if let WorkerEventKind::Finished { error: slot, .. } = &mut event.kind {
                        *slot = Some(format!("the queued task does not decode: {error}"));
                    }
                    let published = self.publish_event_on(link, &event).await?;
                    if published != Published::Confirmed {
                        // Without the report, let the broker redeliver rather than lose the failure.
                        self.give_back(link, &delivery.acker, &published).await;
                        return Ok(None);
                    }
                }
                if let Err(error) = delivery.acker.reject(BasicRejectOptions { requeue: false }).await {
                    tracing::warn!(error = %error, "reject failed");
                    self.report_broken(link.generation);
                }
                return Ok(None);
            }
        };
        let attempt = delivery_count(&delivery.properties).saturating_add(1);
        let task_id = envelope.task_id.clone();
        if lock(&self.settled).contains(&task_id) {
            tracing::info!(task_id = %task_id, "redelivery of a task settled here; dropped");
            if let Err(error) = delivery.acker.ack(BasicAckOptions::default()).await {
                tracing::warn!(error = %error, "ack failed");
                self.report_broken(link.generation);
            }
            return Ok(None);
        }
        if lock(&self.controls).cancelled.contains(&task_id) {
            tracing::info!(task_id = %task_id, "task was cancelled before it was claimed");
            let event = self.finished_event(&task_id, attempt, TaskOutcome::Cancelled);
            self.finish_unrun(link, &delivery.acker, event).await?;
            return Ok(None);
        }
        if attempt > envelope.max_attempts.max(1) {
            tracing::warn!(task_id = %task_id, attempts = attempt - 1, "task exhausted its attempts; failed");
            let event = self.finished_event(&task_id, attempt, TaskOutcome::Failed);
            self.finish_unrun(link, &delivery.acker, event).await?;
            return Ok(None);
        }
        let token = format!("{}.{}", link.generation, delivery.delivery_tag);
        let claim = Claim { generation: link.generation, acker: delivery.acker, terminal: Vec::new() };
        lock(&self.claims).insert(token.clone(), claim);
        Ok(Some(ClaimedTask { envelope, attempt, token }))
    }

    /// The connection a claim was made on, if it is still the live one.
    fn claim_link(&self, task: &ClaimedTask) -> Result<Arc<Link>> {
        let lost = || QueueError::LeaseLost { task_id: task.envelope.task_id.clone() };
        let generation = lock(&self.claims).get(&task.token).map(|held| held.generation).ok_or_else(lost)?;
        match &*self.link.borrow() {
            LinkState::Up(link) if link.generation == generation => Ok(link.clone()),
            _ => {
                lock(&self.claims).remove(&task.token);
                Err(lost())
            }
        }
    }
}

impl Shared {
    /// Sends a claimed task's terminal event without waiting for its confirm, which [`WorkQueue::settle`]
    /// leaves to the background.
    async fn send_terminal(&self, link: &Link, task: &ClaimedTask, event: &WorkerEvent) -> Result<()> {
        let lost = || QueueError::LeaseLost { task_id: task.envelope.task_id.clone() };
        let message = Outgoing { id: event.task_id.clone(), body: event.encode()? };
        match self.send(link, Target::Event, &message).await {
            Ok(confirm) => {
                let mut claims = lock(&self.claims);
                let claim = claims.get_mut(&task.token).ok_or_else(lost)?;
                claim.terminal.push(confirm);
                Ok(())
            }
            Err(error) => {
                // As with a lost confirm: the delivery goes back with the connection, the worker stops.
                tracing::warn!(task_id = %event.task_id, error = %error, "terminal event not sent");
                self.report_broken(link.generation);
                lock(&self.claims).remove(&task.token);
                Err(lost())
            }
        }
    }

    /// Queues an acknowledgement for [`run_background`]. Unbounded, but each job holds an unacked delivery, so
    /// the prefetch counts bound it.
    fn in_background(&self, job: Background) {
        self.in_background.send_modify(|n| *n += 1);
        if self.background.send(job).is_err() {
            // Only after `close`: nothing is acknowledged, the broker redelivers.
            self.in_background.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    async fn run_job(&self, job: Background) {
        match job {
            Background::AckEvent(held) => {
                if let Err(error) = held.acker.ack(BasicAckOptions::default()).await {
                    tracing::debug!(error = %error, "event ack failed; it will be redelivered");
                    self.report_broken(held.generation);
                }
            }
            Background::Settle { task_id, generation, acker, terminal } => {
                let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
                let mut stored = false;
                let mut connection_lost = false;
                let mut refused = None;
                for confirm in terminal {
                    match tokio::time::timeout_at(deadline, confirm).await {
                        Ok(Ok(Confirmation::Ack(None))) => stored = true,
                        Ok(Ok(Confirmation::Ack(Some(returned)))) => {
                            refused = Some(format!("the broker returned the message: {}", returned.reply_text));
                        }
                        Ok(Ok(Confirmation::Nack(_))) => refused = Some("the broker refused the message (nack)".into()),
                        Ok(Ok(Confirmation::NotRequested)) => {
                            refused = Some("publisher confirms are off on this channel".into());
                        }
                        Ok(Err(_)) | Err(_) => connection_lost = true,
                    }
                }
                if stored {
                    // The answer is stored: a redelivery reaching this worker is a duplicate, even if this ack
                    // is lost with the connection.
                    lock(&self.settled).insert(&task_id);
                    if let Err(error) = acker.ack(BasicAckOptions::default()).await {
                        tracing::warn!(task_id = %task_id, error = %error, "ack failed; the task will be redelivered");
                        self.report_broken(generation);
                    }
                } else if connection_lost {
                    tracing::warn!(task_id = %task_id, "terminal event not confirmed; the task will be redelivered");
                    self.report_broken(generation);
                } else {
                    let reason = refused.unwrap_or_default();
                    tracing::warn!(task_id = %task_id, reason = %reason, "terminal event refused; task requeued");
                    if let Err(error) = acker.reject(BasicRejectOptions { requeue: true }).await {
                        tracing::warn!(error = %error, "requeue failed");
                        self.report_broken(generation);
                    }
                }
            }
        }
    }
}

/// Runs the acknowledgements handed over by `settle` and `ack_event`, many at a time.
async fn run_background(shared: Arc<Shared>, mut jobs: mpsc::UnboundedReceiver<Background>) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            job = jobs.recv() => match job {
                Some(job) => running.push(shared.run_job(job)),
                None => return,
            },
            Some(()) = running.next(), if !running.is_empty() => {
                shared.in_background.send_modify(|n| *n = n.saturating_sub(1));
            }
        }
    }
}

/// Deliveries of this message before this one, as counted by the quorum queue (absent on the first).
fn delivery_count(properties: &BasicProperties) -> u32 {
    let Some(headers) = properties.headers() else {
        return 0;
    };
    let count: i128 = match headers.inner().get("x-delivery-count") {
        Some(AMQPValue::ShortShortInt(v)) => (*v).into(),
        Some(AMQPValue::ShortShortUInt(v)) => (*v).into(),
        Some(AMQPValue::ShortInt(v)) => (*v).into(),
        Some(AMQPValue::ShortUInt(v)) => (*v).into(),
        Some(AMQPValue::LongInt(v)) => (*v).into(),
        Some(AMQPValue::LongUInt(v)) => (*v).into(),
        Some(AMQPValue::LongLongInt(v)) => (*v).into(),
        _ => return 0,
    };
    // Leaves room for the `+ 1` of the attempt number.
    u32::try_from(count.clamp(0, i128::from(u32::MAX - 1))).unwrap_or(0)
}

impl TaskQueue for AmqpQueue {
    fn publish<'a>(&'a self, task: &'a TaskEnvelope) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.publish_many(std::slice::from_ref(task)))
    }

    fn control<'a>(&'a self, message: &'a ControlMessage) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let batch = [Outgoing { id: message.task_id.clone(), body: message.encode()? }];
            self.shared.publish_reliably(Target::Control, &batch).await
        })
    }

    fn next_event(&self) -> BoxFuture<'_, Result<EventDelivery>> {
        Box::pin(async move {
            let shared = &self.shared;
            loop {
                let (link, delivery) = shared
                    .next_delivery(|link| &link.events, &shared.names.events_queue, EVENT_PREFETCH, "events")
                    .await?;
                let event = match WorkerEvent::decode(&delivery.data) {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::error!(error = %error, "worker event does not decode; dropped");
                        let _ = delivery.acker.reject(BasicRejectOptions { requeue: false }).await;
                        continue;
                    }
                };
                let duplicate = {
                    let mut finished = lock(&shared.finished);
                    let duplicate = finished.contains(&event.task_id);
                    if !duplicate && event.is_terminal() {
                        finished.insert(&event.task_id);
                    }
                    duplicate
                };
                if duplicate {
                    tracing::debug!(task_id = %event.task_id, "event after the task's terminal event; dropped");
                    let _ = delivery.acker.ack(BasicAckOptions::default()).await;
                    continue;
                }
                let tag = shared.next_event_tag.fetch_add(1, Ordering::Relaxed);
                lock(&shared.unacked_events).insert(tag, Held { generation: link.generation, acker: delivery.acker });
                return Ok(EventDelivery { event, tag });
            }
        })
    }

    fn ack_event(&self, delivery: &EventDelivery) -> BoxFuture<'_, Result<()>> {
        let tag = delivery.tag;
        Box::pin(async move {
            let Some(held) = lock(&self.shared.unacked_events).remove(&tag) else {
                return Ok(());
            };
            // Sent in the background. If the connection is gone the event comes back; terminal ones are then
            // dropped as duplicates and the coordinator applies the others idempotently, so a failed ack is not
            // the caller's problem.
            self.shared.in_background(Background::AckEvent(held));
            Ok(())
        })
    }
}

async fn start_consumer(link: &Link, queue: &ShortString, prefetch: u16) -> Result<(Channel, Consumer)> {
    let channel = link.connection.create_channel().await.map_err(broker)?;
    channel.basic_qos(prefetch.max(1), BasicQosOptions::default()).await.map_err(broker)?;
    let consumer = channel
        .basic_consume(queue.clone(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .map_err(broker)?;
    Ok((channel, consumer))
}

impl WorkQueue for AmqpQueue {
    fn claim(&self) -> BoxFuture<'_, Result<ClaimedTask>> {
        Box::pin(async move {
            let shared = &self.shared;
            loop {
                let prefetch = shared.settings.prefetch_count;
                let (link, delivery) =
                    shared.next_delivery(|link| &link.tasks, &shared.names.tasks_queue, prefetch, "tasks").await?;
                if let Some(task) = shared.admit(&link, delivery).await? {
                    return Ok(task);
                }
            }
        })
    }

    fn emit<'a>(&'a self, task: &'a ClaimedTask, event: &'a WorkerEvent) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let link = self.shared.claim_link(task)?;
            if event.is_terminal() {
                return self.shared.send_terminal(&link, task, event).await;
            }
            match self.shared.publish_event_on(&link, event).await? {
                Published::Confirmed => Ok(()),
                // The claim still holds; the caller may retry the event or give up on the task.
                Published::Refused(reason) => Err(QueueError::Broker(reason)),
                Published::ConnectionLost => {
                    // The event may or may not have reached the broker; either way the delivery goes back to
                    // the queue with the connection, so the worker must stop and let the redelivery run.
                    lock(&self.shared.claims).remove(&task.token);
                    Err(QueueError::LeaseLost { task_id: task.envelope.task_id.clone() })
                }
            }
        })
    }

    fn controls<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<Vec<ControlMessage>>> {
        Box::pin(async move { Ok(lock(&self.shared.controls).take(&task.envelope.task_id)) })
    }

    fn settle<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let shared = &self.shared;
            lock(&shared.controls).take(&task.envelope.task_id);
            let lost = || QueueError::LeaseLost { task_id: task.envelope.task_id.clone() };
            let link = shared.claim_link(task)?;
            let claim = lock(&shared.claims).remove(&task.token).ok_or_else(lost)?;
            if !claim.terminal.is_empty() {
                shared.in_background(Background::Settle {
                    task_id: task.envelope.task_id.clone(),
                    generation: claim.generation,
                    acker: claim.acker,
                    terminal: claim.terminal,
                });
                return Ok(());
            }
            if let Err(error) = claim.acker.ack(BasicAckOptions::default()).await {
                tracing::warn!(task_id = %task.envelope.task_id, error = %error, "ack failed; the task will be redelivered");
                shared.report_broken(link.generation);
                return Err(lost());
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_count(value: AMQPValue) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert("x-delivery-count".into(), value);
        BasicProperties::default().with_headers(headers)
    }

    #[test]
    fn delivery_count_reads_any_integer_and_tolerates_nonsense() {
        assert_eq!(delivery_count(&BasicProperties::default()), 0);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongLongInt(2))), 2);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongInt(3))), 3);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongLongInt(-5))), 0);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongLongInt(i64::MAX))), u32::MAX - 1);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongString("7".into()))), 0);
    }

    #[test]
    fn control_buffer_remembers_cancels_and_stays_bounded() {
        let mut buffer = ControlBuffer::default();
        buffer.push(ControlMessage::new("t0", ControlKind::Cancel));
        for i in 0..BUFFERED_TASKS + 10 {
            buffer.push(ControlMessage::new(&format!("s{i}"), ControlKind::Steer { text: "x".into() }));
        }
        for _ in 0..BUFFERED_PER_TASK + 5 {
            buffer.push(ControlMessage::new("busy", ControlKind::Steer { text: "y".into() }));
        }
        assert!(buffer.by_task.len() <= BUFFERED_TASKS);
        assert!(buffer.take("t0").is_empty(), "the oldest buffer was evicted");
        assert!(buffer.cancelled.contains("t0"), "but the cancel is remembered");
        assert_eq!(buffer.take("busy").len(), BUFFERED_PER_TASK);
        assert!(buffer.take("busy").is_empty());
    }

    #[test]
    fn names_longer_than_amqp_allows_are_an_error() {
        let mut settings = AmqpSettings::new("amqp://localhost");
        assert!(Names::new(&settings).is_ok());
        settings.queue_name = "q".repeat(300);
        assert!(matches!(Names::new(&settings), Err(QueueError::Broker(_))));
    }
}
