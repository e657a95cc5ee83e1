//! Reading the transcripts as a person browses them (the web UI's /history and the web chat's paging): the
//! sessions, one session's conversation a page at a time, and full-text search.
//!
//! Only what a person said and read is shown: user messages and assistant answers. Tool results, and assistant
//! messages that only asked for tool calls, stay out of every page and every count here.
//!
//! Search runs on `messages_fts` (migration 0007). What the user typed never reaches FTS5's query syntax: it is cut
//! into words and each word becomes a quoted prefix phrase (`"word"*`), all words required; when that finds
//! nothing, any word will do.

use crate::{Result, Role, Store, StoredMessage};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

/// The most rows one call returns, whatever the caller asks for.
pub const MAX_PAGE: u32 = 500;
/// The most characters of a session's preview.
pub const PREVIEW_CHARS: usize = 120;
/// The most distinct words a search uses: FTS5's cost grows quickly with the terms.
pub const MAX_SEARCH_WORDS: usize = 16;
/// Around the matched words of a [`SearchHit::snippet`]. Private-use characters, so no text a person writes
/// is mistaken for them and a page can mark the words without parsing HTML.
pub const MATCH_START: char = '\u{E000}';
pub const MATCH_END: char = '\u{E001}';

/// A row a person sees: a user message, or an assistant message with text.
macro_rules! visible {
    () => {
        "(role = 'user' OR (role = 'assistant' AND (tool_calls_json IS NULL OR TRIM(content) != '')))"
    };
}

/// One session in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub session_id: String,
    /// User messages and assistant answers.
    pub messages: u64,
    pub last_message_at: String,
    /// The start of the latest user or assistant text, at most [`PREVIEW_CHARS`] characters (`…` when cut).
    pub preview: String,
}

/// One message a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub message_id: i64,
    pub session_id: String,
    pub role: Role,
    pub created_at: String,
    /// The text around the match, the matched words between [`MATCH_START`] and [`MATCH_END`].
    pub snippet: String,
}

impl SearchHit {
    /// The snippet in pieces: `(true, text)` for matched words, `(false, text)` for what lies between.
    pub fn snippet_parts(&self) -> Vec<(bool, &str)> {
        let mut parts = Vec::new();
        let mut rest = self.snippet.as_str();
        while let Some(start) = rest.find(MATCH_START) {
            if start > 0 {
                parts.push((false, &rest[..start]));
            }
            let after = &rest[start + MATCH_START.len_utf8()..];
            let end = after.find(MATCH_END).unwrap_or(after.len());
            if end > 0 {
                parts.push((true, &after[..end]));
            }
            rest = after.get(end + MATCH_END.len_utf8()..).unwrap_or("");
        }
        if !rest.is_empty() {
            parts.push((false, rest));
        }
        parts
    }
}

