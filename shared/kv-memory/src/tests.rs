#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

const LIMITS: Limits = Limits { default_limit: 20, max_limit: 100 };
const OWNER: &str = "owner-1";

async fn store(dir: &tempfile::TempDir) -> KvMemory {
    KvMemory::open(&dir.path().join("kv_memory.db"), 5, LIMITS).await.unwrap()
}

fn new(title: &str, data: &str, category: &str) -> NewEntry {
    let mut metadata = Map::new();
    metadata.insert("category".into(), json!(category));
    NewEntry { title: title.into(), data: data.into(), metadata, source: None, expires_at: None }
}

async fn create(store: &KvMemory, title: &str, data: &str) -> Entry {
    match store.create(OWNER, new(title, data, "otros")).await.unwrap() {
        Created::Created(entry) => entry,
        Created::Duplicate(entry) => panic!("duplicate of {entry:?}"),
    }
}

async fn search(store: &KvMemory, query: &str) -> Page {
    store.search(OWNER, Some(query), &Filter::default(), None, None).await.unwrap()
}

fn titles(page: &Page) -> Vec<&str> {
    page.entries.iter().map(|e| e.title.as_str()).collect()
}

/// The schema MiniBot 0.36's SQLAlchemy model creates (reference §7), with its FTS table and triggers.
const MINIBOT_SCHEMA: &str = r#"
CREATE TABLE kv_memory (
    id VARCHAR(36) NOT NULL,
    owner_id VARCHAR(128) NOT NULL,
    title VARCHAR(100) NOT NULL,
    data TEXT NOT NULL,
    metadata JSON NOT NULL,
    source VARCHAR(256),
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    expires_at DATETIME,
    PRIMARY KEY (id)
);
CREATE INDEX ix_kv_memory_owner_id ON kv_memory (owner_id);
CREATE INDEX ix_kv_memory_owner_title_lower ON kv_memory (lower(title), owner_id);
CREATE VIRTUAL TABLE kv_memory_fts USING fts5(title, data, content='kv_memory', content_rowid='rowid');
CREATE TRIGGER kv_memory_ai AFTER INSERT ON kv_memory BEGIN
    INSERT INTO kv_memory_fts(rowid, title, data) VALUES (new.rowid, new.title, new.data); END;
CREATE TRIGGER kv_memory_ad AFTER DELETE ON kv_memory BEGIN
    INSERT INTO kv_memory_fts(kv_memory_fts, rowid, title, data) VALUES('delete', old.rowid, old.title, old.data); END;
CREATE TRIGGER kv_memory_au AFTER UPDATE ON kv_memory BEGIN
    INSERT INTO kv_memory_fts(kv_memory_fts, rowid, title, data) VALUES('delete', old.rowid, old.title, old.data);
    INSERT INTO kv_memory_fts(rowid, title, data) VALUES (new.rowid, new.title, new.data); END;
"#;

