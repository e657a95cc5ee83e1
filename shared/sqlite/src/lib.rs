//! How minibot opens a SQLite database. [`open_pool`] owns the one set-up every database shares: the file and
//! its folder are created when missing, the journal is WAL with `synchronous = NORMAL` (a commit survives a
//! process crash, and readers never block the writer), and a 10 s busy timeout lets the orchestrator and local
//! workers write the same file. The task queue (`minibot-queue`) and the store (`minibot-store`) both open
//! their pools here, so the two cannot drift apart.
//!
//! Close a pool ([`SqlitePool::close`]) before the tokio runtime stops: sqlx hands a dropped connection back
//! to its pool on a spawned task, which panics once the runtime is gone.

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a statement waits for another connection's write lock before it fails with `SQLITE_BUSY`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the folder for {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("cannot open database {path}: {source}")]
    Open { path: PathBuf, source: sqlx::Error },
}

pub type Result<T> = std::result::Result<T, Error>;

/// SQLite's page cache per connection, in KiB.
const CACHE_KIB: u32 = 256;

/// A WAL-mode pool of at most `max_connections` on `path`, creating the file and its folder when missing.
pub async fn open_pool(path: &Path, max_connections: u32) -> Result<SqlitePool> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| Error::CreateDir { path: path.to_path_buf(), source })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
        // SQLite's own page cache is 2 MiB per connection by default and fills as the file grows, so a pool of
        // four held 8 MiB more after a few thousand messages than at start. The OS caches the file anyway.
        .pragma("cache_size", format!("-{CACHE_KIB}"));
    SqlitePoolOptions::new()
        .max_connections(max_connections)
        .connect_with(options)
        .await
        .map_err(|source| Error::Open { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn creates_the_folder_and_the_file_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/deeper/test.db");
        let pool = open_pool(&path, 2).await.unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&pool).await.unwrap();
        assert_eq!(mode, "wal");
        let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous").fetch_one(&pool).await.unwrap();
        assert_eq!(synchronous, 1, "NORMAL");
        pool.close().await;
        assert!(path.exists());
    }

    #[tokio::test]
    async fn a_folder_that_cannot_be_created_names_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"").unwrap();
        let path = file.join("test.db");
        let error = open_pool(&path, 1).await.unwrap_err();
        assert!(matches!(error, Error::CreateDir { .. }), "{error:?}");
        assert!(error.to_string().contains("test.db"), "{error}");
    }
}
