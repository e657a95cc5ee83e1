//! Times as the table stores them: UTC text in SQLAlchemy's layout (`2026-12-04 09:00:00.000000`), MiniBot's
//! own, fixed width so that text order is time order and `run_at <= ?` compares correctly.

use chrono::{DateTime, Utc};

pub use minibot_sqlite::stored_time::{from_text, to_text};

/// A time as the model and the user read it: `2026-12-04T09:00:00Z`.
pub fn iso(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
