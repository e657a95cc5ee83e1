//! /history: the sessions (`?offset=`), one session's conversation a page at a time (`?session=`, older pages by
//! `?before=`), and full-text search (`?q=`). A user's text and search snippets are shown as text; an
//! assistant's answer as the chat shows it: markdown rendered, then cleaned by ammonia.

use super::browse::{self, BadParam, count, link, pager, when};
use super::layout::page;
use crate::readers::{ReadError, Readers};
use crate::state::WebState;
use actix_web::{HttpResponse, http::StatusCode, web};
use maud::{Markup, html};
use minibot_store::{Role, SearchHit, SessionSummary, StoredMessage};
use serde::Deserialize;

const TITLE: &str = "History";
const PATH: &str = "/history";
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 200;
/// Session ids are short (`telegram:12345`, `web:1@2026-…`); anything longer is not one.
const MAX_SESSION_CHARS: usize = 256;
const MAX_QUERY_CHARS: usize = 500;

#[derive(Debug, Default, Deserialize)]
pub struct HistoryQuery {
    pub session: Option<String>,
    pub before: Option<String>,
    pub q: Option<String>,
    pub offset: Option<String>,
    pub limit: Option<String>,
}

/// What the parameters ask for.
#[derive(Debug, PartialEq, Eq)]
pub enum View {
    Sessions { offset: u64, limit: u32 },
    Session { id: String, before: Option<i64>, limit: u32 },
    Search { query: String, limit: u32 },
}

pub fn parse(query: &HistoryQuery) -> Result<View, BadParam> {
    let limit = browse::limit(query.limit.as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?;
    let session = browse::text(query.session.as_deref(), "session", MAX_SESSION_CHARS)?;
    let search = browse::text(query.q.as_deref(), "q", MAX_QUERY_CHARS)?;
    let before = browse::number(query.before.as_deref(), "before", 1, i64::MAX.unsigned_abs())?;
    let offset = browse::offset(query.offset.as_deref(), "offset")?;
    match (session, search) {
        (Some(_), Some(_)) => Err(BadParam("give either session or q, not both".into())),
        (None, Some(query)) => Ok(View::Search { query, limit }),
        (Some(id), None) => {
            let before = before.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
            Ok(View::Session { id, before, limit })
        }
        (None, None) if before.is_some() => Err(BadParam("before needs session: it pages one session".into())),
        (None, None) => Ok(View::Sessions { offset, limit }),
    }
}

pub async fn handler(state: web::Data<WebState>, query: web::Query<HistoryQuery>) -> HttpResponse {
    respond(&state.readers, !state.credentials.is_open(), &query).await
}

pub async fn respond(readers: &Readers, signed_in: bool, query: &HistoryQuery) -> HttpResponse {
    let view = match parse(query) {
        Ok(view) => view,
        Err(bad) => return browse::bad_request(TITLE, PATH, signed_in, &bad),
    };
    match read(readers, view).await {
        Ok(body) => browse::html_response(StatusCode::OK, page(TITLE, PATH, signed_in, body)),
        Err(error) => browse::read_failed(TITLE, PATH, signed_in, &error),
    }
}

async fn read(readers: &Readers, view: View) -> Result<Markup, ReadError> {
    let store = readers.history()?;
    Ok(match view {
        View::Sessions { offset, limit } => {
            let start = u32::try_from(offset).unwrap_or(u32::MAX);
            sessions(&store.sessions(limit, start).await?, offset, limit)
        }
        View::Session { id, before, limit } => {
            let messages = store.history_page(&id, before, limit).await?;
            session(&id, &messages, before, limit)
        }
        View::Search { query, limit } => search(&query, &store.search(&query, limit).await?),
    })
}

fn search_form(query: &str) -> Markup {
    html! {
        form.search method="get" action=(PATH) role="search" {
            input type="search" name="q" value=(query) placeholder="Search messages" maxlength=(MAX_QUERY_CHARS);
            button type="submit" { "Search" }
        }
    }
}

pub fn sessions(sessions: &[SessionSummary], offset: u64, limit: u32) -> Markup {
    html! {
        h1 { (TITLE) }
        (search_form(""))
        @if sessions.is_empty() {
            p #empty { @if offset == 0 { "No conversations yet." } @else { "No more conversations." } }
        } @else {
            table #sessions {
                thead { tr { th { "Session" } th { "Messages" } th { "Last message" } th { "Latest" } } }
                tbody {
                    @for s in sessions {
                        tr {
                            td { a href=(link(PATH, &[("session", s.session_id.clone())])) { code { (s.session_id) } } }
                            td { (s.messages) }
                            td { (when(&s.last_message_at)) }
                            td.preview { (s.preview) }
                        }
                    }
                }
            }
        }
        (pager(PATH, &[], "offset", offset, limit, sessions.len(), None))
    }
}

