use crate::{Result, Store, now};
use sqlx::Row;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub created_at: String,
}

impl Store {
    /// The session's messages, oldest first (the latest `max_history_messages` when that is set).
    pub async fn history(&self, session_id: &str) -> Result<Vec<StoredMessage>> {
        let limit = self.max_history_messages.map_or(-1, i64::from);
        let rows = sqlx::query(
            "SELECT id, role, content, created_at FROM (
                 SELECT id, role, content, created_at FROM messages WHERE session_id = ?1
                 ORDER BY id DESC LIMIT ?2
             ) ORDER BY id ASC",
        )
        .bind(session_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| StoredMessage {
                id: row.get("id"),
                role: if row.get::<String, _>("role") == "assistant" { Role::Assistant } else { Role::User },
                content: row.get("content"),
                created_at: row.get("created_at"),
            })
            .collect())
    }

    /// Appends the messages of one turn and removes its pending rows, in one transaction; then trims the
    /// session to `max_history_messages`.
    pub async fn finish_turn(
        &self,
        session_id: &str,
        messages: &[(Role, &str)],
        pending_event_ids: &[&str],
    ) -> Result<()> {
        self.finish_turn_answered(session_id, messages, pending_event_ids, None).await
    }

    /// As [`Store::finish_turn`]; with `answer_json`, the first pending row stays and holds the answer until
    /// [`Store::clear_pending`] says it was delivered (the other rows, messages steered into the turn, go).
    pub async fn finish_turn_answered(
        &self,
        session_id: &str,
        messages: &[(Role, &str)],
        pending_event_ids: &[&str],
        answer_json: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let created_at = now();
        for (role, content) in messages {
            sqlx::query("INSERT INTO messages (session_id, role, content, created_at) VALUES (?1, ?2, ?3, ?4)")
                .bind(session_id)
                .bind(role.as_str())
                .bind(self.redactor.redact(content))
                .bind(&created_at)
                .execute(&mut *tx)
                .await?;
        }
        for (i, event_id) in pending_event_ids.iter().enumerate() {
            match answer_json.filter(|_| i == 0) {
                Some(answer) => {
                    sqlx::query("UPDATE pending_turns SET answer_json = ?2 WHERE event_id = ?1")
                        .bind(event_id)
                        .bind(self.redactor.redact_json_text(answer))
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    sqlx::query("DELETE FROM pending_turns WHERE event_id = ?1")
                        .bind(event_id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        if let Some(max) = self.max_history_messages {
            self.trim(session_id, u64::from(max)).await?;
        }
        Ok(())
    }

    /// Starts the session afresh and keeps its conversation: its messages move to the session
    /// `{session_id}@{now}`. Returns that id and how many messages moved (none: the session was empty).
    pub async fn archive_session(&self, session_id: &str) -> Result<(String, u64)> {
        let archive = format!("{session_id}@{}", now());
        let moved = sqlx::query("UPDATE messages SET session_id = ?2 WHERE session_id = ?1")
            .bind(session_id)
            .bind(&archive)
            .execute(&self.pool)
            .await?;
        Ok((archive, moved.rows_affected()))
    }

    pub async fn count(&self, session_id: &str) -> Result<u64> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE session_id = ?1")
            .bind(session_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Keeps the latest `keep_latest` messages of the session; returns how many were removed.
    pub async fn trim(&self, session_id: &str, keep_latest: u64) -> Result<u64> {
        let keep = i64::try_from(keep_latest).unwrap_or(i64::MAX);
        let result = sqlx::query(
            "DELETE FROM messages WHERE session_id = ?1 AND id NOT IN (
                 SELECT id FROM messages WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2)",
        )
        .bind(session_id)
        .bind(keep)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected())
    }
}