/// Rows as MiniBot wrote them: case-duplicate titles (it never enforced uniqueness in the database), non-ASCII
/// text, another owner, and SQLAlchemy's timestamp text.
const MINIBOT_ROWS: &[(&str, &str, &str, &str, &str)] = &[
    ("a1", OWNER, "Car insurance", "Renewal due in March, policy 4411", r#"{"category": "vehículos"}"#),
    ("a2", OWNER, "car insurance", "Second copy MiniBot let through", r#"{"category": "vehículos"}"#),
    ("a3", OWNER, "CAR INSURANCE", "Third copy", r#"{"category": "finanzas", "note": "x"}"#),
    ("a4", OWNER, "Vehículos de la familia", "Seat Ibiza y Renault Clio", r#"{"category": "vehículos"}"#),
    ("a5", OWNER, "ÜBER uns", "Straße und Größe", r#"{"category": "otros"}"#),
    ("b1", "owner-2", "Car insurance", "someone else's", r#"{"category": "finanzas"}"#),
];

async fn minibot_file(path: &Path) {
    let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    sqlx::raw_sql(MINIBOT_SCHEMA).execute(&mut conn).await.unwrap();
    for (i, (id, owner, title, data, metadata)) in MINIBOT_ROWS.iter().enumerate() {
        sqlx::query(
            "INSERT INTO kv_memory (id, owner_id, title, data, metadata, source, created_at, updated_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'chat', ?6, ?6, NULL)",
        )
        .bind(id)
        .bind(owner)
        .bind(title)
        .bind(data)
        .bind(metadata)
        .bind(format!("2025-01-0{} 10:00:00.123456", i + 1))
        .execute(&mut conn)
        .await
        .unwrap();
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_minibot_file_opens_with_every_row_readable_and_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv_memory.db");
    minibot_file(&path).await;
    let store = KvMemory::open(&path, 2, LIMITS).await.unwrap();

    for (id, owner, title, data, _) in MINIBOT_ROWS {
        let entry = store.get(owner, id).await.unwrap().unwrap_or_else(|| panic!("row {id} lost"));
        assert_eq!((entry.title.as_str(), entry.data.as_str()), (*title, *data));
        assert_eq!(entry.source.as_deref(), Some("chat"));
        let found = store.search(owner, Some(data), &Filter::default(), Some(100), None).await.unwrap();
        assert!(found.entries.iter().any(|e| e.id == *id), "{id} found by its data: {found:?}");
    }
    let a1 = store.get(OWNER, "a1").await.unwrap().unwrap();
    assert_eq!(a1.created_at, "2025-01-01T10:00:00.123456+00:00");
    assert_eq!(a1.category(), Some("vehículos"));

    let all = store.list(OWNER, &Filter::default(), None, None).await.unwrap();
    assert_eq!(all.total, 5, "{all:?}");
    let insurance = search(&store, "insurance").await;
    assert_eq!(insurance.total, 3, "all three case-duplicates survive: {insurance:?}");
    assert_eq!(search(&store, "vehiculos").await.total, 1, "FTS folds diacritics");
    assert_eq!(search(&store, "größe").await.total, 1);

    // The old duplicates stay, but a new one is refused, and MiniBot's rows are keyed like new ones.
    match store.create(OWNER, new("Car Insurance", "again", "otros")).await.unwrap() {
        Created::Duplicate(existing) => assert_eq!(existing.id, "a1", "the oldest of the duplicates"),
        Created::Created(e) => panic!("created a fourth duplicate {e:?}"),
    }
    assert!(matches!(store.create(OWNER, new("über UNS", "x", "otros")).await.unwrap(), Created::Duplicate(_)));

    // Writes keep the index in step: an updated row is found by its new text only.
    store.update(OWNER, "a2", Changes { data: Some("zeppelin".into()), ..Changes::default() }).await.unwrap();
    assert_eq!(titles(&search(&store, "zeppelin").await), ["car insurance"]);
    assert!(store.delete(OWNER, "a3").await.unwrap());
    assert_eq!(search(&store, "insurance").await.total, 2);
    store.close().await;

    // Opening again runs no migration twice and keeps everything.
    let store = KvMemory::open(&path, 2, LIMITS).await.unwrap();
    assert_eq!(store.list(OWNER, &Filter::default(), None, None).await.unwrap().total, 4);
    store.close().await;
}

#[tokio::test]
async fn titles_are_unique_per_owner_ignoring_unicode_case() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let first = create(&store, "  Vehículos  ", "two cars").await;
    assert_eq!(first.title, "Vehículos", "trimmed");
    for same in ["VEHÍCULOS", "vehículos", "Vehi\u{301}culos"] {
        match store.create(OWNER, new(same, "x", "otros")).await.unwrap() {
            Created::Duplicate(existing) => assert_eq!(existing.id, first.id, "{same}"),
            Created::Created(e) => panic!("{same} created {e:?}"),
        }
    }
    create(&store, "ÜBER", "a").await;
    assert!(matches!(store.create(OWNER, new("über", "b", "otros")).await.unwrap(), Created::Duplicate(_)));
    // Another owner has its own titles.
    assert!(matches!(store.create("owner-2", new("vehículos", "x", "otros")).await.unwrap(), Created::Created(_)));
}

#[tokio::test]
async fn concurrent_creates_of_one_title_make_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let other = KvMemory::open(&dir.path().join("kv_memory.db"), 5, LIMITS).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { store.clone() } else { other.clone() };
        let title = if i % 3 == 0 { "Passport" } else { "PASSPORT" };
        tasks.push(tokio::spawn(async move { store.create(OWNER, new(title, &format!("copy {i}"), "otros")).await }));
    }
    let mut created = 0;
    for task in tasks {
        if matches!(task.await.unwrap().unwrap(), Created::Created(_)) {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    assert_eq!(search(&store, "passport").await.total, 1);
}

#[tokio::test]
async fn search_ranks_by_bm25_then_falls_back_to_any_word_then_to_substrings() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    create(&store, "Garden", "tomato seeds; water the tomato daily; tomato tomato").await;
    create(&store, "Shopping", "milk, bread, one tomato").await;
    create(&store, "Tomato sauce recipe", "tomato, garlic, olive oil").await;
    let page = search(&store, "tomato").await;
    assert_eq!(page.total, 3);
    assert_eq!(titles(&page)[2], "Shopping", "the weakest match ranks last: {:?}", titles(&page));

    // All words first; a word missing everywhere falls back to any word.
    assert_eq!(titles(&search(&store, "tomato garlic").await), ["Tomato sauce recipe"]);
    assert_eq!(search(&store, "garlic unicorn").await.total, 1);
    // Prefixes match.
    assert_eq!(titles(&search(&store, "shop").await), ["Shopping"]);
    // Inside a word only the substring fallback finds it.
    assert_eq!(titles(&search(&store, "opping").await), ["Shopping"]);

    // FTS5 syntax in the query is only text.
    for query in ["a\"b OR (", "*", "\"", "NEAR(", "title:x", "-milk", "AND", "((("] {
        store.search(OWNER, Some(query), &Filter::default(), None, None).await.unwrap();
    }
    assert_eq!(titles(&search(&store, "milk, bread").await), ["Shopping"]);
}

#[tokio::test]
async fn unicode_search_ignores_case_and_accents() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    create(&store, "Vehículos", "Seat Ibiza matrícula 1234-ABC").await;
    create(&store, "ÜBER", "Straße").await;
    for query in ["vehículos", "VEHÍCULOS", "vehiculos", "matricula", "MATRÍCULA"] {
        assert_eq!(titles(&search(&store, query).await), ["Vehículos"], "{query}");
    }
    assert_eq!(titles(&search(&store, "über").await), ["ÜBER"]);
    // Substrings, where SQLite's lower() would not fold the capitals.
    assert_eq!(titles(&search(&store, "HÍCUL").await), ["Vehículos"]);
    assert_eq!(titles(&search(&store, "übe").await), ["ÜBER"]);
    assert_eq!(titles(&search(&store, "RASSE").await), Vec::<&str>::new(), "ß is not ss");
    assert_eq!(titles(&search(&store, "TRAßE").await), ["ÜBER"]);
}

#[tokio::test]
async fn expired_entries_are_never_returned_and_are_purged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv_memory.db");
    let store = store(&dir).await;
    let live = create(&store, "Live", "keep").await;
    let soon = store
        .create(
            OWNER,
            NewEntry {
                expires_at: Some(Utc::now() + chrono::Duration::milliseconds(300)),
                ..new("Soon", "gone", "otros")
            },
        )
        .await
        .unwrap();
    let Created::Created(soon) = soon else { panic!() };
    assert!(store.get(OWNER, &soon.id).await.unwrap().is_some());
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;

    assert!(store.get(OWNER, &soon.id).await.unwrap().is_none());
    assert_eq!(search(&store, "gone").await.total, 0);
    assert_eq!(titles(&store.list(OWNER, &Filter::default(), None, None).await.unwrap()), ["Live"]);
    assert!(
        store
            .update(OWNER, &soon.id, Changes { data: Some("x".into()), ..Changes::default() })
            .await
            .unwrap()
            .is_none()
    );
    // The expired title is free again; the write also deleted the row.
    assert!(matches!(store.create(OWNER, new("soon", "new", "otros")).await.unwrap(), Created::Created(_)));
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM kv_memory WHERE id = ?1")
        .bind(&soon.id)
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    store.close().await;

    // A row that expired while nothing wrote is purged when the store opens.
    let options = SqliteConnectOptions::new().filename(&path);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    sqlx::query("UPDATE kv_memory SET expires_at = '2001-01-01 00:00:00.000000' WHERE id = ?1")
        .bind(&live.id)
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let store = KvMemory::open(&path, 1, LIMITS).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM kv_memory").fetch_one(&store.pool).await.unwrap();
    assert_eq!(rows, 1, "only the new `soon` is left");
    let fts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM kv_memory_fts WHERE kv_memory_fts MATCH 'keep'")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(fts, 0, "the index follows");
    store.close().await;
}

#[tokio::test]
async fn update_replaces_metadata_and_keeps_the_category() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let mut first = new("Doctor", "Dr. Ruiz", "salud");
    first.metadata.insert("phone".into(), json!("555"));
    let Created::Created(entry) = store.create(OWNER, first).await.unwrap() else { panic!() };

    let mut metadata = Map::new();
    metadata.insert("address".into(), json!("Calle 1"));
    let updated = store
        .update(OWNER, &entry.id, Changes { metadata: Some(metadata), ..Changes::default() })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Value::Object(updated.metadata.clone()), json!({ "address": "Calle 1", "category": "salud" }));
    assert_eq!(updated.data, "Dr. Ruiz");
    assert!(updated.updated_at >= entry.updated_at);

    let updated = store
        .update(OWNER, &entry.id, Changes { category: Some("contactos".into()), ..Changes::default() })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Value::Object(updated.metadata), json!({ "address": "Calle 1", "category": "contactos" }));
    assert!(store.update("owner-2", &entry.id, Changes::default()).await.unwrap().is_none(), "owner-scoped");
}

