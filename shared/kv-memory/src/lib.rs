//! The key/value memory store behind the `memory_*` tools (MiniBot's `[tools.kv_memory]`): short notes an owner
//! keeps across conversations, each with a title unique per owner regardless of case, a category (kept as
//! `metadata.category`), free-form metadata, a source and an optional expiry. One SQLite file (`kv_memory.db`)
//! with MiniBot's table `kv_memory` and its FTS5 index `kv_memory_fts`, so a file MiniBot wrote opens here and is
//! migrated in place without losing a row.
//!
//! Differences from MiniBot, on purpose:
//! - the title check and its insert are one `BEGIN IMMEDIATE` transaction, so two concurrent creates of one title
//!   (two processes, or two calls of one turn) cannot both succeed;
//! - case-insensitivity covers all of Unicode (`ÜBER` equals `über`): SQLite's `lower()` only folds ASCII, so each
//!   row carries Rust-folded keys (`title_key`, `data_key`) that the title check and the substring fallback read;
//! - `expires_at` is enforced: an expired entry is never returned, does not block its title, and is deleted when
//!   the store opens and at the start of every write ([`KvMemory::create`], [`KvMemory::update`],
//!   [`KvMemory::delete`]).

mod search;
pub mod time;

use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde_json::{Map, Value};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{AssertSqlSafe, QueryBuilder, Row, Sqlite};
use std::path::{Path, PathBuf};
use unicode_normalization::UnicodeNormalization;

/// MiniBot's categories, fixed and in Spanish.
pub const CATEGORIES: &[&str] = &[
    "finanzas",
    "recordatorios",
    "proyectos",
    "preferencias",
    "salud",
    "viajes",
    "vehículos",
    "contactos",
    "seguimiento",
    "conocimiento",
    "otros",
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Open(#[from] minibot_sqlite::Error),
    #[error("cannot migrate the memory database {path}: {source}")]
    Migrate { path: PathBuf, source: sqlx::migrate::MigrateError },
    #[error("memory database error: {0}")]
    Query(#[from] sqlx::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Page sizes: `default_limit` when a caller gives none (or 0), never more than `max_limit`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub default_limit: u32,
    pub max_limit: u32,
}

/// One stored note, timestamps already in the ISO form results show.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: String,
    pub owner_id: String,
    pub title: String,
    pub data: String,
    pub metadata: Map<String, Value>,
    pub source: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: Option<String>,
}

impl Entry {
    pub fn category(&self) -> Option<&str> {
        self.metadata.get("category").and_then(Value::as_str)
    }
}

/// A note to create; `metadata` already holds its `category`.
#[derive(Debug, Clone)]
pub struct NewEntry {
    pub title: String,
    pub data: String,
    pub metadata: Map<String, Value>,
    pub source: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// What [`KvMemory::create`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    Created(Entry),
    /// The owner already has a live entry with this title (compared without case); nothing was written.
    Duplicate(Entry),
}

/// The fields [`KvMemory::update`] changes; `None` keeps the stored value.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub data: Option<String>,
    pub category: Option<String>,
    /// Replaces the stored metadata; the category (the new one, else the stored one) is put back into it.
    pub metadata: Option<Map<String, Value>>,
    pub source: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Conditions every listed or searched entry meets.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub category: Option<String>,
    pub source: Option<String>,
    /// Inclusive bounds on `updated_at`.
    pub updated_after: Option<DateTime<Utc>>,
    pub updated_before: Option<DateTime<Utc>>,
}

/// One page of entries and how many match in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub entries: Vec<Entry>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// The store. Cheap to clone.
#[derive(Clone, Debug)]
pub struct KvMemory {
    pool: SqlitePool,
    limits: Limits,
}

/// Every column read as bytes and decoded leniently ([`lossy`]): a row another program wrote with a number or a
/// blob (even one that is not UTF-8) where text belongs still reads, instead of failing every listing it is in.
const COLUMNS: &str = "CAST(k.id AS BLOB), CAST(k.owner_id AS BLOB), CAST(k.title AS BLOB), CAST(k.data AS BLOB), \
     CAST(k.metadata AS BLOB), CAST(k.source AS BLOB), CAST(k.created_at AS BLOB), CAST(k.updated_at AS BLOB), \
     CAST(k.expires_at AS BLOB)";

