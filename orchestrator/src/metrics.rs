//! The process's metrics, in Prometheus text format for `/metrics`. The recorder is installed only when the web
//! UI runs; without it every `metrics::counter!` in the code is a no-op.
//!
//! Names (all prefixed `minibot_`): `turns_total{channel,outcome}`, `tool_calls_total{tool,outcome}`,
//! `llm_requests_total{provider,outcome}`, `llm_request_seconds`, `llm_tokens_total{kind}`,
//! `tasks_total{status}`, `task_dispatch_seconds`, `task_queue_depth`, `workers_online`, `mcp_servers_up`.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use minibot_web::MetricsRender;
use std::sync::{Arc, OnceLock};

static RENDER: OnceLock<MetricsRender> = OnceLock::new();

/// Seconds: a turn's model call takes from tens of milliseconds (a local model) to minutes.
const LATENCY_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// Installs the process-wide recorder (once) and answers its renderer.
pub fn install() -> anyhow::Result<MetricsRender> {
    if let Some(render) = RENDER.get() {
        return Ok(render.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| anyhow::anyhow!("cannot install the metrics recorder: {e}"))?;
    describe();
    let render: MetricsRender = Arc::new(move || handle.render());
    Ok(RENDER.get_or_init(|| render).clone())
}

fn describe() {
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
