//! Task records: the orchestrator's account of every background task, whichever queue carries it. Worker
//! events are applied idempotently: a terminal status is final (the first terminal event wins) and events of
//! a task that already ended change nothing.

use crate::{Result, StoreError, now};
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;
use std::path::Path;

/// Events kept per task; older ones are dropped.
pub const MAX_EVENTS_PER_TASK: i64 = 100;
pub const TERMINAL: &[&str] = &["done", "failed", "cancelled", "timed_out"];

#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub id: String,
    pub owner_id: String,
    pub channel: String,
    pub chat_id: Option<i64>,
    pub user_id: Option<i64>,
    pub prompt: String,
    pub agent_name: Option<String>,
    pub context_json: Option<String>,
    pub model_overrides: Value,
    pub delivery: String,
    pub continuation_depth: u32,
    pub origin_turn_id: Option<String>,
    pub max_attempts: u32,
    pub timeout_seconds: u64,
    pub max_steps: Option<u32>,
    pub max_tool_calls: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub id: String,
    pub owner_id: String,
    pub channel: String,
    pub chat_id: Option<i64>,
    pub user_id: Option<i64>,
    pub prompt: String,
    pub agent_name: Option<String>,
    pub delivery: String,
    pub continuation_depth: u32,
    pub status: String,
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_seconds: u64,
    pub max_steps: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub progress: Value,
    pub result_text: Option<String>,
    pub stop_reason: Option<String>,
    pub last_error: Option<String>,
    pub model_overrides: Value,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl TaskRecord {
    pub fn is_terminal(&self) -> bool {
        TERMINAL.contains(&self.status.as_str())
    }
}

/// What applying an event did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The event was stale or repeated; nothing changed.
    Ignored,
    Updated(TaskRecord),
    /// This event ended the task.
    Finished(TaskRecord),
}

#[derive(Clone, Debug)]
pub struct TaskStore {
    pool: SqlitePool,
}

fn row_to_record(row: &sqlx::sqlite::SqliteRow) -> TaskRecord {
    let parse = |text: String| serde_json::from_str(&text).unwrap_or(Value::Null);
    let opt_u32 = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
    TaskRecord {
        id: row.get("id"),
        owner_id: row.get("owner_id"),
        channel: row.get("channel"),
        chat_id: row.get("chat_id"),
        user_id: row.get("user_id"),
        prompt: row.get("prompt"),
        agent_name: row.get("agent_name"),
        delivery: row.get("delivery"),
        continuation_depth: u32::try_from(row.get::<i64, _>("continuation_depth")).unwrap_or(0),
        status: row.get("status"),
        attempts: u32::try_from(row.get::<i64, _>("attempts")).unwrap_or(0),
        max_attempts: u32::try_from(row.get::<i64, _>("max_attempts")).unwrap_or(0),
        timeout_seconds: u64::try_from(row.get::<i64, _>("timeout_seconds")).unwrap_or(0),
        max_steps: opt_u32(row.get("max_steps")),
        max_tool_calls: opt_u32(row.get("max_tool_calls")),
        progress: parse(row.get("progress")),
        result_text: row.get("result_text"),
        stop_reason: row.get("stop_reason"),
        last_error: row.get("last_error"),
        model_overrides: parse(row.get("model_overrides")),
        started_at: row.get("started_at"),
        completed_at: row.get("completed_at"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    }
}

/// How a prefix lookup came out.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Found(Box<TaskRecord>),
    NotFound,
    Ambiguous(Vec<String>),
}

impl TaskStore {
    pub async fn open(path: &Path) -> Result<Self> {
        let pool = crate::open_pool(path, 2).await?;
        let mut migrator = sqlx::migrate!("./migrations_tasks");
        // The same file holds the SQLite queue's own tables.
        migrator.set_ignore_missing(true);
        migrator.run(&pool).await.map_err(|source| StoreError::Migrate { path: path.to_path_buf(), source })?;
        Ok(Self { pool })
    }