impl Store {
    /// Sessions with at least one visible message, the most recently active first.
    pub async fn sessions(&self, limit: u32, offset: u32) -> Result<Vec<SessionSummary>> {
        let rows = sqlx::query(concat!(
            "SELECT session_id, COUNT(*) AS messages, MAX(created_at) AS last_at, MAX(id) AS last_id,
                    (SELECT SUBSTR(p.content, 1, 400) FROM messages p
                     WHERE p.session_id = m.session_id AND p.role != 'tool' AND TRIM(p.content) != ''
                     ORDER BY p.id DESC LIMIT 1) AS preview
             FROM messages m WHERE ",
            visible!(),
            " GROUP BY session_id ORDER BY last_id DESC LIMIT ?1 OFFSET ?2"
        ))
        .bind(i64::from(limit.min(MAX_PAGE)))
        .bind(i64::from(offset))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| SessionSummary {
                session_id: row.get("session_id"),
                messages: u64::try_from(row.get::<i64, _>("messages")).unwrap_or(0),
                last_message_at: row.get("last_at"),
                preview: preview(&row.get::<Option<String>, _>("preview").unwrap_or_default()),
            })
            .collect())
    }

    /// The `limit` visible messages of the session before message `before_id` (the latest without it), oldest
    /// first. The first message's id is the `before_id` of the page before.
    pub async fn history_page(
        &self,
        session_id: &str,
        before_id: Option<i64>,
        limit: u32,
    ) -> Result<Vec<StoredMessage>> {
        let rows = sqlx::query(concat!(
            "SELECT id, role, content, tool_calls_json, tool_call_id, tool_name, turn_id, context_tokens, created_at
             FROM messages WHERE session_id = ?1 AND id < ?2 AND ",
            visible!(),
            " ORDER BY id DESC LIMIT ?3"
        ))
        .bind(session_id)
        .bind(before_id.unwrap_or(i64::MAX))
        .bind(i64::from(limit.min(MAX_PAGE)))
        .fetch_all(&self.pool)
        .await?;
        let mut messages: Vec<StoredMessage> = rows.iter().filter_map(crate::transcripts::stored_message).collect();
        messages.reverse();
        Ok(messages)
    }

    /// Messages whose text has every word of `query` (words as prefixes), best match first; when none has them
    /// all, those with any. Empty when the query has no word at all (`*`, `"()"`).
    pub async fn search(&self, query: &str, limit: u32) -> Result<Vec<SearchHit>> {
        let limit = i64::from(limit.clamp(1, MAX_PAGE));
        let mut tried = None;
        for joiner in [" AND ", " OR "] {
            let Some(expression) = fts_expression(query, joiner) else { return Ok(Vec::new()) };
            // One word reads the same joined either way.
            if tried.as_ref() == Some(&expression) {
                break;
            }
            let rows = sqlx::query(
                "SELECT m.id, m.session_id, m.role, m.created_at,
                        snippet(messages_fts, 0, ?3, ?4, '…', 16) AS snippet
                 FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                 WHERE messages_fts MATCH ?1
                 ORDER BY bm25(messages_fts), m.id DESC LIMIT ?2",
            )
            .bind(&expression)
            .bind(limit)
            .bind(MATCH_START.to_string())
            .bind(MATCH_END.to_string())
            .fetch_all(&self.pool)
            .await?;
            let hits: Vec<SearchHit> = rows.iter().filter_map(hit).collect();
            if !hits.is_empty() {
                return Ok(hits);
            }
            tried = Some(expression);
        }
        Ok(Vec::new())
    }
}

/// The FTS5 expression for what a person typed: each word (a run of letters and digits, as FTS5's `unicode61`
/// tokenizer sees one) a quoted prefix phrase, so `OR`, `NEAR`, quotes, `*`, `:` and parentheses are only text.
/// `None` when there is no word.
fn fts_expression(query: &str, joiner: &str) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && seen.insert(word.to_lowercase()))
        .take(MAX_SEARCH_WORDS)
        .map(|word| format!("\"{word}\"*"))
        .collect();
    (!words.is_empty()).then(|| words.join(joiner))
}

