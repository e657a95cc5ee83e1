//! The process's metrics, in Prometheus text format for `/metrics`. The recorder is installed only when the web
//! UI runs; without it every `metrics::counter!` in the code is a no-op.
//!
//! Names (all prefixed `minibot_`): `turns_total{channel,outcome}`, `tool_calls_total{tool,outcome}`,
//! `llm_requests_total{provider,outcome}`, `llm_request_seconds{provider}`, `llm_tokens_total{kind}`,
//! `tasks_total{status}`, `task_dispatch_seconds`, `task_queue_depth`, `workers_online`, `mcp_servers_up`.
//!
//! Where they are taken, and what the labels hold (every value bounded: no user text, id or error message):
//! - turns: `crate::turn`, once per main-agent turn however it ends. `outcome` is `answered`, `failed` (an
//!   error reply), `timed_out` (the turn's time limit) or `stopped` (the user stopped it, or a step, tool-call
//!   or repetition limit ended it before its answer).
//! - tool calls: the agent loop (`minibot_agent`), per call it answered. `outcome` is `ok`, `error` (the tool
//!   failed, or the call was malformed) or `denied` (not approved); `tool` is the registered name, `unknown`
//!   for a name the registry does not hold. Workers run the same loop in their own processes, without a
//!   recorder, so only the main agent counts.
//! - model requests: `minibot_llm::Metered`, around every client `provider_for` builds, streamed or not, retries
//!   included in one request. `provider` is the configured provider name; `outcome` is `ok` or the error's kind
//!   (`timeout`, `rate_limited`, `server`, …). Tokens are the usage the provider reported.
//! - tasks: the coordinator and the task hub, from worker events and heartbeats (workers have no endpoint):
//!   `status` is the terminal status (`done`, `failed`, `cancelled`, `timed_out`); the dispatch time is from
//!   submission to the first start; the queue depth (tasks no worker runs yet) and the roster size are set by the
//!   coordinator's sweep, every second.
//! - MCP: `crate::mcp_supervisor`, servers connected with their tools loaded, checked every 5 s.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use minibot_web::MetricsRender;
use std::sync::{Arc, Mutex};

/// The renderer once the recorder is installed; a lock, so that two callers at once install it only once.
static RENDER: Mutex<Option<MetricsRender>> = Mutex::new(None);

/// Seconds: a turn's model call takes from tens of milliseconds (a local model) to minutes.
const LATENCY_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// Installs the process-wide recorder (once) and answers its renderer.
pub fn install() -> anyhow::Result<MetricsRender> {
    let mut installed = RENDER.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(render) = installed.as_ref() {
        return Ok(render.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| anyhow::anyhow!("cannot install the metrics recorder: {e}"))?;
    describe();
    let render: MetricsRender = Arc::new(move || handle.render());
    Ok(installed.insert(render).clone())
}

fn describe() {
    // The gauges exist from the start (a scrape before the first task or worker reads 0, not nothing); counters
    // and histograms appear with their first event, one series per label set.
    for gauge in ["minibot_task_queue_depth", "minibot_workers_online", "minibot_mcp_servers_up"] {
        metrics::gauge!(gauge).set(0.0);
    }
    metrics::describe_counter!("minibot_turns_total", "Main-agent turns, by channel and outcome");
    metrics::describe_counter!("minibot_tool_calls_total", "Tool calls of the main agent, by tool and outcome");
    metrics::describe_counter!("minibot_llm_requests_total", "Requests to the model, by provider and outcome");
    metrics::describe_histogram!("minibot_llm_request_seconds", "Time until the model's answer was complete");
    metrics::describe_counter!("minibot_llm_tokens_total", "Tokens the model reported, by kind (input, output)");
    metrics::describe_counter!("minibot_tasks_total", "Background tasks that ended, by status");
    metrics::describe_histogram!("minibot_task_dispatch_seconds", "Time from a task's submission to its start");
    metrics::describe_gauge!("minibot_task_queue_depth", "Tasks waiting for a worker");
    metrics::describe_gauge!("minibot_workers_online", "Workers on the roster");
    metrics::describe_gauge!("minibot_mcp_servers_up", "MCP servers whose tools loaded");
}
