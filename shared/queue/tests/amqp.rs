#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The RabbitMQ queue against the real broker at `MINIBOT_TEST_AMQP_URL`. Each test declares its own queues
//! and exchanges and deletes them at the end. The broker-restart test lives in `amqp_restart.rs`, its own
//! binary, because it disturbs every connection.

mod support;

use lapin::options::BasicPublishOptions;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use minibot_protocol::*;
use minibot_queue::amqp::{AmqpQueue, AmqpSettings};
use minibot_queue::{QueueError, TaskQueue, WorkQueue};
use std::time::{Duration, Instant};
use support::*;

#[tokio::test]
async fn a_task_goes_round_trip() {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    let worker = connect(&settings, "w1").await;
    let claiming = tokio::spawn(async move {
        let claimed = claim(&worker).await;
        (worker, claimed, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let published = Instant::now();
    orchestrator.publish(&task("t1", 3)).await.unwrap();
    let confirmed = published.elapsed();
    let (worker, claimed, claimed_at) = claiming.await.unwrap();
    let pickup = claimed_at - published;
    println!("publish confirmed after {confirmed:?}; idle worker picked the task up after {pickup:?}");
    assert!(pickup < Duration::from_secs(1), "pickup took {pickup:?}");
    assert_eq!(claimed.envelope, task("t1", 3));
    assert_eq!(claimed.attempt, 1);

    let progress = WorkerEvent::new(
        "t1",
        1,
        "w1",
        WorkerEventKind::Progress { step: 1, tool_names: vec!["bash".into()], total_tokens: 3 },
    );
    worker.emit(&claimed, &progress).await.unwrap();
    let steer = ControlMessage::new("t1", ControlKind::Steer { text: "hurry".into() });
    orchestrator.control(&steer).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let controls = loop {
        let controls = worker.controls(&claimed).await.unwrap();
        if !controls.is_empty() || Instant::now() > deadline {
            break controls;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(controls, vec![steer]);
    assert!(worker.controls(&claimed).await.unwrap().is_empty(), "a control message is read once");
    let finished = done("t1", 1, "w1");
    worker.emit(&claimed, &finished).await.unwrap();
    worker.settle(&claimed).await.unwrap();

    assert_eq!(next(&orchestrator).await, progress);
    assert_eq!(next(&orchestrator).await, finished);
    // Acks are asynchronous on the broker's side; give them a moment before counting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(orchestrator.depths().await.unwrap(), (0, 0));
    orchestrator.close().await;
    let fresh = connect(&settings, "orchestrator-2").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(500), fresh.next_event()).await.is_err(),
        "acknowledged events are gone"
    );
    assert!(tokio::time::timeout(Duration::from_millis(300), worker.claim()).await.is_err(), "a settled task is gone");
    fresh.delete_topology().await.unwrap();
}

#[tokio::test]
async fn a_redelivery_after_a_worker_died_counts_as_an_attempt() {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    orchestrator.publish(&task("t1", 3)).await.unwrap();
    let w1 = connect(&settings, "w1").await;
    let first = claim(&w1).await;
    assert_eq!(first.attempt, 1);
    // w1 dies without acknowledging: the broker puts the task back.
    w1.close().await;
    let w2 = connect(&settings, "w2").await;
    let second = claim(&w2).await;
    assert_eq!(second.envelope.task_id, "t1");
    assert_eq!(second.attempt, 2, "a redelivery counts as an attempt");
    let late = WorkerEvent::new("t1", 1, "w1", WorkerEventKind::Started);
    assert!(matches!(w1.emit(&first, &late).await, Err(QueueError::LeaseLost { .. })));
    w2.emit(&second, &done("t1", 2, "w2")).await.unwrap();
    w2.settle(&second).await.unwrap();
    let event = next(&orchestrator).await;
    assert_eq!((event.attempt, event.worker_id.as_str()), (2, "w2"));
    orchestrator.delete_topology().await.unwrap();
}

#[tokio::test]
async fn a_task_that_keeps_dying_is_failed_after_max_attempts() {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    orchestrator.publish(&task("t1", 2)).await.unwrap();
    for attempt in 1..=2 {
        let worker = connect(&settings, &format!("w{attempt}")).await;
        let claimed = claim(&worker).await;
        assert_eq!(claimed.attempt, attempt);
        worker.close().await;
    }
    let last = connect(&settings, "w3").await;
    let third = tokio::time::timeout(Duration::from_millis(1000), last.claim()).await;
    assert!(third.is_err(), "a dead task is never handed out again");
    let event = next(&orchestrator).await;
    assert_eq!(event.task_id, "t1");
    match event.kind {
        WorkerEventKind::Finished { outcome, stop_reason, error, .. } => {
            assert_eq!(outcome, TaskOutcome::Failed);
            assert_eq!(stop_reason, "worker_error");
            assert!(error.unwrap().contains("2 times"));
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(orchestrator.depths().await.unwrap(), (0, 0));
    assert_eq!(orchestrator.dead_letters().await.unwrap(), 1, "the poison task is kept in <queue>.dead");
    orchestrator.delete_topology().await.unwrap();
}

fn routed(id: &str, agent: &str) -> TaskEnvelope {
    let mut envelope = task(id, 3);
    envelope.agent_name = Some(agent.into());
    envelope
}

#[tokio::test]
async fn a_worker_only_sees_tasks_of_its_routes() {
    let base = settings(1);
    let orchestrator = connect(&AmqpSettings { routes: vec![], ..base.clone() }, "orchestrator").await;
    let plain = connect(&base, "plain").await;
    orchestrator.publish(&routed("gpu-1", "renderer")).await.unwrap();
    orchestrator.publish(&task("plain-1", 3)).await.unwrap();
    let first = claim(&plain).await;
    assert_eq!(first.envelope.task_id, "plain-1", "the generic task, not the renderer's");
    plain.emit(&first, &done("plain-1", 1, "plain")).await.unwrap();
    plain.settle(&first).await.unwrap();
    let nothing = tokio::time::timeout(Duration::from_millis(800), plain.claim()).await;
    assert!(nothing.is_err(), "a worker without the renderer never sees its task");
    plain.close().await;
    let renderer_routes = vec![String::new(), route_for(Some("renderer"))];
    let gpu = connect(&AmqpSettings { routes: renderer_routes.clone(), ..base.clone() }, "gpu").await;
    let second = claim(&gpu).await;
    assert_eq!((second.envelope.task_id.as_str(), second.attempt), ("gpu-1", 1), "waited for a worker that has it");
    // While it runs that task, the GPU worker holds nothing else back: a generic task published now goes to
    // the next free worker, not into the busy worker's buffer.
    orchestrator.publish(&task("plain-2", 3)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = connect(&base, "plain-2").await;
    let third = claim(&other).await;
    assert_eq!((third.envelope.task_id.as_str(), third.attempt), ("plain-2", 1));
    other.emit(&third, &done("plain-2", 1, "plain-2")).await.unwrap();
    other.settle(&third).await.unwrap();
    other.close().await;
    gpu.emit(&second, &done("gpu-1", 1, "gpu")).await.unwrap();
    gpu.settle(&second).await.unwrap();
    let ids = [next(&orchestrator).await.task_id, next(&orchestrator).await.task_id, next(&orchestrator).await.task_id];
    assert_eq!(ids, ["plain-1", "plain-2", "gpu-1"]);
    gpu.close().await;
    let cleanup = connect(&AmqpSettings { routes: renderer_routes, ..base }, "cleanup").await;
    cleanup.delete_topology().await.unwrap();
    orchestrator.close().await;
}

#[tokio::test]
async fn worker_statuses_reach_the_orchestrator() {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    // The orchestrator binds its status queue when it first listens; heartbeats before that are not kept.
    let listening = tokio::spawn(async move {
        let status = tokio::time::timeout(Duration::from_secs(10), orchestrator.next_status()).await;
        (orchestrator, status)
    });
    let worker = connect(&settings, "w1").await;
    let mut status = WorkerStatus::new("w1", "gpu-box");
    status.labels = vec!["gpu".into()];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !listening.is_finished() && Instant::now() < deadline {
        worker.announce(&status).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (orchestrator, heard) = listening.await.unwrap();
    let heard = heard.expect("a status within 10 s").unwrap();
    assert_eq!((heard.worker_id.as_str(), heard.host.as_str(), heard.labels.clone()), ("w1", "gpu-box", status.labels));
    worker.close().await;
    orchestrator.delete_topology().await.unwrap();
    orchestrator.close().await;
}

#[tokio::test]
async fn a_classic_queue_left_by_an_older_version_stops_start_up_with_what_to_do() {
    let settings = settings(1);
    let connection = Connection::connect(&settings.broker_url, ConnectionProperties::default()).await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    channel
        .queue_declare(
            settings.queue_name.as_str().into(),
            lapin::options::QueueDeclareOptions::durable(),
            lapin::types::FieldTable::default(),
        )
        .await
        .unwrap();
    let error = match AmqpQueue::connect(&settings, "w1").await {
        Ok(_) => panic!("a quorum declare over a classic queue must fail"),
        Err(error) => error,
    };
    assert!(matches!(error, QueueError::Topology(_)), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("exists on the broker as a classic queue"), "{text}");
    assert!(text.contains("minibot queue migrate"), "{text}");

    // What the message says to run: the waiting tasks survive the move into a quorum queue. The last one is
    // unsigned (an older version's, or planted): it moves, is counted, and is never signed on the way.
    for n in 0..3 {
        let encoded = task(&format!("old-{n}"), 3).encode().unwrap();
        let body = if n < 2 { message_key().seal(SealKind::Task, "", &encoded) } else { encoded };
        channel
            .basic_publish(
                "".into(),
                settings.queue_name.as_str().into(),
                BasicPublishOptions::default(),
                &body,
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap();
    }
    let _ = connection.close(200, "done".into()).await;
    let migrated = minibot_queue::amqp::migrate::migrate(&settings).await.unwrap();
    assert_eq!((migrated[0].converted, migrated[0].tasks_moved, migrated[0].unsigned), (true, 3, 1));
    let again = minibot_queue::amqp::migrate::migrate(&settings).await.unwrap();
    assert_eq!((again[0].converted, again[0].tasks_moved), (false, 0), "a second run finds nothing to do");
    let worker = connect(&settings, "w1").await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let claimed = claim(&worker).await;
        ids.push(claimed.envelope.task_id.clone());
        worker.emit(&claimed, &done(&claimed.envelope.task_id, 1, "w1")).await.unwrap();
        worker.settle(&claimed).await.unwrap();
    }
    assert_eq!(ids, ["old-0", "old-1"], "in order, none lost; the unsigned one is not run");
    worker.delete_topology().await.unwrap();
    worker.close().await;
}

#[tokio::test]
async fn garbage_on_the_queue_is_dead_lettered_and_the_worker_goes_on() {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    let worker = connect(&settings, "w").await;

    let raw = Connection::connect(&settings.broker_url, ConnectionProperties::default()).await.unwrap();
    let channel = raw.create_channel().await.unwrap();
    for (id, body) in [("bad", &b"\xc1\xff\x00garbage"[..]), ("worse", &b"{\"json\": 1}"[..])] {
        channel
            .basic_publish(
                "".into(),
                settings.queue_name.as_str().into(),
                BasicPublishOptions::default(),
                body,
                BasicProperties::default().with_message_id(id.into()),
            )
            .await
            .unwrap();
    }
    orchestrator.publish(&task("good", 3)).await.unwrap();

    let claimed = claim(&worker).await;
    assert_eq!(claimed.envelope.task_id, "good", "the worker skips the garbage and keeps working");
    // Unsigned, so not ours: nothing is reported for the ids it names (a forger could fail real tasks so).
    let silent = tokio::time::timeout(Duration::from_millis(500), orchestrator.next_event()).await;
    assert!(silent.is_err(), "no event for unsigned garbage: {silent:?}");
    // Dead-lettering is routed by the broker after the reject, so the count may lag the claim.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let dead_count = loop {
        let dead = channel
            .queue_declare(
                format!("{}.dead", settings.queue_name).as_str().into(),
                lapin::options::QueueDeclareOptions { passive: true, ..Default::default() },
                Default::default(),
            )
            .await
            .unwrap();
        if dead.message_count() >= 2 || tokio::time::Instant::now() > deadline {
            break dead.message_count();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(dead_count, 2, "undecodable tasks are dead-lettered");
    raw.close(200, "bye".into()).await.unwrap();
    orchestrator.delete_topology().await.unwrap();
}

#[tokio::test]
async fn a_task_cancelled_before_it_is_claimed_is_reported_cancelled() {
    let settings = settings(1);
    let orchestrator = connect(&settings, "orchestrator").await;
    let worker = connect(&settings, "w").await;
    orchestrator.publish(&task("t1", 3)).await.unwrap();
    orchestrator.control(&ControlMessage::new("t1", ControlKind::Cancel)).await.unwrap();
    orchestrator.publish(&task("t2", 3)).await.unwrap();
    // The cancel reaches the worker's control queue asynchronously.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let claimed = claim(&worker).await;
    assert_eq!(claimed.envelope.task_id, "t2", "t1 is never handed out");
    let event = next(&orchestrator).await;
    assert_eq!(event.task_id, "t1");
    match event.kind {
        WorkerEventKind::Finished { outcome, stop_reason, .. } => {
            assert_eq!(outcome, TaskOutcome::Cancelled);
            assert_eq!(stop_reason, "cancelled");
        }
        other => panic!("expected a cancellation, got {other:?}"),
    }
    orchestrator.delete_topology().await.unwrap();
}

#[tokio::test]
async fn many_tasks_publish_pipelined_and_each_ends_once() {
    let settings = settings(16);
    let orchestrator = connect(&settings, "orchestrator").await;
    let tasks: Vec<_> = (0..500).map(|i| task(&format!("t{i}"), 3)).collect();
    let started = Instant::now();
    orchestrator.publish_many(&tasks).await.unwrap();
    println!("500 tasks published and confirmed in {:?}", started.elapsed());
    let worker = connect(&settings, "w").await;
    let work = tokio::spawn(async move {
        for _ in 0..500 {
            let claimed = claim(&worker).await;
            let id = claimed.envelope.task_id.clone();
            worker.emit(&claimed, &done(&id, claimed.attempt, "w")).await.unwrap();
            worker.settle(&claimed).await.unwrap();
        }
    });
    let mut seen = std::collections::HashSet::new();
    for _ in 0..500 {
        let event = next(&orchestrator).await;
        assert!(seen.insert(event.task_id.clone()), "{} twice", event.task_id);
    }
    work.await.unwrap();
    orchestrator.delete_topology().await.unwrap();
}

#[tokio::test]
async fn a_task_whose_terminal_event_is_not_stored_is_not_acknowledged() {
    let settings = settings(1);
    let worker = connect(&settings, "w").await;
    worker.publish(&task("t1", 3)).await.unwrap();
    let first = claim(&worker).await;
    assert_eq!(first.attempt, 1);
    // With the events queue gone the broker returns the terminal event instead of storing it.
    let raw = Connection::connect(&settings.broker_url, ConnectionProperties::default()).await.unwrap();
    let channel = raw.create_channel().await.unwrap();
    let events = format!("{}.events", settings.queue_name);
    channel.queue_delete(events.as_str().into(), Default::default()).await.unwrap();
    worker.emit(&first, &done("t1", 1, "w")).await.unwrap();
    worker.settle(&first).await.unwrap();
    // So settle does not acknowledge the task: it comes back as another attempt.
    let second = tokio::time::timeout(Duration::from_secs(5), worker.claim()).await.expect("redelivered").unwrap();
    assert_eq!((second.envelope.task_id.as_str(), second.attempt), ("t1", 2));
    // A fresh connection declares the events queue again; this answer is stored and the task acknowledged.
    let orchestrator = connect(&settings, "orchestrator").await;
    worker.emit(&second, &done("t1", 2, "w")).await.unwrap();
    worker.settle(&second).await.unwrap();
    let event = next(&orchestrator).await;
    assert_eq!((event.task_id.as_str(), event.attempt), ("t1", 2));
    assert!(tokio::time::timeout(Duration::from_millis(500), worker.claim()).await.is_err(), "the task is gone");
    raw.close(200, "bye".into()).await.unwrap();
    orchestrator.delete_topology().await.unwrap();
}
