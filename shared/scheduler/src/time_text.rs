//! Times as the table stores them: UTC text in SQLAlchemy's layout (`2026-12-04 09:00:00.000000`), MiniBot's
//! own, fixed width so that text order is time order and `run_at <= ?` compares correctly.

use chrono::{DateTime, NaiveDateTime, Utc};

const LAYOUT: &str = "%Y-%m-%d %H:%M:%S%.6f";

pub fn to_text(at: DateTime<Utc>) -> String {
    at.format(LAYOUT).to_string()
}

/// Reads a stored time. MiniBot wrote the same layout; an offset or a `T` (a row written by hand) is accepted.
pub fn from_text(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    let text = text.replacen('T', " ", 1);
    // With an offset first: a naive parse would read the time and drop the offset. `%#z` also reads an offset
    // of hours only (`+05`).
    let with_offset = ["%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%#z"]
        .iter()
        .find_map(|layout| DateTime::parse_from_str(&text, layout).ok().map(|at| at.with_timezone(&Utc)));
    with_offset.or_else(|| {
        ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M:%S"]
            .iter()
            .find_map(|layout| NaiveDateTime::parse_from_str(&text, layout).ok().map(|n| n.and_utc()))
    })
}

/// A time as the model and the user read it: `2026-12-04T09:00:00Z`.
pub fn iso(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn stored_text_round_trips_and_sorts_as_time() {
        let a = Utc.with_ymd_and_hms(2026, 12, 4, 9, 0, 0).unwrap();
        let b = a + chrono::Duration::microseconds(1500);
        assert_eq!(from_text(&to_text(b)), Some(b));
        assert!(to_text(a) < to_text(b));
        assert_eq!(to_text(a), "2026-12-04 09:00:00.000000");
    }

    #[test]
    fn minibot_and_hand_written_rows_read() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(from_text("2026-01-02 03:04:05"), Some(at));
        assert_eq!(from_text("2026-01-02T03:04:05Z"), Some(at));
        assert_eq!(from_text("2026-01-02 04:04:05+01:00"), Some(at));
        assert_eq!(from_text("2026-01-02T08:04:05+05"), Some(at));
        assert_eq!(from_text("yesterday"), None);
    }
}
