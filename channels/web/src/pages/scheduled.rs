//! /scheduled: the owner's scheduled prompts (`[scheduler.prompts]`) in every chat, active ones first; `?all=1`
//! adds completed, failed and cancelled ones; paged with `?offset=`.

use super::browse::{self, BadParam, count, pager, when};
use super::layout::page;
use crate::readers::{Readers, Rows, ScheduledRow};
use crate::state::WebState;
use actix_web::{HttpResponse, http::StatusCode, web};
use maud::{Markup, html};
use serde::Deserialize;

const TITLE: &str = "Scheduled prompts";
const PATH: &str = "/scheduled";
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 200;

#[derive(Debug, Default, Deserialize)]
pub struct ScheduledQuery {
    pub all: Option<String>,
    pub offset: Option<String>,
    pub limit: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Params {
    pub all: bool,
    pub offset: u64,
    pub limit: u32,
}

pub fn parse(query: &ScheduledQuery) -> Result<Params, BadParam> {
    Ok(Params {
        all: browse::flag(query.all.as_deref(), "all")?.unwrap_or(false),
        offset: browse::offset(query.offset.as_deref(), "offset")?,
        limit: browse::limit(query.limit.as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?,
    })
}

pub async fn handler(state: web::Data<WebState>, query: web::Query<ScheduledQuery>) -> HttpResponse {
    respond(&state.readers, !state.credentials.is_open(), &query).await
}

pub async fn respond(readers: &Readers, signed_in: bool, query: &ScheduledQuery) -> HttpResponse {
    let params = match parse(query) {
        Ok(params) => params,
        Err(bad) => return browse::bad_request(TITLE, PATH, signed_in, &bad),
    };
    match readers.scheduled(!params.all, params.limit, params.offset).await {
        Ok(jobs) => browse::html_response(StatusCode::OK, page(TITLE, PATH, signed_in, render(&params, &jobs))),
        Err(error) => browse::read_failed(TITLE, PATH, signed_in, &error),
    }
}

pub fn render(params: &Params, jobs: &Rows<ScheduledRow>) -> Markup {
    let keep = [("all", if params.all { "1".to_string() } else { String::new() })];
    html! {
        h1 { (TITLE) }
        p #total {
            (count(jobs.total, if params.all { "prompt" } else { "active prompt" }, if params.all { "prompts" } else { "active prompts" }))
            " · "
            @if params.all { a href=(PATH) { "Active only" } } @else { a href={ (PATH) "?all=1" } { "Show all" } }
        }
        @if !jobs.rows.is_empty() {
            table #scheduled {
                thead { tr { th { "Prompt" } th { "Kind" } th { "Next run" } th { "Recurrence" } th { "Status" } th { "Chat" } } }
                tbody { @for job in &jobs.rows { (row(job)) } }
            }
        }
        (pager(PATH, &keep, "offset", params.offset, params.limit, jobs.rows.len(), Some(jobs.total)))
    }
}

fn row(job: &ScheduledRow) -> Markup {
    let chat = match job.chat_id {
        Some(chat) => format!("{}:{chat}", job.channel),
        None => job.channel.clone(),
    };
    html! {
        tr {
            td.text { (job.content) }
            td { (kind(job)) }
            td { @if job.is_active() { (when(&job.run_at)) } @else { "—" } }
            td { (recurrence(job)) }
            td {
                (job.status)
                @if let Some(error) = &job.last_error { br; small.error { (error) } }
            }
            td { code { (chat) } }
        }
    }
}

fn kind(job: &ScheduledRow) -> &'static str {
    match job.recurrence.as_str() {
        "interval" => "repeating",
        "cron" => "cron",
        _ => "once",
    }
}

/// `every 3600 s`, `0 9 * * 1-5`, `—`; with `until …` when it ends.
fn recurrence(job: &ScheduledRow) -> String {
    let rule = match job.recurrence.as_str() {
        "interval" => job.interval_seconds.map_or("every ? s".into(), |s| format!("every {s} s")),
        "cron" => job.cron_expression.clone().unwrap_or_default(),
        _ => return "—".into(),
    };
    match &job.end_at {
        Some(end) => format!("{rule}, until {}", when(end)),
        None => rule,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use chrono::{Duration, Utc};
    use minibot_scheduler::{NewJob, Recurrence, SchedulerStore, StoreSettings, Target};
    use std::sync::Arc;

    use super::browse::status_and_text as text;

    fn query(all: Option<&str>) -> ScheduledQuery {
        ScheduledQuery { all: all.map(Into::into), offset: None, limit: None }
    }

    #[tokio::test]
    async fn jobs_show_their_kind_next_run_and_chat() {
        let dir = tempfile::tempdir().unwrap();
        let config = minibot_config::Config::from_toml("", "t.toml", dir.path(), &|_| None).unwrap();
        let path =
            config.resolve_path(&minibot_config::sqlite_path_from_url(&config.scheduler.prompts.sqlite_url).unwrap());
        let readers = Readers::new(Arc::new(config.clone()), None);
        let (status, page) = text(respond(&readers, false, &query(None)).await).await;
        assert_eq!(status, StatusCode::OK, "no file yet is no prompts");
        assert!(page.contains("0 active prompts"), "{page}");
        assert!(!path.exists(), "reading does not create the file");

        let settings = StoreSettings { batch_size: 10, lease: std::time::Duration::from_secs(60) };
        let store = SchedulerStore::open(&path, 2, settings).await.unwrap();
        let target = Target {
            owner_id: config.runtime.owner_id.clone(),
            channel: "telegram".into(),
            chat_id: 42,
            user_id: None,
        };
        let now = Utc::now();
        let job = |content: &str, recurrence| NewJob {
            target: target.clone(),
            role: "user".into(),
            content: content.into(),
            run_at: now + Duration::hours(1),
            metadata: serde_json::json!({}),
            recurrence,
            end_at: None,
            time_zone: None,
            max_attempts: 3,
        };
        store
            .create(job("<script>water the plants</script>", Recurrence::Interval { seconds: 3600 }), now)
            .await
            .unwrap();
        let once = store.create(job("call mum", Recurrence::None), now).await.unwrap();
        store.cancel(&target, &once.id, now).await.unwrap();
        store.close().await;

        let (_, page) = text(respond(&readers, false, &query(None)).await).await;
        assert!(
            page.contains("1 active prompt") && page.contains("every 3600 s") && page.contains("telegram:42"),
            "{page}"
        );
        assert!(page.contains("&lt;script&gt;water") && !page.contains("<script>"), "{page}");
        assert!(!page.contains("call mum"), "a cancelled prompt is not active");
        let (_, page) = text(respond(&readers, false, &query(Some("1"))).await).await;
        assert!(page.contains("2 prompts") && page.contains("call mum") && page.contains("cancelled"), "{page}");
        let (status, page) = text(respond(&readers, false, &query(Some("everything"))).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(page.contains("all must be 1 or 0, not `everything`"), "{page}");
        readers.close().await;
    }

    #[tokio::test]
    async fn scheduled_prompts_off_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let config = "[scheduler.prompts]\nenabled = false\n";
        let config = minibot_config::Config::from_toml(config, "t.toml", dir.path(), &|_| None).unwrap();
        let readers = Readers::new(Arc::new(config), None);
        let (status, page) = text(respond(&readers, false, &query(None)).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("Scheduled prompts are off: [scheduler.prompts] enabled = false"), "{page}");
    }
}
