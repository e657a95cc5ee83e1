//! The read-only browsing pages (/history, /memory, /scheduled, /graph, /mcp): their routes, and what they share:
//! query parameters read with bounds (a bad one is a 400 that names it), paging links, and the pages shown when a
//! feature is off or its database cannot be read.

use super::layout::page;
use crate::readers::ReadError;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use maud::{Markup, html};

/// Registers the five pages (GET only).
pub fn configure(config: &mut web::ServiceConfig) {
    config
        .route("/history", web::get().to(super::history::handler))
        .route("/memory", web::get().to(super::memory::handler))
        .route("/scheduled", web::get().to(super::scheduled::handler))
        .route("/graph", web::get().to(super::graph::handler))
        .route("/mcp", web::get().to(super::mcp::handler));
}

/// The most rows past the first a page may start at: deeper paging is a scan, not browsing.
pub const MAX_OFFSET: u64 = 1_000_000;

/// A query parameter the page cannot use; the message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParam(pub String);

/// An optional whole number in `min..=max`; missing or empty is `None`.
pub fn number(value: Option<&str>, name: &str, min: u64, max: u64) -> Result<Option<u64>, BadParam> {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else { return Ok(None) };
    let shown = excerpt(text);
    let parsed: u64 = text.parse().map_err(|_| BadParam(format!("{name} must be a whole number, not `{shown}`")))?;
    if !(min..=max).contains(&parsed) {
        return Err(BadParam(format!("{name} must be between {min} and {max}, not {parsed}")));
    }
    Ok(Some(parsed))
}

/// The page size: `default` when not given.
pub fn limit(value: Option<&str>, default: u32, max: u32) -> Result<u32, BadParam> {
    let limit = number(value, "limit", 1, u64::from(max))?;
    Ok(limit.and_then(|l| u32::try_from(l).ok()).unwrap_or(default))
}

/// Where a page starts: 0 when not given.
pub fn offset(value: Option<&str>, name: &str) -> Result<u64, BadParam> {
    Ok(number(value, name, 0, MAX_OFFSET)?.unwrap_or(0))
}

/// Optional text, trimmed; missing or blank is `None`. Control characters (other than tabs) are refused: no one
/// types them into a search box.
pub fn text(value: Option<&str>, name: &str, max_chars: usize) -> Result<Option<String>, BadParam> {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else { return Ok(None) };
    if text.chars().count() > max_chars {
        return Err(BadParam(format!("{name} is longer than {max_chars} characters")));
    }
    if text.chars().any(|c| c.is_control() && c != '\t') {
        return Err(BadParam(format!("{name} contains control characters")));
    }
    Ok(Some(text.to_string()))
}

/// A yes/no flag: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`; `None` when missing.
pub fn flag(value: Option<&str>, name: &str) -> Result<Option<bool>, BadParam> {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else { return Ok(None) };
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(BadParam(format!("{name} must be 1 or 0, not `{}`", excerpt(text)))),
    }
}

/// The start of what someone sent, for an error message.
fn excerpt(text: &str) -> String {
    let mut shown: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        shown.push('…');
    }
    shown
}

pub fn html_response(status: StatusCode, markup: Markup) -> HttpResponse {
    HttpResponse::build(status).content_type("text/html; charset=utf-8").body(markup.into_string())
}

/// 400 for a bad parameter.
pub fn bad_request(title: &str, path: &str, signed_in: bool, bad: &BadParam) -> HttpResponse {
    let body = html! {
        h1 { (title) }
        p.error #bad-request { (bad.0) }
        p { a href=(path) { "Back to " (title) } }
    };
    html_response(StatusCode::BAD_REQUEST, page(title, path, signed_in, body))
}