/// The stored time layout as a GLOB pattern: text in it compares as time.
const STORED_SHAPE: &str = minibot_sqlite::stored_time::GLOB;

/// Column `index` of a row selected `CAST(… AS BLOB)`, as text (invalid UTF-8 replaced).
fn lossy(row: &SqliteRow, index: usize) -> Result<Option<String>> {
    Ok(row.try_get::<Option<Vec<u8>>, _>(index)?.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

impl KvMemory {
    /// Opens (creating when missing) the database at `path` with at most `pool_size` connections, migrates it
    /// (a MiniBot file included), fills in the case-folded keys of rows written without them, and deletes
    /// expired entries.
    pub async fn open(path: &Path, pool_size: u32, limits: Limits) -> Result<Self> {
        let pool = minibot_sqlite::open_pool(path, pool_size.max(1)).await?;
        let mut migrator = sqlx::migrate!("./migrations");
        // The file belongs to this store alone, but a newer version's migrations must not stop an older one.
        migrator.set_ignore_missing(true);
        minibot_sqlite::migrate(&pool, &migrator)
            .await
            .map_err(|source| Error::Migrate { path: path.to_path_buf(), source })?;
        let store = Self { pool, limits };
        let mut tx = store.pool.begin_with("BEGIN IMMEDIATE").await?;
        fill_keys(&mut tx).await?;
        purge_expired(&mut tx).await?;
        tx.commit().await?;
        Ok(store)
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Closes the pool. Call it before the tokio runtime stops.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Creates an entry unless the owner has a live one with the same title, ignoring case. The check and the
    /// insert are one write transaction: a concurrent create of the same title waits and then sees this one.
    pub async fn create(&self, owner_id: &str, new: NewEntry) -> Result<Created> {
        let title = new.title.trim().to_string();
        let title_key = fold(&title);
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        purge_expired(&mut tx).await?;
        let existing = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM kv_memory k WHERE k.owner_id = ?1 AND k.title_key = ?2 \
             ORDER BY k.created_at LIMIT 1"
        )))
        .bind(owner_id)
        .bind(&title_key)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = existing {
            tx.commit().await?;
            return Ok(Created::Duplicate(entry(&row)?));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let now = time::stored(Utc::now());
        sqlx::query(
            "INSERT INTO kv_memory (id, owner_id, title, data, metadata, source, created_at, updated_at, expires_at, \
             title_key, data_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10)",
        )
        .bind(&id)
        .bind(owner_id)
        .bind(&title)
        .bind(&new.data)
        .bind(Value::Object(new.metadata).to_string())
        .bind(&new.source)
        .bind(&now)
        .bind(new.expires_at.map(time::stored))
        .bind(&title_key)
        .bind(fold(&new.data))
        .execute(&mut *tx)
        .await?;
        let created = fetch(&mut tx, owner_id, &id).await?;
        tx.commit().await?;
        // Read back inside the transaction that wrote it; absent only if SQLite lost the row it just inserted.
        created.map(Created::Created).ok_or(Error::Query(sqlx::Error::RowNotFound))
    }

    /// Changes an owner's live entry; `None` when there is none with this id.
    pub async fn update(&self, owner_id: &str, entry_id: &str, changes: Changes) -> Result<Option<Entry>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        purge_expired(&mut tx).await?;
        let Some(current) = fetch(&mut tx, owner_id, entry_id).await? else {
            tx.commit().await?;
            return Ok(None);
        };
        let category = changes.category.or_else(|| current.category().map(str::to_string));
        let mut metadata = changes.metadata.unwrap_or(current.metadata);
        if let Some(category) = category {
            metadata.insert("category".into(), Value::String(category));
        }
        let data = changes.data.unwrap_or(current.data);
        sqlx::query(
            "UPDATE kv_memory SET data = ?1, data_key = ?2, metadata = ?3, source = COALESCE(?4, source), \
             expires_at = COALESCE(?5, expires_at), updated_at = ?6 WHERE owner_id = ?7 AND id = ?8",
        )
        .bind(&data)
        .bind(fold(&data))
        .bind(Value::Object(metadata).to_string())
        .bind(&changes.source)
        .bind(changes.expires_at.map(time::stored))
        .bind(time::stored(Utc::now()))
        .bind(owner_id)
        .bind(entry_id)
        .execute(&mut *tx)
        .await?;
        let updated = fetch(&mut tx, owner_id, entry_id).await?;
        tx.commit().await?;
        Ok(updated)
    }

    /// An owner's live entry.
    pub async fn get(&self, owner_id: &str, entry_id: &str) -> Result<Option<Entry>> {
        let mut conn = self.pool.acquire().await?;
        fetch(&mut conn, owner_id, entry_id).await
    }

    /// Deletes an owner's entry; whether one was deleted (an expired one counts as already gone).
    pub async fn delete(&self, owner_id: &str, entry_id: &str) -> Result<bool> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        purge_expired(&mut tx).await?;
        let deleted = sqlx::query("DELETE FROM kv_memory WHERE owner_id = ?1 AND id = ?2")
            .bind(owner_id)
            .bind(entry_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted > 0)
    }

    /// An owner's live entries, newest update first.
    pub async fn list(&self, owner_id: &str, filter: &Filter, limit: Option<i64>, offset: Option<i64>) -> Result<Page> {
        self.search(owner_id, None, filter, limit, offset).await
    }

    /// An owner's live entries matching `query` (MiniBot's order of attempts): the full-text index with every
    /// word as a quoted prefix, all required and best bm25 rank first; then any of them; then, when neither finds
    /// anything, entries whose title or data contains the query as typed, ignoring case, newest update first.
    /// Without a query: every entry, newest update first.
    pub async fn search(
        &self,
        owner_id: &str,
        query: Option<&str>,
        filter: &Filter,
        limit: Option<i64>,
        offset: Option<i64>,
    ) -> Result<Page> {
        let limit = self.resolve_limit(limit);
        let offset = offset.unwrap_or(0).max(0);
        let now = time::stored(Utc::now());
        let query = query.map(str::trim).filter(|q| !q.is_empty());
        // One read transaction: the count and the page see the same rows.
        let mut tx = self.pool.begin().await?;
        let scope = Scope { owner_id, filter, now: &now };
        if let Some(query) = query {
            let mut tried = None;
            for joiner in [search::Joiner::And, search::Joiner::Or] {
                let Some(expression) = search::fts_expression(query, joiner) else { break };
                // One word reads the same joined either way: no second attempt.
                if tried.as_ref() == Some(&expression) {
                    break;
                }
                let total = count(&mut tx, &scope, Match::Fts(&expression)).await?;
                if total > 0 {
                    let entries = page(&mut tx, &scope, Match::Fts(&expression), limit, offset).await?;
                    tx.commit().await?;
                    return Ok(Page { entries, total, limit, offset: offset.unsigned_abs() });
                }
                tried = Some(expression);
            }
        }
        let matcher = match query {
            Some(query) => Match::Contains(fold(query)),
            None => Match::All,
        };
        let total = count(&mut tx, &scope, matcher.clone()).await?;
        let entries = page(&mut tx, &scope, matcher, limit, offset).await?;
        tx.commit().await?;
        Ok(Page { entries, total, limit, offset: offset.unsigned_abs() })
    }

    fn resolve_limit(&self, limit: Option<i64>) -> u32 {
        let max = i64::from(self.limits.max_limit.max(1));
        let requested = limit.filter(|l| *l != 0).unwrap_or(i64::from(self.limits.default_limit));
        u32::try_from(requested.clamp(1, max)).unwrap_or(1)
    }
}

