//! `read_docs`: lists, reads and searches the user manual compiled into this binary. Pages are looked up by
//! name in a fixed table, never by a path built from the arguments. Its refusals are answers with `ok: false`
//! (as MiniBot's are), so `page_not_found` can carry the list of pages.

use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

include!(concat!(env!("OUT_DIR"), "/docs_pages.rs"));

/// The most characters of a page one call returns.
const PAGE_MAX_CHARS: usize = 30_000;
/// The most pages a search returns.
const MAX_HITS: usize = 8;
/// The most matching lines shown per page.
const MAX_SNIPPETS: usize = 3;
/// The longest query: a few words, not a document.
const MAX_QUERY_CHARS: usize = 1_000;
/// The most distinct words of a query that are searched.
const MAX_TERMS: usize = 16;
/// The most characters of one matching line.
const SNIPPET_MAX_CHARS: usize = 200;

pub struct ReadDocs {
    pages: &'static [(&'static str, &'static str)],
}

impl ReadDocs {
    /// The manual this binary was built with.
    pub fn bundled() -> Self {
        Self { pages: PAGES }
    }

    /// Another set of pages (tests).
    pub fn with_pages(pages: &'static [(&'static str, &'static str)]) -> Self {
        Self { pages }
    }

    fn read(&self, page: &str, offset: usize) -> Value {
        let name = page.trim();
        let name = name.strip_suffix(".md").unwrap_or(name);
        let Some((name, text)) = self.pages.iter().find(|(n, _)| *n == name) else {
            return json!({
                "ok": false,
                "error_code": "page_not_found",
                "error": format!("no page named '{page}'; call read_docs without arguments for the list"),
                "pages": self.pages.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            });
        };
        // Pages run past one call's share (configuration.md is over 50,000 characters): `offset` reads on.
        let total = text.chars().count();
        let content: String = text.chars().skip(offset).take(PAGE_MAX_CHARS).collect();
        let end = offset.saturating_add(PAGE_MAX_CHARS);
        let mut result = json!({
            "ok": true,
            "page": name,
            "title": title(text, name),
            "truncated": end < total,
            "content": content,
        });
        if offset > 0 {
            result["offset"] = json!(offset);
        }
        if end < total {
            result["next_offset"] = json!(end);
            result["total_chars"] = json!(total);
        }
        result
    }

    fn search(&self, query: &str) -> Value {
        // Each term costs a pass over every line: repeated ones count once, and at most MAX_TERMS are used.
        let mut terms: Vec<String> = Vec::new();
        for term in query.to_lowercase().split_whitespace() {
            if !terms.iter().any(|t| t == term) && terms.len() < MAX_TERMS {
                terms.push(term.to_string());
            }
        }
        let mut hits: Vec<(usize, Value)> = Vec::new();
        for (name, text) in self.pages {
            // Each line with the character offset it starts at, so a hit can be read in full with `offset`.
            let mut at = 0usize;
            let matching: Vec<(usize, &str)> = text
                .split_inclusive('\n')
                .filter_map(|line| {
                    let start = at;
                    at += line.chars().count();
                    let lower = line.to_lowercase();
                    terms.iter().all(|term| lower.contains(term.as_str())).then_some((start, line.trim()))
                })
                .collect();
            if matching.is_empty() {
                continue;
            }
            let snippets: Vec<String> = matching
                .iter()
                .take(MAX_SNIPPETS)
                .map(|(_, line)| line.chars().take(SNIPPET_MAX_CHARS).collect())
                .collect();
            let offsets: Vec<usize> = matching.iter().take(MAX_SNIPPETS).map(|(start, _)| *start).collect();
            hits.push((
                matching.len(),
                json!({ "page": name, "matches": matching.len(), "snippets": snippets, "offsets": offsets }),
            ));
        }
        // Stable: pages with as many matches keep their name order.
        hits.sort_by_key(|hit| std::cmp::Reverse(hit.0));
        let results: Vec<Value> = hits.into_iter().take(MAX_HITS).map(|(_, hit)| hit).collect();
        json!({ "ok": true, "query": minibot_agent::excerpt(query), "results": results })
    }
}

/// A page's title: its first `# ` heading, else its name.
fn title(text: &str, name: &str) -> String {
    text.lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix("# "))
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|| name.to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    page: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    offset: Option<i64>,
}

impl Tool for ReadDocs {
    type Args = Args;

    fn name(&self) -> &str {
        "read_docs"
    }

