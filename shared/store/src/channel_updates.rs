//! Durable intake of channel updates: the update id and the pending turn it carries are written together.

use crate::{Result, Store, now};
use sqlx::Row;

/// Update ids kept per source behind the highest (a redelivery is at most one batch of 100 old).
const KEEP_UPDATE_IDS: i64 = 10_000;

/// A pending turn to write with its update.
#[derive(Debug, Clone)]
pub struct PendingWrite {
    pub event_id: String,
    pub session_id: String,
    pub message_json: String,
}

impl Store {
    /// Records each update id and its pending turn in one transaction. Returns, per update, whether it was new
    /// (`false`: recorded before, a redelivery whose turn must not run again).
    pub async fn accept_updates(&self, source: &str, updates: &[(i64, Option<PendingWrite>)]) -> Result<Vec<bool>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let accepted_at = now();
        let mut fresh = Vec::with_capacity(updates.len());
        for (update_id, pending) in updates {
            let inserted = sqlx::query(
                "INSERT OR IGNORE INTO channel_updates (source, update_id, accepted_at) VALUES (?1, ?2, ?3)",
            )
            .bind(source)
            .bind(update_id)
            .bind(&accepted_at)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if inserted && let Some(pending) = pending {
                sqlx::query(
                    "INSERT OR REPLACE INTO pending_turns (event_id, session_id, message_json, task_handoff_completed, created_at)
                     VALUES (?1, ?2, ?3, 0, ?4)",
                )
                .bind(&pending.event_id)
                .bind(&pending.session_id)
                .bind(self.redactor.redact_json_text(&pending.message_json))
                .bind(&accepted_at)
                .execute(&mut *tx)
                .await?;
            }
            fresh.push(inserted);
        }
        // Redeliveries only ever concern the latest updates; the ids long confirmed go, so the table stays small.
        sqlx::query(
            "DELETE FROM channel_updates WHERE source = ?1 AND update_id <
                 (SELECT MAX(update_id) FROM channel_updates WHERE source = ?1) - ?2",
        )
        .bind(source)
        .bind(KEEP_UPDATE_IDS)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(fresh)
    }

    /// The highest update id recorded for `source`. Also prunes rows older than two days.
    pub async fn last_update_id(&self, source: &str) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT MAX(update_id) AS last FROM channel_updates WHERE source = ?1")
            .bind(source)
            .fetch_one(&self.pool)
            .await?;
        let last: Option<i64> = row.get("last");
        let cutoff =
            (chrono::Utc::now() - chrono::Duration::days(2)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        sqlx::query("DELETE FROM channel_updates WHERE source = ?1 AND accepted_at < ?2 AND update_id < ?3")
            .bind(source)
            .bind(cutoff)
            .bind(last.unwrap_or(0))
            .execute(&self.pool)
            .await?;
        Ok(last)
    }
}
