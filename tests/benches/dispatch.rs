#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; asserts nothing. Dispatch latency of background tasks, from `spawn_task` returning to the
//! worker's first model request (three tasks in quick succession, then one after a quiet 1.2 s, repeated), with the SQLite queue (local workers) and with RabbitMQ (two
//! `minibot-worker` processes), and the resident memory of an idle worker.
//!
//! Run: `cargo build --release -p minibot -p minibot-worker && cargo bench -p minibot-e2e --bench dispatch`
//! (RabbitMQ at MINIBOT_TEST_AMQP_URL, default amqp://guest:guest@127.0.0.1:5672/%2f).

use actix::prelude::*;
use minibot_e2e::{Reply, Script, ScriptedLlm, binary};
use minibot_orchestrator::boot;
use minibot_orchestrator::tasks::{WorkerCommand, WorkerStart};
use minibot_tools::tasks::{Delivery, TaskRequest, TaskService};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TASKS: usize = 60;
/// Every fourth task comes after a quiet spell, when idle workers poll at their slower pace.
const QUIET_EVERY: usize = 4;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure(backend: &str, extra: &str) -> Vec<Duration> {
    let scripts = (0..TASKS).map(|i| Script::new(&format!("noop {i}"), vec![Reply::text("ok")])).collect();
    let llm = ScriptedLlm::start(scripts).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, format!("[llm]\nbase_url = \"{}\"\napi_key = \"k\"\n{extra}", llm.base_url())).unwrap();
    let config = minibot_config::Config::load(Some(&path)).unwrap();
    let args = vec!["worker".to_string(), "--config".into(), path.display().to_string()];
    let worker = WorkerCommand { program: binary("minibot"), args };
    let rt = boot::start(config, Some(worker), WorkerStart::AtOnce).await.unwrap().runtime;
    let mut remote = Vec::new();
    if backend == "rabbitmq" {
        for _ in 0..2 {
            remote.push(
                Command::new(binary("minibot-worker"))
                    .arg("--config")
                    .arg(&path)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hub = rt.tasks.clone().unwrap();
    let ctx = minibot_agent::ToolContext {
        session_id: "bench:1".into(),
        channel: "bench".into(),
        chat_id: Some(1),
        owner_id: "primary".into(),
        ..Default::default()
    };
    let mut latencies = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        let request = TaskRequest::new(Delivery::Spawn, format!("noop {i}"));
        let before = llm.requests().len();
        hub.submit(request, &ctx).await.unwrap();
        let returned = Instant::now();
        while llm.requests().len() == before {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let arrived = llm.arrivals()[before];
        latencies.push(arrived.saturating_duration_since(returned));
        let gap = if (i + 1) % QUIET_EVERY == 0 { 1_200 } else { 30 };
        tokio::time::sleep(Duration::from_millis(gap)).await;
    }
    for mut child in remote {
        let _ = child.kill();
        let _ = child.wait();
    }
    latencies.sort();
    latencies
}

fn idle_worker_rss_kb() -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"k\"\n").unwrap();
    let mut child = Command::new(binary("minibot-worker")).arg("--config").arg(&path).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let amqp =
        std::env::var("MINIBOT_TEST_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    System::new().block_on(async {
        let sqlite = measure("sqlite", "[tasks]\nlocal_workers = 2\n").await;
        println!(
            "dispatch latency, SQLite queue (2 local workers), {TASKS} tasks: p50 {:.2} ms, p99 {:.2} ms",
            percentile(&sqlite, 0.5).as_secs_f64() * 1e3,
            percentile(&sqlite, 0.99).as_secs_f64() * 1e3
        );
        let id = std::process::id();
        let rabbit = measure(
            "rabbitmq",
            &format!(
                "[tasks]\nbackend = \"rabbitmq\"\n[rabbitmq]\nbroker_url = \"{amqp}\"\nqueue_name = \"minibot-bench-{id}\"\nexchange_name = \"minibot-bench-{id}.tasks\"\nmessage_key = \"test-message-key-0123456789abcdef0123456789\"\n"
            ),
        )
        .await;
        println!(
            "dispatch latency, RabbitMQ (2 minibot-worker processes), {TASKS} tasks: p50 {:.2} ms, p99 {:.2} ms",
            percentile(&rabbit, 0.5).as_secs_f64() * 1e3,
            percentile(&rabbit, 0.99).as_secs_f64() * 1e3
        );
        let settings = minibot_queue::amqp::AmqpSettings {
            broker_url: amqp.clone(),
            queue_name: format!("minibot-bench-{id}"),
            exchange_name: format!("minibot-bench-{id}.tasks"),
            prefetch_count: 1,
            ..minibot_queue::amqp::AmqpSettings::new("", minibot_protocol::MessageKey::new("test-message-key-0123456789abcdef0123456789").unwrap())
        };
        if let Ok(queue) = minibot_queue::amqp::AmqpQueue::connect(&settings, "bench-cleanup").await {
            let _ = queue.delete_topology().await;
            queue.close().await;
        }
    });
    println!("idle minibot-worker RSS (SQLite queue): {:.1} MB", idle_worker_rss_kb() as f64 / 1024.0);
}
