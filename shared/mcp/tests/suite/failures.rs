use super::peers::*;
use minibot_config::schema::{McpMode, McpServerSection};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn crashed_server_is_reconnected_on_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let hub = start(&section(vec![fixture_server("fix", McpMode::Bridge, &dir.path().join("s"))])).await;
    let out = call(&tool(&hub, "mcp_fix__crash"), json!({})).await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error_code"], "mcp_call_failed", "{out}");
    let out = call(&tool(&hub, "mcp_fix__add"), json!({"a": 20, "b": 22})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["result"], "42");
    hub.shutdown().await;
}

#[tokio::test]
async fn silent_tool_times_out_with_an_error_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = section(vec![fixture_server("fix", McpMode::Bridge, &dir.path().join("s"))]);
    mcp.timeout_seconds = 2.0;
    let hub = start(&mcp).await;
    let started = Instant::now();
    let out = call(&tool(&hub, "mcp_fix__hang"), json!({})).await;
    let took = started.elapsed();
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error_code"], "mcp_call_failed");
    assert!(out["error"].as_str().unwrap().contains("no answer within 2s"), "{out}");
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(4), "{took:?}");
    // The session is still usable.
    let out = call(&tool(&hub, "mcp_fix__add"), json!({"a": 1, "b": 1})).await;
    assert_eq!(out["result"], "2", "{out}");
    hub.shutdown().await;
}

#[tokio::test]
async fn server_that_never_initializes_times_out_at_startup() {
    let mut mcp = section(vec![McpServerSection {
        name: "mute".into(),
        command: Some(python()),
        args: vec!["-c".into(), "import time; time.sleep(600)".into()],
        ..Default::default()
    }]);
    mcp.timeout_seconds = 1.0;
    let started = Instant::now();
    let hub = start(&mcp).await;
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(names(&hub).is_empty());
    let error = hub.status()[0].error.clone().unwrap();
    assert!(error.contains("mute") && error.contains("initialize"), "{error}");
    hub.shutdown().await;
}

#[tokio::test]
async fn missing_command_is_a_clear_error() {
    let missing = McpServerSection {
        name: "ghost".into(),
        command: Some("minibot-no-such-mcp-server".into()),
        ..Default::default()
    };
    let lazy = McpServerSection { name: "lghost".into(), mode: McpMode::Lazy, ..missing.clone() };
    let hub = start(&section(vec![missing, lazy])).await;
    let status = hub.status();
    let error = status[0].error.clone().unwrap();
    assert!(error.contains("`minibot-no-such-mcp-server` not found"), "{error}");
    assert!(status[0].tools.is_empty());
    // Lazy bindings stay, with a fallback description, and report the error when used.
    let list = tool(&hub, "mcp_lghost__list_tools");
    let out = call(&list, json!({})).await;
    assert_eq!(out["error_code"], "mcp_catalog_unavailable", "{out}");
    assert!(out["error"].as_str().unwrap().contains("not found"), "{out}");
    let out = call(&tool(&hub, "mcp_lghost__call_tool"), json!({"tool_name": "x", "arguments": {}})).await;
    assert_eq!(out["error_code"], "mcp_catalog_unavailable", "{out}");
    hub.shutdown().await;
}

#[tokio::test]
async fn disabled_section_starts_nothing() {
    let mut mcp = section(vec![everything_stdio("everything", McpMode::Bridge)]);
    mcp.enabled = false;
    let hub = start(&mcp).await;
    assert!(hub.tools().is_empty());
    assert!(hub.servers().is_empty());
}

#[tokio::test]
async fn restarted_http_server_is_reconnected() {
    let port = free_port();
    let peer = HttpEverything::spawn(port).await;
    let mut mcp = section(vec![http_server("web", McpMode::Bridge, &peer.url)]);
    mcp.timeout_seconds = 5.0;
    let hub = start(&mcp).await;
    let echo = tool(&hub, "mcp_web__echo");
    assert_eq!(call(&echo, json!({"message": "one"})).await["ok"], true);

    drop(peer);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let out = call(&echo, json!({"message": "down"})).await;
    assert_eq!(out["ok"], false, "{out}");
    assert!(started.elapsed() < Duration::from_secs(7), "{:?}", started.elapsed());

    let _peer = HttpEverything::spawn(port).await;
    let out = call(&echo, json!({"message": "two"})).await;
    assert_eq!(out["ok"], true, "{out}");
    hub.shutdown().await;
}

#[tokio::test]
async fn server_that_exited_between_calls_is_reconnected() {
    let dir = tempfile::tempdir().unwrap();
    let hub = start(&section(vec![fixture_server("fix", McpMode::Bridge, &dir.path().join("s"))])).await;
    let out = call(&tool(&hub, "mcp_fix__exit_soon"), json!({})).await;
    assert_eq!(out["result"], "bye", "{out}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let out = call(&tool(&hub, "mcp_fix__add"), json!({"a": 1, "b": 2})).await;
    assert_eq!(out["result"], "3", "{out}");
    hub.shutdown().await;
}

fn alive(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

#[tokio::test]
async fn shutdown_stops_grandchildren_of_a_wrapper_command() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s");
    let mut server = fixture_server("wrapped", McpMode::Bridge, &state);
    // The shell stays as the parent because a command follows the server, like `npx` or `uv run` do.
    let script = format!("{} {}; true", server.command.take().unwrap(), fixture());
    server.command = Some("sh".into());
    server.args = vec!["-c".into(), script];
    let hub = start(&section(vec![server])).await;
    let out = call(&tool(&hub, "mcp_wrapped__add"), json!({"a": 1, "b": 1})).await;
    assert_eq!(out["result"], "2", "{out}");
    let pid = std::fs::read_to_string(dir.path().join("s.pid")).unwrap();
    assert!(alive(&pid));
    hub.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(&pid) {
        assert!(Instant::now() < deadline, "python grandchild {pid} outlived shutdown");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
