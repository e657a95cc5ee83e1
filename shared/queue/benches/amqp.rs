#![allow(clippy::expect_used, clippy::unwrap_used)]
//! RabbitMQ queue numbers against the broker at `MINIBOT_TEST_AMQP_URL`:
//! - throughput of no-op tasks through `AmqpQueue` (4 workers, each on its own connection: claim, emit the
//!   terminal event, settle; the orchestrator consumes and acks the events), next to a raw lapin loop on the
//!   same kind of queue (persistent publishes with pipelined confirms, manual acks) as the ceiling;
//! - dispatch latency, publish call → `claim` returning in an idle worker, p50/p99;
//! - the cost of signing ([`MessageKey`]): seal and check of each message a no-op task makes, next to the CPU
//!   this process (orchestrator and workers, not the broker) spends per no-op task end to end.
//!
//! Run: `cargo bench -p minibot-queue --bench amqp` (release). Prints numbers; asserts nothing.

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use minibot_protocol::*;
use minibot_queue::amqp::{AmqpQueue, AmqpSettings};
use minibot_queue::{TaskQueue, WorkQueue};
use std::time::{Duration, Instant};

const TASKS: usize = 4_000;
const WORKERS: usize = 4;
const LATENCY_SAMPLES: usize = 500;

fn broker_url() -> String {
    std::env::var("MINIBOT_TEST_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

fn settings(prefetch_count: u16) -> AmqpSettings {
    let id = uuid::Uuid::new_v4().simple().to_string();
    AmqpSettings {
        broker_url: broker_url(),
        queue_name: format!("bench-{id}"),
        exchange_name: format!("bench-{id}.tasks"),
        prefetch_count,
        ..AmqpSettings::new(
            "",
            minibot_protocol::MessageKey::new("test-message-key-0123456789abcdef0123456789").unwrap(),
        )
    }
}

fn task(id: String) -> TaskEnvelope {
    TaskEnvelope {
        version: PROTOCOL_VERSION,
        task_id: id,
        agent_name: None,
        prompt: "nothing".into(),
        context_json: None,
        model_overrides: ModelOverrides::default(),
        limits: TaskLimits { timeout_seconds: 60, max_steps: None, max_tool_calls: None },
        owner_id: "primary".into(),
        channel: "console".into(),
        chat_id: None,
        user_id: None,
        max_attempts: 3,
        agent_hash: None,
        requires: Vec::new(),
        agent_definition: None,
    }
}

fn done(claimed: &minibot_queue::ClaimedTask, worker: &str) -> WorkerEvent {
    let mut event = done_event(&claimed.envelope.task_id, worker);
    event.attempt = claimed.attempt;
    event
}

fn done_event(task_id: &str, worker: &str) -> WorkerEvent {
    WorkerEvent::new(
        task_id,
        1,
        worker,
        WorkerEventKind::Finished {
            outcome: TaskOutcome::Done,
            stop_reason: "completed".into(),
            text: None,
            error: None,
            steps: 0,
            tool_calls: 0,
            total_tokens: 0,
            attachments: Vec::new(),
        },
    )
}

async fn connect(settings: &AmqpSettings, who: &str) -> AmqpQueue {
    AmqpQueue::connect(settings, who).await.unwrap_or_else(|e| {
        panic!(
            "RabbitMQ is not reachable ({e}); start it with `rabbitmq-server -detached && rabbitmqctl await_startup`"
        )
    })
}

/// The ceiling: the same quorum queue, persistent messages, confirms every 512, prefetch 64, manual acks.
async fn raw_loop() -> f64 {
    let connection = Connection::connect(&broker_url(), ConnectionProperties::default()).await.unwrap();
    let queue = format!("bench-raw-{}", uuid::Uuid::new_v4().simple());
    let publisher = connection.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
    publisher.queue_declare(queue.as_str().into(), QueueDeclareOptions::durable(), args).await.unwrap();
    publisher.confirm_select(ConfirmSelectOptions::default()).await.unwrap();
    let consuming = connection.create_channel().await.unwrap();
    consuming.basic_qos(64, BasicQosOptions::default()).await.unwrap();
    let mut consumer = consuming
        .basic_consume(queue.as_str().into(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .unwrap();
    let body = task("raw".into()).encode().unwrap();
    let started = Instant::now();
    let consume = tokio::spawn(async move {
        for _ in 0..TASKS {
            let delivery = consumer.next().await.unwrap().unwrap();
            delivery.ack(BasicAckOptions::default()).await.unwrap();
        }
    });
    for chunk in 0..TASKS.div_ceil(512) {
        let mut confirms = Vec::new();
        for _ in (chunk * 512)..((chunk + 1) * 512).min(TASKS) {
            confirms.push(
                publisher
                    .basic_publish(
                        "".into(),
                        queue.as_str().into(),
                        BasicPublishOptions::default(),
                        &body,
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await
                    .unwrap(),
            );
        }
        for confirm in confirms {
            assert!(confirm.await.unwrap().is_ack());
        }
    }
    consume.await.unwrap();
    let rate = TASKS as f64 / started.elapsed().as_secs_f64();
    publisher.queue_delete(queue.as_str().into(), QueueDeleteOptions::default()).await.unwrap();
    connection.close(200, "done".into()).await.unwrap();
    rate
}

/// CPU time this process has used (all threads), from the scheduler's own account.
fn process_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    Duration::from_nanos(text.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0))
}

/// Seal and check of the messages one no-op task makes (its envelope and its terminal event), averaged.
fn signing_per_task() -> Duration {
    let key = MessageKey::new("bench-message-key-0123456789abcdef0123456789").unwrap();
    let task = task("t-signing".into()).encode().unwrap();
    let event = done_event("t-signing", "w0").encode().unwrap();
    const ROUNDS: u32 = 20_000;
    let started = Instant::now();
    for _ in 0..ROUNDS {
        let sealed = key.seal(SealKind::Task, "orchestrator", std::hint::black_box(&task));
        assert!(key.open(SealKind::Task, "orchestrator", &sealed).is_ok());
        let sealed = key.seal(SealKind::Event, "worker-host", std::hint::black_box(&event));
        assert!(key.open(SealKind::Event, "worker-host", &sealed).is_ok());
    }
    started.elapsed() / ROUNDS
}

/// No-op tasks end to end: publish, claim, terminal event, settle, event consumed and acked. Returns tasks per
/// second and this process's CPU per task.
async fn queue_throughput() -> (f64, Duration) {
    let settings = settings(16);
    let orchestrator = connect(&settings, "orchestrator").await;
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let worker = connect(&settings, &format!("w{w}")).await;
        workers.push(tokio::spawn(async move {
            let name = format!("w{w}");
            loop {
                let claimed = worker.claim().await.unwrap();
                worker.emit(&claimed, &done(&claimed, &name)).await.unwrap();
                worker.settle(&claimed).await.unwrap();
            }
        }));
    }
    let tasks: Vec<_> = (0..TASKS).map(|i| task(format!("t{i}"))).collect();
    let started = Instant::now();
    let cpu_before = process_cpu();
    let (published, ()) = tokio::join!(orchestrator.publish_many(&tasks), async {
        for _ in 0..TASKS {
            let delivery = orchestrator.next_event().await.unwrap();
            orchestrator.ack_event(&delivery).await.unwrap();
        }
    });
    published.unwrap();
    let rate = TASKS as f64 / started.elapsed().as_secs_f64();
    let cpu = (process_cpu() - cpu_before) / TASKS as u32;
    for worker in workers {
        worker.abort();
    }
    orchestrator.delete_topology().await.unwrap();
    (rate, cpu)
}

/// Publish call → claim returning, one task at a time into an idle worker.
async fn dispatch_latency() -> Vec<Duration> {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    let worker = connect(&settings, "w").await;
    let (claimed_tx, mut claimed_rx) = tokio::sync::mpsc::unbounded_channel();
    let working = tokio::spawn(async move {
        loop {
            let claimed = worker.claim().await.unwrap();
            let at = Instant::now();
            worker.emit(&claimed, &done(&claimed, "w")).await.unwrap();
            worker.settle(&claimed).await.unwrap();
            if claimed_tx.send(at).is_err() {
                return;
            }
        }
    });
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for i in 0..LATENCY_SAMPLES {
        let published = Instant::now();
        orchestrator.publish(&task(format!("l{i}"))).await.unwrap();
        let claimed_at = claimed_rx.recv().await.unwrap();
        samples.push(claimed_at - published);
        let delivery = orchestrator.next_event().await.unwrap();
        orchestrator.ack_event(&delivery).await.unwrap();
    }
    working.abort();
    orchestrator.delete_topology().await.unwrap();
    samples.sort();
    samples
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let raw = raw_loop().await;
    println!("raw lapin publish→consume (quorum queue, persistent, confirms/512, prefetch 64): {raw:.0} msg/s");
    let (queue, cpu) = queue_throughput().await;
    println!(
        "AmqpQueue no-op tasks, {WORKERS} workers, {TASKS} tasks (publish, claim, terminal event, settle, event ack): \
         {queue:.0} tasks/s, {:.1} µs of this process's CPU per task",
        cpu.as_secs_f64() * 1e6
    );
    let signing = signing_per_task();
    println!(
        "signing per no-op task (seal + check of the envelope and the terminal event): {:.2} µs = {:.2} % of the \
         CPU per task above (orchestrator and workers; broker and model not counted, so the true share is smaller)",
        signing.as_secs_f64() * 1e6,
        100.0 * signing.as_secs_f64() / cpu.as_secs_f64().max(f64::EPSILON)
    );
    let latency = dispatch_latency().await;
    println!(
        "dispatch latency publish→claim over {LATENCY_SAMPLES} tasks: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&latency, 0.50),
        percentile(&latency, 0.99),
        latency.last().copied().unwrap_or_default()
    );
}
