//! Shared by the RabbitMQ test binaries: the broker address, unique names per test and small helpers.
#![allow(dead_code)]

use minibot_protocol::*;
use minibot_queue::amqp::{AmqpQueue, AmqpSettings};
use minibot_queue::{TaskQueue, WorkQueue};
use std::time::Duration;

pub fn broker_url() -> String {
    std::env::var("MINIBOT_TEST_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// Fresh queue and exchange names, so tests neither share nor inherit messages.
pub fn settings(prefetch_count: u16) -> AmqpSettings {
    let id = uuid::Uuid::new_v4().simple().to_string();
    AmqpSettings {
        broker_url: broker_url(),
        queue_name: format!("test-{id}"),
        exchange_name: format!("test-{id}.tasks"),
        prefetch_count,
        ..AmqpSettings::new("", message_key())
    }
}

/// The key the tests' own orchestrator and workers share.
pub const MESSAGE_KEY: &str = "test-message-key-0123456789abcdef0123456789";

pub fn message_key() -> MessageKey {
    MessageKey::new(MESSAGE_KEY).unwrap()
}

/// Connects or fails the test with instructions: these tests never skip.
pub async fn connect(settings: &AmqpSettings, who: &str) -> AmqpQueue {
    match AmqpQueue::connect(settings, who).await {
        Ok(queue) => queue,
        Err(error) => panic!(
            "RabbitMQ is not reachable at {} ({error}). Start it with \
             `rabbitmq-server -detached && rabbitmqctl await_startup`, or point MINIBOT_TEST_AMQP_URL at a broker.",
            settings.broker_url
        ),
    }
}

pub fn task(id: &str, max_attempts: u32) -> TaskEnvelope {
    TaskEnvelope {
        version: PROTOCOL_VERSION,
        task_id: id.into(),
        agent_name: None,
        prompt: "do it".into(),
        context_json: None,
        model_overrides: ModelOverrides::default(),
        limits: TaskLimits { timeout_seconds: 30, max_steps: None, max_tool_calls: None },
        owner_id: "primary".into(),
        channel: "console".into(),
        chat_id: Some(1),
        user_id: Some(1),
        max_attempts,
        agent_hash: None,
        requires: Vec::new(),
        agent_definition: None,
    }
}

pub fn done(task_id: &str, attempt: u32, worker: &str) -> WorkerEvent {
    WorkerEvent::new(
        task_id,
        attempt,
        worker,
        WorkerEventKind::Finished {
            outcome: TaskOutcome::Done,
            stop_reason: "completed".into(),
            text: Some("ok".into()),
            error: None,
            steps: 1,
            tool_calls: 0,
            total_tokens: 1,
            attachments: Vec::new(),
        },
    )
}

/// The next event, acknowledged.
pub async fn next(queue: &AmqpQueue) -> WorkerEvent {
    let delivery = tokio::time::timeout(Duration::from_secs(10), queue.next_event())
        .await
        .expect("no event within 10 s")
        .expect("next_event failed");
    queue.ack_event(&delivery).await.unwrap();
    delivery.event
}

pub async fn claim(queue: &AmqpQueue) -> minibot_queue::ClaimedTask {
    tokio::time::timeout(Duration::from_secs(10), queue.claim())
        .await
        .expect("no task within 10 s")
        .expect("claim failed")
}
