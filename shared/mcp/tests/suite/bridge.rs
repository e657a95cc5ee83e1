use super::peers::*;
use minibot_config::schema::McpMode;
use minibot_mcp::McpHub;
use serde_json::json;

#[tokio::test]
async fn stdio_bridge_names_describes_and_calls() {
    let hub = start(&section(vec![everything_stdio("everything", McpMode::Bridge)])).await;
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
    let hub = start(&section(vec![everything_stdio("everything", McpMode::Bridge)])).await;
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
    let hub = start(&mcp).await;
    assert_eq!(names(&hub), vec!["x_ev__echo".to_string()]);
    hub.shutdown().await;
}

#[tokio::test]
async fn long_results_come_whole_with_the_spill_limit_declared() {
    // The binding does not cut: the spill wrapper spills past the declared limit, or cuts to it when spill is off.
    let mut server = everything_stdio("everything", McpMode::Bridge);
    server.inline_result_chars = 200;
    let hub = start(&section(vec![server])).await;
    let echo = tool(&hub, "mcp_everything__echo");
    assert_eq!(echo.spill_after_chars(), Some(200));
    let out = call(&echo, json!({"message": "y".repeat(1000)})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert!(out["result"].as_str().unwrap().contains(&"y".repeat(1000)), "{out}");
    hub.shutdown().await;
}

#[tokio::test]
async fn http_headers_arrive_as_written() {
    let peer = HttpFixture::spawn(free_port()).await;
    let mut server = http_server("web", McpMode::Bridge, &peer.url);
    // A Basic credential is sent as written, not as `Bearer Basic …`.
    server.headers.insert("Authorization".into(), "Basic dXNlcjpwYXNz".into());
    let hub = start(&section(vec![server])).await;
    assert!(hub.status()[0].error.is_none(), "{:?}", hub.status());
    let seen = headers_seen(&hub, "web").await;
    assert_eq!(seen["x-minibot-test"], "1", "{seen:?}");
    assert_eq!(seen["authorization"], "Basic dXNlcjpwYXNz", "{seen:?}");
    hub.shutdown().await;
}

#[tokio::test]
async fn auth_secret_is_sent_as_a_bearer_token_from_the_vault() {
    let peer = HttpFixture::spawn(free_port()).await;
    let mut server = http_server("web", McpMode::Bridge, &peer.url);
    server.auth_secret = Some("mcp_token".into());
    let mut config = config(&section(vec![server]));
    config.vault.enabled = true;
    config.secrets = minibot_vault::Secrets::new([("mcp_token".to_string(), "s3cr3t".to_string())].into());
    let hub = McpHub::start(&config).await.unwrap();
    let seen = headers_seen(&hub, "web").await;
    assert_eq!(seen["authorization"], "Bearer s3cr3t", "{seen:?}");
    assert_eq!(seen["x-minibot-test"], "1", "{seen:?}");
    hub.shutdown().await;
}

#[tokio::test]
async fn unusable_auth_secret_stops_the_hub_naming_server_and_secret() {
    let mut server = http_server("web", McpMode::Bridge, "http://127.0.0.1:9/mcp");
    server.auth_secret = Some("mcp_token".into());
    let mut config = config(&section(vec![server.clone()]));
    // The vault is off.
    let err = McpHub::start(&config).await.err().unwrap().to_string();
    assert!(err.contains("`web`") && err.contains("`mcp_token`"), "{err}");
    // The vault is on but lacks the secret.
    config.vault.enabled = true;
    let err = McpHub::start(&config).await.err().unwrap().to_string();
    assert!(err.contains("`web`") && err.contains("`mcp_token`") && err.contains("not in the vault"), "{err}");
    // Both a secret and a written Authorization header.
    config.secrets = minibot_vault::Secrets::new([("mcp_token".to_string(), "s3cr3t".to_string())].into());
    server.headers.insert("authorization".into(), "Basic eA==".into());
    config.tools.mcp.servers = vec![server];
    let err = McpHub::start(&config).await.err().unwrap().to_string();
    assert!(err.contains("`web`") && err.contains("Authorization"), "{err}");
    // A worker that does not use the server is not stopped by it.
    let hub = McpHub::start_subset(&config, &[]).await.unwrap();
    assert!(hub.servers().is_empty());
}

#[tokio::test]
async fn relative_command_and_cwd_resolve_against_the_config_folder() {
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("bin")).unwrap();
    std::fs::create_dir_all(base.path().join("work")).unwrap();
    let script = base.path().join("bin/run-fixture");
    std::fs::write(&script, format!("#!/bin/sh\nexec '{}' '{}'\n", python(), fixture())).unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();

    let mut server = fixture_server("rel", McpMode::Bridge, std::path::Path::new("state"));
    server.command = Some("bin/run-fixture".into());
    server.args = vec![];
    server.cwd = Some("work".into());
    let mut config = config(&section(vec![server]));
    // The test process runs in the crate folder; only the config folder has bin/ and work/.
    config.base_dir = base.path().to_path_buf();
    let hub = McpHub::start(&config).await.unwrap();
    assert!(hub.status()[0].error.is_none(), "{:?}", hub.status());
    let out = call(&tool(&hub, "mcp_rel__add"), json!({"a": 1, "b": 2})).await;
    assert_eq!(out["result"], "3", "{out}");
    // The fixture writes its relative state file's `.pid` into its working directory.
    assert!(base.path().join("work/state.pid").is_file(), "the server ran in <config folder>/work");
    hub.shutdown().await;
}

#[tokio::test]
async fn subset_starts_only_named_servers() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mcp =
        section(vec![everything_stdio("everything", McpMode::Bridge), fixture_server("fix", McpMode::Bridge, &state)]);
    let hub = start_subset(&mcp, &["fix".to_string(), "missing".to_string()]).await;
    let mut got = names(&hub);
    got.sort();
    assert_eq!(got, vec!["mcp_fix__add", "mcp_fix__crash", "mcp_fix__exit_soon", "mcp_fix__hang"]);
    assert_eq!(hub.servers().len(), 1);
    hub.shutdown().await;
}

#[tokio::test]
async fn concurrent_calls_share_one_session() {
    let hub = start(&section(vec![everything_stdio("everything", McpMode::Bridge)])).await;
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
