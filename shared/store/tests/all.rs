#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The store against real SQLite files.

use minibot_store::{PendingWrite, Role, Store};

#[path = "suite/tool_history.rs"]
mod tool_history;

async fn open(dir: &tempfile::TempDir, max: Option<u32>) -> Store {
    Store::open(&dir.path().join("data/minibot.db"), max).await.expect("open")
}

#[tokio::test]
async fn a_turn_is_stored_once_and_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Some(3)).await;
    store.mark_pending("e1", "console:1", "{}").await.unwrap();
    store.finish_turn("console:1", &[(Role::User, "hi"), (Role::Assistant, "hello")], &["e1"]).await.unwrap();
    store.finish_turn("console:1", &[(Role::User, "2+2?"), (Role::Assistant, "4")], &[]).await.unwrap();
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
async fn an_update_is_accepted_once_with_its_turn_and_polling_resumes_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let pending = |id: &str| PendingWrite {
        event_id: id.into(),
        session_id: "telegram:5".into(),
        message_json: format!(r#"{{"text":"{id}"}}"#),
    };
    {
        let store = open(&dir, None).await;
        assert_eq!(store.last_update_id("telegram:1").await.unwrap(), None);
        let fresh = store.accept_updates("telegram:1", &[(7, Some(pending("e7"))), (8, None)]).await.unwrap();
        assert_eq!(fresh, [true, true]);
        store.close().await;
    }
    let store = open(&dir, None).await;
    assert_eq!(store.last_update_id("telegram:1").await.unwrap(), Some(8));
    assert_eq!(store.last_update_id("telegram:2").await.unwrap(), None, "ids are per source");
    // A redelivered update (the restart came before Telegram heard of it) neither counts nor queues its turn again.
    let again = store.accept_updates("telegram:1", &[(7, Some(pending("e7-again"))), (9, Some(pending("e9")))]).await;
    assert_eq!(again.unwrap(), [false, true]);
    let ids: Vec<String> = store.pending_turns().await.unwrap().into_iter().map(|p| p.event_id).collect();
    assert_eq!(ids, ["e7", "e9"]);
}

