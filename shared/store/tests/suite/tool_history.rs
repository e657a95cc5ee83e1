//! Tool calls and results in the stored transcript: stored in order, trimmed only at whole call groups, replayed
//! without orphans, and read from a database the previous schema wrote.

use minibot_store::{Role, Store, StoredMessage, StoredToolCall, TurnMessage, replay};
use std::collections::HashSet;
use std::path::Path;

async fn open(path: &Path, max: Option<u32>) -> Store {
    Store::open(path, max).await.expect("open")
}

fn call(id: &str, name: &str) -> StoredToolCall {
    StoredToolCall { id: id.into(), name: name.into(), arguments: format!(r#"{{"call":"{id}"}}"#) }
}

/// A turn that asks for `groups` rounds of `per_group` calls before answering.
fn tool_turn(turn: usize, groups: usize, per_group: usize) -> Vec<TurnMessage> {
    let mut messages = vec![TurnMessage::user(format!("question {turn}"))];
    for g in 0..groups {
        let ids: Vec<String> = (0..per_group).map(|c| format!("t{turn}g{g}c{c}")).collect();
        let calls = ids.iter().map(|id| call(id, "write_file")).collect();
        messages.push(TurnMessage::assistant_calls("", calls));
        messages.extend(ids.iter().map(|id| TurnMessage::tool_result(id, "write_file", format!("wrote {id}"))));
    }
    messages.push(TurnMessage::assistant(format!("answer {turn}")));
    messages
}

/// Every tool result in `rows` follows, within its group, the assistant message that asked for its call, and
/// every call of such a message has its result: what a provider accepts.
fn assert_whole_groups(rows: &[StoredMessage], context: &str) {
    let mut open: Option<HashSet<String>> = None;
    for (i, row) in rows.iter().enumerate() {
        match row.role {
            Role::Tool => {
                let asked = open.as_mut().unwrap_or_else(|| panic!("{context}: result at {i} has no call: {rows:#?}"));
                let id = row.tool_call_id.clone().unwrap();
                assert!(asked.remove(&id), "{context}: result {id} at {i} answers no open call");
            }
            _ => {
                if let Some(unanswered) = open.take() {
                    assert!(unanswered.is_empty(), "{context}: calls {unanswered:?} have no result");
                }
                if !row.tool_calls.is_empty() {
                    open = Some(row.tool_calls.iter().map(|c| c.id.clone()).collect());
                }
            }
        }
    }
    if let Some(unanswered) = open {
        assert!(unanswered.is_empty(), "{context}: calls {unanswered:?} at the end have no result");
    }
}

#[tokio::test]
async fn a_turn_with_tool_calls_is_stored_in_order_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("minibot.db"), None).await;
    store.mark_pending("e1", "s", "{}").await.unwrap();
    store.store_turn("s", &tool_turn(1, 2, 2), &["e1"], None).await.unwrap();
    let rows = store.history("s").await.unwrap();
    let roles: Vec<Role> = rows.iter().map(|r| r.role).collect();
    use Role::{Assistant as A, Tool as T, User as U};
    assert_eq!(roles, [U, A, T, T, A, T, T, A]);
    assert_eq!(rows[1].tool_calls, [call("t1g0c0", "write_file"), call("t1g0c1", "write_file")]);
    assert_eq!(rows[3].tool_call_id.as_deref(), Some("t1g0c1"));
    assert_eq!(rows[3].content, "wrote t1g0c1");
    assert!(rows.iter().all(|r| r.turn_id == Some(rows[0].id)), "one turn: {rows:#?}");
    assert!(store.pending_turns().await.unwrap().is_empty(), "the pending row goes with the same write");
    let counts = store.counts("s").await.unwrap();
    assert_eq!((counts.user, counts.assistant, counts.assistant_tool_calls, counts.tool_results), (1, 3, 2, 4));
    assert_eq!(store.count("s").await.unwrap(), 8, "the count is every row");
    let again = store.message("s", rows[2].id).await.unwrap().expect("the row by id");
    assert_eq!(again.content, "wrote t1g0c0");
    assert_eq!(store.message("other", rows[2].id).await.unwrap(), None, "another chat's rows are not readable");
}