/// Text as the case-insensitive comparisons see it: NFC (a composed and a decomposed `í` are one letter), then
/// Unicode lowercase.
pub fn fold(text: &str) -> String {
    text.nfc().collect::<String>().to_lowercase()
}

type Tx = sqlx::Transaction<'static, Sqlite>;

/// Deletes every expired entry (of every owner: the file is this instance's); the FTS triggers follow. Expiry
/// times another program wrote in another layout are put into the stored one first, so each is compared as the
/// instant it names.
async fn purge_expired(tx: &mut Tx) -> Result<u64> {
    normalise_expiry(tx).await?;
    let purged = sqlx::query("DELETE FROM kv_memory WHERE expires_at IS NOT NULL AND expires_at <= ?1")
        .bind(time::stored(Utc::now()))
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(purged)
}

/// Rewrites every `expires_at` not in the stored layout (an offset, a `T`, a Unix time written by another
/// program) as the UTC text the purge and the filters compare: compared as written, `2026-12-04 18:00:00-05:00`
/// would count as past at 19:00 UTC and the live row would be deleted. Text that is no time at all is cleared
/// (the entry never expires) rather than guessed at.
async fn normalise_expiry(tx: &mut Tx) -> Result<()> {
    let rows = sqlx::query(AssertSqlSafe(format!(
        "SELECT rowid, typeof(expires_at), CAST(expires_at AS BLOB) FROM kv_memory WHERE expires_at IS NOT NULL
             AND (typeof(expires_at) != 'text' OR expires_at NOT GLOB '{STORED_SHAPE}')"
    )))
    .fetch_all(&mut **tx)
    .await?;
    for row in rows {
        let rowid: i64 = row.try_get(0)?;
        let kind: String = row.try_get(1)?;
        let raw = lossy(&row, 2)?.unwrap_or_default();
        let parsed = match kind.as_str() {
            "integer" | "real" => raw.parse::<f64>().ok().and_then(|secs| Utc.timestamp_opt(secs as i64, 0).single()),
            _ => time::parse(&raw),
        };
        let normal = parsed.filter(|at| at.year() <= time::LAST_YEAR).map(time::stored);
        sqlx::query("UPDATE kv_memory SET expires_at = ?1 WHERE rowid = ?2")
            .bind(normal)
            .bind(rowid)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Computes the folded keys of rows that lack them: all rows of a file MiniBot wrote, and rows MiniBot added
/// since this store last opened it.
async fn fill_keys(tx: &mut Tx) -> Result<()> {
    let rows = sqlx::query(
        "SELECT rowid, CAST(title AS BLOB), CAST(data AS BLOB) FROM kv_memory WHERE title_key IS NULL OR data_key IS NULL",
    )
        .fetch_all(&mut **tx)
        .await?;
    for row in rows {
        let rowid: i64 = row.try_get(0)?;
        let title = lossy(&row, 1)?.unwrap_or_default();
        let data = lossy(&row, 2)?.unwrap_or_default();
        sqlx::query("UPDATE kv_memory SET title_key = ?1, data_key = ?2 WHERE rowid = ?3")
            .bind(fold(title.trim()))
            .bind(fold(&data))
            .bind(rowid)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

async fn fetch(conn: &mut sqlx::SqliteConnection, owner_id: &str, entry_id: &str) -> Result<Option<Entry>> {
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM kv_memory k WHERE k.owner_id = ?1 AND k.id = ?2 \
         AND (k.expires_at IS NULL OR k.expires_at > ?3 OR k.expires_at NOT GLOB '{STORED_SHAPE}')"
    )))
    .bind(owner_id)
    .bind(entry_id)
    .bind(time::stored(Utc::now()))
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(entry).transpose()
}

/// Who and what a listing covers.
struct Scope<'a> {
    owner_id: &'a str,
    filter: &'a Filter,
    now: &'a str,
}

