#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints per-call latency of a bridged stdio `echo` (server-everything) and hub start-up time with three
//! servers. Needs the peers from `scripts/setup-mcp-peers.sh`.
//!
//! `cargo bench -p minibot-mcp` (release) or `cargo run --example`-style with `--profile dev`.

use minibot_agent::ToolContext;
use minibot_config::Config;
use minibot_config::schema::{McpSection, McpServerSection};
use minibot_mcp::McpHub;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const CALLS: usize = 1_000;
const WARMUP: usize = 50;
const STARTS: usize = 5;

fn everything_js() -> String {
    let dir = match std::env::var_os("MINIBOT_MCP_PEERS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/minibot-rs/mcp-peers"),
    };
    let path = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.is_file(), "server-everything missing at {}: run scripts/setup-mcp-peers.sh", path.display());
    path.to_string_lossy().into_owned()
}

fn server(name: &str) -> McpServerSection {
    McpServerSection {
        name: name.into(),
        command: Some("node".into()),
        args: vec![everything_js(), "stdio".into()],
        ..Default::default()
    }
}

fn config(names: &[&str]) -> Config {
    let mut config = Config::defaults(env!("CARGO_MANIFEST_DIR"));
    config.tools.mcp =
        McpSection { enabled: true, servers: names.iter().map(|n| server(n)).collect(), ..Default::default() };
    config
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label:<34} n={:<5} p50={:>9.1?} p99={:>9.1?} max={:>9.1?}",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let mut starts = Vec::new();
        for _ in 0..STARTS {
            let started = Instant::now();
            let hub = McpHub::start(&config(&["a", "b", "c"])).await.unwrap();
            starts.push(started.elapsed());
            assert!(hub.status().iter().all(|s| s.error.is_none()), "{:?}", hub.status());
            hub.shutdown().await;
        }
        report("hub start, 3 stdio servers", starts);

        let hub = McpHub::start(&config(&["everything"])).await.unwrap();
        let echo = hub.tools().into_iter().find(|t| t.name() == "mcp_everything__echo").expect("echo");
        let ctx = ToolContext::default();
        let server = hub.servers()[0].clone();

        let mut bridged = Vec::with_capacity(CALLS);
        let mut direct = Vec::with_capacity(CALLS);
        for i in 0..WARMUP + CALLS {
            let started = Instant::now();
            let out = echo.call_json(json!({"message": format!("ping {i}")}), &ctx).await.unwrap();
            let took = started.elapsed();
            assert_eq!(out["ok"], true, "{out}");

            let mut args = Map::new();
            args.insert("message".into(), Value::String(format!("ping {i}")));
            let started = Instant::now();
            server.call_tool("echo", args).await.unwrap();
            let took_direct = started.elapsed();
            if i >= WARMUP {
                bridged.push(took);
                direct.push(took_direct);
            }
        }
        report("bridged echo (DynTool::call_json)", bridged);
        report("session echo (McpServer::call_tool)", direct);
        hub.shutdown().await;
    });
}