pub fn session(id: &str, messages: &[StoredMessage], before: Option<i64>, limit: u32) -> Markup {
    let full = messages.len() >= usize::try_from(limit).unwrap_or(usize::MAX);
    html! {
        h1 { (TITLE) ": " code { (id) } }
        p { a href=(PATH) { "All sessions" } }
        @if messages.is_empty() {
            p #empty { "No messages." }
        } @else {
            @if let (true, Some(first)) = (full, messages.first()) {
                nav.pager { a rel="prev" href=(link(PATH, &[("session", id.to_string()), ("before", first.id.to_string())])) { "Older" } }
            }
            ol.history #messages {
                @for m in messages {
                    li.message.(role_class(m.role)) id=(format!("m{}", m.id)) {
                        div.meta { span.role { (role_label(m.role)) } " · " time { (when(&m.created_at)) } }
                        @if m.role == Role::Assistant {
                            // Rendered as the chat shows it, and cleaned the same way.
                            div.body { (maud::PreEscaped(crate::chat::markup::to_html(&m.content, minibot_agent::ReplyKind::Markdown))) }
                        } @else {
                            div.text { (m.content) }
                        }
                    }
                }
            }
        }
        @if before.is_some() {
            nav.pager { a rel="next" href=(link(PATH, &[("session", id.to_string())])) { "Newest" } }
        }
    }
}

