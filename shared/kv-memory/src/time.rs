//! Timestamps as the `kv_memory` table holds them. MiniBot's SQLAlchemy columns store UTC as
//! `YYYY-MM-DD HH:MM:SS.ffffff` (no offset); this store writes the same text, so the comparisons the queries make
//! (`updated_at >= ?`, `expires_at <= ?`) are plain text comparisons that hold for old and new rows alike.

use chrono::{DateTime, SecondsFormat, Utc};

pub use minibot_sqlite::stored_time::{LAST_YEAR, from_text as parse, to_text as stored};

/// A column value read back, in the ISO form MiniBot's results use (`2025-01-02T03:04:05.678901+00:00`, the
/// fraction left out when it is zero). Text that is not a timestamp is returned as it is: a row is never hidden
/// because one of its dates is odd.
pub fn iso_from_stored(raw: &str) -> String {
    match parse(raw) {
        Some(at) => iso(at),
        None => raw.to_string(),
    }
}

/// Python's `datetime.isoformat()` of a UTC time.
pub fn iso(at: DateTime<Utc>) -> String {
    let format = if at.timestamp_subsec_micros() == 0 { SecondsFormat::Secs } else { SecondsFormat::Micros };
    at.to_rfc3339_opts(format, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn reads_what_callers_write_and_what_minibot_stored() {
        let expected = Utc.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).single().unwrap();
        for text in [
            "2025-03-04T05:06:07Z",
            "2025-03-04T05:06:07+00:00",
            "2025-03-04T07:06:07+02:00",
            "2025-03-04 05:06:07.000000",
            "2025-03-04T05:06:07",
            " 2025-03-04 05:06:07 ",
        ] {
            assert_eq!(parse(text), Some(expected), "{text}");
        }
        assert_eq!(parse("2025-03-04"), Utc.with_ymd_and_hms(2025, 3, 4, 0, 0, 0).single());
        assert_eq!(parse("2025-03-04T05:06"), Utc.with_ymd_and_hms(2025, 3, 4, 5, 6, 0).single());
        for bad in ["", "tomorrow", "2025-13-01", "04/03/2025"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn stored_text_sorts_like_time_and_reads_back_as_python_isoformat() {
        let at = Utc.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).single().unwrap();
        assert_eq!(stored(at), "2025-03-04 05:06:07.000000");
        assert_eq!(iso_from_stored(&stored(at)), "2025-03-04T05:06:07+00:00");
        let later = at + chrono::Duration::microseconds(5);
        assert_eq!(iso_from_stored(&stored(later)), "2025-03-04T05:06:07.000005+00:00");
        assert!(stored(later) > stored(at));
        assert_eq!(iso_from_stored("not a date"), "not a date");
    }
}
