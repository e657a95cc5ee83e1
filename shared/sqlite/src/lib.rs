//! How minibot opens a SQLite database. [`open_pool`] owns the one set-up every database shares: the file and
//! its folder are created when missing, private to this account (the folder 0700, the file 0600 before SQLite
//! first opens it, so its `-wal` and `-shm` journals, which SQLite creates with the database's mode, are 0600
//! too; see [`private_fs`]), the journal is WAL with `synchronous = NORMAL` (a commit survives a
//! process crash, and readers never block the writer), and a 10 s busy timeout lets the orchestrator and local
//! workers write the same file. The task queue (`minibot-queue`) and the store (`minibot-store`) both open
//! their pools here, so the two cannot drift apart.
//!
//! Close a pool ([`SqlitePool::close`]) before the tokio runtime stops: sqlx hands a dropped connection back
//! to its pool on a spawned task, which panics once the runtime is gone.

pub mod private_fs;
pub mod stored_time;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a statement waits for another connection's write lock before it fails with `SQLITE_BUSY`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // The cause is part of the message and deliberately not the error's `source()`: an error chain printed in full
    // (`{:#}`) would say it twice.
    #[error("cannot create the folder for {path}: {cause}")]
    CreateDir { path: PathBuf, cause: std::io::Error },
    #[error("cannot create database {path}: {cause}")]
    CreateFile { path: PathBuf, cause: std::io::Error },
    #[error("cannot open database {path}: {cause}")]
    Open { path: PathBuf, cause: sqlx::Error },
}

pub type Result<T> = std::result::Result<T, Error>;

/// SQLite's page cache per connection, in KiB.
const CACHE_KIB: u32 = 256;

/// A WAL-mode pool of at most `max_connections` on `path`, creating the file and its folder when missing.
pub async fn open_pool(path: &Path, max_connections: u32) -> Result<SqlitePool> {
    prepare_files(path)?;
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
        .map_err(|cause| Error::Open { path: path.to_path_buf(), cause })
}

/// How often [`migrate`] tries before it gives up.
const MIGRATE_TRIES: u32 = 8;

/// Applies `migrator` to `pool`. Two processes that open one new database at the same moment (two daemons, a
/// daemon and its first worker) both find the migrations missing and both apply them; SQLite lets one commit and
/// the other's transaction fails (its `_sqlx_migrations` row already exists, or its `ALTER TABLE` finds the
/// column there). The loser tries again, finds the migrations applied, and goes on. An error that persists is
/// returned after the last try (about 2 s in all).
pub async fn migrate(
    pool: &SqlitePool,
    migrator: &sqlx::migrate::Migrator,
) -> std::result::Result<(), sqlx::migrate::MigrateError> {
    let mut tries = 1;
    loop {
        match migrator.run(pool).await {
            Ok(()) => return Ok(()),
            Err(error) if tries < MIGRATE_TRIES && !matches!(error, sqlx::migrate::MigrateError::VersionMissing(_)) => {
                tracing::debug!(error = %error, tries, "migration failed; another process may be applying it");
                tokio::time::sleep(Duration::from_millis(50 * u64::from(tries))).await;
                tries += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// The journals SQLite keeps next to a database, by suffix.
const JOURNAL_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Makes the database's folder (0700) and the file (0600) when missing, and narrows an existing database and
/// its journals that the group or others can read: they are ours, and they hold the transcripts.
fn prepare_files(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        private_fs::create_dir_all(parent).map_err(|cause| Error::CreateDir { path: path.to_path_buf(), cause })?;
    }
    private_fs::create_file(path).map_err(|cause| Error::CreateFile { path: path.to_path_buf(), cause })?;
    let journals = JOURNAL_SUFFIXES.iter().map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    });
    for file in std::iter::once(path.to_path_buf()).chain(journals) {
        match private_fs::tighten(&file) {
            Ok(None) => {}
            Ok(Some(old)) => tracing::info!(
                path = %file.display(),
                old_mode = format!("{old:o}"),
                new_mode = format!("{:o}", private_fs::private_mode(old)),
                "made a database file private: the group and others could read it"
            ),
            Err(error) => tracing::warn!(
                path = %file.display(),
                %error,
                "cannot make a database file private; the group or others can read it"
            ),
        }
    }
    Ok(())
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

    /// Set in the child that [`under_umask_022`] starts.
    const UMASK_CHILD: &str = "MINIBOT_SQLITE_TEST_UMASK_CHILD";

    /// Runs the test `name` of this binary again in a child process under umask 022 and asserts it passed: the
    /// umask belongs to the whole process, so one test cannot change it for itself here. Returns whether the
    /// caller is that child (and should do the work).
    fn under_umask_022(name: &str) -> bool {
        if std::env::var_os(UMASK_CHILD).is_some() {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            assert!(status.lines().any(|l| l.starts_with("Umask:") && l.ends_with("0022")), "{status}");
            return true;
        }
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg("umask 022 && exec \"$0\" \"$@\"")
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(UMASK_CHILD, "1")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{text}");
        assert!(text.contains("1 passed"), "the child ran the test: {text}");
        false
    }

    #[tokio::test]
    async fn the_folder_the_database_and_its_journals_are_private_under_umask_022() {
        if !under_umask_022("tests::the_folder_the_database_and_its_journals_are_private_under_umask_022") {
            return;
        }
        use private_fs::tests::mode;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/minibot.db");
        let pool = open_pool(&path, 2).await.unwrap();
        sqlx::raw_sql("CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('transcript')").execute(&pool).await.unwrap();
        assert_eq!(mode(&dir.path().join("data")), "700");
        // While the pool is open SQLite keeps both journals; it makes them with the database's own mode.
        for file in ["minibot.db", "minibot.db-wal", "minibot.db-shm"] {
            assert_eq!(mode(&dir.path().join("data").join(file)), "600", "{file}");
        }
        pool.close().await;

        // A file that SQLite made under umask 022 before this version (0644), and its journals, are narrowed.
        let old = dir.path().join("old.db");
        let pool = SqlitePoolOptions::new()
            .connect_with(
                SqliteConnectOptions::new().filename(&old).create_if_missing(true).journal_mode(SqliteJournalMode::Wal),
            )
            .await
            .unwrap();
        sqlx::raw_sql("CREATE TABLE t (x TEXT)").execute(&pool).await.unwrap();
        assert_eq!(mode(&old), "644", "what SQLite does on its own under umask 022");
        assert_eq!(mode(&dir.path().join("old.db-wal")), "644");
        let reopened = open_pool(&old, 1).await.unwrap();
        for file in ["old.db", "old.db-wal", "old.db-shm"] {
            assert_eq!(mode(&dir.path().join(file)), "600", "{file}");
        }
        reopened.close().await;
        pool.close().await;
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
