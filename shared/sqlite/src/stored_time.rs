//! Times as minibot's SQLite tables store them: UTC text in SQLAlchemy's layout (`2026-12-04 09:00:00.000000`),
//! MiniBot's own, so its files read as they are. The layout is fixed-width, so text order is time order and
//! `run_at <= ?` or `expires_at > ?` compare correctly in SQL, for as long as every row keeps the layout (up to
//! the year 9999; [`GLOB`] tells rows in it from the rest).

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

const LAYOUT: &str = "%Y-%m-%d %H:%M:%S%.6f";

/// The stored layout as a SQLite GLOB pattern: a value matching it compares as time.
pub const GLOB: &str =
    "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]";

/// The last year a stored time may have: past it the text (`+10000-…`) no longer sorts as time.
pub const LAST_YEAR: i32 = 9999;

/// `at` as a column value.
pub fn to_text(at: DateTime<Utc>) -> String {
    at.format(LAYOUT).to_string()
}

/// A time as a caller, MiniBot or another program wrote it: RFC 3339; date and time with `T` or a space, with or
/// without seconds and fraction, with an offset (`+01:00`, `+01`, converted to UTC) or without (taken as UTC, as
/// MiniBot does); or a bare date (midnight UTC).
pub fn from_text(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    let text = text.replacen('T', " ", 1);
    // With an offset first: a naive parse would read the time and drop the offset.
    let with_offset = ["%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%d %H:%M%#z"]
        .iter()
        .find_map(|layout| DateTime::parse_from_str(&text, layout).ok().map(|at| at.with_timezone(&Utc)));
    with_offset
        .or_else(|| {
            ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"]
                .iter()
                .find_map(|layout| NaiveDateTime::parse_from_str(&text, layout).ok().map(|n| n.and_utc()))
        })
        .or_else(|| {
            let date = text.strip_suffix('Z').unwrap_or(&text);
            NaiveDate::parse_from_str(date, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)).map(|n| n.and_utc())
        })
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
    fn every_layout_others_write_reads() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        for text in [
            "2026-01-02 03:04:05",
            "2026-01-02T03:04:05Z",
            "2026-01-02 04:04:05+01:00",
            "2026-01-02T08:04:05+05",
            "2026-01-02T03:04:05.000",
        ] {
            assert_eq!(from_text(text), Some(at), "{text}");
        }
        assert_eq!(from_text("2026-01-02 03:04"), Some(at - chrono::Duration::seconds(5)));
        assert_eq!(from_text("2026-01-02"), Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).single());
        assert_eq!(from_text("yesterday"), None);
    }
}
