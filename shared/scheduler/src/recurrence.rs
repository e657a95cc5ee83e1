//! When a job runs again: never, every N seconds, or on a 5-field cron expression in an IANA time zone.
//!
//! Missed slots are skipped, as in MiniBot: after a fire, an interval job moves to the first `run_at + k·interval`
//! after now, and a cron job to its first occurrence after `max(run_at, now)`. A job that was due while nothing
//! ran fires once, not once per missed slot. Cron times are computed in the job's zone by `croner`, which runs a
//! fixed-time job once on the day the clocks go back (the first of the two 02:30s) and at the first valid minute
//! on the day they go forward.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq)]
pub enum Recurrence {
    None,
    Interval { seconds: u64 },
    Cron { expression: String, zone: Tz },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecurrenceError {
    #[error("`{0}` is not a 5-field cron expression (minute hour day-of-month month day-of-week)")]
    CronFields(String),
    #[error("`{expression}` is not a valid cron expression: {reason}")]
    Cron { expression: String, reason: String },
    #[error("`{0}` is not an IANA time zone name such as `Europe/Madrid` or `UTC`")]
    Zone(String),
    #[error("cron expression `{0}` never matches a date")]
    NeverMatches(String),
    #[error("an interval of {0} seconds is longer than the {MAX_INTERVAL_SECONDS} seconds (10 years) a job may wait")]
    IntervalTooLong(u64),
    #[error("the next run is beyond any date this version can store")]
    OutOfRange,
}

/// The longest interval a job may have: ten years. Longer ones are typos, and would overflow time arithmetic.
pub const MAX_INTERVAL_SECONDS: u64 = 10 * 365 * 86_400;

impl Recurrence {
    /// A cron recurrence, checked: exactly 5 fields (MiniBot's croniter form; croner would also take seconds and
    /// years), and a zone from the IANA database (`None`: UTC).
    pub fn cron(expression: &str, zone: Option<&str>) -> Result<Self, RecurrenceError> {
        let expression = expression.split_whitespace().collect::<Vec<_>>().join(" ");
        if expression.split(' ').count() != 5 {
            return Err(RecurrenceError::CronFields(expression));
        }
        let zone = match zone.map(str::trim).filter(|z| !z.is_empty()) {
            None => Tz::UTC,
            Some(name) => Tz::from_str(name).map_err(|_| RecurrenceError::Zone(name.to_string()))?,
        };
        let recurrence = Self::Cron { expression, zone };
        recurrence.parsed_cron()?;
        Ok(recurrence)
    }

    fn parsed_cron(&self) -> Result<Option<Cron>, RecurrenceError> {
        let Self::Cron { expression, .. } = self else { return Ok(None) };
        Cron::from_str(expression)
            .map(Some)
            .map_err(|e| RecurrenceError::Cron { expression: expression.clone(), reason: e.to_string() })
    }

