#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; asserts nothing. Dispatch latency of background tasks, from `spawn_task` returning to the
//! worker's first model request (three tasks in quick succession, then one after a quiet 1.2 s, repeated), with the SQLite queue (local workers) and with RabbitMQ (two
//! `minibot-worker` processes), and the resident memory of an idle worker.
//!
//! Local workers start with the first task and stop after `[tasks] local_worker_idle_seconds`: the cold numbers
//! are tasks submitted when no worker runs (the wait includes starting one), the warm ones tasks submitted right
//! after, to the worker that just ran the cold one. Last, the resident memory of a whole interactive console
//! (its process tree) while idle, while its workers are up after a task, and after they stopped.
//!
//! Run: `cargo build --release -p minibot -p minibot-worker && cargo bench -p minibot-e2e --bench dispatch`
//! (RabbitMQ at MINIBOT_TEST_AMQP_URL, default amqp://guest:guest@127.0.0.1:5672/%2f).

use actix::prelude::*;
use minibot_e2e::{Home, Reply, Script, ScriptedLlm, Terminal, binary, children_of};
use minibot_orchestrator::boot;
use minibot_orchestrator::tasks::{WorkerCommand, WorkerStart};
use minibot_tools::tasks::{Delivery, TaskRequest, TaskService};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TASKS: usize = 60;
/// Cold starts measured, each followed by a warm task.
const COLD_ROUNDS: usize = 12;
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

/// The worker processes this process started (local workers are `minibot worker` children).
fn workers_of(pid: u32) -> usize {
    children_of(pid)
        .into_iter()
        .filter(|child| {
            let line = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&line).contains("\0worker")
        })
        .count()
}

/// Submission to the worker's first model request, `(cold, warm)`, with local workers that stop after 1 s idle.
async fn cold_and_warm() -> (Vec<Duration>, Vec<Duration>) {
    let scripts = (0..COLD_ROUNDS)
        .flat_map(|i| [format!("cold {i}"), format!("warm {i}")])
        .map(|text| Script::new(&text, vec![Reply::text("ok")]))
        .collect();
    let llm = ScriptedLlm::start(scripts).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let tasks = "[tasks]\nlocal_workers = 2\nlocal_worker_idle_seconds = 1\n";
    std::fs::write(&path, format!("[llm]\nbase_url = \"{}\"\napi_key = \"k\"\n{tasks}", llm.base_url())).unwrap();
    let config = minibot_config::Config::load(Some(&path)).unwrap();
    let args = vec!["worker".to_string(), "--config".into(), path.display().to_string()];
    let worker = WorkerCommand { program: binary("minibot"), args };
    let booted = boot::start(config, Some(worker), WorkerStart::OnDemand).await.unwrap();
    let hub = booted.runtime.tasks.clone().unwrap();
    let ctx = minibot_agent::ToolContext {
        session_id: "bench:1".into(),
        channel: "bench".into(),
        chat_id: Some(1),
        owner_id: "primary".into(),
        ..Default::default()
    };
    let submit = async |text: String| {
        let before = llm.requests().len();
        hub.submit(TaskRequest::new(Delivery::Spawn, text), &ctx).await.unwrap();
        let returned = Instant::now();
        while llm.requests().len() == before {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        llm.arrivals()[before].saturating_duration_since(returned)
    };
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for i in 0..COLD_ROUNDS {
        while workers_of(std::process::id()) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cold.push(submit(format!("cold {i}")).await);
        tokio::time::sleep(Duration::from_millis(30)).await;
        warm.push(submit(format!("warm {i}")).await);
    }
    cold.sort();
    warm.sort();
    (cold, warm)
}

/// Resident memory (KiB) and count of `pid` and every process below it.
fn tree_rss_kb(pid: u32) -> (u64, usize) {
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse().ok())
        .unwrap_or(0);
    children_of(pid).into_iter().map(tree_rss_kb).fold((rss, 1), |(kb, n), (c_kb, c_n)| (kb + c_kb, n + c_n))
}

/// An interactive console's process tree (below `script`, which provides its terminal): idle, with its workers
/// up after a task, and after they stopped.
async fn console_tree() -> [(u64, usize); 3] {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "start a job",
            vec![Reply::tool("spawn_task", serde_json::json!({ "prompt": "a job" })), Reply::text("Started.")],
        ),
        Script::new("a job", vec![Reply::text("job done")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "[tasks]\nlocal_workers = 2\nlocal_worker_idle_seconds = 3\n");
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    let config = home.config().display().to_string();
    let console = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .find(|pid| {
            let line = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
                .replace('\0', " ");
            line.contains(" console ") && line.contains(&config) && !line.starts_with("script")
        })
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = tree_rss_kb(console);
    terminal.type_line("start a job");
    terminal.wait_for("job done").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let busy = tree_rss_kb(console);
    while workers_of(console) > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = tree_rss_kb(console);
    terminal.exit().await;
    [idle, busy, after]
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
        let (cold, warm) = cold_and_warm().await;
        for (name, times) in [("cold (no worker running)", &cold), ("warm (worker idle)", &warm)] {
            println!(
                "task to worker, SQLite queue, {name}, {COLD_ROUNDS} tasks: p50 {:.1} ms, max {:.1} ms",
                percentile(times, 0.5).as_secs_f64() * 1e3,
                times.last().unwrap().as_secs_f64() * 1e3
            );
        }
        for (state, (kb, processes)) in ["idle", "workers up after a task", "workers stopped"].iter().zip(console_tree().await) {
            println!("console process tree, {state}: {processes} process(es), {:.1} MiB", kb as f64 / 1024.0);
        }
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
