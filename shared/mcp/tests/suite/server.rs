//! Driving one server handle directly, as a supervisor would.

use super::peers::*;
use minibot_config::schema::McpMode;
use minibot_mcp::{McpServer, bindings};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn handle_connects_lists_calls_and_closes() {
    let mut config = everything_stdio("ev", McpMode::Bridge);
    config.enabled_tools = vec!["echo".into()];
    let server = Arc::new(McpServer::new(config, Duration::from_secs(20)));
    assert!(!server.is_connected().await);
    server.connect().await.unwrap();
    assert!(server.is_connected().await);
    assert!(server.instructions().is_some());

    let tools = server.list_tools().await.unwrap();
    assert_eq!(tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), vec!["echo"]);
    let mut args = Map::new();
    args.insert("message".into(), Value::String("direct".into()));
    let out = server.call_tool("echo", args).await.unwrap();
    assert!(!out.is_error);
    assert!(out.text.contains("direct"));

    let tools = bindings("mcp", &server, &tools);
    assert_eq!(tools.len(), 1);
    server.close().await;
    assert!(!server.is_connected().await);
    // A binding reconnects a closed handle on use.
    let out = call(&tools[0], json!({"message": "again"})).await;
    assert_eq!(out["ok"], true, "{out}");
    server.close().await;
}
