#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Restarts the real broker (`rabbitmqctl stop_app && rabbitmqctl start_app`) while tasks are in flight.
//! Its own test binary with a single test: cargo runs test binaries one after another, so no other queue test
//! sees the broker go away under it.
//!
//! Delivery is at least once: a task whose terminal event was confirmed but whose acknowledgement was lost
//! with the connection is redelivered and run again as a later attempt, and that attempt's terminal event
//! reaches the orchestrator too. The user still gets one answer, because the coordinator keeps the first
//! terminal event of a task and ignores the rest. So the test applies the events as the coordinator does and
//! holds the queue to what the user sees, every task answered once, and to what the coordinator relies on: the
//! terminal event of one attempt arrives once.

mod support;

use minibot_protocol::*;
use minibot_queue::{TaskQueue, WorkQueue};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::*;

const TASKS: usize = 200;
const WORKERS: usize = 4;

/// The worker events the orchestrator received, and what its coordinator made of them.
#[derive(Default)]
struct Seen {
    /// Per task, its terminal events as (attempt, worker), in the order they arrived.
    ended: HashMap<String, Vec<(u32, String)>>,
    /// Per task, the coordinator's record.
    records: HashMap<String, Record>,
    /// Events the coordinator refuses: another worker holds their attempt.
    refused: usize,
}

/// A task as the coordinator keeps it (`shared/store/src/tasks.rs`, reduced to what decides the answer): the
/// first terminal event ends the task, an attempt older than the newest is ignored, and an attempt belongs to
/// the worker of its first event.
#[derive(Default)]
struct Record {
    attempt: u32,
    holder: Option<String>,
    /// The attempt and worker whose terminal event the user sees.
    answer: Option<(u32, String)>,
}

impl Seen {
    fn record(&mut self, event: &WorkerEvent) {
        if event.is_terminal() {
            self.ended.entry(event.task_id.clone()).or_default().push((event.attempt, event.worker_id.clone()));
        }
        let record = self.records.entry(event.task_id.clone()).or_default();
        if record.answer.is_some() || event.attempt < record.attempt {
            return;
        }
        if event.attempt > record.attempt {
            record.attempt = event.attempt;
            record.holder = None;
        }
        match &record.holder {
            Some(holder) if *holder != event.worker_id => {
                self.refused += 1;
                return;
            }
            Some(_) => {}
            None => record.holder = Some(event.worker_id.clone()),
        }
        if event.is_terminal() {
            record.answer = Some((event.attempt, event.worker_id.clone()));
        }
    }

    fn answered(&self) -> usize {
        self.records.values().filter(|record| record.answer.is_some()).count()
    }
}

async fn rabbitmqctl(args: &[&str]) {
    let output = tokio::process::Command::new("rabbitmqctl")
        .args(args)
        .output()
        .await
        .expect("rabbitmqctl runs (the restart test needs the broker on this machine)");
    assert!(output.status.success(), "rabbitmqctl {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_gets_one_answer_across_a_broker_restart() {
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

    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let run = async {
        let answered = || seen.lock().unwrap().answered();
        let mut retried = 0;
        let mut restart = None;
        let mut publisher = None;
        while answered() < TASKS {
            if restart.is_none() && answered() >= 30 {
                println!("restarting RabbitMQ with 30 tasks answered");
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
            retried += usize::from(delivery.event.is_terminal() && delivery.event.attempt > 1);
            seen.lock().unwrap().record(&delivery.event);
        }
        // Events still redelivered after every task ended (their acks lost) must not pass a second time.
        let drain_until = Instant::now() + Duration::from_secs(3);
        while let Ok(Ok(delivery)) = tokio::time::timeout_at(drain_until.into(), orchestrator.next_event()).await {
            let _ = orchestrator.ack_event(&delivery).await;
            seen.lock().unwrap().record(&delivery.event);
        }
        let restart_took = restart.expect("the broker was restarted").await.unwrap();
        publisher.expect("published").await.unwrap().unwrap();
        (restart_took, retried)
    };
    let Ok((restart_took, retried)) = tokio::time::timeout(Duration::from_secs(120), run).await else {
        let seen = seen.lock().unwrap();
        let answered = |id: &String| seen.records.get(id).is_some_and(|record| record.answer.is_some());
        let missing: Vec<_> = (0..TASKS).map(|i| format!("t{i}")).filter(|id| !answered(id)).collect();
        panic!(
            "not every task was answered within 120 s ({} events refused); {} workers finished {} runs; \
             unanswered: {missing:?}",
            seen.refused,
            WORKERS,
            completions.load(Ordering::Relaxed)
        );
    };
    for worker in &workers {
        worker.abort();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());

    let run_again: Vec<_> = seen.ended.iter().filter(|(_, ends)| ends.len() > 1).collect();
    println!(
        "broker restart took {restart_took:?}; {} terminal events for {TASKS} tasks ({retried} on a later \
         attempt, {} refused); workers finished {} runs and lost {} claims to the restart; ended by more than \
         one attempt (answered once, by the first): {run_again:?}",
        seen.ended.values().map(Vec::len).sum::<usize>(),
        seen.refused,
        completions.load(Ordering::Relaxed),
        lost.load(Ordering::Relaxed)
    );
    for i in 0..TASKS {
        let record = seen.records.get(&format!("t{i}"));
        assert!(record.is_some_and(|record| record.answer.is_some()), "t{i} was never answered");
    }
    assert_eq!(seen.records.len(), TASKS, "events of tasks never published");
    for (task, ends) in &seen.ended {
        let distinct: HashSet<_> = ends.iter().collect();
        assert_eq!(distinct.len(), ends.len(), "{task}: one attempt's terminal event arrived twice: {ends:?}");
    }
    orchestrator.delete_topology().await.unwrap();
}
