//! Scheduled prompts (`[scheduler.prompts]`): the job store ([`SchedulerStore`], MiniBot's `scheduled_prompts`
//! table plus the fires in flight), recurrence rules ([`Recurrence`]: one-off, interval, 5-field cron in an IANA
//! zone), and the [`Engine`] that sleeps until the next due job and fires each exactly once.
//!
//! Exactly once, across processes and crashes: a due job's move to its next run and the fire row that carries
//! its prompt are one transaction, so two processes on one file cannot both fire a slot. The fire row stays until
//! the chat's store has taken the turn under the fire's id, and that store records the id in the same
//! transaction as the turn, so a fire delivered twice (a crash between the two commits) starts one turn.
//! The tools that create and list jobs live in `minibot-tools`; the process side (which chat, which channel) in
//! the orchestrator.

pub mod clock;
mod engine;
mod job;
mod recurrence;
mod store;
pub mod time_text;

pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{Deliver, Engine, LATE_NOTICE_AFTER, Wake};
pub use job::{Fire, Job, JobStatus, NewJob, Target};
pub use recurrence::{MAX_INTERVAL_SECONDS, Recurrence, RecurrenceError};
pub use store::{AfterFailure, ListQuery, Removed, SchedulerStore, StoreError, StoreSettings, retry_delay};

/// The text a fire's turn starts with, MiniBot's words, so prompts written for MiniBot behave the same.
pub const FIRE_PREFIX: &str = "The user scheduled a prompt for this time with the following instructions. Fulfill them \
     now and use tools if required:\n";

/// The user message a fire becomes: MiniBot's prefix and the prompt, with a note when it runs late.
pub fn fire_text(fire: &Fire, late_by: Option<std::time::Duration>) -> String {
    let mut text = String::from(FIRE_PREFIX);
    text.push_str(&fire.content);
    if let Some(late) = late_by {
        text.push_str(&format!(
            "\n\n(Note: this prompt was due at {} and runs {} late, because the assistant was not running or could \
             not deliver it then. Take that into account.)",
            time_text::iso(fire.due_at),
            human_duration(late)
        ));
    }
    text
}

/// `3 h 12 min`, `45 s`, `2 d 4 h`, `2 h`: the largest unit and the next one down, when that is not zero.
pub fn human_duration(duration: std::time::Duration) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "min"), (1, "s")];
    let secs = duration.as_secs();
    let index = UNITS.iter().position(|(size, _)| secs >= *size).unwrap_or(UNITS.len() - 1);
    let (size, name) = UNITS[index];
    let mut text = format!("{} {name}", secs / size);
    if let Some((next, next_name)) = UNITS.get(index + 1) {
        let minor = secs % size / next;
        if minor > 0 {
            text.push_str(&format!(" {minor} {next_name}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::human_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_in_two_units() {
        assert_eq!(human_duration(Duration::from_secs(45)), "45 s");
        assert_eq!(human_duration(Duration::from_secs(3 * 3600 + 12 * 60 + 5)), "3 h 12 min");
        assert_eq!(human_duration(Duration::from_secs(2 * 86_400 + 4 * 3600)), "2 d 4 h");
        assert_eq!(human_duration(Duration::from_secs(0)), "0 s");
        assert_eq!(human_duration(Duration::from_secs(7203)), "2 h", "not `2 h 3 s`");
    }
}