    /// MiniBot's name of the kind: `none`, `interval` or `cron`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Interval { .. } => "interval",
            Self::Cron { .. } => "cron",
        }
    }

    /// The first cron occurrence at or after `from` (a new cron job's first run).
    pub fn first_at_or_after(&self, from: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, RecurrenceError> {
        self.occurrence(from, true)
    }

    /// The run after a fire of the slot `run_at`, at `now`; `None` for a one-off.
    pub fn next_after_fire(
        &self,
        run_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, RecurrenceError> {
        match self {
            Self::None => Ok(None),
            Self::Interval { seconds } if *seconds > MAX_INTERVAL_SECONDS => {
                Err(RecurrenceError::IntervalTooLong(*seconds))
            }
            Self::Interval { seconds } => {
                let step = i64::try_from((*seconds).max(1)).unwrap_or(i64::MAX);
                let behind = (now - run_at).num_seconds().max(0);
                // The first `run_at + k·step` strictly after now, k ≥ 1.
                let k = behind / step + 1;
                chrono::Duration::try_seconds(k.saturating_mul(step))
                    .and_then(|ahead| run_at.checked_add_signed(ahead))
                    .map(Some)
                    .ok_or(RecurrenceError::OutOfRange)
            }
            Self::Cron { .. } => self.occurrence(run_at.max(now), false),
        }
    }

    fn occurrence(&self, from: DateTime<Utc>, inclusive: bool) -> Result<Option<DateTime<Utc>>, RecurrenceError> {
        let (Some(cron), Self::Cron { zone, expression }) = (self.parsed_cron()?, self) else {
            return Ok(Some(from));
        };
        let local = from.with_timezone(zone);
        match cron.find_next_occurrence(&local, inclusive) {
            Ok(next) => Ok(Some(next.with_timezone(&Utc))),
            Err(croner::errors::CronError::TimeSearchLimitExceeded) => {
                Err(RecurrenceError::NeverMatches(expression.clone()))
            }
            Err(error) => Err(RecurrenceError::Cron { expression: expression.clone(), reason: error.to_string() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn interval_skips_missed_slots() {
        let every = Recurrence::Interval { seconds: 3600 };
        let run_at = utc(2026, 1, 1, 9, 0);
        // Fired on time: the next slot.
        assert_eq!(every.next_after_fire(run_at, run_at).unwrap(), Some(utc(2026, 1, 1, 10, 0)));
        // Fired 5 h 30 min late: one fire, then the next slot after now.
        let late = run_at + chrono::Duration::minutes(330);
        assert_eq!(every.next_after_fire(run_at, late).unwrap(), Some(utc(2026, 1, 1, 15, 0)));
    }

    #[test]
    fn cron_moves_from_the_later_of_slot_and_now() {
        let daily = Recurrence::cron("0 9 * * *", None).unwrap();
        let run_at = utc(2026, 1, 1, 9, 0);
        assert_eq!(daily.next_after_fire(run_at, run_at).unwrap(), Some(utc(2026, 1, 2, 9, 0)));
        // Down for three days: one fire, then tomorrow.
        let now = utc(2026, 1, 4, 12, 0);
        assert_eq!(daily.next_after_fire(run_at, now).unwrap(), Some(utc(2026, 1, 5, 9, 0)));
        assert_eq!(daily.first_at_or_after(utc(2026, 1, 1, 9, 0)).unwrap(), Some(utc(2026, 1, 1, 9, 0)));
    }

    #[test]
    fn cron_runs_in_its_zone() {
        let madrid = Recurrence::cron("0 9 * * *", Some("Europe/Madrid")).unwrap();
        // 09:00 in Madrid is 08:00 UTC in winter.
        assert_eq!(madrid.first_at_or_after(utc(2026, 1, 1, 0, 0)).unwrap(), Some(utc(2026, 1, 1, 8, 0)));
        // and 07:00 UTC in summer.
        assert_eq!(madrid.first_at_or_after(utc(2026, 7, 1, 0, 0)).unwrap(), Some(utc(2026, 7, 1, 7, 0)));
    }

    /// The day the clocks go back, 02:30 happens twice in Berlin; the job runs once.
    #[test]
    fn a_daily_job_fires_once_when_the_clocks_go_back() {
        let job = Recurrence::cron("30 2 * * *", Some("Europe/Berlin")).unwrap();
        // 2026-10-25: CEST→CET at 03:00 local. The first 02:30 is 00:30 UTC, the second 01:30 UTC.
        let first = job.first_at_or_after(utc(2026, 10, 24, 12, 0)).unwrap().unwrap();
        assert_eq!(first, utc(2026, 10, 25, 0, 30));
        let next = job.next_after_fire(first, first).unwrap().unwrap();
        assert_eq!(next, utc(2026, 10, 26, 1, 30), "not again at the second 02:30");
    }

    /// The day the clocks go forward there is no 02:30 in Berlin; the job still runs that day, once.
    #[test]
    fn a_daily_job_fires_once_when_the_clocks_go_forward() {
        let job = Recurrence::cron("30 2 * * *", Some("Europe/Berlin")).unwrap();
        let before = utc(2026, 3, 28, 1, 30); // 02:30 CET the day before
        let on_the_day = job.next_after_fire(before, before).unwrap().unwrap();
        assert!(on_the_day > utc(2026, 3, 29, 0, 0) && on_the_day < utc(2026, 3, 30, 0, 0), "{on_the_day}");
        let after = job.next_after_fire(on_the_day, on_the_day).unwrap().unwrap();
        assert_eq!(after, utc(2026, 3, 30, 0, 30), "02:30 CEST the day after");
    }

    #[test]
    fn an_interval_too_long_to_compute_is_an_error_not_a_panic() {
        let run_at = utc(2026, 1, 1, 9, 0);
        let huge = Recurrence::Interval { seconds: 10_000_000_000_000_000 };
        assert_eq!(huge.next_after_fire(run_at, run_at), Err(RecurrenceError::IntervalTooLong(10_000_000_000_000_000)));
        let near_the_end = DateTime::<Utc>::MAX_UTC - chrono::Duration::days(1);
        let yearly = Recurrence::Interval { seconds: MAX_INTERVAL_SECONDS };
        assert_eq!(yearly.next_after_fire(near_the_end, near_the_end), Err(RecurrenceError::OutOfRange));
    }

    #[test]
    fn bad_expressions_and_zones_are_named() {
        assert_eq!(Recurrence::cron("0 9 * *", None), Err(RecurrenceError::CronFields("0 9 * *".into())));
        assert!(matches!(Recurrence::cron("0 0 9 * * *", None), Err(RecurrenceError::CronFields(_))));
        assert!(matches!(Recurrence::cron("61 9 * * *", None), Err(RecurrenceError::Cron { .. })));
        assert_eq!(
            Recurrence::cron("0 9 * * *", Some("Mars/Olympus")),
            Err(RecurrenceError::Zone("Mars/Olympus".into()))
        );
    }
}
