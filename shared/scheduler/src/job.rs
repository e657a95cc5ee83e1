//! A scheduled prompt as the store holds it.

use crate::recurrence::Recurrence;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// MiniBot's statuses. `Leased`: a one-off job has fired and its turn is on its way to the chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Pending,
    Leased,
    Completed,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Leased => "leased",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => Self::Pending,
            "leased" => Self::Leased,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// Still to fire (or firing now).
    pub fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Leased)
    }
}

/// Where a job's prompt goes and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub owner_id: String,
    pub channel: String,
    pub chat_id: i64,
    pub user_id: Option<i64>,
}

/// A job to add.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub target: Target,
    /// Stored as MiniBot does; every fire arrives as a user turn.
    pub role: String,
    pub content: String,
    pub run_at: DateTime<Utc>,
    pub metadata: Value,
    pub recurrence: Recurrence,
    pub end_at: Option<DateTime<Utc>>,
    /// The zone the user wrote a one-off's time in, kept to show it back (a cron job's zone is its recurrence's).
    pub time_zone: Option<chrono_tz::Tz>,
    pub max_attempts: u32,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub target: Target,
    pub role: String,
    pub content: String,
    pub status: JobStatus,
    pub run_at: DateTime<Utc>,
    pub retry_count: u32,
    pub max_attempts: u32,
    pub metadata: Value,
    pub last_error: Option<String>,
    /// The recurrence as stored. A row whose recurrence no longer reads (a cron expression or zone this version
    /// refuses) keeps its text here and fails when it comes due; see [`Job::recurrence`].
    pub recurrence_kind: String,
    pub interval_seconds: Option<i64>,
    pub cron_expression: Option<String>,
    pub time_zone: Option<String>,
    pub end_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Job {
    /// The job's recurrence, or why its stored row cannot say.
    pub fn recurrence(&self) -> Result<Recurrence, String> {
        match self.recurrence_kind.as_str() {
            "none" | "" => Ok(Recurrence::None),
            "interval" => match self.interval_seconds {
                Some(seconds) if seconds >= 1 && seconds.unsigned_abs() <= crate::MAX_INTERVAL_SECONDS => {
                    Ok(Recurrence::Interval { seconds: seconds.unsigned_abs() })
                }
                other => Err(format!(
                    "interval job without an interval between 1 and {} seconds ({other:?})",
                    crate::MAX_INTERVAL_SECONDS
                )),
            },
            "cron" => {
                let expression = self.cron_expression.as_deref().unwrap_or_default();
                Recurrence::cron(expression, self.time_zone.as_deref()).map_err(|e| e.to_string())
            }
            other => Err(format!("unknown recurrence `{other}`")),
        }
    }
}

/// One firing of a job on its way to the chat.
#[derive(Debug, Clone)]
pub struct Fire {
    /// Unique in its database; with the database's identity, the id the chat store records the turn under.
    pub id: i64,
    pub job_id: String,
    pub target: Target,
    pub content: String,
    /// The slot this fire is for: how late it runs is measured from here.
    pub due_at: DateTime<Utc>,
    pub fired_at: DateTime<Utc>,
    /// Failed deliveries so far.
    pub attempts: u32,
}
