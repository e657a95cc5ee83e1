//! What a script adds to tool calls: ten `current_datetime` calls made by one `run_tools_script` script against
//! the same ten calls made directly. Target: the script adds less than 5 ms, starting the script's process
//! (this package's `minibot-codemode`, which `cargo bench` builds) included.
//!
//! `cargo bench -p minibot-codemode --bench overhead`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use minibot_agent::{ToolContext, ToolRegistry};
use minibot_config::Config;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: u32 = 200;
const CALLS: usize = 10;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let config =
            Config::from_toml("[tools.codemode]\nenabled = true\n", "bench.toml", dir.path(), &|_| None).unwrap();
        let services = minibot_tools::ToolServices::new(Arc::new(config.clone()), None).unwrap();
        let direct = minibot_tools::main_agent_tools(&services);
        let scripted = minibot_codemode::with_codemode(&direct, &config.tools.codemode).unwrap();
        let code = format!("for i in range({CALLS}):\n    await tools.current_datetime()\n'done'");

        let direct_time = measure(|| direct_calls(&direct)).await;
        let script_time = measure(|| script_call(&scripted, &code)).await;
        let overhead = script_time.saturating_sub(direct_time);
        println!("{CALLS} direct current_datetime calls:           {direct_time:>10.3?}");
        println!("one run_tools_script making {CALLS} such calls:  {script_time:>10.3?}");
        println!(
            "added by the script:                          {overhead:>10.3?} (target < 5 ms: {})",
            if overhead < Duration::from_millis(5) { "met" } else { "MISSED" }
        );
    });
}

/// The mean time of one round, after a few rounds of warm-up.
async fn measure<F, Fut>(round: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..10 {
        round().await;
    }
    let started = Instant::now();
    for _ in 0..ROUNDS {
        round().await;
    }
    started.elapsed() / ROUNDS
}

async fn direct_calls(tools: &ToolRegistry) {
    let tool = tools.get("current_datetime").unwrap();
    let ctx = ToolContext::default();
    for _ in 0..CALLS {
        tool.call_json(json!({}), &ctx).await.unwrap();
    }
}

async fn script_call(tools: &ToolRegistry, code: &str) {
    let tool = tools.get("run_tools_script").unwrap();
    let out = tool.call_json(json!({ "code": code }), &ToolContext::default()).await.unwrap();
    assert_eq!(out["result"], "done", "{out}");
}
