use super::peers::*;
use minibot_config::schema::McpMode;
use serde_json::json;

#[tokio::test]
async fn reload_adds_tools_and_keeps_failing_servers() {
    let dir = tempfile::tempdir().unwrap();
    let growing = dir.path().join("growing");
    let breaking = dir.path().join("breaking");
    let mut mcp = section(vec![
        fixture_server("grow", McpMode::Bridge, &growing),
        fixture_server("brk", McpMode::Bridge, &breaking),
    ]);
    mcp.reload = true;
    let hub = start(&mcp).await;
    assert!(names(&hub).contains(&"reload_mcp".to_string()));
    assert!(!names(&hub).contains(&"mcp_grow__extra".to_string()));
    assert_eq!(hub.instructions_for(&["mcp_brk__add".to_string()]).len(), 1);

    std::fs::write(&growing, "extra").unwrap();
    std::fs::write(&breaking, "fail").unwrap();
    let report = call(&tool(&hub, "reload_mcp"), json!({})).await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["added"], json!(["mcp_grow__extra"]), "{report}");
    assert_eq!(report["removed"], json!([]), "{report}");
    let servers = report["servers"].as_array().unwrap();
    assert_eq!(servers[0]["server"], "grow");
    assert_eq!(servers[0]["ok"], true);
    assert!(servers[0]["tools"].as_array().unwrap().contains(&json!("mcp_grow__extra")));
    assert_eq!(servers[1]["server"], "brk");
    assert_eq!(servers[1]["ok"], false);
    assert!(servers[1]["error"].as_str().unwrap().contains("brk"), "{report}");
    assert_eq!(servers[1]["tools"].as_array().unwrap().len(), 4, "failed server keeps its tools: {report}");
    // The child's last stderr lines explain why it failed.
    assert!(servers[1]["error"].as_str().unwrap().contains("told to fail"), "{report}");

    let out = call(&tool(&hub, "mcp_grow__extra"), json!({})).await;
    assert_eq!(out["result"], "extra", "{out}");
    // The failed server's old session still serves its kept tools.
    let out = call(&tool(&hub, "mcp_brk__add"), json!({"a": 2, "b": 2})).await;
    assert_eq!(out["result"], "4", "{out}");
    assert_eq!(hub.instructions_for(&["mcp_brk__add".to_string()]).len(), 1);

    // Back to the smaller set: the tool is reported removed.
    std::fs::write(&growing, "").unwrap();
    let report = hub.reload().await;
    assert_eq!(report.removed, vec!["mcp_grow__extra".to_string()]);
    hub.shutdown().await;
}

#[tokio::test]
async fn bridge_server_down_at_startup_appears_after_reload() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut mcp = section(vec![http_server("web", McpMode::Bridge, &url)]);
    mcp.timeout_seconds = 5.0;
    let hub = start(&mcp).await;
    assert!(names(&hub).is_empty());
    assert!(hub.status()[0].error.is_some());

    let _peer = HttpEverything::spawn(port).await;
    let report = hub.reload().await;
    assert!(report.servers[0].ok, "{report:?}");
    assert!(report.added.contains(&"mcp_web__echo".to_string()), "{report:?}");
    hub.shutdown().await;
}