#[derive(Clone)]
enum Match<'a> {
    All,
    /// An FTS5 expression built by [`search::fts_expression`], never the caller's text.
    Fts(&'a str),
    /// Folded text the title or the data must contain.
    Contains(String),
}

fn select(head: &str, scope: &Scope<'_>, matcher: &Match<'_>) -> QueryBuilder<Sqlite> {
    let mut q = QueryBuilder::new(head);
    match matcher {
        Match::Fts(expression) => {
            // CROSS JOIN fixes the loop order: the index finds the matches, then each is looked up by rowid. Left
            // to choose, SQLite walks the owner's rows and probes the index once per row: seconds at 100,000.
            q.push(" FROM kv_memory_fts CROSS JOIN kv_memory k ON k.rowid = kv_memory_fts.rowid WHERE kv_memory_fts MATCH ");
            q.push_bind(*expression);
            q.push(" AND ");
        }
        Match::All | Match::Contains(_) => {
            q.push(" FROM kv_memory k WHERE ");
        }
    }
    q.push("k.owner_id = ").push_bind(scope.owner_id);
    // An expiry in another layout (written by another program since the last write) is not compared as text: it
    // shows until the next write puts it in the stored layout and judges it.
    q.push(" AND (k.expires_at IS NULL OR k.expires_at > ").push_bind(scope.now);
    q.push(format!(" OR k.expires_at NOT GLOB '{STORED_SHAPE}')"));
    if let Match::Contains(needle) = matcher {
        q.push(" AND (instr(k.title_key, ").push_bind(needle.as_str()).push(") > 0 OR instr(k.data_key, ");
        q.push_bind(needle.as_str()).push(") > 0)");
    }
    let filter = scope.filter;
    if let Some(category) = &filter.category {
        // Metadata that is not JSON (written by another program) has no category; json_extract would fail the query.
        q.push(" AND CASE WHEN json_valid(k.metadata) THEN json_extract(k.metadata, '$.category') END = ")
            .push_bind(category.as_str());
    }
    if let Some(source) = &filter.source {
        q.push(" AND k.source = ").push_bind(source.as_str());
    }
    if let Some(after) = filter.updated_after {
        q.push(" AND k.updated_at >= ").push_bind(time::stored(after));
    }
    if let Some(before) = filter.updated_before {
        q.push(" AND k.updated_at <= ").push_bind(time::stored(before));
    }
    q
}

