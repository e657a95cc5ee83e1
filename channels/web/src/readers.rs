//! What the browsing pages read: the transcripts (the daemon's [`Store`]), memory (`[tools.kv_memory]`), the
//! relation graph (`[extensions]` graph module) and scheduled prompts (`[scheduler.prompts]`), each located from
//! the config the way its tools locate it and opened by the first page that needs it.
//!
//! The graph and scheduler files are opened read-only and queried directly: their stores only read one chat's
//! or one namespace's rows, and opening them as a store would migrate and tidy the file. A file that does not
//! exist yet means nothing was written: an empty page, and no file is created.

use minibot_config::Config;
use minibot_kv_memory::{Filter, KvMemory, Limits};
use minibot_store::Store;
use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::OnceCell;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The feature is off in the config; the message names the setting.
    #[error("{0}")]
    Off(String),
    #[error("{key} = `{url}` is not a SQLite URL such as sqlite:///./data/file.db")]
    BadUrl { key: &'static str, url: String },
    #[error("cannot read {what} ({path}): {source}")]
    Database { what: &'static str, path: PathBuf, source: sqlx::Error },
    #[error("cannot read memory: {0}")]
    Memory(#[from] minibot_kv_memory::Error),
    #[error("cannot read the history: {0}")]
    History(#[from] minibot_store::StoreError),
}

pub type Result<T> = std::result::Result<T, ReadError>;

/// A page of rows and how many there are in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    pub total: u64,
}

impl<T> Rows<T> {
    fn empty() -> Self {
        Self { rows: Vec::new(), total: 0 }
    }
}

/// One edge of the relation graph; times as stored (UTC).
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeRow {
    pub graph: String,
    pub source: String,
    pub rel: String,
    pub target: String,
    pub attrs: Option<String>,
    pub valid_from: String,
    /// Set once the edge was unlinked.
    pub valid_to: Option<String>,
}

/// One node of the live graph and how many live edges touch it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub graph: String,
    pub node: String,
    pub edges: u64,
}

/// One scheduled prompt; times as stored (UTC).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledRow {
    pub id: String,
    pub channel: String,
    pub chat_id: Option<i64>,
    pub status: String,
    pub run_at: String,
    /// `none`, `interval` or `cron`.
    pub recurrence: String,
    pub interval_seconds: Option<i64>,
    pub cron_expression: Option<String>,
    pub end_at: Option<String>,
    pub content: String,
    pub last_error: Option<String>,
}

impl ScheduledRow {
    /// Pending and leased jobs have a next run; the others are done with.
    pub fn is_active(&self) -> bool {
        matches!(self.status.as_str(), "pending" | "leased")
    }
}

/// Where one database is: off, misconfigured, or a file opened on first use.
enum Source {
    Off(String),
    BadUrl { key: &'static str, url: String },
    File { path: PathBuf, pool: OnceCell<SqlitePool> },
}

impl Source {
    fn from_url(url: Option<&str>, key: &'static str, config: &Config, off: String) -> Self {
        let Some(url) = url else { return Self::Off(off) };
        match minibot_config::sqlite_path_from_url(url) {
            Some(path) => Self::File { path: config.resolve_path(&path), pool: OnceCell::new() },
            None => Self::BadUrl { key, url: url.to_string() },
        }
    }

    /// The read-only pool, `None` when the file does not exist yet.
    async fn pool(&self, what: &'static str) -> Result<Option<(&SqlitePool, &PathBuf)>> {
        let (path, cell) = match self {
            Self::Off(message) => return Err(ReadError::Off(message.clone())),
            Self::BadUrl { key, url } => return Err(ReadError::BadUrl { key, url: url.clone() }),
            Self::File { path, pool } => (path, pool),
        };
        if cell.get().is_none() && !path.exists() {
            return Ok(None);
        }
        let pool = cell
            .get_or_try_init(|| async {
                let options = SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true)
                    .create_if_missing(false)
                    .busy_timeout(minibot_sqlite::BUSY_TIMEOUT);
                SqlitePoolOptions::new().max_connections(2).connect_with(options).await
            })
            .await
            .map_err(|source| ReadError::Database { what, path: path.clone(), source })?;
        Ok(Some((pool, path)))
    }

