//! The SQLite backend: one WAL database file shared by the orchestrator and the workers on the same machine.
//!
//! A worker claims with one `UPDATE … RETURNING` over pending tasks and tasks whose lease expired, and every
//! later write for that task is guarded by the lease token, so a worker that lost its lease cannot overwrite
//! anything. Events flow back through an outbox table that the orchestrator reads and deletes once applied;
//! control messages (cancel, steer, approval answers) go the other way through `queue_controls`, which the
//! worker of the task reads and empties between steps.
//! Idle sides poll every [`POLL_INTERVAL`] while work is flowing and every [`IDLE_POLL_INTERVAL`] after a quiet
//! second: an indexed query costs microseconds, pick-up latency stays far below 100 ms, and an idle worker
//! costs next to no CPU.

use crate::{ClaimedTask, EventDelivery, QueueError, Result, TaskQueue, WorkQueue, dead_task_error};
use futures_util::future::BoxFuture;
use minibot_protocol::{
    ControlKind, ControlMessage, TaskEnvelope, TaskOutcome, WorkerEvent, WorkerEventKind, WorkerStatus,
};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;
use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex;

pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
pub const IDLE_POLL_INTERVAL: Duration = Duration::from_millis(50);
const QUIET_AFTER: Duration = Duration::from_secs(1);
/// How often the orchestrator looks for new worker statuses; heartbeats come every few seconds.
const STATUS_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The pause before the next poll of a wait that began at `since` (right after the previous task or event):
/// short at first, since work tends to come in bursts, longer once it has been quiet.
fn pause(since: std::time::Instant) -> Duration {
    if since.elapsed() < QUIET_AFTER { POLL_INTERVAL } else { IDLE_POLL_INTERVAL }
}
/// Time a worker gets beyond the task's own timeout before its lease expires.
pub const LEASE_GRACE: Duration = Duration::from_secs(10);
/// Longest lease: `now + lease` stays far from SQLite's integer limit whatever timeout a task names.
const LONGEST_LEASE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS queue_tasks (
    task_id          TEXT    PRIMARY KEY,
    envelope         BLOB    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    lease_ms         INTEGER NOT NULL,
    worker_id        TEXT,
    created_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_queue_tasks_claim ON queue_tasks (status, created_at);
CREATE TABLE IF NOT EXISTS queue_events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT    NOT NULL,
    payload BLOB    NOT NULL
);
CREATE TABLE IF NOT EXISTS queue_controls (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT    NOT NULL,
    payload BLOB    NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_queue_controls_task ON queue_controls (task_id);
CREATE TABLE IF NOT EXISTS queue_workers (
    worker_id  TEXT    PRIMARY KEY,
    status     BLOB    NOT NULL,
    seq        INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
";

/// Added after the first release: a task's route ([`minibot_protocol::route_for`]); older rows are generic.
const ADD_ROUTE: &str = "ALTER TABLE queue_tasks ADD COLUMN route TEXT NOT NULL DEFAULT ''";
/// Worker rows unchanged this long are removed (a worker that died without saying so).
const STALE_WORKER_MS: i64 = 3_600_000;

pub struct SqliteQueue {
    pool: SqlitePool,
    worker_id: String,
    lease_timeout: Duration,
    /// The routes a worker claims tasks of, as a JSON array for the claim query; `None` claims any.
    routes: Option<String>,
    /// Worker statuses read but not yet handed out, and the highest `seq` read.
    statuses: Mutex<(VecDeque<WorkerStatus>, i64)>,
    /// Events read but not yet acknowledged, and the highest sequence number read.
    events: Mutex<(VecDeque<EventDelivery>, i64)>,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl SqliteQueue {
    /// Opens (creating when missing) the queue database. `lease_timeout` is `[tasks.sqlite].lease_timeout_seconds`.
    pub async fn open(path: &Path, worker_id: &str, lease_timeout: Duration) -> Result<Self> {
        let pool = minibot_sqlite::open_pool(path, 2).await?;
        sqlx::raw_sql(SCHEMA).execute(&pool).await?;
        let has_route: bool =
            sqlx::query_scalar("SELECT COUNT(*) > 0 FROM pragma_table_info('queue_tasks') WHERE name = 'route'")
                .fetch_one(&pool)
                .await?;
        if !has_route {
            // Two processes may both see it missing; the loser's ALTER fails with "duplicate column", harmless.
            if let Err(error) = sqlx::query(ADD_ROUTE).execute(&pool).await
                && !error.to_string().contains("duplicate column")
            {
                return Err(error.into());
            }
        }
        // A backlog of tasks nobody can take (a specialist no live worker has) must not slow every claim.
        sqlx::query("CREATE INDEX IF NOT EXISTS ix_queue_tasks_route ON queue_tasks (route, status, created_at)")
            .execute(&pool)
            .await?;
        Ok(Self {
            pool,
            worker_id: worker_id.to_string(),
            lease_timeout,
            routes: None,
            statuses: Mutex::new((VecDeque::new(), 0)),
            events: Mutex::new((VecDeque::new(), 0)),
        })
    }

    /// Claims only tasks of these routes (a worker's).
    pub fn with_routes(mut self, routes: &[String]) -> Self {
        self.routes = serde_json::to_string(routes).ok();
        self
    }

    /// Makes the claims of a worker that died reclaimable at once instead of when their leases expire.
    pub async fn release_worker(&self, worker_id: &str) -> Result<u64> {
        let result =
            sqlx::query("UPDATE queue_tasks SET lease_expires_at = 0 WHERE worker_id = ?1 AND status = 'leased'")
                .bind(worker_id)
                .execute(&self.pool)
                .await?;
        Ok(result.rows_affected())
    }

    /// The workers holding a claim now.
    pub async fn claiming_workers(&self) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT worker_id FROM queue_tasks WHERE status = 'leased' AND worker_id IS NOT NULL",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Tasks waiting or running, for diagnostics and tests.
    pub async fn depth(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM queue_tasks").fetch_one(&self.pool).await?)
    }

    /// Closes the pool. Call it before the tokio runtime stops: sqlx returns a dropped connection on a
    /// spawned task, which panics once the runtime is gone. A worker's side first gives back the tasks it
    /// holds, so another worker claims them at once instead of after the lease.
    pub async fn close(&self) {
        if self.routes.is_some()
            && let Err(error) = self.release_worker(&self.worker_id).await
        {
            tracing::warn!(error = %error, "cannot give back the tasks this worker holds");
        }
        self.pool.close().await;
    }

    async fn try_claim(&self) -> Result<Option<ClaimedTask>> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let now = now_ms();
        let row = sqlx::query(
            "UPDATE queue_tasks
             SET status = 'leased', attempts = attempts + 1, lease_token = ?1,
                 lease_expires_at = ?2 + lease_ms, worker_id = ?3
             WHERE task_id = (
                 SELECT task_id FROM queue_tasks
                 WHERE (status = 'pending' OR (status = 'leased' AND lease_expires_at <= ?2))
                   AND (?4 IS NULL OR route IN (SELECT value FROM json_each(?4)))
                 ORDER BY created_at LIMIT 1)
             RETURNING task_id, envelope, attempts, max_attempts",
        )
        .bind(&token)
        .bind(now)
        .bind(&self.worker_id)
        .bind(self.routes.as_deref())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let task_id: String = row.get("task_id");
        let attempts = u32::try_from(row.get::<i64, _>("attempts")).unwrap_or(u32::MAX);
        let max_attempts = u32::try_from(row.get::<i64, _>("max_attempts")).unwrap_or(1);
        let envelope = match TaskEnvelope::decode(row.get::<&[u8], _>("envelope")) {
            Ok(envelope) => envelope,
            Err(error) => {
                tracing::error!(task_id = %task_id, error = %error, "queued task does not decode; dead-lettered");
                self.kill(&task_id, &token, attempts, &format!("the queued task does not decode: {error}")).await?;
                return Ok(None);
            }
        };
        if attempts > max_attempts {
            tracing::warn!(task_id = %task_id, attempts = attempts - 1, "task exhausted its attempts; failed");
            self.kill(&task_id, &token, attempts, &dead_task_error(attempts - 1)).await?;
            return Ok(None);
        }
        Ok(Some(ClaimedTask { envelope, attempt: attempts, token }))
    }

    /// Marks a task dead and reports it failed, in one transaction.
    async fn kill(&self, task_id: &str, token: &str, attempt: u32, error: &str) -> Result<()> {
        let event = WorkerEvent::new(
            task_id,
            attempt,
            &self.worker_id,
            WorkerEventKind::Finished {
                outcome: TaskOutcome::Failed,
                stop_reason: "worker_error".into(),
                text: None,
                error: Some(error.to_string()),
                steps: 0,
                tool_calls: 0,
                total_tokens: 0,
                attachments: Vec::new(),
            },
        );
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM queue_tasks WHERE task_id = ?1 AND lease_token = ?2")
            .bind(task_id)
            .bind(token)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM queue_controls WHERE task_id = ?1").bind(task_id).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO queue_events (task_id, payload) VALUES (?1, ?2)")
            .bind(task_id)
            .bind(event.encode()?)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

impl TaskQueue for SqliteQueue {
    fn publish<'a>(&'a self, task: &'a TaskEnvelope) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // Saturating: a task's timeout is the sender's number, and no number may overflow (or wrap into a
            // short lease that lets a second worker take a running task).
            let task_lease = Duration::from_secs(task.limits.timeout_seconds).saturating_add(LEASE_GRACE);
            let lease = self.lease_timeout.max(task_lease).min(LONGEST_LEASE);
            let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
            sqlx::query(
                "INSERT INTO queue_tasks (task_id, envelope, status, attempts, max_attempts, lease_ms, created_at, route)
                 VALUES (?1, ?2, 'pending', 0, ?3, ?4, ?5, ?6)",
            )
            .bind(&task.task_id)
            .bind(task.encode()?)
            .bind(i64::from(task.max_attempts.max(1)))
            .bind(lease_ms)
            .bind(now_ms())
            .bind(task.route())
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn control<'a>(&'a self, message: &'a ControlMessage) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if message.kind == ControlKind::Cancel {
                // A task nobody has claimed yet is simply taken off the queue.
                let removed = sqlx::query("DELETE FROM queue_tasks WHERE task_id = ?1 AND status = 'pending'")
                    .bind(&message.task_id)
                    .execute(&self.pool)
                    .await?;
                if removed.rows_affected() > 0 {
                    return Ok(());
                }
            }
            if matches!(message.kind, ControlKind::ApprovalResult { .. } | ControlKind::Cancel) {
                // Only a claimed task reads its controls, and settling deletes them; an answer or a cancel for a
                // task no worker holds any more would stay in the table for good. Nobody waits for it, so it is
                // not stored.
                sqlx::query(
                    "INSERT INTO queue_controls (task_id, payload)
                     SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM queue_tasks WHERE task_id = ?1 AND status = 'leased')",
                )
                .bind(&message.task_id)
                .bind(message.encode()?)
                .execute(&self.pool)
                .await?;
                return Ok(());
            }
            sqlx::query("INSERT INTO queue_controls (task_id, payload) VALUES (?1, ?2)")
                .bind(&message.task_id)
                .bind(message.encode()?)
                .execute(&self.pool)
                .await?;
            Ok(())
        })
    }

    fn next_event(&self) -> BoxFuture<'_, Result<EventDelivery>> {
        Box::pin(async move {
            let since = std::time::Instant::now();
            loop {
                if self.pool.is_closed() {
                    return Err(QueueError::Closed);
                }
                {
                    let mut guard = self.events.lock().await;
                    if let Some(delivery) = guard.0.pop_front() {
                        return Ok(delivery);
                    }
                    let rows =
                        sqlx::query("SELECT seq, payload FROM queue_events WHERE seq > ?1 ORDER BY seq LIMIT 256")
                            .bind(guard.1)
                            .fetch_all(&self.pool)
                            .await?;
                    for row in rows {
                        let seq: i64 = row.get("seq");
                        guard.1 = guard.1.max(seq);
                        match WorkerEvent::decode(row.get::<&[u8], _>("payload")) {
                            Ok(event) => guard.0.push_back(EventDelivery { event, tag: seq as u64 }),
                            Err(error) => {
                                tracing::error!(seq, error = %error, "worker event does not decode; dropped");
                                sqlx::query("DELETE FROM queue_events WHERE seq = ?1")
                                    .bind(seq)
                                    .execute(&self.pool)
                                    .await?;
                            }
                        }
                    }
                    if let Some(delivery) = guard.0.pop_front() {
                        return Ok(delivery);
                    }
                }
                tokio::time::sleep(pause(since)).await;
            }
        })
    }

    fn next_status(&self) -> BoxFuture<'_, Result<WorkerStatus>> {
        Box::pin(async move {
            loop {
                if self.pool.is_closed() {
                    return Err(QueueError::Closed);
                }
                {
                    let mut guard = self.statuses.lock().await;
                    if let Some(status) = guard.0.pop_front() {
                        return Ok(status);
                    }
                    let rows =
                        sqlx::query("SELECT seq, status, updated_at FROM queue_workers WHERE seq > ?1 ORDER BY seq")
                            .bind(guard.1)
                            .fetch_all(&self.pool)
                            .await?;
                    let now = now_ms();
                    for row in rows {
                        guard.1 = guard.1.max(row.get::<i64, _>("seq"));
                        let age = now.saturating_sub(row.get::<i64, _>("updated_at"));
                        match WorkerStatus::decode(row.get::<&[u8], _>("status")) {
                            // A row written long ago (a worker killed before it could say it left) is no news:
                            // the roster would take it for alive for three more heartbeats.
                            Ok(status)
                                if age > i64::try_from(status.heartbeat_ms.saturating_mul(3)).unwrap_or(i64::MAX) => {}
                            Ok(status) => guard.0.push_back(status),
                            Err(error) => tracing::debug!(error = %error, "worker status does not decode; skipped"),
                        }
                    }
                    if let Some(status) = guard.0.pop_front() {
                        return Ok(status);
                    }
                }
                tokio::time::sleep(STATUS_POLL_INTERVAL).await;
            }
        })
    }

    fn ack_event(&self, delivery: &EventDelivery) -> BoxFuture<'_, Result<()>> {
        let seq = delivery.tag as i64;
        Box::pin(async move {
            sqlx::query("DELETE FROM queue_events WHERE seq = ?1").bind(seq).execute(&self.pool).await?;
            Ok(())
        })
    }
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(SqliteQueue::close(self))
    }
}

