//! SQLite persistence with sqlx migrations: conversation transcripts (user and assistant text per session, with
//! `max_history_messages` trimming) and pending turns (written before a turn runs, replayed after a crash).
//!
//! Task records ([`TaskStore`]) live in the tasks database next to the SQLite queue.
//!
//! One database file in WAL mode; every write that belongs together is one transaction, so a crash leaves
//! either the whole turn or none of it.

mod pending;
pub mod tasks;
mod transcripts;

pub use pending::PendingTurn;
pub use tasks::{Applied, Lookup, NewTask, TaskRecord, TaskStore};
pub use transcripts::{Role, StoredMessage};

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the folder for {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("cannot open database {path}: {source}")]
    Open { path: PathBuf, source: sqlx::Error },
    #[error("cannot migrate database {path}: {source}")]
    Migrate { path: PathBuf, source: sqlx::migrate::MigrateError },
    #[error("database error: {0}")]
    Query(#[from] sqlx::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The conversation store.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    max_history_messages: Option<u32>,
}

impl Store {
    /// Opens (creating when missing) the database at `path` and applies migrations.
    pub async fn open(path: &Path, max_history_messages: Option<u32>) -> Result<Self> {
        let pool = open_pool(path, 4).await?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate { path: path.to_path_buf(), source })?;
        Ok(Self { pool, max_history_messages })
    }

    pub fn max_history_messages(&self) -> Option<u32> {
        self.max_history_messages
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// A WAL-mode pool on `path`, creating the file and its folder when missing.
pub(crate) async fn open_pool(path: &Path, max_connections: u32) -> Result<SqlitePool> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| StoreError::CreateDir { path: path.to_path_buf(), source })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    SqlitePoolOptions::new()
        .max_connections(max_connections)
        .connect_with(options)
        .await
        .map_err(|source| StoreError::Open { path: path.to_path_buf(), source })
}

pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
