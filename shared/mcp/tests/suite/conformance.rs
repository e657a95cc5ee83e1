//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in scripts/setup-mcp-peers.sh)
//! runs its client scenarios against `mcp-conformance-client`, which connects through the hub and calls through
//! the bridge or the lazy binding.

use super::peers::peers_dir;
use serde_json::Value;
use std::path::{Path, PathBuf};

const SCENARIOS: &[&str] = &["initialize", "tools_call", "sse-retry"];
const MODES: &[&str] = &["bridge", "lazy"];

fn conformance_js() -> PathBuf {
    let path = peers_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(path.is_file(), "the conformance suite is missing at {}: run scripts/setup-mcp-peers.sh", path.display());
    path
}

/// Runs one scenario; `Err` holds everything the suite said about a failure.
async fn run(suite: &Path, mode: &str, scenario: &str, results: &Path) -> Result<(), String> {
    let client = format!("{} --mode {mode}", env!("CARGO_BIN_EXE_mcp-conformance-client"));
    let output = tokio::process::Command::new("node")
        .arg(suite)
        .args(["client", "--command", &client, "--scenario", scenario, "--timeout", "30000", "--output-dir"])
        .arg(results)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run node: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    // The suite fails a scenario on any FAILURE or WARNING check; name those, with the client's own output.
    let mut report = format!(
        "{scenario} ({mode}) failed, {}\n--- suite stdout\n{}\n--- suite stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for entry in std::fs::read_dir(results).into_iter().flatten().flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        for check in checks.iter().filter(|c| c["status"] != "SUCCESS" && c["status"] != "INFO") {
            report.push_str(&format!("\n--- check {check}"));
        }
    }
    Err(report)
}

#[tokio::test]
async fn client_scenarios_pass_in_bridge_and_lazy_mode() {
    let suite = conformance_js();
    let results = tempfile::tempdir().unwrap();
    let runs = MODES.iter().flat_map(|mode| SCENARIOS.iter().map(move |scenario| (*mode, *scenario))).map(
        |(mode, scenario)| {
            let suite = suite.clone();
            let dir = results.path().join(format!("{mode}-{scenario}"));
            async move { run(&suite, mode, scenario, &dir).await }
        },
    );
    // One after another: sse-retry measures the client's reconnect delay, which a crowded machine would skew.
    let mut failures = Vec::new();
    for outcome in runs {
        if let Err(report) = outcome.await {
            failures.push(report);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
