//! A chat's compaction summaries. The latest one stands in for every message up to its `through_id` when the
//! history is sent to the model; the messages stay in `messages`, whole and readable by id, so compaction never
//! loses what was said.

use crate::{Result, Store};
use sqlx::Row;

/// One summary of a chat's earlier messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub id: i64,
    /// The first and last message ids it covers, and how many messages that was.
    pub first_id: i64,
    pub through_id: i64,
    pub covered: u64,
    pub text: String,
}

impl Store {
    /// The summary the next request starts from, if the chat was compacted.
    pub async fn latest_summary(&self, session_id: &str) -> Result<Option<Summary>> {
        let row = sqlx::query(
            "SELECT id, first_id, through_id, covered, text FROM summaries WHERE session_id = ?1 \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| Summary {
            id: row.get("id"),
            first_id: row.get("first_id"),
            through_id: row.get("through_id"),
            covered: u64::try_from(row.get::<i64, _>("covered")).unwrap_or(0),
            text: row.get("text"),
        }))
    }

    /// Records `text` as the summary of the session's messages up to `through_id` (those of an earlier summary
    /// included: it summarised them too).
    pub async fn add_summary(&self, session_id: &str, through_id: i64, text: &str) -> Result<Summary> {
        let text = self.redactor.redact(text).into_owned();
        let range = sqlx::query(
            "SELECT COALESCE(MIN(id), 0) AS first, COUNT(*) AS n FROM messages WHERE session_id = ?1 AND id <= ?2",
        )
        .bind(session_id)
        .bind(through_id)
        .fetch_one(&self.pool)
        .await?;
        let (first_id, covered): (i64, i64) = (range.get("first"), range.get("n"));
        let id = sqlx::query(
            "INSERT INTO summaries (session_id, through_id, first_id, covered, text, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(session_id)
        .bind(through_id)
        .bind(first_id)
        .bind(covered)
        .bind(&text)
        .bind(crate::now())
        .execute(&self.pool)
        .await?
        .last_insert_rowid();
        Ok(Summary { id, first_id, through_id, covered: u64::try_from(covered).unwrap_or(0), text })
    }

    /// Forgets the session's summaries (the chat was trimmed past them or started afresh).
    pub async fn drop_summaries(&self, session_id: &str) -> Result<u64> {
        let done =
            sqlx::query("DELETE FROM summaries WHERE session_id = ?1").bind(session_id).execute(&self.pool).await?;
        Ok(done.rows_affected())
    }
}
