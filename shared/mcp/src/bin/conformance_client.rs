//! The client the official MCP conformance suite (`@modelcontextprotocol/conformance`) runs in
//! tests/suite/conformance.rs. Test support, not a product binary: the Dockerfile ships only `minibot` and
//! `minibot-worker`.
//!
//! `mcp-conformance-client [--mode bridge|lazy] <server-url>`: the suite appends the URL of its test server and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO`. It connects the way an agent does, through an [`McpHub`] with
//! one HTTP server, and calls the scenario's tool through the bridge or lazy binding. Exits non-zero, saying why
//! on stderr, when a step fails.

use minibot_agent::ToolContext;
use minibot_config::Config;
use minibot_config::schema::{McpMode, McpServerSection, McpTransport};
use minibot_mcp::{McpHub, binding_name};
use serde_json::{Value, json};
use std::process::ExitCode;

const SERVER: &str = "conformance";
const USAGE: &str = "usage: mcp-conformance-client [--mode bridge|lazy] <server-url>";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mcp-conformance-client: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let (mode, url) = parse_args(std::env::args().skip(1))?;
    let scenario =
        std::env::var("MCP_CONFORMANCE_SCENARIO").map_err(|_| "MCP_CONFORMANCE_SCENARIO is not set".to_string())?;
    let mut config = Config::defaults(std::env::current_dir().unwrap_or_default());
    config.tools.mcp.enabled = true;
    config.tools.mcp.servers = vec![McpServerSection {
        name: SERVER.into(),
        mode,
        transport: McpTransport::Http,
        url: Some(url),
        ..Default::default()
    }];
    let hub = McpHub::start(&config).await.map_err(|e| e.to_string())?;
    let outcome = drive(&hub, mode, &scenario).await;
    hub.shutdown().await;
    outcome
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(McpMode, String), String> {
    let mut mode = McpMode::Bridge;
    let mut url = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mode" => {
                mode = match args.next().as_deref() {
                    Some("bridge") => McpMode::Bridge,
                    Some("lazy") => McpMode::Lazy,
                    other => return Err(format!("--mode must be `bridge` or `lazy`, got {other:?}; {USAGE}")),
                }
            }
            _ if url.is_none() => url = Some(arg),
            _ => return Err(format!("unexpected argument `{arg}`; {USAGE}")),
        }
    }
    Ok((mode, url.ok_or_else(|| format!("the server URL is missing; {USAGE}"))?))
}

async fn drive(hub: &McpHub, mode: McpMode, scenario: &str) -> Result<(), String> {
    if let Some(error) = hub.status().into_iter().find_map(|s| s.error) {
        return Err(error);
    }
    let out = match scenario {
        // Connecting (and, in bridge mode, listing the tools) is the whole scenario.
        "initialize" => return Ok(()),
        "tools_call" => call(hub, mode, "add_numbers", json!({"a": 5, "b": 3})).await?,
        "sse-retry" => call(hub, mode, "test_reconnection", json!({})).await?,
        other => return Err(format!("scenario `{other}` is not supported")),
    };
    println!("{out}");
    if out["ok"] == true { Ok(()) } else { Err(format!("the tool call failed: {out}")) }
}

/// Calls `remote` through the binding the mode exposes: its own bridge tool, or the lazy `call_tool`.
async fn call(hub: &McpHub, mode: McpMode, remote: &str, args: Value) -> Result<Value, String> {
    let (binding, args) = match mode {
        McpMode::Bridge => (binding_name("mcp", SERVER, remote), args),
        McpMode::Lazy => (binding_name("mcp", SERVER, "call_tool"), json!({"tool_name": remote, "arguments": args})),
    };
    let tools = hub.tools();
    let Some(tool) = tools.iter().find(|t| t.name() == binding) else {
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        return Err(format!("no tool `{binding}`; the hub has {names:?}"));
    };
    tool.call_json(args, &ToolContext::default()).await.map_err(|e| format!("{binding}: {e}"))
}