impl WorkQueue for SqliteQueue {
    fn claim(&self) -> BoxFuture<'_, Result<ClaimedTask>> {
        Box::pin(async move {
            let since = std::time::Instant::now();
            loop {
                if let Some(task) = self.try_claim().await? {
                    return Ok(task);
                }
                tokio::time::sleep(pause(since)).await;
            }
        })
    }

    fn emit<'a>(&'a self, task: &'a ClaimedTask, event: &'a WorkerEvent) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let renewed = sqlx::query(
                "UPDATE queue_tasks SET lease_expires_at = ?1 + lease_ms
                 WHERE task_id = ?2 AND lease_token = ?3 AND status = 'leased'",
            )
            .bind(now_ms())
            .bind(&task.envelope.task_id)
            .bind(&task.token)
            .execute(&mut *tx)
            .await?;
            if renewed.rows_affected() == 0 {
                return Err(QueueError::LeaseLost { task_id: task.envelope.task_id.clone() });
            }
            sqlx::query("INSERT INTO queue_events (task_id, payload) VALUES (?1, ?2)")
                .bind(&task.envelope.task_id)
                .bind(event.encode()?)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn controls<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<Vec<ControlMessage>>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "DELETE FROM queue_controls WHERE task_id = ?1
                 AND EXISTS (SELECT 1 FROM queue_tasks WHERE task_id = ?1 AND lease_token = ?2)
                 RETURNING seq, payload",
            )
            .bind(&task.envelope.task_id)
            .bind(&task.token)
            .fetch_all(&self.pool)
            .await?;
            let mut rows: Vec<(i64, Vec<u8>)> = rows.iter().map(|r| (r.get("seq"), r.get("payload"))).collect();
            rows.sort_by_key(|(seq, _)| *seq);
            Ok(rows
                .into_iter()
                .filter_map(|(seq, payload)| match ControlMessage::decode(&payload) {
                    Ok(message) => Some(message),
                    Err(error) => {
                        tracing::error!(seq, error = %error, "control message does not decode; dropped");
                        None
                    }
                })
                .collect())
        })
    }

    fn announce<'a>(&'a self, status: &'a WorkerStatus) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let now = now_ms();
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "INSERT INTO queue_workers (worker_id, status, seq, updated_at)
                 VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM queue_workers), ?3)
                 ON CONFLICT (worker_id) DO UPDATE SET status = excluded.status, seq = excluded.seq,
                     updated_at = excluded.updated_at",
            )
            .bind(&status.worker_id)
            .bind(status.encode()?)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM queue_workers WHERE updated_at < ?1")
                .bind(now - STALE_WORKER_MS)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn settle<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            sqlx::query("DELETE FROM queue_tasks WHERE task_id = ?1 AND lease_token = ?2")
                .bind(&task.envelope.task_id)
                .bind(&task.token)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM queue_controls WHERE task_id = ?1")
                .bind(&task.envelope.task_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(SqliteQueue::close(self))
    }
}
