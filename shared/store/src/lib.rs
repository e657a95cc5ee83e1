//! SQLite persistence with sqlx migrations: conversation transcripts (user and assistant messages, tool calls and
//! tool results per session, with `max_history_messages` trimming) and pending turns (written before a turn runs, replayed after a crash).
//!
//! Task records ([`TaskStore`]) live in the tasks database next to the SQLite queue.
//!
//! One database file in WAL mode; every write that belongs together is one transaction, so a crash leaves
//! either the whole turn or none of it. Those transactions begin `IMMEDIATE`: they take the write lock first,
//! waiting out another writer, where a deferred one could fail at once with "database is locked" when the
//! history index (`messages_fts`) made it read before it wrote.

mod browse;
mod channel_updates;
mod pending;
pub mod replay;
mod summaries;
pub mod tasks;
mod transcripts;

pub use browse::{MATCH_END, MATCH_START, SearchHit, SessionSummary};
pub use channel_updates::PendingWrite;
pub use minibot_protocol::{Delivery, TaskStatus, TaskUsage};
pub use pending::PendingTurn;
pub use summaries::Summary;
pub use tasks::{Applied, Attempt, Ending, Lookup, NewTask, TaskRecord, TaskStore};
pub use transcripts::{HistoryCounts, Role, StoredMessage, StoredToolCall, TurnMessage};

use minibot_vault::Redactor;
use sqlx::sqlite::SqlitePool;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file or its folder could not be opened or created; the message names the file.
    #[error(transparent)]
    Open(#[from] minibot_sqlite::Error),
    #[error("cannot migrate database {path}: {source}")]
    Migrate { path: PathBuf, source: sqlx::migrate::MigrateError },
    #[error("database error: {0}")]
    Query(#[from] sqlx::Error),
    #[error("task {task_id} has a row this version cannot read: {source}")]
    BadTaskRow { task_id: String, source: minibot_protocol::UnknownName },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The conversation store.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    max_history_messages: Option<u32>,
    /// Known secret values never reach the database file: a message that quotes one is stored masked.
    redactor: Redactor,
}

impl Store {
    /// Opens (creating when missing) the database at `path` and applies migrations.
    pub async fn open(path: &Path, max_history_messages: Option<u32>) -> Result<Self> {
        let pool = open_pool(path, 4).await?;
        minibot_sqlite::migrate(&pool, &sqlx::migrate!("./migrations"))
            .await
            .map_err(|source| StoreError::Migrate { path: path.to_path_buf(), source })?;
        Ok(Self { pool, max_history_messages, redactor: Redactor::default() })
    }

    /// Masks the vault's secret values in everything written from now on.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn max_history_messages(&self) -> Option<u32> {
        self.max_history_messages
    }

    /// Closes the pool. Call it before the tokio runtime stops: sqlx returns a dropped connection on a
    /// spawned task, which panics once the runtime is gone.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// A WAL-mode pool on `path`, creating the file and its folder when missing (see [`minibot_sqlite`]).
pub(crate) async fn open_pool(path: &Path, max_connections: u32) -> Result<SqlitePool> {
    Ok(minibot_sqlite::open_pool(path, max_connections).await?)
}

pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