async fn count(tx: &mut Tx, scope: &Scope<'_>, matcher: Match<'_>) -> Result<u64> {
    let mut q = select("SELECT COUNT(*)", scope, &matcher);
    let total: i64 = q.build_query_scalar().fetch_one(&mut **tx).await?;
    Ok(total.unsigned_abs())
}

async fn page(tx: &mut Tx, scope: &Scope<'_>, matcher: Match<'_>, limit: u32, offset: i64) -> Result<Vec<Entry>> {
    let mut q = select(&format!("SELECT {COLUMNS}"), scope, &matcher);
    match matcher {
        Match::Fts(_) => q.push(" ORDER BY bm25(kv_memory_fts) ASC, k.updated_at DESC"),
        Match::All | Match::Contains(_) => q.push(" ORDER BY k.updated_at DESC"),
    };
    q.push(" LIMIT ").push_bind(i64::from(limit)).push(" OFFSET ").push_bind(offset);
    let rows = q.build().fetch_all(&mut **tx).await?;
    rows.iter().map(entry).collect()
}

/// A row as an entry. MiniBot's rows are read as they are: metadata that is not a JSON object reads as `{}`.
fn entry(row: &SqliteRow) -> Result<Entry> {
    let text = |index: usize| lossy(row, index);
    let metadata = match text(4)?.and_then(|raw| serde_json::from_str::<Value>(&raw).ok()) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    Ok(Entry {
        id: text(0)?.unwrap_or_default(),
        owner_id: text(1)?.unwrap_or_default(),
        title: text(2)?.unwrap_or_default(),
        data: text(3)?.unwrap_or_default(),
        metadata,
        source: text(5)?,
        created_at: time::iso_from_stored(&text(6)?.unwrap_or_default()),
        updated_at: time::iso_from_stored(&text(7)?.unwrap_or_default()),
        expires_at: text(8)?.map(|raw| time::iso_from_stored(&raw)),
    })
}

#[cfg(test)]
mod tests;