    async fn close(&self) {
        if let Self::File { pool, .. } = self
            && let Some(pool) = pool.get()
        {
            pool.close().await;
        }
    }
}

pub struct Readers {
    config: Arc<Config>,
    history: Option<Store>,
    memory: OnceCell<KvMemory>,
    graph: Source,
    scheduled: Source,
}

impl Readers {
    pub fn new(config: Arc<Config>, history: Option<Store>) -> Self {
        let graph_url = config.extensions.graph_sqlite_url();
        let graph = Source::from_url(
            graph_url.as_deref(),
            "extensions graph sqlite_url",
            &config,
            "The relation graph is off: [extensions] modules does not list minibot.extensions.tools.graph".into(),
        );
        let prompts = &config.scheduler.prompts;
        let scheduled = Source::from_url(
            (prompts.enabled != Some(false)).then_some(prompts.sqlite_url.as_str()),
            "scheduler.prompts.sqlite_url",
            &config,
            "Scheduled prompts are off: [scheduler.prompts] enabled = false".into(),
        );
        Self { config, history, memory: OnceCell::new(), graph, scheduled }
    }

    /// The transcripts.
    pub fn history(&self) -> Result<&Store> {
        self.history.as_ref().ok_or_else(|| ReadError::Off("The history is not available in this process".into()))
    }

    /// The owner's memory entries, newest update first, or those matching `query` (the `memory_search` tool's
    /// search); `limit` within the memory's `max_limit`.
    pub async fn memory(&self, query: Option<&str>, limit: u32, offset: u64) -> Result<minibot_kv_memory::Page> {
        let memory = self.memory_store().await?;
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let owner = &self.config.runtime.owner_id;
        Ok(memory.search(owner, query, &Filter::default(), Some(i64::from(limit.max(1))), Some(offset)).await?)
    }

    async fn memory_store(&self) -> Result<&KvMemory> {
        let section = &self.config.tools.kv_memory;
        if !section.enabled {
            return Err(ReadError::Off("Memory is off: [tools.kv_memory] enabled = false".into()));
        }
        let path = minibot_config::sqlite_path_from_url(&section.sqlite_url)
            .map(|p| self.config.resolve_path(&p))
            .ok_or_else(|| ReadError::BadUrl { key: "tools.kv_memory.sqlite_url", url: section.sqlite_url.clone() })?;
        let limits = Limits { default_limit: section.default_limit, max_limit: section.max_limit };
        // Opened as the memory tools open it (migrated, expired entries purged): both may share the file.
        Ok(self.memory.get_or_try_init(|| KvMemory::open(&path, section.pool_size, limits)).await?)
    }

    /// Graph edges, live ones first, then the newest.
    pub async fn graph_edges(&self, limit: u32, offset: u64) -> Result<Rows<EdgeRow>> {
        const WHAT: &str = "the relation graph";
        let Some((pool, path)) = self.graph.pool(WHAT).await? else { return Ok(Rows::empty()) };
        let failed = |source| ReadError::Database { what: WHAT, path: path.clone(), source };
        let owner = &self.config.runtime.owner_id;
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM graph_edges WHERE owner_id = ?1")
            .bind(owner)
            .fetch_one(pool)
            .await
            .map_err(failed)?;
        let rows = sqlx::query(
            "SELECT CAST(graph AS TEXT), CAST(source AS TEXT), CAST(rel AS TEXT), CAST(target AS TEXT),
                    CAST(attrs AS TEXT), CAST(valid_from AS TEXT), CAST(valid_to AS TEXT)
             FROM graph_edges WHERE owner_id = ?1
             ORDER BY valid_to IS NOT NULL, valid_from DESC, rowid DESC LIMIT ?2 OFFSET ?3",
        )
        .bind(owner)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(failed)?;
        let rows = rows
            .iter()
            .map(|row| {
                Ok(EdgeRow {
                    graph: text(row, 0)?,
                    source: text(row, 1)?,
                    rel: text(row, 2)?,
                    target: text(row, 3)?,
                    attrs: row.try_get(4)?,
                    valid_from: text(row, 5)?,
                    valid_to: row.try_get(6)?,
                })
            })
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(failed)?;
        Ok(Rows { rows, total: u64::try_from(total).unwrap_or(0) })
    }

