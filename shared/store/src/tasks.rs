//! Task records: the orchestrator's account of every background task, whichever queue carries it. Worker
//! events are applied idempotently: a terminal status is final (the first terminal event wins) and events of
//! a task that already ended change nothing.
//!
//! An attempt belongs to one worker. The first event of an attempt (`started`, or whichever comes first when a
//! quick task ends before it says it started) binds the attempt to the worker that sent it; events of that
//! attempt from any other worker id are refused ([`Applied::NotHolder`]), and events of an attempt older than
//! the record's current one are refused too ([`Applied::Superseded`]), so neither can overwrite the state or
//! the result of the attempt that holds the task. A newer attempt binds its own worker: the queue hands a task
//! out again only once the previous holder lost it (it died, its lease expired, its connection dropped).
//!
//! Statuses and deliveries are stored as their names ([`TaskStatus::as_str`], [`Delivery::as_str`]); a row
//! whose name this version does not know reads as [`StoreError::BadTaskRow`]. The SQL spells the open
//! statuses (`'pending', 'running'`) and the terminal ones itself, in the same names.

use crate::{Result, StoreError, now};
use minibot_protocol::{Delivery, TaskStatus, TaskUsage};
use minibot_vault::Redactor;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use std::borrow::Cow;
use std::path::Path;

/// Events kept per task; older ones are dropped.
pub const MAX_EVENTS_PER_TASK: i64 = 100;

/// Longest result or error text kept for a task, in bytes. A worker's text is model output and far shorter in
/// practice; a longer one (a runaway or hostile worker) is cut at a character boundary, and the kept text ends
/// with a line that says so. The chat shows much less ([`TaskRecord::result_text`] is what `get_task` reads).
pub const MAX_STORED_TEXT_BYTES: usize = 1024 * 1024;

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
    pub delivery: Delivery,
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
    pub delivery: Delivery,
    pub continuation_depth: u32,
    pub status: TaskStatus,
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_seconds: u64,
    pub max_steps: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub progress: Value,
    pub result_text: Option<String>,
    pub stop_reason: Option<String>,
    pub last_error: Option<String>,
    /// What the attempt that ended the task used; `None` when no worker reported it.
    pub usage: Option<TaskUsage>,
    /// The worker that started the latest attempt, and its host when it had announced itself.
    pub worker_id: Option<String>,
    pub worker_host: Option<String>,
    /// Whether the user or the main agent asked for the task's cancel (`cancel_task`): a task that ended
    /// `cancelled` without it was stopped by someone else.
    pub cancel_requested: bool,
    pub model_overrides: Value,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl TaskRecord {
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }
}

/// How a task ended, for [`TaskStore::finish`]. Start from [`Ending::new`] and set what is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ending<'a> {
    /// One of the terminal statuses.
    pub status: TaskStatus,
    pub stop_reason: &'a str,
    /// The answer, on `done`.
    pub text: Option<&'a str>,
    /// What went wrong, otherwise.
    pub error: Option<&'a str>,
    /// What the attempt used, when its worker reported it.
    pub usage: Option<TaskUsage>,
    /// The worker that ended it and its host, when a worker did: a quick task ends before it says it started.
    pub worker_id: Option<&'a str>,
    pub worker_host: Option<&'a str>,
}

impl<'a> Ending<'a> {
    pub fn new(status: TaskStatus, stop_reason: &'a str) -> Self {
        Self { status, stop_reason, text: None, error: None, usage: None, worker_id: None, worker_host: None }
    }
}

/// One attempt of a task as a worker's event names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt<'a> {
    pub number: u32,
    pub worker_id: &'a str,
    /// Where the worker runs, when it announced itself.
    pub host: Option<&'a str>,
}

/// What applying an event did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The event was repeated, or its task ended or is unknown; nothing changed.
    Ignored,
    /// The event's attempt is held by another worker (`holder`); nothing changed.
    NotHolder {
        holder: String,
    },
    /// The event is of an attempt older than the record's `current` one; nothing changed.
    Superseded {
        current: u32,
    },
    Updated(TaskRecord),
    /// This event ended the task.
    Finished(TaskRecord),
}

