use super::peers::*;
use minibot_config::schema::McpMode;
use serde_json::json;

#[tokio::test]
async fn lazy_lists_and_calls() {
    let mut server = everything_stdio("ev", McpMode::Lazy);
    server.disabled_tools = vec!["get-sum".into()];
    let hub = start(&section(vec![server])).await;
    assert_eq!(names(&hub), vec!["mcp_ev__list_tools".to_string(), "mcp_ev__call_tool".to_string()]);
    let list = tool(&hub, "mcp_ev__list_tools");
    let call_tool = tool(&hub, "mcp_ev__call_tool");
    // The server's instructions are embedded in both descriptions.
    let instructions = hub.status()[0].instructions.clone().expect("server-everything sends instructions");
    let first_line = instructions.lines().find(|l| !l.trim().is_empty()).unwrap().trim().to_string();
    assert!(list.spec().description.contains(&first_line));
    assert!(call_tool.spec().description.contains(&first_line));
    assert_eq!(hub.instructions_for(&["mcp_ev__call_tool".to_string()]).len(), 1);

    let listed = call(&list, json!({})).await;
    assert_eq!(listed["ok"], true, "{listed}");
    let tools = listed["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo listed");
    assert_eq!(echo["input_schema"]["type"], "object");
    assert!(echo["input_schema"]["properties"]["message"].is_object(), "{echo}");
    assert!(!tools.iter().any(|t| t["name"] == "get-sum"), "disabled tool hidden");

    let out = call(&call_tool, json!({"tool_name": "echo", "arguments": {"message": "lazy"}})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["tool"], "echo");
    assert!(out["result"].as_str().unwrap().contains("lazy"));

    let out = call(&call_tool, json!({"tool_name": "get-sum", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(out["error_code"], "mcp_tool_not_available", "{out}");
    let out = call(&call_tool, json!({"tool_name": "nope", "arguments": {}})).await;
    assert_eq!(out["error_code"], "mcp_tool_not_available", "{out}");
    let out = call(&call_tool, json!({"arguments": {}})).await;
    assert_eq!(out["error_code"], "invalid_tool_name", "{out}");
    let out = call(&call_tool, json!({"tool_name": "echo", "arguments": "message=hi"})).await;
    assert_eq!(out["error_code"], "invalid_arguments", "{out}");
    assert_eq!(out["ok"], false);
    assert_eq!(out["server"], "ev");
    hub.shutdown().await;
}

#[tokio::test]
async fn lazy_catalog_cache_ttl_zero_sees_new_tools() {
    // With the cache off, a direct call discovers the catalog again and finds a tool added since.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut server = fixture_server("fix", McpMode::Lazy, &state);
    server.catalog_cache_ttl_seconds = 0;
    let hub = start(&section(vec![server])).await;
    let call_tool = tool(&hub, "mcp_fix__call_tool");
    let out = call(&call_tool, json!({"tool_name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(out["result"], "3", "{out}");
    let out = call(&call_tool, json!({"tool_name": "extra", "arguments": {}})).await;
    assert_eq!(out["error_code"], "mcp_tool_not_available", "{out}");

    // A crash-and-reconnect picks up the new state file.
    std::fs::write(&state, "extra").unwrap();
    let out = call(&call_tool, json!({"tool_name": "crash", "arguments": {}})).await;
    assert_eq!(out["ok"], false, "{out}");
    let out = call(&call_tool, json!({"tool_name": "extra", "arguments": {}})).await;
    assert_eq!(out["result"], "extra", "{out}");
    hub.shutdown().await;
}

#[tokio::test]
async fn lazy_server_down_at_startup_recovers_on_call() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut mcp = section(vec![http_server("web", McpMode::Lazy, &url)]);
    mcp.timeout_seconds = 5.0;
    let hub = start(&mcp).await;
    let status = hub.status();
    assert!(status[0].error.is_some(), "{status:?}");
    let list = tool(&hub, "mcp_web__list_tools");
    assert!(list.spec().description.contains("not available yet"), "{}", list.spec().description);
    let out = call(&list, json!({})).await;
    assert_eq!(out["error_code"], "mcp_catalog_unavailable", "{out}");

    let _peer = HttpEverything::spawn(port).await;
    let out = call(&list, json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    let out =
        call(&tool(&hub, "mcp_web__call_tool"), json!({"tool_name": "echo", "arguments": {"message": "up"}})).await;
    assert_eq!(out["ok"], true, "{out}");
    hub.shutdown().await;
}
