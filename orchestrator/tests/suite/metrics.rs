//! `/metrics` moves with the work: a main-agent turn with a tool call shows in the rendered Prometheus text as a
//! turn, a tool call, two model requests with their latency, and the tokens the model reported. The recorder is
//! global to the test process and other tests run alongside, so this test uses a channel and a provider name of
//! its own and compares what they show before and after the turn.

use super::harness::{Harness, register};
use super::task_support::{chat, hub};
use actix::prelude::*;
use minibot_orchestrator::messages::Inbound;
use minibot_orchestrator::router;
use minibot_orchestrator::tasks::coordinator::TaskCoordinator;
use minibot_protocol::{TaskOutcome, WorkerEvent, WorkerEventKind};
use minibot_queue::WorkQueue;
use minibot_queue::sqlite::SqliteQueue;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use minibot_tools::tasks::{Delivery, TaskRequest, TaskService};
use prometheus_parse::{Scrape, Value};
use std::time::Duration;
use tokio::sync::mpsc::unbounded_channel;

const CHANNEL: &str = "metrics_probe";
const PROVIDER: &str = "metrics_probe_llm";

/// The rendered metrics, parsed.
fn scrape(render: &minibot_web::MetricsRender) -> Scrape {
    let text = render();
    Scrape::parse(text.lines().map(|line| Ok(line.to_string()))).expect("the metrics parse as Prometheus text")
}

/// Scrapes until `ready` holds for the scrape (the metric is taken just after what the test waits for), for at
/// most 5 s; answers the last scrape either way.
async fn scrape_until(render: &minibot_web::MetricsRender, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut scraped = scrape(render);
    while !ready(&scraped) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        scraped = scrape(render);
    }
    scraped
}

/// The value of the sample named `metric` whose labels include all of `labels`; 0 when there is none yet. A
/// histogram counts its `+Inf` bucket (every observation).
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
            Value::Summary(_) => 0.0,
        })
        .sum()
}