#[tokio::test]
async fn filters_limits_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    for i in 0..30 {
        let category = if i % 2 == 0 { "finanzas" } else { "viajes" };
        let mut entry = new(&format!("Note {i:02}"), "common words", category);
        entry.source = Some(if i < 10 { "email".into() } else { "chat".into() });
        store.create(OWNER, entry).await.unwrap();
    }
    let all = Filter::default();
    let page = store.list(OWNER, &all, None, None).await.unwrap();
    assert_eq!((page.total, page.limit, page.entries.len()), (30, 20, 20));
    assert_eq!(page.entries[0].title, "Note 29", "newest first");
    assert_eq!(store.list(OWNER, &all, Some(1000), None).await.unwrap().limit, 100);
    assert_eq!(store.list(OWNER, &all, Some(-5), None).await.unwrap().limit, 1);
    let tail = store.list(OWNER, &all, Some(10), Some(25)).await.unwrap();
    assert_eq!((tail.entries.len(), tail.offset), (5, 25));
    assert_eq!(store.list(OWNER, &all, None, Some(-3)).await.unwrap().offset, 0);

    let viajes = Filter { category: Some("viajes".into()), ..Filter::default() };
    assert_eq!(store.list(OWNER, &viajes, None, None).await.unwrap().total, 15);
    let email = Filter { source: Some("email".into()), ..Filter::default() };
    assert_eq!(store.search(OWNER, Some("common"), &email, None, None).await.unwrap().total, 10);
    let future = Filter { updated_after: Some(Utc::now() + chrono::Duration::hours(1)), ..Filter::default() };
    assert_eq!(store.list(OWNER, &future, None, None).await.unwrap().total, 0);
    let past = Filter { updated_before: Some(Utc::now() - chrono::Duration::hours(1)), ..Filter::default() };
    assert_eq!(store.list(OWNER, &past, None, None).await.unwrap().total, 0);
    let window = Filter {
        updated_after: Some(Utc::now() - chrono::Duration::hours(1)),
        updated_before: Some(Utc::now() + chrono::Duration::hours(1)),
        ..Filter::default()
    };
    assert_eq!(store.list(OWNER, &window, None, None).await.unwrap().total, 30);
}

