use super::peers::*;
use minibot_config::schema::McpMode;
use minibot_mcp::McpHub;
use serde_json::json;

#[tokio::test]
async fn stdio_bridge_names_describes_and_calls() {
    let hub = McpHub::start(&section(vec![everything_stdio("everything", McpMode::Bridge)])).await;
    let echo = tool(&hub, "mcp_everything__echo");
    let spec = echo.spec();
    assert!(spec.description.starts_with("[everything] "), "{}", spec.description);
    assert_eq!(spec.parameters["type"], "object");
    assert!(!names(&hub).contains(&"reload_mcp".to_string()), "reload is off by default");

    let out = call(&echo, json!({"message": "hi there"})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["server"], "everything");
    assert_eq!(out["tool"], "echo");
    assert_eq!(out["is_error"], false);
    assert!(out["result"].as_str().unwrap().contains("hi there"), "{out}");

    // Nulls are dropped before the call, so a strict remote schema does not see them.
    let sum = tool(&hub, "mcp_everything__get-sum");
    let out = call(&sum, json!({"a": 2, "b": 3, "c": null})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert!(out["result"].as_str().unwrap().contains('5'), "{out}");

    let image = tool(&hub, "mcp_everything__get-tiny-image");
    let out = call(&image, json!({})).await;
    let text = out["result"].as_str().unwrap();
    assert!(text.contains("[image payload omitted (image/png)]"), "{text}");
    assert!(text.len() < 5_000, "no base64 payload inline: {text}");

    hub.shutdown().await;
}

#[tokio::test]
async fn instructions_follow_visible_tools() {
    let hub = McpHub::start(&section(vec![everything_stdio("everything", McpMode::Bridge)])).await;
    let fragments = hub.instructions_for(&["mcp_everything__echo".to_string()]);
    assert_eq!(fragments.len(), 1, "{fragments:?}");
    assert!(fragments[0].contains("everything"), "{}", fragments[0]);
    assert!(hub.instructions_for(&["bash".to_string()]).is_empty());
    assert!(hub.instructions_for(&[]).is_empty());
    hub.shutdown().await;
}

#[tokio::test]
async fn enabled_and_disabled_filters() {
    let mut server = everything_stdio("ev", McpMode::Bridge);
    server.enabled_tools = vec!["echo".into(), "get-sum".into()];
    server.disabled_tools = vec!["get-sum".into()];
    let mut mcp = section(vec![server]);
    mcp.name_prefix = "x".into();
    let hub = McpHub::start(&mcp).await;
    assert_eq!(names(&hub), vec!["x_ev__echo".to_string()]);
    hub.shutdown().await;
}

#[tokio::test]
async fn long_results_are_cut() {
    let mut server = everything_stdio("everything", McpMode::Bridge);
    server.inline_result_chars = 200;
    let hub = McpHub::start(&section(vec![server])).await;
    let out = call(&tool(&hub, "mcp_everything__echo"), json!({"message": "y".repeat(1000)})).await;
    assert_eq!(out["output_truncated"], true, "{out}");
    assert_eq!(out["ok"], true);
    assert_eq!(out["output_preview"].as_str().unwrap().chars().count(), 200);
    assert!(out["output_notice"].as_str().unwrap().contains("200"));
    hub.shutdown().await;
}

#[tokio::test]
async fn http_bridge_with_headers() {
    let peer = HttpEverything::spawn(free_port()).await;
    let hub = McpHub::start(&section(vec![http_server("web", McpMode::Bridge, &peer.url)])).await;
    assert!(hub.status()[0].error.is_none(), "{:?}", hub.status());
    let out = call(&tool(&hub, "mcp_web__echo"), json!({"message": "over http"})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert!(out["result"].as_str().unwrap().contains("over http"));
    assert_eq!(hub.instructions_for(&["mcp_web__echo".to_string()]).len(), 1);
    hub.shutdown().await;
}

#[tokio::test]
async fn subset_starts_only_named_servers() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mcp =
        section(vec![everything_stdio("everything", McpMode::Bridge), fixture_server("fix", McpMode::Bridge, &state)]);
    let hub = McpHub::start_subset(&mcp, &["fix".to_string(), "missing".to_string()]).await;
    let mut got = names(&hub);
    got.sort();
    assert_eq!(got, vec!["mcp_fix__add", "mcp_fix__crash", "mcp_fix__exit_soon", "mcp_fix__hang"]);
    assert_eq!(hub.servers().len(), 1);
    hub.shutdown().await;
}

#[tokio::test]
async fn concurrent_calls_share_one_session() {
    let hub = McpHub::start(&section(vec![everything_stdio("everything", McpMode::Bridge)])).await;
    let echo = tool(&hub, "mcp_everything__echo");
    let calls = (0..20).map(|i| {
        let echo = echo.clone();
        async move { call(&echo, json!({"message": format!("n{i}")})).await }
    });
    let results = futures_util::future::join_all(calls).await;
    for (i, out) in results.iter().enumerate() {
        assert_eq!(out["ok"], true, "{out}");
        assert!(out["result"].as_str().unwrap().contains(&format!("n{i}")), "{out}");
    }
    hub.shutdown().await;
}