    /// The live graph's nodes by namespace and name, with how many live edges touch each.
    pub async fn graph_nodes(&self, limit: u32, offset: u64) -> Result<Rows<NodeRow>> {
        const WHAT: &str = "the relation graph";
        let Some((pool, path)) = self.graph.pool(WHAT).await? else { return Ok(Rows::empty()) };
        let failed = |source| ReadError::Database { what: WHAT, path: path.clone(), source };
        let nodes = "SELECT graph, source AS node FROM graph_edges WHERE owner_id = ?1 AND valid_to IS NULL
                     UNION ALL SELECT graph, target FROM graph_edges WHERE owner_id = ?1 AND valid_to IS NULL";
        let owner = &self.config.runtime.owner_id;
        let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(DISTINCT graph || ' ' || node) FROM ({nodes})"
        )))
        .bind(owner)
        .fetch_one(pool)
        .await
        .map_err(failed)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(graph AS TEXT), CAST(node AS TEXT), COUNT(*) FROM ({nodes})
             GROUP BY graph, node ORDER BY graph, node LIMIT ?2 OFFSET ?3"
        )))
        .bind(owner)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(failed)?;
        let rows = rows
            .iter()
            .map(|row| {
                Ok(NodeRow {
                    graph: text(row, 0)?,
                    node: text(row, 1)?,
                    edges: u64::try_from(row.try_get::<i64, _>(2)?).unwrap_or(0),
                })
            })
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(failed)?;
        Ok(Rows { rows, total: u64::try_from(total).unwrap_or(0) })
    }

    /// The owner's scheduled prompts in every chat: active ones first, soonest first, then the rest newest
    /// first. `active_only` leaves out completed, failed and cancelled ones.
    pub async fn scheduled(&self, active_only: bool, limit: u32, offset: u64) -> Result<Rows<ScheduledRow>> {
        const WHAT: &str = "the scheduled prompts";
        let Some((pool, path)) = self.scheduled.pool(WHAT).await? else { return Ok(Rows::empty()) };
        let failed = |source| ReadError::Database { what: WHAT, path: path.clone(), source };
        let filter = "WHERE owner_id = ?1 AND (?2 = 0 OR status IN ('pending', 'leased'))";
        let owner = &self.config.runtime.owner_id;
        let total: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM scheduled_prompts {filter}")))
                .bind(owner)
                .bind(active_only)
                .fetch_one(pool)
                .await
                .map_err(failed)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(id AS TEXT), CAST(channel AS TEXT), chat_id, CAST(status AS TEXT), CAST(run_at AS TEXT),
                    CAST(recurrence AS TEXT), recurrence_interval_seconds, CAST(recurrence_cron_expression AS TEXT),
                    CAST(recurrence_end_at AS TEXT), CAST(content AS TEXT), CAST(last_error AS TEXT)
             FROM scheduled_prompts {filter}
             ORDER BY status NOT IN ('pending', 'leased'),
                      CASE WHEN status IN ('pending', 'leased') THEN run_at END ASC, updated_at DESC
             LIMIT ?3 OFFSET ?4"
        )))
        .bind(owner)
        .bind(active_only)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(failed)?;
        let rows = rows
            .iter()
            .map(|row| {
                Ok(ScheduledRow {
                    id: text(row, 0)?,
                    channel: text(row, 1)?,
                    chat_id: row.try_get(2)?,
                    status: text(row, 3)?,
                    run_at: text(row, 4)?,
                    recurrence: text(row, 5)?,
                    interval_seconds: row.try_get(6)?,
                    cron_expression: row.try_get(7)?,
                    end_at: row.try_get(8)?,
                    content: text(row, 9)?,
                    last_error: row.try_get(10)?,
                })
            })
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(failed)?;
        Ok(Rows { rows, total: u64::try_from(total).unwrap_or(0) })
    }

    /// Closes what the pages opened. Call it before the tokio runtime stops (see [`minibot_sqlite`]).
    pub async fn close(&self) {
        if let Some(memory) = self.memory.get() {
            memory.close().await;
        }
        self.graph.close().await;
        self.scheduled.close().await;
    }
}

/// A text column that may be NULL in a file another program wrote: empty then.
fn text(row: &sqlx::sqlite::SqliteRow, index: usize) -> std::result::Result<String, sqlx::Error> {
    Ok(row.try_get::<Option<String>, _>(index)?.unwrap_or_default())
}
