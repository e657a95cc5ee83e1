#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Argument handling; the end-to-end behaviour is in tests/e2e/memory.rs.

use super::*;

async fn tools() -> (tempfile::TempDir, ToolRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits { default_limit: 20, max_limit: 100 };
    let store = KvMemory::open(&dir.path().join("kv.db"), 2, limits).await.unwrap();
    let memory = Arc::new(Memory::with_store(store));
    let mut registry = ToolRegistry::new();
    registry.register(dyn_tool(MemoryCreate::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemoryUpdate::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemorySearch::new(memory)));
    (dir, registry)
}

fn ctx() -> ToolContext {
    ToolContext { owner_id: "primary".into(), ..ToolContext::default() }
}

async fn refusal(registry: &ToolRegistry, tool: &str, args: Value) -> (String, String) {
    match registry.get(tool).unwrap().call_json(args, &ctx()).await {
        Err(ToolError::RespondToModel { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_arguments_are_refused_naming_the_argument() {
    let (_dir, tools) = tools().await;
    let ok = json!({ "title": "t", "data": "d", "category": "otros" });
    let with = |key: &str, value: Value| {
        let mut args = ok.clone();
        args[key] = value;
        args
    };
    let cases = [
        (with("category", json!("cars")), "memory:invalid_arguments:invalid_category", "category"),
        (with("category", Value::Null), "memory:invalid_arguments:category_required", "category"),
        (with("title", json!("  ")), "memory:invalid_arguments:title_required", "title"),
        (with("data", json!(5)), "memory:invalid_arguments:invalid_data", "data"),
        (with("metadata", json!("[1]")), "memory:invalid_arguments:invalid_metadata", "metadata"),
        (with("metadata", json!("{not json")), "memory:invalid_arguments:invalid_metadata", "metadata"),
        (with("metadata", json!(r#"{"category":"x"}"#)), "memory:invalid_arguments:category_in_metadata", "category"),
        (with("expires_at", json!("next week")), "memory:invalid_arguments:invalid_expires_at", "expires_at"),
        (
            with("expires_at", json!("2001-01-01T00:00:00Z")),
            "memory:invalid_arguments:expires_at_in_past",
            "expires_at",
        ),
        (with("colour", json!("red")), "invalid_arguments", "colour"),
    ];
    for (args, code, named) in cases {
        let (got, message) = refusal(&tools, "memory_create", args.clone()).await;
        assert_eq!(got, code, "{args}: {message}");
        assert!(message.contains(named), "{args}: {message}");
    }
    let (code, _) = refusal(&tools, "memory_search", json!({ "limit": "many" })).await;
    assert_eq!(code, "memory:invalid_arguments:invalid_limit");
    let (code, _) = refusal(&tools, "memory_update", json!({ "entry_id": "x" })).await;
    assert_eq!(code, "memory:invalid_arguments:nothing_to_update");
    let (code, _) = refusal(&tools, "memory_update", json!({ "data": "x" })).await;
    assert_eq!(code, "memory:invalid_arguments:entry_id_required");
}

#[tokio::test]
async fn metadata_may_come_as_an_object_and_numbers_as_text() {
    let (_dir, tools) = tools().await;
    let created = tools
        .get("memory_create")
        .unwrap()
        .call_json(json!({ "title": "t", "data": "d", "category": "otros", "metadata": { "k": 1 } }), &ctx())
        .await
        .unwrap();
    assert_eq!(created["metadata"], json!({ "k": 1, "category": "otros" }));
    let found = tools
        .get("memory_search")
        .unwrap()
        .call_json(json!({ "query": null, "limit": "5", "offset": 0.0 }), &ctx())
        .await
        .unwrap();
    assert_eq!((found["total"].as_u64(), found["limit"].as_u64()), (Some(1), Some(5)));
}