pub fn search(query: &str, hits: &[SearchHit]) -> Markup {
    html! {
        h1 { (TITLE) }
        (search_form(query))
        p { (count(u64::try_from(hits.len()).unwrap_or(0), "match", "matches")) " for " q { (query) } }
        @if !hits.is_empty() {
            ol.hits #hits {
                @for hit in hits {
                    li {
                        div.meta {
                            // The page of the session that ends with the message found.
                            a href=(format!("{}#m{}", link(PATH, &[("session", hit.session_id.clone()), ("before", hit.message_id.saturating_add(1).to_string())]), hit.message_id)) {
                                code { (hit.session_id) }
                            }
                            " · " (role_label(hit.role)) " · " time { (when(&hit.created_at)) }
                        }
                        div.text {
                            @for (matched, part) in hit.snippet_parts() {
                                @if matched { mark { (part) } } @else { (part) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn role_label(role: Role) -> &'static str {
    match role {
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
    }
}

fn role_class(role: Role) -> &'static str {
    role.as_str()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use minibot_store::{Store, TurnMessage};
    use std::sync::Arc;

    fn query(pairs: &[(&str, &str)]) -> HistoryQuery {
        let get = |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
        HistoryQuery {
            session: get("session"),
            before: get("before"),
            q: get("q"),
            offset: get("offset"),
            limit: get("limit"),
        }
    }

    #[test]
    fn parameters_choose_the_view_and_bad_ones_are_refused() {
        assert_eq!(parse(&query(&[])), Ok(View::Sessions { offset: 0, limit: DEFAULT_LIMIT }));
        assert_eq!(
            parse(&query(&[("session", "web:1"), ("before", "40"), ("limit", "10")])),
            Ok(View::Session { id: "web:1".into(), before: Some(40), limit: 10 })
        );
        assert_eq!(
            parse(&query(&[("q", " lisbon ")])),
            Ok(View::Search { query: "lisbon".into(), limit: DEFAULT_LIMIT })
        );
        for (pairs, message) in [
            (vec![("before", "3")], "before needs session: it pages one session"),
            (vec![("session", "a"), ("q", "b")], "give either session or q, not both"),
            (vec![("session", "a"), ("before", "0")], "before must be between 1 and 9223372036854775807, not 0"),
            (vec![("limit", "201")], "limit must be between 1 and 200, not 201"),
            (vec![("offset", "x")], "offset must be a whole number, not `x`"),
        ] {
            assert_eq!(parse(&query(&pairs)), Err(BadParam(message.into())), "{pairs:?}");
        }
    }

    fn message(id: i64, role: Role, content: &str) -> StoredMessage {
        StoredMessage {
            id,
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            turn_id: None,
            context_tokens: None,
            created_at: "2026-12-04T21:03:54Z".into(),
        }
    }

    #[test]
    fn hostile_text_is_shown_as_text() {
        let hostile = "<script>alert(1)</script> **bold**";
        let page = session("web:<b>", &[message(7, Role::User, hostile)], None, 50).into_string();
        assert!(
            !page.contains("<script>") && page.contains("&lt;script&gt;alert(1)&lt;/script&gt; **bold**"),
            "{page}"
        );
        assert!(page.contains("web:&lt;b&gt;") && !page.contains("<strong>"), "{page}");
        // An answer is rendered as in the chat, without its script.
        let answer = "<script>alert(1)</script>\n\n**bold** <img src=x onerror=alert(1)>";
        let page = session("web:1", &[message(8, Role::Assistant, answer)], None, 50).into_string();
        assert!(page.contains("<strong>bold</strong>") && !page.contains("<script>"), "{page}");
        assert!(!page.contains("onerror"), "{page}");
        let index = SessionSummary {
            session_id: "x\"><script>".into(),
            messages: 1,
            last_message_at: "now".into(),
            preview: "<img src=x onerror=alert(1)>".into(),
        };
        let page = sessions(&[index], 0, 50).into_string();
        assert!(!page.contains("<script>") && !page.contains("<img"), "{page}");
        let hit = SearchHit {
            message_id: 3,
            session_id: "s".into(),
            role: Role::User,
            created_at: "now".into(),
            snippet: "a \u{E000}<script>\u{E001} b".into(),
        };
        let page = search("<script>", &[hit]).into_string();
        assert!(page.contains("<mark>&lt;script&gt;</mark>") && !page.contains("<script>"), "{page}");
        assert!(
            page.contains(r#"href="/history?session=s&amp;before=4#m3""#),
            "the link opens the page ending with the hit: {page}"
        );
    }

    #[test]
    fn a_full_page_links_to_older_messages() {
        let messages = [message(5, Role::User, "q"), message(6, Role::Assistant, "a")];
        let page = session("web:1", &messages, Some(9), 2).into_string();
        assert!(page.contains(r#"href="/history?session=web%3A1&amp;before=5""#), "{page}");
        assert!(page.contains("Newest"));
        let page = session("web:1", &messages, None, 3).into_string();
        assert!(!page.contains("Older") && !page.contains("Newest"), "{page}");
    }

    #[tokio::test]
    async fn pages_read_a_real_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("minibot.db"), None).await.unwrap();
        store
            .store_turn(
                "web:1",
                &[TurnMessage::user("where is <Lisbon>?"), TurnMessage::assistant("Portugal")],
                &[],
                None,
            )
            .await
            .unwrap();
        let config = minibot_config::Config::from_toml("", "t.toml", dir.path(), &|_| None).unwrap();
        let readers = Readers::new(Arc::new(config), Some(store.clone()));
        let body = super::browse::status_and_text;
        let (status, page) = body(respond(&readers, true, &query(&[])).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("web:1") && page.contains("Portugal"), "{page}");
        let (status, page) = body(respond(&readers, true, &query(&[("session", "web:1")])).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("where is &lt;Lisbon&gt;?"), "{page}");
        let (status, page) = body(respond(&readers, true, &query(&[("q", "lisbon")])).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("1 match") && page.contains("<mark>Lisbon</mark>"), "{page}");
        let (status, page) = body(respond(&readers, true, &query(&[("before", "abc"), ("session", "s")])).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(page.contains("before must be a whole number, not `abc`"), "{page}");

        let without = Readers::new(
            Arc::new(minibot_config::Config::from_toml("", "t.toml", dir.path(), &|_| None).unwrap()),
            None,
        );
        let (status, page) = body(respond(&without, true, &query(&[])).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("The history is not available"), "{page}");
        store.close().await;
    }
}