    fn description(&self) -> String {
        "Read the user manual of this installed version. Call it with no arguments to list the pages, with `query` \
         to search every page for words such as a config key or tool name (returns matching lines per page, with \
         the offset each starts at; every word must be on the line), or with `page` to read one page (30,000 \
         characters at a time: pass `offset`, e.g. the result's `next_offset` or a search hit's offset, to read \
         on). Use it when the user asks how a feature, config key, tool, channel or command works. It describes how this version works, not what this instance \
         has enabled; use get_settings for that. If it returns `docs_unavailable`, no manual is bundled."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "page": { "type": ["string", "null"], "description": "Page name from the listing, for example 'configuration'." },
                "query": { "type": ["string", "null"], "description": "Words to search for across every page." },
                "offset": { "type": ["integer", "null"], "minimum": 0, "description": "With `page`: the character to start at, to read on past a cut (`next_offset`) or at a search hit (`offsets`)." },
            },
            "required": ["page", "query"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        if self.pages.is_empty() {
            return Ok(json!({
                "ok": false,
                "error_code": "docs_unavailable",
                "error": "no documentation ships with this build",
            }));
        }
        let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        if let Some(page) = given(args.page) {
            let offset = args.offset.unwrap_or(0);
            let Ok(offset) = usize::try_from(offset) else {
                return Err(minibot_agent::ToolError::invalid_arguments(format!(
                    "offset must be 0 or more, got {offset}"
                )));
            };
            return Ok(self.read(&page, offset));
        }
        if let Some(query) = given(args.query) {
            if query.chars().count() > MAX_QUERY_CHARS {
                return Err(minibot_agent::ToolError::invalid_arguments(format!(
                    "query is longer than {MAX_QUERY_CHARS} characters; search for a few words"
                )));
            }
            return Ok(self.search(&query));
        }
        let pages: Vec<Value> =
            self.pages.iter().map(|(name, text)| json!({ "page": name, "title": title(text, name) })).collect();
        Ok(json!({ "ok": true, "pages": pages }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PAGES: &[(&str, &str)] = &[
        ("alpha", "# Alpha guide\nThe `sqlite_url` key sets the file.\nsqlite_url again, with URL\n"),
        ("beta", "no heading\nSQLITE_URL here\n"),
    ];

    async fn call(page: Option<&str>, query: Option<&str>) -> Value {
        let args = Args { page: page.map(str::to_string), query: query.map(str::to_string), offset: None };
        ReadDocs::with_pages(PAGES).call(args, &ToolContext::default()).await.unwrap()
    }

    #[tokio::test]
    async fn lists_reads_and_searches() {
        let listing = call(None, None).await;
        assert_eq!(
            listing["pages"],
            json!([{ "page": "alpha", "title": "Alpha guide" }, { "page": "beta", "title": "beta" }])
        );
        let page = call(Some("alpha.md"), None).await;
        assert_eq!((page["page"].as_str(), page["truncated"].as_bool()), (Some("alpha"), Some(false)));
        let found = call(None, Some("SQLite_URL AGAIN")).await;
        assert_eq!(found["results"][0]["page"], "alpha");
        assert_eq!(found["results"][0]["matches"], 1, "both words on one line: {found}");
        let found = call(None, Some("sqlite_url")).await;
        assert_eq!(found["results"][0]["matches"], 2);
        assert_eq!(found["results"][1]["snippets"], json!(["SQLITE_URL here"]));
        let missing = call(Some("../etc/passwd"), None).await;
        assert_eq!(missing["error_code"], "page_not_found");
        assert_eq!(missing["pages"], json!(["alpha", "beta"]));
    }

    #[tokio::test]
    async fn the_bundled_manual_is_compiled_in() {
        let tool = ReadDocs::bundled();
        assert!(tool.pages.iter().any(|(name, _)| *name == "configuration"));
        let long = "x".repeat(PAGE_MAX_CHARS + 10);
        let leaked: &'static str = Box::leak(long.into_boxed_str());
        let pages: &'static [(&str, &str)] = Box::leak(vec![("big", leaked)].into_boxed_slice());
        let args = Args { page: Some("big".into()), query: None, offset: None };
        let read = ReadDocs::with_pages(pages).call(args, &ToolContext::default()).await.unwrap();
        assert_eq!(read["truncated"], true);
        assert_eq!(read["content"].as_str().unwrap().len(), PAGE_MAX_CHARS);
    }

    /// A page longer than one call's share is read on from `next_offset`, and a search hit names where it starts.
    #[tokio::test]
    async fn a_long_page_is_read_on_from_the_offset_a_cut_or_a_hit_gives() {
        let long: &'static str =
            Box::leak(format!("# Long\n{}\nthe needle line\n", "x".repeat(40_000)).into_boxed_str());
        let pages: &'static [(&'static str, &'static str)] = Box::leak(vec![("long", long)].into_boxed_slice());
        let docs = ReadDocs::with_pages(pages);
        let ctx = ToolContext::default();
        let first = docs.call(Args { page: Some("long".into()), query: None, offset: None }, &ctx).await.unwrap();
        assert_eq!(first["truncated"], true);
        let next = first["next_offset"].as_u64().unwrap();
        let rest =
            docs.call(Args { page: Some("long".into()), query: None, offset: Some(next as i64) }, &ctx).await.unwrap();
        assert_eq!(rest["truncated"], false);
        assert!(rest["content"].as_str().unwrap().ends_with("the needle line\n"));
        let hit = docs.call(Args { page: None, query: Some("needle".into()), offset: None }, &ctx).await.unwrap();
        let at = hit["results"][0]["offsets"][0].as_i64().unwrap();
        let read = docs.call(Args { page: Some("long".into()), query: None, offset: Some(at) }, &ctx).await.unwrap();
        assert_eq!(read["content"], "the needle line\n");
        assert!(docs.call(Args { page: Some("long".into()), query: None, offset: Some(-1) }, &ctx).await.is_err());
    }

    #[tokio::test]
    async fn a_huge_query_is_refused_and_repeated_words_count_once() {
        let ctx = ToolContext::default();
        let docs = ReadDocs::with_pages(PAGES);
        let huge = Args { page: None, query: Some("e ".repeat(100_000)), offset: None };
        assert!(docs.call(huge, &ctx).await.is_err());
        let repeated = Args { page: None, query: Some("sqlite_url ".repeat(50)), offset: None };
        let found = docs.call(repeated, &ctx).await.unwrap();
        assert_eq!(found["results"].as_array().unwrap().len(), 2, "{found}");
    }
}
