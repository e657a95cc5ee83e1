#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The store against real SQLite files.

use minibot_store::{Role, Store};

async fn open(dir: &tempfile::TempDir, max: Option<u32>) -> Store {
    Store::open(&dir.path().join("data/minibot.db"), max).await.expect("open")
}

#[tokio::test]
async fn a_turn_is_stored_once_and_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Some(3)).await;
    store.mark_pending("e1", "console:1", "{}").await.unwrap();
    store.finish_turn("console:1", &[(Role::User, "hi"), (Role::Assistant, "hello")], Some("e1")).await.unwrap();
    store.finish_turn("console:1", &[(Role::User, "2+2?"), (Role::Assistant, "4")], None).await.unwrap();
    let history = store.history("console:1").await.unwrap();
    let texts: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["hello", "2+2?", "4"]);
    assert!(store.pending_turns().await.unwrap().is_empty(), "finishing clears the pending row");
    assert_eq!(store.count("console:2").await.unwrap(), 0);
}

#[tokio::test]
async fn pending_turns_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir, None).await;
        store.mark_pending("e1", "console:1", r#"{"text":"first"}"#).await.unwrap();
        store.mark_pending("e2", "console:1", r#"{"text":"second"}"#).await.unwrap();
        store.mark_task_handoff("e2").await.unwrap();
        store.close().await;
    }
    let store = open(&dir, None).await;
    let pending = store.pending_turns().await.unwrap();
    assert_eq!(pending.len(), 1, "a turn that handed off to a task is not replayed");
    assert_eq!(pending[0].message_json, r#"{"text":"first"}"#);
}

#[tokio::test]
async fn trim_keeps_latest() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, None).await;
    for i in 0..5 {
        store.finish_turn("s", &[(Role::User, &format!("m{i}"))], None).await.unwrap();
    }
    assert_eq!(store.trim("s", 2).await.unwrap(), 3);
    let history = store.history("s").await.unwrap();
    assert_eq!(history.iter().map(|m| m.content.clone()).collect::<Vec<_>>(), ["m3", "m4"]);
}
