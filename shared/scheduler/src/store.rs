//! The scheduled prompts database (`[scheduler.prompts] sqlite_url`): jobs, their fires in flight, and the
//! transactions that make a due job fire exactly once across processes and crashes.
//!
//! Every transaction that writes starts with `BEGIN IMMEDIATE`: it takes the write lock first (waiting out the
//! busy timeout), so two processes on one file take turns instead of one failing when a read turns into a write.

use crate::job::{Fire, Job, JobStatus, NewJob, Target};
use crate::recurrence::Recurrence;
use crate::time_text::{from_text, to_text};
use chrono::{DateTime, Datelike, Utc};
use sqlx::sqlite::{SqlitePool, SqliteRow};
// Every SQL text built here joins fixed fragments and `?n` placeholders; values are always bound.
use sqlx::{AssertSqlSafe, Row, Sqlite, Transaction};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Open(#[from] minibot_sqlite::Error),
    #[error("cannot migrate the scheduled prompts database {path}: {source}")]
    Migrate { path: PathBuf, source: sqlx::migrate::MigrateError },
    #[error("scheduled prompts database error: {0}")]
    Query(#[from] sqlx::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// How the store moves jobs along: MiniBot's `[scheduler.prompts]` tuning.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    /// Due jobs taken per transaction (`batch_size`).
    pub batch_size: u32,
    /// How long a fire may stay undelivered before another process delivers it (`lease_timeout_seconds`).
    pub lease: Duration,
}

#[derive(Clone)]
pub struct SchedulerStore {
    pool: SqlitePool,
    identity: String,
    settings: StoreSettings,
}

/// What became of a fire whose delivery failed.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterFailure {
    /// Tried again at this time.
    RetryAt(DateTime<Utc>),
    /// `max_attempts` reached: the job is `failed` and its chat should be told.
    GaveUp,
}

/// The filters of `list_scheduled_prompts`.
#[derive(Debug, Clone)]
pub struct ListQuery<'a> {
    pub target: &'a Target,
    pub active_only: bool,
    pub limit: u32,
    pub offset: u32,
}

/// What a cancel or delete found.
#[derive(Debug, Clone)]
pub struct Removed {
    pub before: Job,
}

use minibot_sqlite::stored_time::{GLOB, LAST_YEAR};

/// SQL that holds when `column` is a time in the stored layout. A `run_at` in no other layout (garbage, or one
/// tidy could not read) is taken by the next firing and fails, and is never the next time to wake for.
fn in_layout(column: &str) -> String {
    format!("(typeof({column}) = 'text' AND {column} GLOB '{GLOB}')")
}

const JOB_COLUMNS: &str = "rowid AS row_key, id, owner_id, channel, chat_id, user_id, role, content, status, run_at, retry_count, \
     max_attempts, metadata, last_error, recurrence, recurrence_interval_seconds, recurrence_cron_expression, \
     recurrence_time_zone, recurrence_end_at, created_at, updated_at";

impl SchedulerStore {
    pub async fn open(path: &Path, pool_size: u32, settings: StoreSettings) -> Result<Self> {
        let pool = minibot_sqlite::open_pool(path, pool_size.max(2)).await?;
        minibot_sqlite::migrate(&pool, &sqlx::migrate!("./migrations"))
            .await
            .map_err(|source| StoreError::Migrate { path: path.to_path_buf(), source })?;
        let identity: String =
            sqlx::query_scalar("SELECT id FROM scheduler_identity WHERE only_row = 1").fetch_one(&pool).await?;
        let store = Self { pool, identity, settings };
        store.tidy().await?;
        Ok(store)
    }