#[tokio::test]
async fn an_answer_waits_with_its_turn_until_it_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir, None).await;
        store.mark_pending("e1", "telegram:1", r#"{"text":"hi"}"#).await.unwrap();
        store.mark_pending("e2", "telegram:1", r#"{"text":"and also"}"#).await.unwrap();
        let entries = [(Role::User, "hi"), (Role::User, "and also"), (Role::Assistant, "hello")];
        store.finish_turn_answered("telegram:1", &entries, &["e1", "e2"], Some(r#"{"text":"hello"}"#)).await.unwrap();
        store.close().await;
    }
    let store = open(&dir, None).await;
    let pending = store.pending_turns().await.unwrap();
    assert_eq!(pending.len(), 1, "the steered message's row goes; the turn's row keeps the answer");
    assert_eq!(pending[0].event_id, "e1");
    assert_eq!(pending[0].answer_json.as_deref(), Some(r#"{"text":"hello"}"#));
    assert_eq!(store.history("telegram:1").await.unwrap().len(), 3, "the turn is stored once");
    store.clear_pending("e1").await.unwrap();
    assert!(store.pending_turns().await.unwrap().is_empty());
}

#[tokio::test]
async fn trim_keeps_latest() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, None).await;
    for i in 0..5 {
        store.finish_turn("s", &[(Role::User, &format!("m{i}"))], &[]).await.unwrap();
    }
    assert_eq!(store.trim("s", 2).await.unwrap(), 3);
    let history = store.history("s").await.unwrap();
    assert_eq!(history.iter().map(|m| m.content.clone()).collect::<Vec<_>>(), ["m3", "m4"]);
}

mod tasks {
    //! Task records against a real SQLite file.

    use minibot_store::{
        Applied, Attempt, Delivery, Ending, Lookup, NewTask, StoreError, TaskRecord, TaskStatus, TaskStore, TaskUsage,
    };
    use serde_json::json;

    async fn open(dir: &tempfile::TempDir) -> TaskStore {
        TaskStore::open(&dir.path().join("data/tasks.db")).await.expect("open")
    }

    fn new_task(id: &str, delivery: Delivery) -> NewTask {
        NewTask {
            id: id.into(),
            owner_id: "primary".into(),
            channel: "console".into(),
            chat_id: Some(1),
            user_id: None,
            prompt: "find it".into(),
            agent_name: None,
            context_json: None,
            model_overrides: json!({}),
            delivery,
            continuation_depth: 0,
            origin_turn_id: None,
            max_attempts: 3,
            timeout_seconds: 60,
            max_steps: None,
            max_tool_calls: Some(5),
        }
    }

    /// Attempt `number` as worker `worker_id` on host `gpu-box` reports it.
    fn by(worker_id: &str, number: u32) -> Attempt<'_> {
        Attempt { number, worker_id, host: Some("gpu-box") }
    }

    /// A worker's report that it finished with `text`.
    fn done_by<'a>(worker_id: &'a str, text: &'a str) -> Ending<'a> {
        Ending { text: Some(text), worker_id: Some(worker_id), ..Ending::new(TaskStatus::Done, "completed") }
    }

    fn finished(applied: Applied) -> TaskRecord {
        match applied {
            Applied::Finished(record) => record,
            other => panic!("expected the task to end, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn usage_round_trips_and_the_first_ending_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create(&new_task("aaaaaaaa-1", Delivery::Delegate)).await.unwrap();
        let created = store.get("aaaaaaaa-1").await.unwrap().unwrap();
        assert_eq!((created.status, created.delivery, created.usage), (TaskStatus::Pending, Delivery::Delegate, None));
        let Applied::Updated(running) = store.started("aaaaaaaa-1", &by("w1", 1)).await.unwrap() else {
            panic!("the start is applied")
        };
        assert_eq!((running.worker_id.as_deref(), running.worker_host.as_deref()), (Some("w1"), Some("gpu-box")));

        let usage = TaskUsage { steps: 4, tool_calls: 7, total_tokens: 12_345_678_901 };
        let ending = Ending { text: Some("42"), usage: Some(usage), ..Ending::new(TaskStatus::Done, "completed") };
        let record = finished(store.finish("aaaaaaaa-1", 1, &ending).await.unwrap());
        assert_eq!((record.status, record.usage), (TaskStatus::Done, Some(usage)));
        assert!(record.is_terminal());

        // Read back from a fresh connection, as after a restart.
        drop(store);
        let store = open(&dir).await;
        let record = store.get("aaaaaaaa-1").await.unwrap().unwrap();
        assert_eq!(record.usage, Some(usage));
        assert_eq!(record.result_text.as_deref(), Some("42"));
        assert_eq!(record.delivery, Delivery::Delegate);

        let late = Ending::new(TaskStatus::Cancelled, "cancelled");
        assert_eq!(store.finish("aaaaaaaa-1", 1, &late).await.unwrap(), Applied::Ignored);
        let events: Vec<String> = store.events("aaaaaaaa-1").await.unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(events, ["queued", "running", "done"]);
    }

    #[tokio::test]
    async fn an_ending_without_a_worker_report_has_no_usage_and_lists_by_status() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create(&new_task("bbbbbbbb-1", Delivery::Spawn)).await.unwrap();
        store.create(&new_task("bbbbbbbb-2", Delivery::Spawn)).await.unwrap();
        let record =
            finished(store.finish("bbbbbbbb-1", 0, &Ending::new(TaskStatus::Cancelled, "cancelled")).await.unwrap());
        assert_eq!((record.status, record.usage), (TaskStatus::Cancelled, None));

        let ids = |records: Vec<TaskRecord>| records.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(store.list("primary", Some(TaskStatus::Cancelled), 10).await.unwrap()), ["bbbbbbbb-1"]);
        assert_eq!(ids(store.list("primary", Some(TaskStatus::Pending), 10).await.unwrap()), ["bbbbbbbb-2"]);
        assert_eq!(store.list("primary", None, 10).await.unwrap().len(), 2);
        assert_eq!(ids(store.active().await.unwrap()), ["bbbbbbbb-2"]);
    }

    #[tokio::test]
    async fn a_database_from_before_the_usage_columns_opens_and_its_rows_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/tasks.db");
        let store = TaskStore::open(&path).await.unwrap();
        store.create(&new_task("eeeeeeee-1", Delivery::Delegate)).await.unwrap();
        store.finish("eeeeeeee-1", 1, &Ending::new(TaskStatus::TimedOut, "timeout")).await.unwrap();
        drop(store);
        // Back to the first schema: the strings the first version wrote, without the usage columns.
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        for sql in [
            "ALTER TABLE tasks DROP COLUMN steps",
            "ALTER TABLE tasks DROP COLUMN tool_calls",
            "ALTER TABLE tasks DROP COLUMN total_tokens",
            "DELETE FROM _sqlx_migrations WHERE version = 2",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        pool.close().await;

        let store = TaskStore::open(&path).await.unwrap();
        let record = store.get("eeeeeeee-1").await.unwrap().unwrap();
        assert_eq!((record.status, record.delivery, record.usage), (TaskStatus::TimedOut, Delivery::Delegate, None));
    }

    #[tokio::test]
    async fn a_row_with_an_unknown_status_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/tasks.db");
        let store = TaskStore::open(&path).await.unwrap();
        store.create(&new_task("cccccccc-1", Delivery::Spawn)).await.unwrap();
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        sqlx::query("UPDATE tasks SET status = 'leased' WHERE id = 'cccccccc-1'").execute(&pool).await.unwrap();
        pool.close().await;

        let error = store.get("cccccccc-1").await.unwrap_err();
        assert!(matches!(&error, StoreError::BadTaskRow { task_id, .. } if task_id == "cccccccc-1"), "{error}");
        assert_eq!(
            error.to_string(),
            "task cccccccc-1 has a row this version cannot read: unknown task status `leased`"
        );
        assert!(matches!(store.list("primary", None, 10).await, Err(StoreError::BadTaskRow { .. })));
        assert!(matches!(store.find("primary", "cccccccc").await, Err(StoreError::BadTaskRow { .. })));
        // Other tasks still read.
        store.create(&new_task("dddddddd-1", Delivery::Spawn)).await.unwrap();
        assert!(matches!(store.find("primary", "dddddddd-1").await.unwrap(), Lookup::Found(_)));
    }

    #[tokio::test]
    async fn an_attempt_takes_events_only_from_the_worker_that_started_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create(&new_task("ffffffff-1", Delivery::Spawn)).await.unwrap();
        assert!(matches!(store.started("ffffffff-1", &by("w-a", 1)).await.unwrap(), Applied::Updated(_)));
        let before = store.get("ffffffff-1").await.unwrap().unwrap();

        let refused = Applied::NotHolder { holder: "w-a".into() };
        assert_eq!(store.started("ffffffff-1", &by("w-b", 1)).await.unwrap(), refused);
        assert_eq!(store.progress("ffffffff-1", &by("w-b", 1), &json!({ "step": 9 })).await.unwrap(), refused);
        assert_eq!(store.hold("ffffffff-1", &by("w-b", 1)).await.unwrap(), refused);
        assert_eq!(store.finish("ffffffff-1", 1, &done_by("w-b", "forged")).await.unwrap(), refused);
        assert_eq!(store.get("ffffffff-1").await.unwrap().unwrap(), before, "nothing of B's reached the record");

        assert!(matches!(
            store.progress("ffffffff-1", &by("w-a", 1), &json!({ "step": 1 })).await.unwrap(),
            Applied::Updated(_)
        ));
        let record = finished(store.finish("ffffffff-1", 1, &done_by("w-a", "the real answer")).await.unwrap());
        assert_eq!(record.result_text.as_deref(), Some("the real answer"));
        assert_eq!((record.worker_id.as_deref(), record.worker_host.as_deref()), (Some("w-a"), Some("gpu-box")));
        let events: Vec<String> = store.events("ffffffff-1").await.unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(events, ["queued", "running", "progress", "done"], "refused events leave no trace");
    }

    #[tokio::test]
    async fn a_quick_tasks_first_event_binds_its_attempt() {
        // The worker says it started only after 250 ms: a quicker task's first event is its result, or its
        // first progress.
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create(&new_task("ffffffff-2", Delivery::Spawn)).await.unwrap();
        let record = finished(store.finish("ffffffff-2", 1, &done_by("w-a", "quick")).await.unwrap());
        assert_eq!((record.worker_id.as_deref(), record.attempts), (Some("w-a"), 1));
        assert_eq!(store.finish("ffffffff-2", 1, &done_by("w-b", "forged")).await.unwrap(), Applied::Ignored);

        store.create(&new_task("ffffffff-3", Delivery::Spawn)).await.unwrap();
        let Applied::Updated(bound) = store.progress("ffffffff-3", &by("w-a", 1), &json!({})).await.unwrap() else {
            panic!("the first progress is applied")
        };
        assert_eq!((bound.worker_id.as_deref(), bound.status), (Some("w-a"), TaskStatus::Pending));
        let refused = store.finish("ffffffff-3", 1, &done_by("w-b", "forged")).await.unwrap();
        assert_eq!(refused, Applied::NotHolder { holder: "w-a".into() });

        // An approval question may come first too.
        store.create(&new_task("ffffffff-4", Delivery::Spawn)).await.unwrap();
        assert!(matches!(store.hold("ffffffff-4", &by("w-a", 1)).await.unwrap(), Applied::Updated(_)));
        assert!(matches!(store.started("ffffffff-4", &by("w-b", 1)).await.unwrap(), Applied::NotHolder { .. }));
    }

    #[tokio::test]
    async fn an_older_attempt_cannot_overwrite_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create(&new_task("ffffffff-5", Delivery::Spawn)).await.unwrap();
        assert!(matches!(store.started("ffffffff-5", &by("w-a", 1)).await.unwrap(), Applied::Updated(_)));
        // A lost its claim; the queue handed the task to B as attempt 2.
        let second = Attempt { number: 2, worker_id: "w-b", host: None };
        let Applied::Updated(taken) = store.started("ffffffff-5", &second).await.unwrap() else {
            panic!("a newer attempt takes the task over")
        };
        assert_eq!((taken.worker_id.as_deref(), taken.worker_host.as_deref(), taken.attempts), (Some("w-b"), None, 2));

        let stale = Applied::Superseded { current: 2 };
        assert_eq!(store.started("ffffffff-5", &by("w-a", 1)).await.unwrap(), stale);
        assert_eq!(store.progress("ffffffff-5", &by("w-a", 1), &json!({ "step": 7 })).await.unwrap(), stale);
        assert_eq!(store.finish("ffffffff-5", 1, &done_by("w-a", "old")).await.unwrap(), stale);
        assert_eq!(store.get("ffffffff-5").await.unwrap().unwrap(), taken, "attempt 1 changed nothing");
        let record = finished(store.finish("ffffffff-5", 2, &done_by("w-b", "new")).await.unwrap());
        assert_eq!((record.result_text.as_deref(), record.worker_id.as_deref()), (Some("new"), Some("w-b")));

        // The orchestrator's own ending (a cancel, read at an older attempt) applies to whatever attempt runs.
        store.create(&new_task("ffffffff-6", Delivery::Spawn)).await.unwrap();
        store.started("ffffffff-6", &by("w-a", 2)).await.unwrap();
        let record =
            finished(store.finish("ffffffff-6", 1, &Ending::new(TaskStatus::Cancelled, "cancelled")).await.unwrap());
        assert_eq!((record.attempts, record.worker_id.as_deref()), (2, Some("w-a")));
    }

    #[tokio::test]
    async fn a_cancel_asked_for_is_noted_and_one_that_was_not_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        let cancel = |worker_id| Ending { worker_id, ..Ending::new(TaskStatus::Cancelled, "cancelled") };
        store.create(&new_task("abababab-1", Delivery::Spawn)).await.unwrap();
        store.started("abababab-1", &by("w-a", 1)).await.unwrap();
        store.request_cancel("abababab-1").await.unwrap();
        let record = finished(store.finish("abababab-1", 1, &cancel(Some("w-a"))).await.unwrap());
        assert!(record.cancel_requested, "the worker's report of a cancel the user asked for");

        store.create(&new_task("abababab-2", Delivery::Spawn)).await.unwrap();
        store.started("abababab-2", &by("w-a", 1)).await.unwrap();
        store.request_cancel("abababab-2").await.unwrap();
        // The cancel could not be sent: the task keeps running, and a cancel that comes anyway was not asked for.
        store.withdraw_cancel("abababab-2").await.unwrap();
        let record = finished(store.finish("abababab-2", 1, &cancel(Some("w-a"))).await.unwrap());
        assert!(!record.cancel_requested);

        // Asking after the end changes nothing.
        store.request_cancel("abababab-2").await.unwrap();
        assert!(!store.get("abababab-2").await.unwrap().unwrap().cancel_requested);
    }

    #[tokio::test]
    async fn a_result_past_the_stored_bound_is_cut_at_a_character_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create(&new_task("cdcdcdcd-1", Delivery::Spawn)).await.unwrap();
        // Three-byte characters, so the bound falls inside one.
        let text = "€".repeat(minibot_store::tasks::MAX_STORED_TEXT_BYTES / 3 + 10);
        let record = finished(store.finish("cdcdcdcd-1", 1, &done_by("w-a", &text)).await.unwrap());
        let stored = record.result_text.unwrap();
        let (kept, note) = stored.split_once("\n\n").unwrap();
        assert!(kept.len() <= minibot_store::tasks::MAX_STORED_TEXT_BYTES && kept.chars().all(|c| c == '€'));
        assert_eq!(kept.chars().count(), minibot_store::tasks::MAX_STORED_TEXT_BYTES / 3);
        assert_eq!(
            note,
            format!("[cut: the text was {} bytes; the task store keeps the first 1048576 bytes]", text.len())
        );
        // A text within the bound is kept whole.
        store.create(&new_task("cdcdcdcd-2", Delivery::Spawn)).await.unwrap();
        let whole = "x".repeat(minibot_store::tasks::MAX_STORED_TEXT_BYTES);
        let record = finished(store.finish("cdcdcdcd-2", 1, &done_by("w-a", &whole)).await.unwrap());
        assert_eq!(record.result_text.as_deref(), Some(whole.as_str()));
    }
}