#[tokio::test]
async fn trimming_at_any_point_keeps_whole_call_groups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minibot.db");
    let store = open(&path, None).await;
    let turns = [tool_turn(1, 1, 3), tool_turn(2, 0, 0), tool_turn(3, 2, 2), tool_turn(4, 1, 1)];
    let total: usize = turns.iter().map(Vec::len).sum();
    for keep in 0..=total + 1 {
        let session = format!("s{keep}");
        for turn in &turns {
            store.store_turn(&session, turn, &[], None).await.unwrap();
        }
        let before = store.history(&session).await.unwrap();
        let removed = store.trim(&session, keep as u64).await.unwrap();
        let kept = store.history(&session).await.unwrap();
        let context = format!("keep {keep}");
        assert_eq!(removed as usize + kept.len(), total, "{context}");
        assert!(kept.len() <= keep, "{context}: kept {}", kept.len());
        assert_eq!(kept[..], before[before.len() - kept.len()..], "{context}: the latest rows stay, unchanged");
        assert!(kept.first().is_none_or(|r| r.role != Role::Tool), "{context}: opens with a tool result");
        assert_whole_groups(&kept, &context);
        // A cut moves forward only past the results of the group it fell into (at most 3 here).
        assert!(kept.len() + 3 >= keep.min(total), "{context}: kept only {}", kept.len());
    }
}

#[tokio::test]
async fn max_history_messages_trims_after_each_turn_at_whole_call_groups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minibot.db");
    for max in 1..=9u32 {
        let store = open(&path, Some(max)).await;
        let session = format!("s{max}");
        for turn in 1..=3 {
            store.store_turn(&session, &tool_turn(turn, 2, 2), &[], None).await.unwrap();
            let kept = store.history(&session).await.unwrap();
            let context = format!("max {max}, after turn {turn}");
            assert!(kept.len() <= max as usize, "{context}");
            assert_eq!(store.count(&session).await.unwrap(), kept.len() as u64, "{context}: trimmed in the file");
            assert!(kept.first().is_none_or(|r| r.role != Role::Tool), "{context}");
            assert_whole_groups(&kept, &context);
            assert_eq!(kept.last().map(|r| r.content.clone()), Some(format!("answer {turn}")), "{context}");
        }
        store.close().await;
    }
}

#[tokio::test]
async fn rows_a_crash_or_an_older_writer_left_half_done_are_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minibot.db");
    let store = open(&path, None).await;
    store.store_turn("s", &tool_turn(1, 1, 1), &[], None).await.unwrap();
    store.close().await;
    // What a writer that stored calls as they happened would leave after dying between call and result: the
    // assistant message asking for two calls, one answered, and a result for a call that no row asked for.
    let pool = minibot_sqlite::open_pool(&path, 1).await.unwrap();
    for (role, content, calls, call_id) in [
        ("user", "question 2", None, None),
        (
            "assistant",
            "",
            Some(r#"[{"id":"a","name":"bash","arguments":"{}"},{"id":"b","name":"bash","arguments":"{}"}]"#),
            None,
        ),
        ("tool", "ran a", None, Some("a")),
        ("tool", "stray", None, Some("zzz")),
    ] {
        sqlx::query(
            "INSERT INTO messages (session_id, role, content, tool_calls_json, tool_call_id, tool_name, created_at)
             VALUES ('s', ?1, ?2, ?3, ?4, 'bash', '2026-01-01T00:00:00Z')",
        )
        .bind(role)
        .bind(content)
        .bind(calls)
        .bind(call_id)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    let store = open(&path, None).await;
    let replayed = store.replay_history("s", Some("chat_history_info")).await.unwrap();
    assert_whole_groups(&replayed, "replayed");
    let last_call = replayed.iter().rev().find(|r| !r.tool_calls.is_empty()).unwrap();
    assert_eq!(last_call.tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["a"]);
    assert!(replayed.iter().all(|r| r.content != "stray"));
    assert_eq!(store.count("s").await.unwrap(), 4 + 4, "the rows themselves stay as written");
}

#[tokio::test]
async fn a_database_of_the_previous_schema_opens_and_replays_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data/minibot.db");
    // The migrations as they were before tool history, applied by sqlx as the previous version did.
    let previous = dir.path().join("previous-migrations");
    std::fs::create_dir_all(&previous).unwrap();
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    for name in ["0001_transcripts.sql", "0002_channel_updates.sql", "0003_pending_answers.sql"] {
        std::fs::copy(migrations.join(name), previous.join(name)).unwrap();
    }
    let pool = minibot_sqlite::open_pool(&path, 1).await.unwrap();
    sqlx::migrate::Migrator::new(previous.as_path()).await.unwrap().run(&pool).await.unwrap();
    for (role, content) in [("user", "hi"), ("assistant", "hello"), ("user", "bye"), ("assistant", "see you")] {
        sqlx::query("INSERT INTO messages (session_id, role, content, created_at) VALUES ('old', ?1, ?2, 'then')")
            .bind(role)
            .bind(content)
            .execute(&pool)
            .await
            .unwrap();
    }
    // The last row was trimmed away: its id is not given again.
    sqlx::query("DELETE FROM messages WHERE content = 'see you'").execute(&pool).await.unwrap();
    pool.close().await;

    let store = open(&path, None).await;
    let replayed = store.replay_history("old", Some("chat_history_info")).await.unwrap();
    let texts: Vec<(Role, &str)> = replayed.iter().map(|r| (r.role, r.content.as_str())).collect();
    assert_eq!(texts, [(Role::User, "hi"), (Role::Assistant, "hello"), (Role::User, "bye")]);
    assert!(replayed.iter().all(|r| r.tool_calls.is_empty() && r.turn_id.is_none()));
    store.store_turn("old", &tool_turn(2, 1, 1), &[], None).await.unwrap();
    let rows = store.history("old").await.unwrap();
    assert_eq!(rows.len(), 3 + 4);
    assert_eq!(rows[3].id, 5, "ids continue after the highest ever given");
    assert_eq!(rows[3].content, "question 2");
}