#[actix::test]
async fn a_turn_with_a_tool_call_moves_the_turn_tool_and_model_metrics() {
    let render = minibot_orchestrator::metrics::install().expect("the recorder installs");
    let llm = ScriptedLlm::start(vec![Script::new(
        "how much is 6*7?",
        vec![
            Reply::tools_raw(&[("calculate_expression", r#"{"expression":"6*7"}"#), ("no_such_tool_here", "{}")]),
            Reply::text("It is 42."),
        ],
    )])
    .await;
    let url = llm.base_url();
    let extra = format!(
        "provider = \"{PROVIDER}\"\n[providers.{PROVIDER}]\napi_format = \"openai\"\nbase_url = \"{url}\"\napi_key = \"sk-test\"\n"
    );
    let h = Harness::start(&url, &extra).await;
    let (out_tx, mut replies) = unbounded_channel();
    let (progress_tx, _progress) = unbounded_channel();
    register(&h.router, CHANNEL, out_tx, progress_tx).await;

    let before = scrape(&render);
    h.router.do_send(Inbound::new(CHANNEL, 1, Some(7), "how much is 6*7?"));
    let reply = tokio::time::timeout(Duration::from_secs(10), replies.recv())
        .await
        .expect("a reply within 10 s")
        .expect("channel open");
    assert_eq!(reply.text, "It is 42.");
    // The turn is counted when its future ends, just after the reply is handed over.
    let turns = &[("channel", CHANNEL), ("outcome", "answered")];
    let counted_before = value(&before, "minibot_turns_total", turns);
    let after = scrape_until(&render, |s| value(s, "minibot_turns_total", turns) > counted_before).await;
    let delta = |metric: &str, labels: &[(&str, &str)]| value(&after, metric, labels) - value(&before, metric, labels);

    assert_eq!(delta("minibot_turns_total", turns), 1.0, "one answered turn on {CHANNEL}");
    assert_eq!(delta("minibot_turns_total", &[("channel", CHANNEL), ("outcome", "failed")]), 0.0);
    // Other tests call these tools too: at least this test's calls.
    assert!(delta("minibot_tool_calls_total", &[("tool", "calculate_expression"), ("outcome", "ok")]) >= 1.0);
    // A name the model made up is counted under `unknown`, never under its own name.
    assert!(delta("minibot_tool_calls_total", &[("tool", "unknown"), ("outcome", "error")]) >= 1.0);
    assert_eq!(value(&after, "minibot_tool_calls_total", &[("tool", "no_such_tool_here")]), 0.0);
    // The tool call, then the answer: two requests, both timed.
    let provider = &[("provider", PROVIDER)];
    assert_eq!(delta("minibot_llm_requests_total", &[("provider", PROVIDER), ("outcome", "ok")]), 2.0);
    assert_eq!(delta("minibot_llm_request_seconds_count", provider), 2.0);
    assert!(value(&after, "minibot_llm_request_seconds_sum", provider) > 0.0);
    let (input, output) = (&[("kind", "input")], &[("kind", "output")]);
    assert!(delta("minibot_llm_tokens_total", input) > 0.0, "the usage the fake reported counts");
    assert!(delta("minibot_llm_tokens_total", output) > 0.0);
    assert_eq!(llm.requests().len(), 2);
}

#[actix::test]
async fn a_task_a_worker_starts_and_finishes_moves_the_task_metrics() {
    let render = minibot_orchestrator::metrics::install().expect("the recorder installs");
    let h = Harness::start("http://127.0.0.1:9/v1", "").await;
    let hub = hub(&h);
    TaskCoordinator::new(hub.clone(), router::task_routes(&h.router)).start();
    let before = scrape(&render);

    let queued = hub.submit(TaskRequest::new(Delivery::Spawn, "count the files"), &chat("test", 1)).await.unwrap();
    let task_id = queued["task_id"].as_str().unwrap().to_string();
    // The test is the worker, on the real queue.
    let db = minibot_queue::backend::tasks_db_path(&hub.config).unwrap();
    let worker = SqliteQueue::open(&db, "w-metrics", Duration::from_secs(60)).await.unwrap();
    let task = tokio::time::timeout(Duration::from_secs(10), worker.claim()).await.unwrap().unwrap();
    assert_eq!(task.envelope.task_id, task_id);
    let started = WorkerEvent::new(&task_id, task.attempt, "w-metrics", WorkerEventKind::Started);
    worker.emit(&task, &started).await.unwrap();
    let finished = WorkerEventKind::Finished {
        outcome: TaskOutcome::Done,
        stop_reason: "completed".into(),
        text: Some("42 files".into()),
        error: None,
        steps: 1,
        tool_calls: 0,
        total_tokens: 10,
        attachments: Vec::new(),
    };
    worker.emit(&task, &WorkerEvent::new(&task_id, task.attempt, "w-metrics", finished)).await.unwrap();

    // Other tests end tasks too: at least this one, once started and once done.
    let done = &[("status", "done")];
    let done_before = value(&before, "minibot_tasks_total", done);
    let after = scrape_until(&render, |s| value(s, "minibot_tasks_total", done) > done_before).await;
    assert!(value(&after, "minibot_tasks_total", done) - done_before >= 1.0, "the finished task counts as done");
    let dispatched = |s: &Scrape| value(s, "minibot_task_dispatch_seconds_count", &[]);
    assert!(dispatched(&after) - dispatched(&before) >= 1.0, "its start is timed from its submission");
    // The coordinator's sweep sets the gauges within a second.
    let after = scrape_until(&render, |s| s.samples.iter().any(|x| x.metric == "minibot_task_queue_depth")).await;
    assert!(after.samples.iter().any(|x| x.metric == "minibot_workers_online"), "the roster size is shown");
    worker.close().await;
}