/// A feature that is off (200, the page says so) or a database that failed (500, with its message).
pub fn read_failed(title: &str, path: &str, signed_in: bool, error: &ReadError) -> HttpResponse {
    if let ReadError::Off(message) = error {
        let body = html! { h1 { (title) } p.off #off { (message) } };
        return html_response(StatusCode::OK, page(title, path, signed_in, body));
    }
    tracing::warn!(%error, page = path, "a browsing page cannot read its data");
    let body = html! { h1 { (title) } p.error #read-error { (error.to_string()) } };
    html_response(StatusCode::INTERNAL_SERVER_ERROR, page(title, path, signed_in, body))
}

/// `path?name=value&…`, the values percent-encoded; pairs with an empty value are left out.
pub fn link(path: &str, pairs: &[(&str, String)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| format!("{name}={}", encode(value)))
        .collect();
    if query.is_empty() { path.to_string() } else { format!("{path}?{}", query.join("&")) }
}

/// Percent-encoding of everything but the unreserved characters of RFC 3986.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(byte)),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// "Previous" and "Next" links for offset paging. `keep` are the page's other parameters; `name` the offset's.
pub fn pager(
    path: &str,
    keep: &[(&str, String)],
    name: &str,
    offset: u64,
    limit: u32,
    shown: usize,
    total: Option<u64>,
) -> Markup {
    let limit = u64::from(limit);
    let shown = u64::try_from(shown).unwrap_or(u64::MAX);
    let more = match total {
        Some(total) => offset.saturating_add(shown) < total,
        None => shown >= limit,
    };
    let at = |offset: u64| {
        let mut pairs = keep.to_vec();
        if offset > 0 {
            pairs.push((name, offset.to_string()));
        }
        link(path, &pairs)
    };
    html! {
        @if offset > 0 || more {
            nav.pager {
                @if offset > 0 { a rel="prev" href=(at(offset.saturating_sub(limit))) { "Previous" } }
                @if more && offset.saturating_add(limit) <= MAX_OFFSET { a rel="next" href=(at(offset + limit)) { "Next" } }
            }
        }
    }
}

/// A stored time as `2026-12-04 09:00 UTC`; text that is no time is shown as it is.
pub fn when(stored: &str) -> String {
    match minibot_sqlite::stored_time::from_text(stored) {
        Some(time) => time.format("%Y-%m-%d %H:%M UTC").to_string(),
        None => stored.to_string(),
    }
}

/// "1 entry", "3 entries".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A response's status and body text, for the pages' tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub async fn status_and_text(response: HttpResponse) -> (StatusCode, String) {
    let status = response.status();
    let bytes = actix_web::body::to_bytes(response.into_body()).await.unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_bounded_and_bad_ones_name_the_parameter() {
        assert_eq!(number(None, "offset", 0, 10), Ok(None));
        assert_eq!(number(Some(" "), "offset", 0, 10), Ok(None));
        assert_eq!(number(Some("7"), "offset", 0, 10), Ok(Some(7)));
        assert_eq!(
            number(Some("-1"), "offset", 0, 10),
            Err(BadParam("offset must be a whole number, not `-1`".into()))
        );
        assert_eq!(
            number(Some("11"), "offset", 0, 10),
            Err(BadParam("offset must be between 0 and 10, not 11".into()))
        );
        let huge = "9".repeat(100);
        assert!(
            number(Some(&huge), "before", 1, 10).unwrap_err().0.contains('…'),
            "a long value is cut in the message"
        );
        assert_eq!(limit(None, 50, 200), Ok(50));
        assert_eq!(limit(Some("0"), 50, 200), Err(BadParam("limit must be between 1 and 200, not 0".into())));
        assert_eq!(
            offset(Some("1000001"), "offset").unwrap_err().0,
            "offset must be between 0 and 1000000, not 1000001"
        );
    }

    #[test]
    fn text_and_flags_are_checked() {
        assert_eq!(text(Some("  hi "), "q", 10), Ok(Some("hi".into())));
        assert_eq!(text(Some(""), "q", 10), Ok(None));
        assert_eq!(text(Some(&"x".repeat(11)), "q", 10), Err(BadParam("q is longer than 10 characters".into())));
        assert_eq!(text(Some("a\u{0}b"), "q", 10), Err(BadParam("q contains control characters".into())));
        assert_eq!(flag(Some("1"), "all"), Ok(Some(true)));
        assert_eq!(flag(Some("off"), "all"), Ok(Some(false)));
        assert_eq!(flag(Some("maybe"), "all"), Err(BadParam("all must be 1 or 0, not `maybe`".into())));
    }

    #[test]
    fn links_encode_their_values() {
        let href = link("/history", &[("session", "web:1 <&>".into()), ("before", String::new())]);
        assert_eq!(href, "/history?session=web%3A1%20%3C%26%3E");
        assert_eq!(link("/history", &[]), "/history");
    }

    #[test]
    fn the_pager_offers_what_exists() {
        let render = |offset, shown, total| {
            pager("/memory", &[("q", "a b".into())], "offset", offset, 10, shown, total).into_string()
        };
        assert_eq!(render(0, 3, Some(3)), "", "one page: no links");
        let first = render(0, 10, Some(25));
        assert!(first.contains(r#"href="/memory?q=a%20b&amp;offset=10""#) && !first.contains("Previous"), "{first}");
        let last = render(20, 5, Some(25));
        assert!(last.contains(r#"href="/memory?q=a%20b&amp;offset=10""#) && !last.contains("Next"), "{last}");
        assert!(render(10, 10, None).contains(r#"href="/memory?q=a%20b""#), "back to the first page");
    }

    /// The pages' query strings as actix decodes them from a request.
    #[actix_web::test]
    async fn query_strings_decode_and_bad_ones_are_a_400() {
        use crate::readers::Readers;
        use actix_web::test::{TestRequest, call_service, init_service, read_body};
        async fn history(
            readers: web::Data<Readers>,
            query: web::Query<super::super::history::HistoryQuery>,
        ) -> HttpResponse {
            super::super::history::respond(&readers, true, &query).await
        }
        let dir = tempfile::tempdir().unwrap();
        let store = minibot_store::Store::open(&dir.path().join("minibot.db"), None).await.unwrap();
        let config = minibot_config::Config::from_toml("", "t.toml", dir.path(), &|_| None).unwrap();
        let readers = web::Data::new(Readers::new(std::sync::Arc::new(config), Some(store.clone())));
        let app = init_service(actix_web::App::new().app_data(readers).route("/history", web::get().to(history))).await;
        let get = |uri: &str| TestRequest::get().uri(uri).to_request();

        let response = call_service(&app, get("/history?q=%3Cscript%3E%20hi")).await;
        assert_eq!(response.status(), StatusCode::OK);
        let body = String::from_utf8(read_body(response).await.to_vec()).unwrap();
        assert!(body.contains("<q>&lt;script&gt; hi</q>") && !body.contains("<script>"), "{body}");

        let response = call_service(&app, get("/history?session=s&before=99999999999999999999999")).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body = String::from_utf8(read_body(response).await.to_vec()).unwrap();
        assert!(body.contains("before must be a whole number, not `99999999999999999999999`"), "{body}");
        // Bytes that are not UTF-8 are decoded lossily: a search for nothing in particular.
        assert_eq!(call_service(&app, get("/history?q=%FF")).await.status(), StatusCode::OK);
        for uri in ["/history?offset=1&offset=2", "/history?limit=1e3", "/history?q=%00"] {
            assert_eq!(call_service(&app, get(uri)).await.status(), StatusCode::BAD_REQUEST, "{uri}");
        }
        store.close().await;
    }

    #[test]
    fn stored_times_read_as_utc() {
        assert_eq!(when("2026-12-04 09:00:00.000000"), "2026-12-04 09:00 UTC");
        assert_eq!(when("2026-12-04T21:03:54.123456Z"), "2026-12-04 21:03 UTC");
        assert_eq!(when("soon"), "soon");
    }
}
