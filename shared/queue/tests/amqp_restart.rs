#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Restarts the real broker (`rabbitmqctl stop_app && rabbitmqctl start_app`) while tasks are in flight.
//! Its own test binary with a single test: cargo runs test binaries one after another, so no other queue test
//! sees the broker go away under it.

mod support;

use minibot_protocol::*;
use minibot_queue::{TaskQueue, WorkQueue};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::*;

const TASKS: usize = 200;
const WORKERS: usize = 4;

async fn rabbitmqctl(args: &[&str]) {
    let output = tokio::process::Command::new("rabbitmqctl")
        .args(args)
        .output()
        .await
        .expect("rabbitmqctl runs (the restart test needs the broker on this machine)");
    assert!(output.status.success(), "rabbitmqctl {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_ends_exactly_once_across_a_broker_restart() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "minibot_queue=info".into()),
        )
        .with_test_writer()
        .try_init();
    let settings = settings(4);
    let orchestrator = Arc::new(connect(&settings, "orchestrator").await);
    let tasks: Vec<_> = (0..TASKS).map(|i| task(&format!("t{i}"), 5)).collect();
    orchestrator.publish_many(&tasks[..TASKS / 2]).await.unwrap();

    let completions = Arc::new(AtomicUsize::new(0));
    let lost = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let worker = connect(&settings, &format!("w{w}")).await;
        let completions = completions.clone();
        let lost = lost.clone();
        workers.push(tokio::spawn(async move {
            let name = format!("w{w}");
            loop {
                let Ok(claimed) = worker.claim().await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let id = claimed.envelope.task_id.clone();
                let started = WorkerEvent::new(&id, claimed.attempt, &name, WorkerEventKind::Started);
                if worker.emit(&claimed, &started).await.is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // Long enough that the restart catches tasks mid-run.
                tokio::time::sleep(Duration::from_millis(100)).await;
                if worker.emit(&claimed, &done(&id, claimed.attempt, &name)).await.is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                completions.fetch_add(1, Ordering::Relaxed);
                if worker.settle(&claimed).await.is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }

    let terminal = Arc::new(std::sync::Mutex::new(HashMap::<String, u32>::new()));
    let seen = terminal.clone();
    let run = async {
        let terminal = &seen;
        let mut retried = 0;
        let mut restart = None;
        let mut publisher = None;
        while terminal.lock().unwrap().len() < TASKS {
            if restart.is_none() && terminal.lock().unwrap().len() >= 30 {
                println!("restarting RabbitMQ with 30 tasks finished");
                restart = Some(tokio::spawn(async {
                    let began = Instant::now();
                    rabbitmqctl(&["stop_app"]).await;
                    rabbitmqctl(&["start_app"]).await;
                    began.elapsed()
                }));
                // The second half is published while the broker is going down and coming back.
                let orchestrator = orchestrator.clone();
                let rest = tasks[TASKS / 2..].to_vec();
                publisher = Some(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    orchestrator.publish_many(&rest).await
                }));
            }
            let delivery = match orchestrator.next_event().await {
                Ok(delivery) => delivery,
                Err(error) => {
                    println!("next_event: {error}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let _ = orchestrator.ack_event(&delivery).await;
            if delivery.event.is_terminal() {
                retried += usize::from(delivery.event.attempt > 1);
                *terminal.lock().unwrap().entry(delivery.event.task_id.clone()).or_default() += 1;
            }
        }
        // Anything still redelivered after every task ended must not surface as a second answer.
        let drain_until = Instant::now() + Duration::from_secs(3);
        while let Ok(Ok(delivery)) = tokio::time::timeout_at(drain_until.into(), orchestrator.next_event()).await {
            let _ = orchestrator.ack_event(&delivery).await;
            if delivery.event.is_terminal() {
                *terminal.lock().unwrap().entry(delivery.event.task_id.clone()).or_default() += 1;
            }
        }
        let restart_took = restart.expect("the broker was restarted").await.unwrap();
        publisher.expect("published").await.unwrap().unwrap();
        (restart_took, retried)
    };
    let Ok((restart_took, retried)) = tokio::time::timeout(Duration::from_secs(120), run).await else {
        let ended = terminal.lock().unwrap();
        let missing: Vec<_> = (0..TASKS).map(|i| format!("t{i}")).filter(|id| !ended.contains_key(id)).collect();
        panic!(
            "not every task ended within 120 s; {} workers finished {} runs; missing: {missing:?}",
            WORKERS,
            completions.load(Ordering::Relaxed)
        );
    };
    let terminal = terminal.lock().unwrap().clone();
    for worker in &workers {
        worker.abort();
    }

    println!(
        "broker restart took {restart_took:?}; {} terminal events for {TASKS} tasks ({retried} on a later \
         attempt); workers finished {} runs and lost {} claims to the restart",
        terminal.values().sum::<u32>(),
        completions.load(Ordering::Relaxed),
        lost.load(Ordering::Relaxed)
    );
    assert_eq!(terminal.len(), TASKS, "every task ended");
    let twice: Vec<_> = terminal.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "tasks that ended twice: {twice:?}");
    for i in 0..TASKS {
        assert!(terminal.contains_key(&format!("t{i}")), "t{i} never ended");
    }
    orchestrator.delete_topology().await.unwrap();
}
