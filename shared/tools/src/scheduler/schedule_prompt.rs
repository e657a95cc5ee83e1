//! `schedule_prompt`: a prompt that comes back to this chat as a new turn at a time, once or again and again.

use super::{SchedulerService, store_error, target};
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use minibot_agent::{Tool, ToolContext, ToolResult, excerpt};
use minibot_scheduler::time_text::iso;
use minibot_scheduler::{NewJob, Recurrence};
use serde::Deserialize;
use serde_json::{Value, json};
use std::str::FromStr;
use std::sync::Arc;

/// The longest prompt a job keeps: a reminder, not a document.
const MAX_CONTENT_CHARS: usize = 8_000;
/// Active jobs one chat may hold; past it the model is told to clean up first (a loop that schedules without end
/// would otherwise fill the database).
const MAX_ACTIVE_PER_CHAT: i64 = 500;
/// The most bytes of `metadata` a job keeps (as JSON).
const MAX_METADATA_BYTES: usize = 4_096;
/// The latest a job may first run: a `run_at` beyond is a typo (a year 20260).
const MAX_YEARS_AHEAD: i64 = 100;

tool_struct!(SchedulePrompt { service: Arc<SchedulerService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    content: String,
    #[serde(default)]
    run_at: Option<String>,
    #[serde(default)]
    delay_seconds: Option<i64>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    recurrence_type: Option<String>,
    #[serde(default)]
    recurrence_interval_seconds: Option<i64>,
    #[serde(default)]
    recurrence_cron_expression: Option<String>,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    recurrence_end_at: Option<String>,
}

impl Tool for SchedulePrompt {
    type Args = Args;

    fn name(&self) -> &str {
        "schedule_prompt"
    }

    fn description(&self) -> String {
        format!(
            "Schedule a prompt that comes back to this chat as a new message at a given time, once or repeatedly \
             (a reminder, a daily check). Give `run_at` (ISO 8601) or `delay_seconds` for a one-off. For a repeat, \
             give `recurrence_interval_seconds` (at least {}) or a 5-field `recurrence_cron_expression` (minute \
             hour day-of-month month day-of-week) evaluated in `time_zone` (an IANA name such as `Europe/Madrid`; \
             UTC when omitted); a cron job first runs at its first match at or after `run_at` (or now). A `run_at` \
             without an offset is read in `time_zone`. Missed runs are not repeated: a job that was due while the \
             assistant was down runs once, saying how late. `role` is stored for compatibility; every scheduled \
             prompt arrives as a user message.",
            self.service.min_interval_seconds
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "content": { "type": "string", "description": "What to do when the time comes, as instructions to yourself." },
                "run_at": { "type": ["string", "null"], "description": "When to run first, ISO 8601 (`2026-12-24T09:00:00+01:00`). A past time means now." },
                "delay_seconds": { "type": ["integer", "null"], "minimum": 1, "description": "Run this many seconds from now instead of at `run_at`." },
                "role": { "type": ["string", "null"], "enum": ["user", "system", "developer", "agent", null] },
                "metadata": { "type": ["object", "null"], "description": "Free-form notes kept with the job." },
                "recurrence_type": { "type": ["string", "null"], "enum": ["none", "interval", "cron", null], "description": "Inferred from the fields below when omitted." },
                "recurrence_interval_seconds": { "type": ["integer", "null"], "minimum": self.service.min_interval_seconds },
                "recurrence_cron_expression": { "type": ["string", "null"], "description": "5 fields: minute hour day-of-month month day-of-week, e.g. `0 9 * * 1-5`." },
                "time_zone": { "type": ["string", "null"], "description": "IANA zone for the cron expression and for a `run_at` without offset; default UTC." },
                "recurrence_end_at": { "type": ["string", "null"], "description": "ISO 8601; no run after this time." }
            },
            "required": ["content"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let target = target(ctx)?;
        let now = Utc::now();
        let job = match self.job(args, target, now) {
            Ok(job) => job,
            Err(refusal) => return Ok(refusal.into_result()),
        };
        let job = match self.service.store.create_within(job, now, MAX_ACTIVE_PER_CHAT).await.map_err(store_error)? {
            Ok(job) => job,
            Err(active) => {
                return Ok(Refusal::new(
                    "scheduler:too_many_jobs",
                    format!(
                        "this chat already has {active} active scheduled prompts (the most is {MAX_ACTIVE_PER_CHAT}); \
                         cancel or delete some first"
                    ),
                )
                .into_result());
            }
        };
        self.service.wake.wake();
        let mut result = json!({
            "scheduled": true,
            "job_id": job.id,
            "status": job.status.as_str(),
            "run_at": iso(job.run_at),
            "channel": job.target.channel,
            "recurrence": job.recurrence_kind,
        });
        if let Some(seconds) = job.interval_seconds {
            result["recurrence_interval_seconds"] = json!(seconds);
        }
        if let Some(expression) = &job.cron_expression {
            result["recurrence_cron_expression"] = json!(expression);
        }
        if let Some(zone) = job.time_zone.as_deref().and_then(|z| Tz::from_str(z).ok()) {
            result["time_zone"] = json!(zone.name());
            result["run_at_local"] = json!(job.run_at.with_timezone(&zone).to_rfc3339());
        }
        if let Some(end) = job.end_at {
            result["recurrence_end_at"] = json!(iso(end));
        }
        Ok(result)
    }
}

/// An argument the job cannot be built from: MiniBot's `{scheduled: false, error}`, with `ok` and a code.
struct Refusal {
    code: &'static str,
    message: String,
}

impl Refusal {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new("scheduler:invalid_arguments", message)
    }

    fn into_result(self) -> Value {
        json!({ "ok": false, "scheduled": false, "error_code": self.code, "error": self.message })
    }
}

impl SchedulePrompt {
    fn job(&self, args: Args, target: minibot_scheduler::Target, now: DateTime<Utc>) -> Result<NewJob, Refusal> {
        let content = args.content.trim().to_string();
        if content.is_empty() {
            return Err(Refusal::invalid("content is empty: say what should happen when the time comes"));
        }
        if content.chars().count() > MAX_CONTENT_CHARS {
            return Err(Refusal::invalid(format!("content is longer than {MAX_CONTENT_CHARS} characters")));
        }
        let role = args.role.clone().unwrap_or_else(|| "user".into());
        if !["user", "system", "developer", "agent"].contains(&role.as_str()) {
            return Err(Refusal::invalid(format!(
                "role `{}` is not one of user, system, developer, agent",
                excerpt(&role)
            )));
        }
        let metadata = match args.metadata.clone() {
            None | Some(Value::Null) => json!({}),
            // As a JSON object, or (as some models write objects) as its JSON text.
            Some(Value::String(text)) if text.trim().is_empty() => json!({}),
            Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
                Ok(object @ Value::Object(_)) if object.to_string().len() <= MAX_METADATA_BYTES => object,
                Ok(Value::Object(_)) => {
                    return Err(Refusal::invalid(format!(
                        "metadata is larger than {MAX_METADATA_BYTES} bytes as JSON"
                    )));
                }
                _ => return Err(Refusal::invalid("metadata must be a JSON object")),
            },
            Some(object @ Value::Object(_)) if object.to_string().len() <= MAX_METADATA_BYTES => object,
            Some(Value::Object(_)) => {
                return Err(Refusal::invalid(format!("metadata is larger than {MAX_METADATA_BYTES} bytes as JSON")));
            }
            Some(_) => return Err(Refusal::invalid("metadata must be a JSON object")),
        };
        let zone = match args.time_zone.as_deref().map(str::trim).filter(|z| !z.is_empty()) {
            None => None,
            Some(name) => Some(Tz::from_str(name).map_err(|_| {
                Refusal::invalid(format!(
                    "time_zone `{}` is not an IANA time zone name such as `Europe/Madrid` or `UTC`",
                    excerpt(name)
                ))
            })?),
        };
        let recurrence = self.recurrence(&args, zone)?;
        let start = match (args.run_at.as_deref().filter(|t| !t.trim().is_empty()), args.delay_seconds) {
            (Some(_), Some(_)) => return Err(Refusal::invalid("give run_at or delay_seconds, not both")),
            (Some(text), None) => Some(parse_time("run_at", text, zone)?.max(now)),
            (None, Some(delay)) if (1..=MAX_YEARS_AHEAD * 365 * 86_400).contains(&delay) => {
                Some(now + chrono::Duration::seconds(delay))
            }
            (None, Some(delay)) if delay > 0 => {
                return Err(Refusal::invalid(format!(
                    "delay_seconds must be at most {} ({MAX_YEARS_AHEAD} years), got {delay}",
                    MAX_YEARS_AHEAD * 365 * 86_400
                )));
            }
            (None, Some(delay)) => {
                return Err(Refusal::invalid(format!("delay_seconds must be 1 or more, got {delay}")));
            }
            (None, None) => None,
        };
        let run_at = match (&recurrence, start) {
            (Recurrence::None, None) => {
                return Err(Refusal::invalid("a one-off prompt needs run_at or delay_seconds"));
            }
            (Recurrence::None, Some(start)) => start,
            (Recurrence::Interval { seconds }, start) => match start {
                Some(start) => start,
                // Bounded by MAX_INTERVAL_SECONDS above, so this cannot overflow; checked all the same.
                None => i64::try_from(*seconds)
                    .ok()
                    .and_then(chrono::Duration::try_seconds)
                    .and_then(|step| now.checked_add_signed(step))
                    .ok_or_else(|| Refusal::invalid("recurrence_interval_seconds is too large"))?,
            },
            (Recurrence::Cron { .. }, start) => recurrence
                .first_at_or_after(start.unwrap_or(now))
                .map_err(|e| Refusal::invalid(e.to_string()))?
                .ok_or_else(|| Refusal::invalid("the cron expression has no time to run at"))?,
        };
        if run_at > now + chrono::Duration::days(MAX_YEARS_AHEAD * 366) {
            return Err(Refusal::invalid(format!("run_at {} is more than {MAX_YEARS_AHEAD} years ahead", iso(run_at))));
        }
        let end_at = match args.recurrence_end_at.as_deref().filter(|t| !t.trim().is_empty()) {
            None => None,
            Some(text) => {
                let end = parse_time("recurrence_end_at", text, zone)?;
                if end <= run_at {
                    return Err(Refusal::invalid(format!(
                        "recurrence_end_at {} must be after the first run at {}",
                        iso(end),
                        iso(run_at)
                    )));
                }
                Some(end)
            }
        };
        if end_at.is_some() && recurrence == Recurrence::None {
            return Err(Refusal::invalid("recurrence_end_at only applies to a repeating prompt"));
        }
        Ok(NewJob {
            target,
            role,
            content,
            run_at,
            metadata,
            recurrence,
            end_at,
            time_zone: zone,
            max_attempts: self.service.max_attempts.max(1),
        })
    }

    fn recurrence(&self, args: &Args, zone: Option<Tz>) -> Result<Recurrence, Refusal> {
        let interval = args.recurrence_interval_seconds;
        let cron = args.recurrence_cron_expression.as_deref().map(str::trim).filter(|c| !c.is_empty());
        let kind = match args.recurrence_type.as_deref().map(str::trim) {
            Some("none") | Some("") => "none",
            Some("interval") => "interval",
            Some("cron") => "cron",
            Some(other) => {
                return Err(Refusal::invalid(format!(
                    "recurrence_type `{}` is not one of none, interval, cron",
                    excerpt(other)
                )));
            }
            None => match (interval, cron) {
                (Some(_), Some(_)) => {
                    return Err(Refusal::invalid(
                        "give recurrence_interval_seconds or recurrence_cron_expression, not both",
                    ));
                }
                (Some(_), None) => "interval",
                (None, Some(_)) => "cron",
                (None, None) => "none",
            },
        };
        match kind {
            "interval" => {
                let seconds = interval
                    .ok_or_else(|| Refusal::invalid("recurrence_type interval needs recurrence_interval_seconds"))?;
                let min = i64::try_from(self.service.min_interval_seconds).unwrap_or(i64::MAX);
                let max = i64::try_from(minibot_scheduler::MAX_INTERVAL_SECONDS).unwrap_or(i64::MAX);
                if seconds > max {
                    return Err(Refusal::invalid(format!(
                        "recurrence_interval_seconds must be at most {max} (10 years), got {seconds}"
                    )));
                }
                if seconds < min {
                    return Err(Refusal::invalid(format!(
                        "recurrence_interval_seconds must be at least {min} \
                         ([scheduler.prompts] min_recurrence_interval_seconds), got {seconds}"
                    )));
                }
                Ok(Recurrence::Interval { seconds: seconds.unsigned_abs() })
            }
            "cron" => {
                let expression =
                    cron.ok_or_else(|| Refusal::invalid("recurrence_type cron needs recurrence_cron_expression"))?;
                Recurrence::cron(expression, zone.map(|z| z.name())).map_err(|e| Refusal::invalid(e.to_string()))
            }
            _ if interval.is_some() || cron.is_some() => {
                Err(Refusal::invalid("recurrence_type none takes no interval or cron expression"))
            }
            _ => Ok(Recurrence::None),
        }
    }
}

/// An ISO 8601 time: with an offset as written, without one in `zone` (UTC when none).
fn parse_time(field: &str, text: &str, zone: Option<Tz>) -> Result<DateTime<Utc>, Refusal> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let naive = text.replacen(' ', "T", 1);
    let parsed = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|layout| NaiveDateTime::parse_from_str(&naive, layout).ok())
        .or_else(|| chrono::NaiveDate::parse_from_str(&naive, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)));
    let Some(local) = parsed else {
        return Err(Refusal::invalid(format!(
            "{field} `{}` is not an ISO 8601 time such as 2026-12-24T09:00:00Z",
            excerpt(text)
        )));
    };
    let zone = zone.unwrap_or(Tz::UTC);
    // The earlier of two readings when the clocks go back; a time skipped when they go forward is refused.
    zone.from_local_datetime(&local).earliest().map(|at| at.with_timezone(&Utc)).ok_or_else(|| {
        Refusal::invalid(format!("{field} `{}` does not exist in {} (the clocks skip it)", excerpt(text), zone.name()))
    })
}