/// The first [`PREVIEW_CHARS`] characters on one line.
fn preview(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= PREVIEW_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(PREVIEW_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn hit(row: &SqliteRow) -> Option<SearchHit> {
    Some(SearchHit {
        message_id: row.get("id"),
        session_id: row.get("session_id"),
        role: Role::parse(&row.get::<String, _>("role"))?,
        created_at: row.get("created_at"),
        snippet: row.get("snippet"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::StoredToolCall;
    use crate::TurnMessage;

    async fn open(dir: &tempfile::TempDir) -> Store {
        Store::open(&dir.path().join("data/minibot.db"), None).await.expect("open")
    }

    fn texts(messages: &[StoredMessage]) -> Vec<&str> {
        messages.iter().map(|m| m.content.as_str()).collect()
    }

    /// A turn with a tool call between the question and the answer.
    fn tool_turn(question: &str, answer: &str) -> Vec<TurnMessage> {
        let call = StoredToolCall { id: "c1".into(), name: "http_request".into(), arguments: "{}".into() };
        vec![
            TurnMessage::user(question),
            TurnMessage::assistant_calls("", vec![call]),
            TurnMessage::tool_result("c1", "http_request", "zebra tool output"),
            TurnMessage::assistant(answer),
        ]
    }

    #[tokio::test]
    async fn sessions_are_listed_latest_first_with_visible_counts_and_a_preview() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.store_turn("console:1", &tool_turn("weather?", "Sunny today."), &[], None).await.unwrap();
        store
            .store_turn("web:1", &[TurnMessage::user("hi"), TurnMessage::assistant(" a\n b ")], &[], None)
            .await
            .unwrap();
        let long = "x".repeat(500);
        store.store_turn("console:1", &[TurnMessage::user(long.clone())], &[], None).await.unwrap();

        let sessions = store.sessions(10, 0).await.unwrap();
        let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(ids, ["console:1", "web:1"], "the session written last comes first");
        assert_eq!(sessions[0].messages, 3, "the tool call and its result are not counted");
        assert_eq!(sessions[0].preview.chars().count(), PREVIEW_CHARS);
        assert!(sessions[0].preview.ends_with('…'));
        assert_eq!(sessions[1].preview, "a b", "the preview is one line");
        assert_eq!(store.sessions(10, 1).await.unwrap().len(), 1);
        assert!(store.sessions(10, 2).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_session_reads_back_in_pages_without_tool_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        for i in 0..3 {
            store.store_turn("s", &tool_turn(&format!("q{i}"), &format!("a{i}")), &[], None).await.unwrap();
        }
        let latest = store.history_page("s", None, 4).await.unwrap();
        assert_eq!(texts(&latest), ["q1", "a1", "q2", "a2"], "the newest page, oldest first");
        let older = store.history_page("s", Some(latest[0].id), 4).await.unwrap();
        assert_eq!(texts(&older), ["q0", "a0"]);
        assert!(store.history_page("s", Some(older[0].id), 4).await.unwrap().is_empty());
        assert!(store.history_page("other", None, 4).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn search_finds_words_best_first_and_takes_any_text_without_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store
            .store_turn("a", &tool_turn("book a flight to Lisbon", "Booked: Lisbon, Friday."), &[], None)
            .await
            .unwrap();
        store.store_turn("b", &[TurnMessage::user("Lisbon or Porto?")], &[], None).await.unwrap();

        let hits = store.search("lisb fri", 10).await.unwrap();
        assert_eq!(hits.len(), 1, "every word is required when some message has them all: {hits:?}");
        assert_eq!((hits[0].session_id.as_str(), hits[0].role), ("a", Role::Assistant));
        assert_eq!(
            hits[0].snippet_parts(),
            [(false, "Booked: "), (true, "Lisbon"), (false, ", "), (true, "Friday"), (false, ".")]
        );

        let any = store.search("porto friday", 10).await.unwrap();
        assert_eq!(any.len(), 2, "none has both words, so either will do");
        assert!(store.search("zebra", 10).await.unwrap().is_empty(), "tool results are not indexed");
        for hostile in ["\"", "a\" OR", "NEAR(x y)", "*", "col:lisbon", "((", "-", "^lisbon", "AND", ""] {
            assert!(store.search(hostile, 10).await.is_ok(), "{hostile:?} is an error");
        }
        let or_as_text = store.search("\"Lisbon\" OR (", 10).await.unwrap();
        assert_eq!(or_as_text.len(), 1, "OR is a word to find, not an operator: {or_as_text:?}");
        assert_eq!(or_as_text[0].session_id, "b");
    }

    #[tokio::test]
    async fn the_index_follows_archives_and_trims_and_covers_older_messages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/minibot.db");
        let store = Store::open(&path, None).await.unwrap();
        store.store_turn("s", &[TurnMessage::user("ancient walrus")], &[], None).await.unwrap();
        store.store_turn("s", &[TurnMessage::user("recent otter")], &[], None).await.unwrap();
        store.close().await;
        // As if written before the index existed.
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        for sql in [
            "DROP TRIGGER messages_fts_ai",
            "DROP TRIGGER messages_fts_ad",
            "DROP TRIGGER messages_fts_au",
            "DROP TABLE messages_fts",
            "DELETE FROM _sqlx_migrations WHERE version = 7",
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap();
        }
        pool.close().await;

        let store = Store::open(&path, None).await.unwrap();
        assert_eq!(store.search("walrus", 10).await.unwrap().len(), 1, "the migration indexes existing rows");
        let (archive, _) = store.archive_session("s").await.unwrap();
        assert_eq!(store.search("otter", 10).await.unwrap()[0].session_id, archive);
        store.trim(&archive, 1).await.unwrap();
        assert!(store.search("walrus", 10).await.unwrap().is_empty(), "a trimmed message leaves the index");
        assert_eq!(store.search("otter", 10).await.unwrap().len(), 1);
    }
}