#[derive(Clone, Debug)]
pub struct TaskStore {
    pool: SqlitePool,
    /// Known secret values never reach the tasks database: prompts, results, errors and events are masked.
    redactor: Redactor,
}

/// Reads a `tasks` row. A missing column or a status or delivery this version does not know is an error.
fn row_to_record(row: &SqliteRow) -> Result<TaskRecord> {
    let id: String = row.try_get("id")?;
    let name = |column: &str| row.try_get::<String, _>(column);
    let bad_row = |source| StoreError::BadTaskRow { task_id: id.clone(), source };
    let status = name("status")?.parse::<TaskStatus>().map_err(bad_row)?;
    let delivery = name("delivery")?.parse::<Delivery>().map_err(bad_row)?;
    let json = |column: &str| -> Result<Value> {
        Ok(serde_json::from_str(&row.try_get::<String, _>(column)?).unwrap_or(Value::Null))
    };
    let int = |column: &str| -> Result<Option<i64>> { Ok(row.try_get::<Option<i64>, _>(column)?) };
    let count = |column: &str| -> Result<u32> { Ok(int(column)?.and_then(|n| u32::try_from(n).ok()).unwrap_or(0)) };
    let opt_u32 = |column: &str| -> Result<Option<u32>> { Ok(int(column)?.and_then(|n| u32::try_from(n).ok())) };
    let usage = match (int("steps")?, int("tool_calls")?, int("total_tokens")?) {
        (Some(steps), Some(tool_calls), Some(total_tokens)) => Some(TaskUsage {
            steps: u32::try_from(steps).unwrap_or(0),
            tool_calls: u32::try_from(tool_calls).unwrap_or(0),
            total_tokens: u64::try_from(total_tokens).unwrap_or(0),
        }),
        _ => None,
    };
    Ok(TaskRecord {
        owner_id: row.try_get("owner_id")?,
        channel: row.try_get("channel")?,
        chat_id: row.try_get("chat_id")?,
        user_id: row.try_get("user_id")?,
        prompt: row.try_get("prompt")?,
        agent_name: row.try_get("agent_name")?,
        delivery,
        continuation_depth: count("continuation_depth")?,
        status,
        attempts: count("attempts")?,
        max_attempts: count("max_attempts")?,
        timeout_seconds: int("timeout_seconds")?.and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
        max_steps: opt_u32("max_steps")?,
        max_tool_calls: opt_u32("max_tool_calls")?,
        progress: json("progress")?,
        result_text: row.try_get("result_text")?,
        stop_reason: row.try_get("stop_reason")?,
        last_error: row.try_get("last_error")?,
        usage,
        worker_id: row.try_get("worker_id")?,
        worker_host: row.try_get("worker_host")?,
        cancel_requested: row.try_get::<Option<String>, _>("cancel_requested_at")?.is_some(),
        model_overrides: json("model_overrides")?,
        started_at: row.try_get("started_at")?,
        completed_at: row.try_get("completed_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        id,
    })
}

/// The SQL condition under which an event of attempt `$attempt` from worker `$worker` (both SQL parameters)
/// may change a task's row: it is of a newer attempt, or of the current one and from the worker that holds it
/// (or the first event of it). `attempts` and `worker_id` are the row's current attempt and its holder. A macro
/// so the statements stay literal SQL.
macro_rules! held_by {
    ($attempt:literal, $worker:literal) => {
        concat!(
            "(",
            $attempt,
            " > attempts OR (",
            $attempt,
            " = attempts AND (worker_id IS NULL OR worker_id = ",
            $worker,
            ")))"
        )
    };
}

/// The SQL value of `worker_host` when worker `$worker` (SQL parameter, with its announced `$host`) holds the
/// row: the host it names, else the one known if it already held the row, else unknown.
macro_rules! host_of {
    ($worker:literal, $host:literal) => {
        concat!(
            "CASE WHEN ",
            $host,
            " IS NOT NULL THEN ",
            $host,
            " WHEN worker_id = ",
            $worker,
            " THEN worker_host END"
        )
    };
}

/// The guarded update a worker's event makes to an open task: the assignments `$set` special to the event
/// (each ending in a comma), then the attempt, the time and the holder, when [`held_by!`] lets the worker hold the
/// attempt. Its parameters are those [`held_query`] binds (`?1` to `?5`), then the event's own from `?6`.
macro_rules! held_update {
    ($set:literal) => {
        concat!(
            "UPDATE tasks SET ",
            $set,
            " attempts = MAX(attempts, ?2), updated_at = ?3, worker_host = ",
            host_of!("?4", "?5"),
            ", worker_id = ?4 WHERE id = ?1 AND status IN ('pending', 'running') AND ",
            held_by!("?2", "?4"),
            " RETURNING *"
        )
    };
}

/// A [`held_update!`] statement with its common parameters bound: the task `?1`, the attempt's number `?2`, the
/// time `?3`, its worker `?4` and that worker's host `?5`.
fn held_query(
    sql: &'static str,
    task_id: &str,
    attempt: &Attempt<'_>,
) -> sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(sql)
        .bind(task_id)
        .bind(i64::from(attempt.number))
        .bind(now())
        .bind(attempt.worker_id)
        .bind(attempt.host)
}

