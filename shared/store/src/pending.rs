use crate::{Result, Store, now};
use sqlx::Row;

/// A turn that was accepted and has not finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTurn {
    pub event_id: String,
    pub session_id: String,
    /// The inbound message as the orchestrator serialised it.
    pub message_json: String,
    /// Set once the turn handed its work to a background task, so a replay does not enqueue it twice.
    pub task_handoff_completed: bool,
    /// The finished turn's answer, not yet confirmed delivered: a replay sends it instead of running the turn.
    pub answer_json: Option<String>,
}

impl Store {
    pub async fn mark_pending(&self, event_id: &str, session_id: &str, message_json: &str) -> Result<()> {
        sqlx::query(
            "INSERT OR REPLACE INTO pending_turns (event_id, session_id, message_json, task_handoff_completed, created_at)
             VALUES (?1, ?2, ?3, 0, ?4)",
        )
        .bind(event_id)
        .bind(session_id)
        .bind(self.redactor.redact_json_text(message_json))
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn clear_pending(&self, event_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM pending_turns WHERE event_id = ?1").bind(event_id).execute(&self.pool).await?;
        Ok(())
    }

    pub async fn mark_task_handoff(&self, event_id: &str) -> Result<()> {
        sqlx::query("UPDATE pending_turns SET task_handoff_completed = 1 WHERE event_id = ?1")
            .bind(event_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Pending turns to replay, oldest first. Turns that already handed off to a task are not replayed.
    pub async fn pending_turns(&self) -> Result<Vec<PendingTurn>> {
        let rows = sqlx::query(
            "SELECT event_id, session_id, message_json, task_handoff_completed, answer_json FROM pending_turns
             WHERE task_handoff_completed = 0 OR answer_json IS NOT NULL ORDER BY created_at, rowid",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| PendingTurn {
                event_id: row.get("event_id"),
                session_id: row.get("session_id"),
                message_json: row.get("message_json"),
                task_handoff_completed: row.get::<i64, _>("task_handoff_completed") != 0,
                answer_json: row.get("answer_json"),
            })
            .collect())
    }
}
