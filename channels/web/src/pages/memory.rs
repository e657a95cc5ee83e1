//! /memory: the owner's memory entries (`[tools.kv_memory]`), newest update first, or those matching `?q=` as the
//! `memory_search` tool finds them; paged with `?offset=`.

use super::browse::{self, BadParam, count, pager, when};
use super::layout::page;
use crate::readers::Readers;
use crate::state::WebState;
use actix_web::{HttpResponse, http::StatusCode, web};
use maud::{Markup, html};
use minibot_kv_memory::{Entry, Page};
use serde::Deserialize;

const TITLE: &str = "Memory";
const PATH: &str = "/memory";
const DEFAULT_LIMIT: u32 = 25;
/// The memory store's own bound on a page (`memory_search` clamps at 100).
const MAX_LIMIT: u32 = 100;
const MAX_QUERY_CHARS: usize = 1_000;

#[derive(Debug, Default, Deserialize)]
pub struct MemoryQuery {
    pub q: Option<String>,
    pub offset: Option<String>,
    pub limit: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Params {
    pub query: Option<String>,
    pub offset: u64,
    pub limit: u32,
}

pub fn parse(query: &MemoryQuery) -> Result<Params, BadParam> {
    Ok(Params {
        query: browse::text(query.q.as_deref(), "q", MAX_QUERY_CHARS)?,
        offset: browse::offset(query.offset.as_deref(), "offset")?,
        limit: browse::limit(query.limit.as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?,
    })
}

pub async fn handler(state: web::Data<WebState>, query: web::Query<MemoryQuery>) -> HttpResponse {
    respond(&state.readers, !state.credentials.is_open(), &query).await
}

pub async fn respond(readers: &Readers, signed_in: bool, query: &MemoryQuery) -> HttpResponse {
    let params = match parse(query) {
        Ok(params) => params,
        Err(bad) => return browse::bad_request(TITLE, PATH, signed_in, &bad),
    };
    match readers.memory(params.query.as_deref(), params.limit, params.offset).await {
        Ok(found) => browse::html_response(StatusCode::OK, page(TITLE, PATH, signed_in, render(&params, &found))),
        Err(error) => browse::read_failed(TITLE, PATH, signed_in, &error),
    }
}

pub fn render(params: &Params, found: &Page) -> Markup {
    let query = params.query.clone().unwrap_or_default();
    html! {
        h1 { (TITLE) }
        form.search method="get" action=(PATH) role="search" {
            input type="search" name="q" value=(query) placeholder="Search memory" maxlength=(MAX_QUERY_CHARS);
            button type="submit" { "Search" }
        }
        p #total {
            (count(found.total, "entry", "entries"))
            @if !query.is_empty() { " for " q { (query) } }
        }
        @if !found.entries.is_empty() {
            table #entries {
                thead { tr { th { "Title" } th { "Content" } th { "Tags" } th { "Updated" } th { "Expires" } } }
                tbody { @for entry in &found.entries { (row(entry)) } }
            }
        }
        (pager(PATH, &[("q", query.clone())], "offset", params.offset, params.limit, found.entries.len(), Some(found.total)))
    }
}

fn row(entry: &Entry) -> Markup {
    let tags: Vec<String> = entry
        .metadata
        .iter()
        .filter(|(key, _)| key.as_str() != "category")
        .map(|(key, value)| match value.as_str() {
            Some(text) => format!("{key}: {text}"),
            None => format!("{key}: {value}"),
        })
        .collect();
    html! {
        tr {
            td { (entry.title) }
            td.text { (entry.data) }
            td {
                ul.tags {
                    @if let Some(category) = entry.category() { li.category { (category) } }
                    @for tag in &tags { li { (tag) } }
                    @if let Some(source) = &entry.source { li.source { "source: " (source) } }
                }
            }
            td { (when(&entry.updated_at)) }
            td { @match &entry.expires_at { Some(at) => (when(at)), None => "never" } }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use minibot_kv_memory::{KvMemory, Limits, NewEntry};
    use serde_json::{Map, Value, json};
    use std::sync::Arc;

    use super::browse::status_and_text as text;

    fn query(q: Option<&str>, offset: Option<&str>, limit: Option<&str>) -> MemoryQuery {
        MemoryQuery { q: q.map(Into::into), offset: offset.map(Into::into), limit: limit.map(Into::into) }
    }

    #[test]
    fn parameters_are_bounded() {
        assert_eq!(parse(&query(None, None, None)), Ok(Params { query: None, offset: 0, limit: DEFAULT_LIMIT }));
        assert_eq!(parse(&query(None, None, Some("101"))).unwrap_err().0, "limit must be between 1 and 100, not 101");
        assert_eq!(
            parse(&query(Some(&"q".repeat(1001)), None, None)).unwrap_err().0,
            "q is longer than 1000 characters"
        );
    }

    #[tokio::test]
    async fn entries_are_listed_searched_and_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let config = "[tools.kv_memory]\nenabled = true\nsqlite_url = \"sqlite:///./kv.db\"\n";
        let config = minibot_config::Config::from_toml(config, "t.toml", dir.path(), &|_| None).unwrap();
        let owner = config.runtime.owner_id.clone();
        // Written as the memory tools write, into the file the config names.
        let store =
            KvMemory::open(&dir.path().join("kv.db"), 1, Limits { default_limit: 20, max_limit: 100 }).await.unwrap();
        for (title, data) in [("Car", "<script>alert(1)</script> insurance renews in May"), ("Dentist", "Tuesday 9:00")]
        {
            let metadata: Map<String, Value> =
                json!({ "category": "otros", "plate": "AB-123" }).as_object().unwrap().clone();
            let new = NewEntry {
                title: title.into(),
                data: data.into(),
                metadata,
                source: Some("chat".into()),
                expires_at: None,
            };
            store.create(&owner, new).await.unwrap();
        }
        store.close().await;
        let readers = Readers::new(Arc::new(config), None);

        let (status, page) = text(respond(&readers, false, &query(None, None, None)).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("2 entries") && page.contains("Dentist") && page.contains("plate: AB-123"), "{page}");
        assert!(!page.contains("<script>") && page.contains("&lt;script&gt;"), "{page}");
        let (_, page) = text(respond(&readers, false, &query(Some("insur"), None, None)).await).await;
        assert!(page.contains("1 entry") && page.contains("Car") && !page.contains("Dentist"), "{page}");
        let (_, page) = text(respond(&readers, false, &query(None, None, Some("1"))).await).await;
        assert!(page.contains(r#"href="/memory?offset=1""#), "a second page: {page}");
        let (status, _) = text(respond(&readers, false, &query(None, Some("-3"), None)).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        readers.close().await;
    }

    #[tokio::test]
    async fn memory_off_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let config = minibot_config::Config::from_toml("", "t.toml", dir.path(), &|_| None).unwrap();
        let readers = Readers::new(Arc::new(config), None);
        let (status, page) = text(respond(&readers, false, &query(None, None, None)).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("Memory is off: [tools.kv_memory] enabled = false"), "{page}");
    }
}