/// `text` as stored: at most [`MAX_STORED_TEXT_BYTES`], cut at a character boundary with a line saying so.
fn capped(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.len() <= MAX_STORED_TEXT_BYTES {
        return text;
    }
    let cut = text.floor_char_boundary(MAX_STORED_TEXT_BYTES);
    Cow::Owned(format!(
        "{}\n\n[cut: the text was {} bytes; the task store keeps the first {MAX_STORED_TEXT_BYTES} bytes]",
        &text[..cut],
        text.len()
    ))
}

fn rows_to_records(rows: &[SqliteRow]) -> Result<Vec<TaskRecord>> {
    rows.iter().map(row_to_record).collect()
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
        minibot_sqlite::migrate(&pool, &migrator)
            .await
            .map_err(|source| StoreError::Migrate { path: path.to_path_buf(), source })?;
        Ok(Self { pool, redactor: Redactor::default() })
    }

    /// Masks the vault's secret values in everything written from now on.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// `value` as stored: JSON text with the secret values of its strings masked.
    fn redact_json(&self, value: &Value) -> String {
        if self.redactor.is_empty() {
            return value.to_string();
        }
        let mut value = value.clone();
        self.redactor.redact_json(&mut value);
        value.to_string()
    }

    /// Closes the pool; call it before the tokio runtime stops (see [`crate::Store::close`]).
    pub async fn close(&self) {
        self.pool.close().await;
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
        .bind(self.redactor.redact(&task.prompt))
        .bind(&task.agent_name)
        .bind(&task.context_json)
        .bind(task.model_overrides.to_string())
        .bind(task.delivery.as_str())
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
        row.as_ref().map(row_to_record).transpose()
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
        Ok(match rows.as_slice() {
            [] => Lookup::NotFound,
            [row] => Lookup::Found(Box::new(row_to_record(row)?)),
            _ => Lookup::Ambiguous(rows.iter().map(|r| r.try_get("id")).collect::<sqlx::Result<_>>()?),
        })
    }

    /// The owner's tasks, most recently updated first, optionally only those in `status`.
    pub async fn list(&self, owner_id: &str, status: Option<TaskStatus>, limit: u32) -> Result<Vec<TaskRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM tasks WHERE owner_id = ?1 AND (?2 IS NULL OR status = ?2)
             ORDER BY updated_at DESC, rowid DESC LIMIT ?3",
        )
        .bind(owner_id)
        .bind(status.map(TaskStatus::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows_to_records(&rows)
    }

    /// Tasks not in a terminal status (to resume routing after a restart).
    pub async fn active(&self) -> Result<Vec<TaskRecord>> {
        let rows =
            sqlx::query("SELECT * FROM tasks WHERE status IN ('pending', 'running')").fetch_all(&self.pool).await?;
        rows_to_records(&rows)
    }

    pub async fn events(&self, task_id: &str) -> Result<Vec<(String, Value, String)>> {
        let rows =
            sqlx::query("SELECT event_type, payload, created_at FROM task_events WHERE task_id = ?1 ORDER BY id")
                .bind(task_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                let payload = serde_json::from_str(r.try_get::<&str, _>("payload")?).unwrap_or(Value::Null);
                Ok((r.try_get("event_type")?, payload, r.try_get("created_at")?))
            })
            .collect()
    }

    pub async fn add_event(&self, task_id: &str, event_type: &str, payload: &Value) -> Result<()> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("INSERT INTO task_events (task_id, event_type, payload, created_at) VALUES (?1, ?2, ?3, ?4)")
            .bind(task_id)
            .bind(event_type)
            .bind(self.redact_json(payload))
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

    /// Names the host of a worker on the tasks it started before its announcement was read.
    pub async fn fill_worker_host(&self, worker_id: &str, host: &str) -> Result<u64> {
        let done = sqlx::query("UPDATE tasks SET worker_host = ?2 WHERE worker_id = ?1 AND worker_host IS NULL")
            .bind(worker_id)
            .bind(host)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    /// A worker started an attempt; `attempt.host` is where it runs, when it announced itself.
    pub async fn started(&self, task_id: &str, attempt: &Attempt<'_>) -> Result<Applied> {
        let sql = held_update!("status = 'running', started_at = COALESCE(started_at, ?3),");
        let row = held_query(sql, task_id, attempt).fetch_optional(&self.pool).await?;
        let Some(row) = row else { return self.not_applied(task_id, attempt.number, attempt.worker_id).await };
        let payload = json!({ "attempt": attempt.number, "worker_id": attempt.worker_id });
        self.add_event(task_id, "running", &payload).await?;
        Ok(Applied::Updated(row_to_record(&row)?))
    }

    pub async fn progress(&self, task_id: &str, attempt: &Attempt<'_>, progress: &Value) -> Result<Applied> {
        let row = held_query(held_update!("progress = ?6,"), task_id, attempt)
            .bind(self.redact_json(progress))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return self.not_applied(task_id, attempt.number, attempt.worker_id).await };
        self.add_event(task_id, "progress", progress).await?;
        Ok(Applied::Updated(row_to_record(&row)?))
    }

    /// Binds an attempt to its worker for an event that changes nothing else (an approval question, which may be
    /// the first event of a quick attempt): `Updated` when the worker holds the attempt (now), `Ignored` when
    /// the task ended or is unknown.
    pub async fn hold(&self, task_id: &str, attempt: &Attempt<'_>) -> Result<Applied> {
        let row = held_query(held_update!(""), task_id, attempt).fetch_optional(&self.pool).await?;
        match row {
            Some(row) => Ok(Applied::Updated(row_to_record(&row)?)),
            None => self.not_applied(task_id, attempt.number, attempt.worker_id).await,
        }
    }

    /// Why a worker's event changed nothing: the task ended (or is unknown), the attempt is older than the
    /// record's, or another worker holds it. Read after the fact, for the log; the guarded update decided.
    async fn not_applied(&self, task_id: &str, attempt: u32, worker_id: &str) -> Result<Applied> {
        let Some(record) = self.get(task_id).await? else { return Ok(Applied::Ignored) };
        if record.is_terminal() {
            return Ok(Applied::Ignored);
        }
        if attempt < record.attempts {
            return Ok(Applied::Superseded { current: record.attempts });
        }
        Ok(match record.worker_id {
            Some(holder) if holder != worker_id => Applied::NotHolder { holder },
            _ => Applied::Ignored,
        })
    }

    /// Notes that the user or the main agent asked to cancel the task (before the cancel is sent, so a worker's
    /// report of it, however quick, is known as asked for). Nothing happens to a task that already ended.
    pub async fn request_cancel(&self, task_id: &str) -> Result<()> {
        sqlx::query(
            "UPDATE tasks SET cancel_requested_at = COALESCE(cancel_requested_at, ?2)
             WHERE id = ?1 AND status IN ('pending', 'running')",
        )
        .bind(task_id)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Takes back [`Self::request_cancel`] when the cancel could not be sent: the task keeps running, and a
    /// cancel that comes anyway was not asked for.
    pub async fn withdraw_cancel(&self, task_id: &str) -> Result<()> {
        sqlx::query("UPDATE tasks SET cancel_requested_at = NULL WHERE id = ?1 AND status IN ('pending', 'running')")
            .bind(task_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Ends the task unless it already ended. `ending.status` must be terminal. An ending a worker reported
    /// (`ending.worker_id` set) applies only from the worker that holds `attempt` (or to a newer attempt); the
    /// orchestrator's own endings (a cancel, a timeout) apply to whatever attempt runs.
    pub async fn finish(&self, task_id: &str, attempt: u32, ending: &Ending<'_>) -> Result<Applied> {
        self.finish_guarded(task_id, attempt, ending, None).await
    }

    /// [`Self::finish`], but only if the record is still as it was read (`updated_at` unchanged): a decision
    /// taken on that reading (the task waited too long for a worker) must not end a task a worker has started
    /// since.
    pub async fn finish_unchanged(&self, record: &TaskRecord, ending: &Ending<'_>) -> Result<Applied> {
        self.finish_guarded(&record.id, record.attempts, ending, Some(&record.updated_at)).await
    }

    async fn finish_guarded(
        &self,
        task_id: &str,
        attempt: u32,
        ending: &Ending<'_>,
        unchanged_since: Option<&str>,
    ) -> Result<Applied> {
        debug_assert!(ending.status.is_terminal(), "a task ends in a terminal status, not {}", ending.status);
        let now = now();
        let usage = ending.usage;
        let row = sqlx::query(concat!(
            "UPDATE tasks SET status = ?2, stop_reason = ?3, result_text = ?4, last_error = ?5,
                 attempts = MAX(attempts, ?6), completed_at = ?7, updated_at = ?7,
                 steps = ?8, tool_calls = ?9, total_tokens = ?10,
                 worker_host = CASE WHEN ?12 IS NULL THEN worker_host ELSE ",
            host_of!("?12", "?13"),
            " END,
                 worker_id = COALESCE(?12, worker_id),
                 started_at = CASE WHEN ?12 IS NULL THEN started_at ELSE COALESCE(started_at, ?7) END
             WHERE id = ?1 AND status IN ('pending', 'running') AND (?11 IS NULL OR updated_at = ?11)
                 AND (?12 IS NULL OR ",
            held_by!("?6", "?12"),
            ") RETURNING *"
        ))
        .bind(task_id)
        .bind(ending.status.as_str())
        .bind(ending.stop_reason)
        .bind(ending.text.map(|text| capped(self.redactor.redact(text))))
        .bind(ending.error.map(|error| capped(self.redactor.redact(error))))
        .bind(i64::from(attempt))
        .bind(&now)
        .bind(usage.map(|u| i64::from(u.steps)))
        .bind(usage.map(|u| i64::from(u.tool_calls)))
        .bind(usage.map(|u| i64::try_from(u.total_tokens).unwrap_or(i64::MAX)))
        .bind(unchanged_since)
        .bind(ending.worker_id)
        .bind(ending.worker_host)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return match ending.worker_id {
                Some(worker_id) => self.not_applied(task_id, attempt, worker_id).await,
                None => Ok(Applied::Ignored),
            };
        };
        let payload = json!({ "stop_reason": ending.stop_reason, "attempt": attempt });
        self.add_event(task_id, ending.status.as_str(), &payload).await?;
        Ok(Applied::Finished(row_to_record(&row)?))
    }

    /// Removes ended tasks older than `older_than_seconds` and their events.
    pub async fn purge(&self, older_than_seconds: u64) -> Result<u64> {
        let cutoff =
            chrono::Utc::now() - chrono::Duration::seconds(i64::try_from(older_than_seconds).unwrap_or(i64::MAX / 2));
        let cutoff = cutoff.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
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