#[tokio::test]
async fn older_results_are_shortened_for_the_model_but_stored_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("minibot.db"), None).await;
    let long = |turn: usize| format!("file {turn}: {}", "x".repeat(replay::PREVIEW_CHARS * 4));
    for turn in 1..=2 {
        let calls = vec![call(&format!("c{turn}"), "read_file")];
        let messages = [
            TurnMessage::user(format!("read file {turn}")),
            TurnMessage::assistant_calls("", calls),
            TurnMessage::tool_result(format!("c{turn}"), "read_file", long(turn)),
            TurnMessage::assistant("read"),
        ];
        store.store_turn("s", &messages, &[], None).await.unwrap();
    }
    let replayed = store.replay_history("s", Some("chat_history_info")).await.unwrap();
    let results: Vec<&StoredMessage> = replayed.iter().filter(|r| r.role == Role::Tool).collect();
    assert!(results[0].content.len() < replay::PREVIEW_CHARS + 300, "{}", results[0].content);
    assert!(results[0].content.starts_with("file 1: xxx"));
    let pointer = format!(r#"call chat_history_info with {{"message_id": {}}}"#, results[0].id);
    assert!(results[0].content.contains(&pointer), "{}", results[0].content);
    assert_eq!(results[1].content, long(2), "the latest turn's result is whole");
    let stored = store.message("s", results[0].id).await.unwrap().unwrap();
    assert_eq!(stored.content, long(1), "the store keeps the full result");
}

/// A turn of more messages than one INSERT takes is stored whole, in order, as one turn, and the next turn is
/// another.
#[tokio::test]
async fn a_very_long_turn_is_stored_whole_as_one_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("minibot.db"), None).await;
    let long = tool_turn(1, 700, 2);
    store.store_turn("s", &long, &[], None).await.unwrap();
    store.store_turn("s", &tool_turn(2, 1, 1), &[], None).await.unwrap();
    let rows = store.history("s").await.unwrap();
    assert_eq!(rows.len(), long.len() + 4);
    let (first, second) = rows.split_at(long.len());
    assert!(first.iter().all(|r| r.turn_id == Some(first[0].id)));
    assert!(second.iter().all(|r| r.turn_id == Some(second[0].id)));
    let texts: Vec<&str> = first.iter().map(|r| r.content.as_str()).collect();
    let expected: Vec<&str> = long.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, expected);
    assert_whole_groups(rows.as_slice(), "long turn");
}

#[tokio::test]
async fn the_providers_count_is_kept_on_the_turns_last_row_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minibot.db");
    let store = open(&path, None).await;
    let mut turn = tool_turn(1, 1, 1);
    if let Some(answer) = turn.last_mut() {
        answer.context_tokens = Some(12_345);
    }
    store.store_turn("s", &turn, &[], None).await.unwrap();
    store.store_turn("s", &tool_turn(2, 0, 0), &[], None).await.unwrap();
    store.close().await;

    let store = open(&path, None).await;
    let rows = store.history("s").await.unwrap();
    let counted: Vec<(String, Option<u64>)> =
        rows.iter().filter(|r| r.context_tokens.is_some()).map(|r| (r.content.clone(), r.context_tokens)).collect();
    assert_eq!(counted, [("answer 1".to_string(), Some(12_345))], "only the row it was given, whole");
    assert_eq!(rows.last().unwrap().context_tokens, None, "a turn without a count has none");
}