    pub async fn create(&self, task: &NewTask) -> Result<()> {
        let now = now();
        sqlx::query(
            "INSERT INTO tasks (id, owner_id, channel, chat_id, user_id, prompt, agent_name, context_json,
                model_overrides, delivery, continuation_depth, origin_turn_id, status, max_attempts,
                timeout_seconds, max_steps, max_tool_calls, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'pending', ?13, ?14, ?15, ?16, ?17, ?17)",
        )
        .bind(&task.id)
        .bind(&task.owner_id)
        .bind(&task.channel)
        .bind(task.chat_id)
        .bind(task.user_id)
        .bind(&task.prompt)
        .bind(&task.agent_name)
        .bind(&task.context_json)
        .bind(task.model_overrides.to_string())
        .bind(&task.delivery)
        .bind(i64::from(task.continuation_depth))
        .bind(&task.origin_turn_id)
        .bind(i64::from(task.max_attempts))
        .bind(i64::try_from(task.timeout_seconds).unwrap_or(i64::MAX))
        .bind(task.max_steps.map(i64::from))
        .bind(task.max_tool_calls.map(i64::from))
        .bind(&now)
        .execute(&self.pool)
        .await?;
        self.add_event(&task.id, "queued", &json!({})).await
    }

    pub async fn get(&self, id: &str) -> Result<Option<TaskRecord>> {
        let row = sqlx::query("SELECT * FROM tasks WHERE id = ?1").bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(row_to_record))
    }

    /// By full id or a unique prefix of at least 8 characters, within the owner's tasks.
    pub async fn find(&self, owner_id: &str, id_or_prefix: &str) -> Result<Lookup> {
        let key = id_or_prefix.trim();
        if let Some(record) = self.get(key).await?.filter(|r| r.owner_id == owner_id) {
            return Ok(Lookup::Found(Box::new(record)));
        }
        if key.len() < 8 || !key.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Ok(Lookup::NotFound);
        }
        let rows = sqlx::query("SELECT * FROM tasks WHERE owner_id = ?1 AND id LIKE ?2 || '%' LIMIT 5")
            .bind(owner_id)
            .bind(key)
            .fetch_all(&self.pool)
            .await?;
        Ok(match rows.len() {
            0 => Lookup::NotFound,
            1 => Lookup::Found(Box::new(row_to_record(&rows[0]))),
            _ => Lookup::Ambiguous(rows.iter().map(|r| r.get("id")).collect()),
        })
    }

    pub async fn list(&self, owner_id: &str, status: Option<&str>, limit: u32) -> Result<Vec<TaskRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM tasks WHERE owner_id = ?1 AND (?2 IS NULL OR status = ?2)
             ORDER BY updated_at DESC, rowid DESC LIMIT ?3",
        )
        .bind(owner_id)
        .bind(status)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(row_to_record).collect())
    }

    /// Tasks not in a terminal status (to resume routing after a restart).
    pub async fn active(&self) -> Result<Vec<TaskRecord>> {
        let rows =
            sqlx::query("SELECT * FROM tasks WHERE status IN ('pending', 'running')").fetch_all(&self.pool).await?;
        Ok(rows.iter().map(row_to_record).collect())
    }

    pub async fn events(&self, task_id: &str) -> Result<Vec<(String, Value, String)>> {
        let rows =
            sqlx::query("SELECT event_type, payload, created_at FROM task_events WHERE task_id = ?1 ORDER BY id")
                .bind(task_id)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let payload = serde_json::from_str(r.get::<&str, _>("payload")).unwrap_or(Value::Null);
                (r.get("event_type"), payload, r.get("created_at"))
            })
            .collect())
    }

    pub async fn add_event(&self, task_id: &str, event_type: &str, payload: &Value) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO task_events (task_id, event_type, payload, created_at) VALUES (?1, ?2, ?3, ?4)")
            .bind(task_id)
            .bind(event_type)
            .bind(payload.to_string())
            .bind(now())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM task_events WHERE task_id = ?1 AND id NOT IN (
                 SELECT id FROM task_events WHERE task_id = ?1 ORDER BY id DESC LIMIT ?2)",
        )
        .bind(task_id)
        .bind(MAX_EVENTS_PER_TASK)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A worker started an attempt.
    pub async fn started(&self, task_id: &str, attempt: u32, worker_id: &str) -> Result<Applied> {
        let now = now();
        let row = sqlx::query(
            "UPDATE tasks SET status = 'running', attempts = MAX(attempts, ?2), started_at = COALESCE(started_at, ?3),
                 updated_at = ?3
             WHERE id = ?1 AND status IN ('pending', 'running') RETURNING *",
        )
        .bind(task_id)
        .bind(i64::from(attempt))
        .bind(&now)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(Applied::Ignored) };
        self.add_event(task_id, "running", &json!({ "attempt": attempt, "worker_id": worker_id })).await?;
        Ok(Applied::Updated(row_to_record(&row)))
    }

    pub async fn progress(&self, task_id: &str, attempt: u32, progress: &Value) -> Result<Applied> {
        let row = sqlx::query(
            "UPDATE tasks SET progress = ?2, attempts = MAX(attempts, ?3), updated_at = ?4
             WHERE id = ?1 AND status IN ('pending', 'running') RETURNING *",
        )
        .bind(task_id)
        .bind(progress.to_string())
        .bind(i64::from(attempt))
        .bind(now())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(Applied::Ignored) };
        self.add_event(task_id, "progress", progress).await?;
        Ok(Applied::Updated(row_to_record(&row)))
    }

    /// Ends the task unless it already ended. `status` is one of [`TERMINAL`].
    pub async fn finish(
        &self,
        task_id: &str,
        attempt: u32,
        status: &str,
        stop_reason: &str,
        text: Option<&str>,
        error: Option<&str>,
    ) -> Result<Applied> {
        let now = now();
        let row = sqlx::query(
            "UPDATE tasks SET status = ?2, stop_reason = ?3, result_text = ?4, last_error = ?5,
                 attempts = MAX(attempts, ?6), completed_at = ?7, updated_at = ?7
             WHERE id = ?1 AND status IN ('pending', 'running') RETURNING *",
        )
        .bind(task_id)
        .bind(status)
        .bind(stop_reason)
        .bind(text)
        .bind(error)
        .bind(i64::from(attempt))
        .bind(&now)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(Applied::Ignored) };
        self.add_event(task_id, status, &json!({ "stop_reason": stop_reason, "attempt": attempt })).await?;
        Ok(Applied::Finished(row_to_record(&row)))
    }

    /// Removes ended tasks older than `older_than_seconds` and their events.
    pub async fn purge(&self, older_than_seconds: u64) -> Result<u64> {
        let cutoff =
            chrono::Utc::now() - chrono::Duration::seconds(i64::try_from(older_than_seconds).unwrap_or(i64::MAX / 2));
        let cutoff = cutoff.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "DELETE FROM task_events WHERE task_id IN (SELECT id FROM tasks WHERE status IN ('done','failed','cancelled','timed_out') AND updated_at < ?1)",
        )
        .bind(&cutoff)
        .execute(&mut *tx)
        .await?;
        let removed = sqlx::query(
            "DELETE FROM tasks WHERE status IN ('done','failed','cancelled','timed_out') AND updated_at < ?1",
        )
        .bind(&cutoff)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(removed.rows_affected())
    }
}