    /// Puts rows other programs wrote into the shape the queries compare: times with an offset or a `T`
    /// (`2026-12-04T19:00:00+05:00` compared as text would sort after `2026-12-04 19:…` and fire hours late) are
    /// rewritten as UTC text; fires of jobs that no longer exist are dropped. Times that do not parse are left for
    /// the firing to fail their job with a reason. Run at open and before every firing (another process may have
    /// written since); it only reads unless something needs fixing.
    pub async fn tidy(&self) -> Result<()> {
        let shape = |column: &str| format!("{column} IS NOT NULL AND NOT {}", in_layout(column));
        let needs: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT (SELECT COUNT(*) FROM scheduled_prompts WHERE status IN ('pending', 'leased') AND (({}) OR ({})))
                  + (SELECT COUNT(*) FROM scheduled_fires WHERE job_id NOT IN (SELECT id FROM scheduled_prompts))",
            shape("run_at"),
            shape("recurrence_end_at")
        )))
        .fetch_one(&self.pool)
        .await?;
        if needs == 0 {
            return Ok(());
        }
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM scheduled_fires WHERE job_id NOT IN (SELECT id FROM scheduled_prompts)")
            .execute(&mut *tx)
            .await?;
        for column in ["run_at", "recurrence_end_at"] {
            let rows = sqlx::query(AssertSqlSafe(format!(
                "SELECT rowid, CAST({column} AS TEXT), typeof({column}) FROM scheduled_prompts
                 WHERE status IN ('pending', 'leased') AND {}",
                shape(column)
            )))
            .fetch_all(&mut *tx)
            .await?;
            for row in rows {
                let rowid: i64 = row.try_get(0)?;
                let raw: Option<String> = row.try_get(1).unwrap_or(None);
                let kind: String = row.try_get(2).unwrap_or_default();
                // A number is a Unix time (seconds), as other programs write them.
                let parsed = match kind.as_str() {
                    "integer" | "real" => raw
                        .as_deref()
                        .and_then(|n| n.parse::<f64>().ok())
                        .filter(|n| n.is_finite())
                        .and_then(|n| DateTime::<Utc>::from_timestamp(n as i64, 0)),
                    _ => raw.as_deref().and_then(from_text),
                };
                if let Some(at) = parsed.filter(|at| at.year() <= LAST_YEAR) {
                    sqlx::query(AssertSqlSafe(format!("UPDATE scheduled_prompts SET {column} = ?1 WHERE rowid = ?2")))
                        .bind(to_text(at))
                        .bind(rowid)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// This database's identity, unique per file: fires are recorded in the chat store as `scheduler:<identity>`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn settings(&self) -> &StoreSettings {
        &self.settings
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn write(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    pub async fn create(&self, job: NewJob, now: DateTime<Utc>) -> Result<Job> {
        let mut tx = self.write().await?;
        let created = insert_job(&mut tx, job, now).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Adds the job unless its chat already holds `max_active` active jobs (`Err(count)`), counted in the same
    /// transaction, so parallel calls cannot go past the limit.
    pub async fn create_within(
        &self,
        job: NewJob,
        now: DateTime<Utc>,
        max_active: i64,
    ) -> Result<std::result::Result<Job, i64>> {
        let mut tx = self.write().await?;
        let active: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM scheduled_prompts WHERE owner_id = ?1 AND channel = ?2 AND chat_id = ?3
                 AND status IN ('pending', 'leased')",
        )
        .bind(&job.target.owner_id)
        .bind(&job.target.channel)
        .bind(job.target.chat_id)
        .fetch_one(&mut *tx)
        .await?;
        if active >= max_active {
            return Ok(Err(active));
        }
        let created = insert_job(&mut tx, job, now).await?;
        tx.commit().await?;
        Ok(Ok(created))
    }

    /// Active jobs of one chat (for limits).
    pub async fn count_active(&self, target: &Target) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM scheduled_prompts WHERE owner_id = ?1 AND channel = ?2 AND chat_id = ?3
                 AND status IN ('pending', 'leased')",
        )
        .bind(&target.owner_id)
        .bind(&target.channel)
        .bind(target.chat_id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// The jobs the caller scheduled in this chat, soonest first, and how many match in all (as in MiniBot, a
    /// group's members each see their own).
    pub async fn list(&self, query: &ListQuery<'_>) -> Result<(Vec<Job>, i64)> {
        let status_filter = if query.active_only { "AND status IN ('pending', 'leased')" } else { "" };
        let filter = format!("WHERE owner_id = ?1 AND channel = ?2 AND chat_id = ?3 AND user_id IS ?4 {status_filter}");
        let total: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT COUNT(*) FROM scheduled_prompts {filter}")))
            .bind(&query.target.owner_id)
            .bind(&query.target.channel)
            .bind(query.target.chat_id)
            .bind(query.target.user_id)
            .fetch_one(&self.pool)
            .await?;
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM scheduled_prompts {filter} ORDER BY run_at, created_at LIMIT ?5 OFFSET ?6"
        )))
        .bind(&query.target.owner_id)
        .bind(&query.target.channel)
        .bind(query.target.chat_id)
        .bind(query.target.user_id)
        .bind(i64::from(query.limit))
        .bind(i64::from(query.offset))
        .fetch_all(&self.pool)
        .await?;
        Ok((rows.iter().filter_map(read_job).collect(), total))
    }

    /// One of the chat's jobs.
    pub async fn get(&self, target: &Target, job_id: &str) -> Result<Option<Job>> {
        let mut conn = self.pool.acquire().await?;
        let job = job_by_id(&mut conn, job_id).await?;
        Ok(job.filter(|job| owns(target, job)))
    }

    /// Cancels one of the chat's jobs. `None`: no such job in this chat. A job already finished is left as it is
    /// and reported with its status.
    pub async fn cancel(&self, target: &Target, job_id: &str, now: DateTime<Utc>) -> Result<Option<Removed>> {
        let mut tx = self.write().await?;
        let Some(before) = job_by_id(&mut tx, job_id).await?.filter(|job| owns(target, job)) else {
            return Ok(None);
        };
        if before.status.is_active() {
            sqlx::query(
                "UPDATE scheduled_prompts SET status = 'cancelled', lease_expires_at = NULL, updated_at = ?2
                 WHERE id = ?1",
            )
            .bind(job_id)
            .bind(to_text(now))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Some(Removed { before }))
    }

    /// Deletes one of the chat's jobs and any fire of it not yet delivered.
    pub async fn delete(&self, target: &Target, job_id: &str) -> Result<Option<Removed>> {
        let mut tx = self.write().await?;
        let Some(before) = job_by_id(&mut tx, job_id).await?.filter(|job| owns(target, job)) else {
            return Ok(None);
        };
        sqlx::query("DELETE FROM scheduled_fires WHERE job_id = ?1").bind(job_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM scheduled_prompts WHERE id = ?1").bind(job_id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(Some(Removed { before }))
    }

    /// Fires up to `batch_size` jobs of `channels` due at `now`, in one transaction: each gets a fire row, and
    /// moves to its next run or to `leased`. A job whose row cannot be read or moved on is marked `failed` with
    /// the reason; the others fire all the same. Returns the new fires, claimed by `claimant`.
    pub async fn fire_due(&self, now: DateTime<Utc>, channels: &[String], claimant: &str) -> Result<Vec<Fire>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write().await?;
        // A run_at that is not a time (a row edited by hand) would never compare as due; it is taken too, and fails.
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM scheduled_prompts
             WHERE status = 'pending' AND (run_at <= ?1 OR NOT {}) AND channel IN ({})
             ORDER BY run_at LIMIT ?2",
            in_layout("run_at"),
            placeholders(3, channels.len())
        )))
        .bind(to_text(now))
        .bind(i64::from(self.settings.batch_size.max(1)));
        let rows = channels.iter().fold(rows, |q, c| q.bind(c)).fetch_all(&mut *tx).await?;
        let now_text = to_text(now);
        let lease_until = to_text(self.lease_end(now));
        let mut fires = Vec::with_capacity(rows.len());
        for row in &rows {
            let row_key: i64 = row.try_get("row_key").unwrap_or_default();
            let Some(job) = read_job(row) else {
                fail_job(&mut tx, row_key, "the stored row cannot be read (its id, chat, time or status)", &now_text)
                    .await?;
                continue;
            };
            if job.run_at.year() > LAST_YEAR {
                fail_job(&mut tx, row_key, "its run_at is beyond the year 9999", &now_text).await?;
                continue;
            }
            // Selected by its text but not due by its time (a layout tidy has not reached yet): not now.
            if job.run_at > now {
                continue;
            }
            let next =
                match job.recurrence().and_then(|r| r.next_after_fire(job.run_at, now).map_err(|e| e.to_string())) {
                    Ok(next) => next.filter(|next| job.end_at.is_none_or(|end| *next <= end)),
                    Err(reason) => {
                        fail_job(&mut tx, row_key, &reason, &now_text).await?;
                        continue;
                    }
                };
            match next {
                Some(next) => {
                    sqlx::query(
                        "UPDATE scheduled_prompts SET run_at = ?2, retry_count = 0, updated_at = ?3 WHERE id = ?1",
                    )
                    .bind(&job.id)
                    .bind(to_text(next))
                    .bind(&now_text)
                    .execute(&mut *tx)
                    .await?;
                }
                None => {
                    sqlx::query(
                        "UPDATE scheduled_prompts SET status = 'leased', lease_expires_at = ?2, updated_at = ?3
                         WHERE id = ?1",
                    )
                    .bind(&job.id)
                    .bind(&lease_until)
                    .bind(&now_text)
                    .execute(&mut *tx)
                    .await?;
                }
            }
            let fire_id: i64 = sqlx::query_scalar(
                "INSERT INTO scheduled_fires (job_id, due_at, fired_at, claimed_by, lease_until, attempts)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0) RETURNING id",
            )
            .bind(&job.id)
            .bind(to_text(job.run_at))
            .bind(&now_text)
            .bind(claimant)
            .bind(&lease_until)
            .fetch_one(&mut *tx)
            .await?;
            fires.push(Fire {
                id: fire_id,
                job_id: job.id,
                target: job.target,
                content: job.content,
                due_at: job.run_at,
                fired_at: now,
                attempts: 0,
            });
        }
        tx.commit().await?;
        Ok(fires)
    }

    /// Claims fires of `channels` that need delivering by this process: those whose lease ran out (a retry that
    /// is due, a process that stopped answering for them, or this process's own delivery that failed half-way)
    /// and those whose claimant `is_gone` says has died.
    pub async fn claim_stale_fires(
        &self,
        now: DateTime<Utc>,
        channels: &[String],
        claimant: &str,
        is_gone: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<Fire>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write().await?;
        let query = format!(
            "SELECT f.id AS fire_id, f.due_at, f.fired_at, f.attempts, f.lease_until, f.claimed_by,
                    j.id, j.owner_id, j.channel, j.chat_id, j.user_id, j.content, j.status
             FROM scheduled_fires f JOIN scheduled_prompts j ON j.id = f.job_id
             WHERE j.channel IN ({})
             ORDER BY f.lease_until LIMIT 500",
            placeholders(1, channels.len())
        );
        let rows =
            channels.iter().fold(sqlx::query(AssertSqlSafe(query)), |q, c| q.bind(c)).fetch_all(&mut *tx).await?;
        let lease_until = to_text(self.lease_end(now));
        let mut fires = Vec::new();
        for row in &rows {
            let expired =
                row.try_get::<String, _>("lease_until").ok().and_then(|t| from_text(&t)).is_none_or(|t| t <= now);
            let gone = row.try_get::<Option<String>, _>("claimed_by").ok().flatten().is_some_and(|c| is_gone(&c));
            if !(expired || gone) {
                continue;
            }
            // Cancelled (or failed) while its fire waited for a retry: the user said no more.
            if row.try_get::<String, _>("status").is_ok_and(|status| status == "cancelled" || status == "failed") {
                let id: i64 = row.try_get("fire_id").unwrap_or_default();
                sqlx::query("DELETE FROM scheduled_fires WHERE id = ?1").bind(id).execute(&mut *tx).await?;
                continue;
            }
            let Some(fire) = read_fire(row) else {
                // Unreadable (a row edited by hand): left in place it would be due forever and keep the loop awake.
                // Its one-off job would stay `leased` for ever, so it fails, saying why.
                let id: i64 = row.try_get("fire_id").unwrap_or_default();
                tracing::error!(fire = id, "a scheduled prompt's fire cannot be read; dropped");
                sqlx::query(
                    "UPDATE scheduled_prompts SET status = 'failed', lease_expires_at = NULL,
                         last_error = 'its fire could not be read', updated_at = ?2
                     WHERE id = (SELECT job_id FROM scheduled_fires WHERE id = ?1) AND status = 'leased'",
                )
                .bind(id)
                .bind(to_text(now))
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM scheduled_fires WHERE id = ?1").bind(id).execute(&mut *tx).await?;
                continue;
            };
            sqlx::query("UPDATE scheduled_fires SET claimed_by = ?2, lease_until = ?3 WHERE id = ?1")
                .bind(fire.id)
                .bind(claimant)
                .bind(&lease_until)
                .execute(&mut *tx)
                .await?;
            fires.push(fire);
        }
        tx.commit().await?;
        Ok(fires)
    }

    /// The fire reached the chat's store: it is done, and a one-off job is `completed`.
    pub async fn delivered(&self, fire: &Fire, now: DateTime<Utc>) -> Result<()> {
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM scheduled_fires WHERE id = ?1").bind(fire.id).execute(&mut *tx).await?;
        sqlx::query(
            "UPDATE scheduled_prompts SET status = 'completed', lease_expires_at = NULL, retry_count = 0,
                 last_error = NULL, updated_at = ?2
             WHERE id = ?1 AND status = 'leased'
                 AND NOT EXISTS (SELECT 1 FROM scheduled_fires WHERE job_id = ?1)",
        )
        .bind(&fire.job_id)
        .bind(to_text(now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The fire could not be delivered. It is tried again after MiniBot's backoff
    /// (`min((n+1)·30, 300) + U(0, 10)` seconds) until the job's `max_attempts`, then the job fails.
    pub async fn delivery_failed(&self, fire: &Fire, error: &str, now: DateTime<Utc>) -> Result<AfterFailure> {
        let mut tx = self.write().await?;
        let attempts = fire.attempts.saturating_add(1);
        let max_attempts: Option<i64> = sqlx::query_scalar("SELECT max_attempts FROM scheduled_prompts WHERE id = ?1")
            .bind(&fire.job_id)
            .fetch_optional(&mut *tx)
            .await?;
        let outcome = if i64::from(attempts) >= max_attempts.unwrap_or(1).max(1) {
            sqlx::query("DELETE FROM scheduled_fires WHERE id = ?1").bind(fire.id).execute(&mut *tx).await?;
            AfterFailure::GaveUp
        } else {
            let at = now.checked_add_signed(retry_delay(attempts)).unwrap_or(DateTime::<Utc>::MAX_UTC);
            sqlx::query(
                "UPDATE scheduled_fires SET attempts = ?2, last_error = ?3, claimed_by = NULL, lease_until = ?4
                 WHERE id = ?1",
            )
            .bind(fire.id)
            .bind(i64::from(attempts))
            .bind(error)
            .bind(to_text(at))
            .execute(&mut *tx)
            .await?;
            AfterFailure::RetryAt(at)
        };
        let gave_up = outcome == AfterFailure::GaveUp;
        sqlx::query(
            "UPDATE scheduled_prompts SET retry_count = ?2, last_error = ?3, updated_at = ?4,
                 status = CASE WHEN ?5 THEN 'failed' ELSE status END,
                 lease_expires_at = CASE WHEN ?5 THEN NULL ELSE lease_expires_at END
             WHERE id = ?1",
        )
        .bind(&fire.job_id)
        .bind(i64::from(attempts))
        .bind(error)
        .bind(to_text(now))
        .bind(gave_up)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(outcome)
    }

    /// When something of `channels` next needs doing: the earliest pending job or fire lease.
    pub async fn next_wake(&self, channels: &[String]) -> Result<Option<DateTime<Utc>>> {
        if channels.is_empty() {
            return Ok(None);
        }
        let places = placeholders(1, channels.len());
        let time = in_layout("run_at");
        let query = format!(
            "SELECT MIN(t) FROM (
                 SELECT MIN(run_at) AS t FROM scheduled_prompts WHERE status = 'pending' AND channel IN ({places})
                     AND {time}
                 UNION ALL
                 SELECT MIN(f.lease_until) FROM scheduled_fires f JOIN scheduled_prompts j ON j.id = f.job_id
                     WHERE j.channel IN ({places}))"
        );
        let next: Option<String> = channels
            .iter()
            .fold(sqlx::query_scalar(AssertSqlSafe(query)), |q, c| q.bind(c))
            .fetch_one(&self.pool)
            .await?;
        Ok(next.as_deref().and_then(from_text))
    }

    fn lease(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.settings.lease).unwrap_or(chrono::Duration::seconds(120))
    }

    /// `now` plus the lease, saturating: a lease can never make time arithmetic panic.
    fn lease_end(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now.checked_add_signed(self.lease()).unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

/// MiniBot's retry wait after the `attempts`-th failed delivery.
pub fn retry_delay(attempts: u32) -> chrono::Duration {
    let base = (i64::from(attempts) * 30).min(300);
    chrono::Duration::seconds(base) + chrono::Duration::milliseconds(fastrand::i64(0..10_000))
}

/// A job belongs to the user who scheduled it in that chat: in a group, members do not cancel each other's.
fn owns(target: &Target, job: &Job) -> bool {
    job.target == *target
}

/// `?start, ?start+1, …` for `count` values.
fn placeholders(start: usize, count: usize) -> String {
    (start..start + count).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
}

async fn insert_job(tx: &mut Transaction<'static, Sqlite>, job: NewJob, now: DateTime<Utc>) -> Result<Job> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let zone_written = job.time_zone.map(|zone| zone.name().to_string());
    let (interval, cron, zone) = match &job.recurrence {
        Recurrence::None => (None, None, zone_written),
        Recurrence::Interval { seconds } => (Some(i64::try_from(*seconds).unwrap_or(i64::MAX)), None, zone_written),
        Recurrence::Cron { expression, zone } => (None, Some(expression.clone()), Some(zone.name().to_string())),
    };
    sqlx::query(
        "INSERT INTO scheduled_prompts (id, owner_id, channel, chat_id, user_id, role, content, status, run_at,
             retry_count, max_attempts, metadata, recurrence, recurrence_interval_seconds,
             recurrence_cron_expression, recurrence_time_zone, recurrence_end_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, 0, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16)",
    )
    .bind(&id)
    .bind(&job.target.owner_id)
    .bind(&job.target.channel)
    .bind(job.target.chat_id)
    .bind(job.target.user_id)
    .bind(&job.role)
    .bind(&job.content)
    .bind(to_text(job.run_at))
    .bind(i64::from(job.max_attempts))
    .bind(job.metadata.to_string())
    .bind(job.recurrence.kind())
    .bind(interval)
    .bind(cron)
    .bind(zone)
    .bind(job.end_at.map(to_text))
    .bind(to_text(now))
    .execute(&mut **tx)
    .await?;
    Ok(job_by_id(tx, &id).await?.ok_or(sqlx::Error::RowNotFound)?)
}

async fn job_by_id(conn: &mut sqlx::SqliteConnection, id: &str) -> Result<Option<Job>> {
    let row = sqlx::query(AssertSqlSafe(format!("SELECT {JOB_COLUMNS} FROM scheduled_prompts WHERE id = ?1")))
        .bind(id)
        .fetch_optional(conn)
        .await?;
    Ok(row.as_ref().and_then(read_job))
}

/// Marks a job failed by its rowid, which every row has even when its `id` is unreadable.
async fn fail_job(tx: &mut Transaction<'static, Sqlite>, row_key: i64, reason: &str, now: &str) -> Result<()> {
    tracing::error!(row = row_key, reason, "a scheduled prompt cannot fire; marked failed");
    sqlx::query(
        "UPDATE scheduled_prompts SET status = 'failed', last_error = ?2, lease_expires_at = NULL, updated_at = ?3
         WHERE rowid = ?1",
    )
    .bind(row_key)
    .bind(reason)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn read_job(row: &SqliteRow) -> Option<Job> {
    let text = |name: &str| row.try_get::<Option<String>, _>(name).ok().flatten();
    let time = |name: &str| text(name).as_deref().and_then(from_text);
    let metadata = text("metadata").and_then(|m| serde_json::from_str(&m).ok()).unwrap_or(serde_json::Value::Null);
    Some(Job {
        id: text("id")?,
        target: Target {
            owner_id: text("owner_id")?,
            channel: text("channel")?,
            chat_id: row.try_get::<Option<i64>, _>("chat_id").ok().flatten()?,
            user_id: row.try_get::<Option<i64>, _>("user_id").ok().flatten(),
        },
        role: text("role").unwrap_or_else(|| "user".into()),
        content: text("content")?,
        status: JobStatus::parse(&text("status")?)?,
        run_at: time("run_at")?,
        retry_count: row.try_get::<i64, _>("retry_count").ok().and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
        max_attempts: row.try_get::<i64, _>("max_attempts").ok().and_then(|n| u32::try_from(n).ok()).unwrap_or(3),
        metadata,
        last_error: text("last_error"),
        recurrence_kind: text("recurrence").unwrap_or_else(|| "none".into()),
        interval_seconds: row.try_get::<Option<i64>, _>("recurrence_interval_seconds").ok().flatten(),
        cron_expression: text("recurrence_cron_expression"),
        time_zone: text("recurrence_time_zone"),
        // Present but unreadable, it would let the job repeat for ever: the row does not read, and fails.
        end_at: match text("recurrence_end_at") {
            None => None,
            Some(raw) => Some(from_text(&raw)?),
        },
        created_at: time("created_at").unwrap_or_default(),
        updated_at: time("updated_at").unwrap_or_default(),
    })
}

fn read_fire(row: &SqliteRow) -> Option<Fire> {
    let text = |name: &str| row.try_get::<Option<String>, _>(name).ok().flatten();
    Some(Fire {
        id: row.try_get("fire_id").ok()?,
        job_id: text("id")?,
        target: Target {
            owner_id: text("owner_id")?,
            channel: text("channel")?,
            chat_id: row.try_get::<Option<i64>, _>("chat_id").ok().flatten()?,
            user_id: row.try_get::<Option<i64>, _>("user_id").ok().flatten(),
        },
        content: text("content").unwrap_or_default(),
        due_at: text("due_at").as_deref().and_then(from_text)?,
        fired_at: text("fired_at").as_deref().and_then(from_text)?,
        attempts: row.try_get::<i64, _>("attempts").ok().and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
    })
}