/// Rows another program wrote with odd types (a blob where text belongs, metadata that is not JSON, an expiry
/// with an offset or as a Unix time): the store opens, every row reads, a category filter works, and no live row
/// is purged because its expiry was compared as written.
#[tokio::test]
async fn odd_rows_written_elsewhere_never_disable_the_store_or_lose_live_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv_memory.db");
    minibot_file(&path).await;
    let mut conn = SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(&path)).await.unwrap();
    let in_an_hour = Utc::now() + chrono::Duration::hours(1);
    let offset = in_an_hour.with_timezone(&chrono::FixedOffset::west_opt(5 * 3600).unwrap());
    for (id, title, data, metadata, expires) in [
        ("blob", json!("Blob note"), None, "{\"category\":\"otros\"}", None),
        ("notjson", json!("Not JSON"), Some("plain"), "not json at all", None),
        ("offset", json!("Offset expiry"), Some("still live"), "{}", Some(json!(offset.to_rfc3339()))),
        ("unix", json!("Unix expiry"), Some("lives to 2100"), "{}", Some(json!(4_102_444_800i64))),
    ] {
        let query = sqlx::query(
            "INSERT INTO kv_memory (id, owner_id, title, data, metadata, created_at, updated_at, expires_at)
             VALUES (?1, ?2, ?3, COALESCE(?4, x'00ff10'), ?5, '2025-01-01 00:00:00.000000', '2025-01-01 00:00:00.000000', ?6)",
        )
        .bind(id)
        .bind(OWNER)
        .bind(title.as_str().unwrap())
        .bind(data)
        .bind(metadata);
        let query = match expires {
            Some(serde_json::Value::Number(n)) => query.bind(n.as_i64()),
            Some(other) => query.bind(other.as_str().map(str::to_string)),
            None => query.bind(None::<String>),
        };
        query.execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    let store = KvMemory::open(&path, 2, LIMITS).await.unwrap();
    let all = store.list(OWNER, &Filter::default(), Some(100), None).await.unwrap();
    for title in ["Blob note", "Not JSON", "Offset expiry", "Unix expiry"] {
        assert!(titles(&all).contains(&title), "{title} missing: {:?}", titles(&all));
    }
    let filter = Filter { category: Some("otros".into()), ..Filter::default() };
    let otros = store.list(OWNER, &filter, Some(100), None).await.unwrap();
    assert!(titles(&otros).contains(&"Blob note"), "{:?}", titles(&otros));
    assert!(!titles(&otros).contains(&"Not JSON"));
}

/// An expiry another program writes while the store is open, in another layout, is judged by its instant at the
/// next write: a live row is not purged.
#[tokio::test]
async fn an_expiry_written_later_in_another_layout_is_judged_by_its_instant() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let entry = create(&store, "Live", "still here").await;
    let in_an_hour =
        (Utc::now() + chrono::Duration::hours(1)).with_timezone(&chrono::FixedOffset::west_opt(10 * 3600).unwrap());
    let mut conn =
        SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(dir.path().join("kv_memory.db")))
            .await
            .unwrap();
    sqlx::query("UPDATE kv_memory SET expires_at = ?1 WHERE id = ?2")
        .bind(in_an_hour.format("%Y-%m-%d %H:%M:%S%:z").to_string())
        .bind(&entry.id)
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    assert!(store.get(OWNER, &entry.id).await.unwrap().is_some(), "shown before the next write");
    create(&store, "Another", "write").await;
    let kept = store.get(OWNER, &entry.id).await.unwrap().expect("not purged by the write");
    assert!(kept.expires_at.is_some());
}
