//! Replacing known secret values with `***` in text the program writes (logs, and whatever else the caller
//! passes through [`Redactor::redact`]). A value is also found in the escaped forms that JSON, logfmt and Rust's
//! `Debug` give it, because that is how it appears in request bodies and log fields. Values shorter than
//! [`Redactor::MIN_LEN`] characters are left alone: replacing every `1` or `yes` would shred the logs and hide
//! nothing.

use crate::Secrets;
use aho_corasick::{AhoCorasick, MatchKind};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

/// Replaces known secret values. Cheap to clone; the default redacts nothing.
#[derive(Clone, Default)]
pub struct Redactor {
    matcher: Option<Arc<Matcher>>,
}

enum Matcher {
    Automaton(AhoCorasick),
    /// Longest first. Only when the automaton cannot be built (past size limits no vault comes near).
    Plain(Vec<String>),
}

impl Matcher {
    fn is_match(&self, haystack: &[u8]) -> bool {
        match self {
            Self::Automaton(automaton) => automaton.is_match(haystack),
            Self::Plain(patterns) => patterns.iter().any(|p| contains(haystack, p.as_bytes())),
        }
    }

    fn replace(&self, haystack: &[u8]) -> Vec<u8> {
        match self {
            Self::Automaton(automaton) => {
                let mut out = Vec::with_capacity(haystack.len());
                automaton.replace_all_with_bytes(haystack, &mut out, |_, _, dst| {
                    dst.extend_from_slice(Redactor::MASK.as_bytes());
                    true
                });
                out
            }
            Self::Plain(patterns) => {
                let mut text = haystack.to_vec();
                for pattern in patterns {
                    text = replace_plain(&text, pattern.as_bytes());
                }
                text
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Automaton(automaton) => automaton.patterns_len(),
            Self::Plain(patterns) => patterns.len(),
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace_plain(haystack: &[u8], needle: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(Redactor::MASK.as_bytes());
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

impl Redactor {
    /// What a value is replaced with.
    pub const MASK: &'static str = "***";
    /// Values with fewer characters than this are not redacted.
    pub const MIN_LEN: usize = 4;

    /// A redactor for every value of `secrets`.
    pub fn new(secrets: &Secrets) -> Self {
        Self::from_values(secrets.values())
    }

    pub fn from_values<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut patterns = BTreeSet::new();
        for value in values.into_iter().filter(|v| v.chars().count() >= Self::MIN_LEN) {
            patterns.insert(value.to_string());
            let json = serde_json::to_string(value).unwrap_or_default();
            patterns.insert(json[1..json.len().saturating_sub(1).max(1)].to_string());
            let debug = format!("{value:?}");
            patterns.insert(debug[1..debug.len() - 1].to_string());
        }
        patterns.retain(|p| !p.is_empty());
        if patterns.is_empty() {
            return Self::default();
        }
        // Leftmost-longest: where one secret contains another, the whole longer one goes.
        let matcher = match AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns) {
            Ok(automaton) => Matcher::Automaton(automaton),
            Err(_) => {
                let mut patterns: Vec<String> = patterns.into_iter().collect();
                patterns.sort_by_key(|p| std::cmp::Reverse(p.len()));
                Matcher::Plain(patterns)
            }
        };
        Self { matcher: Some(Arc::new(matcher)) }
    }

    /// Whether this redactor never changes anything.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `text` with every known secret value replaced by `***`; borrowed when nothing matched.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match self.redact_bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Patterns and the mask are whole UTF-8 strings, so replacing them keeps the text valid.
            Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
        }
    }

    /// Redacts the string values of a JSON document in place, leaving keys, numbers and booleans alone (a
    /// short secret such as `1234` must not turn `"max_tokens": 12345` into `***5`) and `data:` URLs (base64
    /// image data would be corrupted by a chance match, and holds no secret text).
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        if self.is_empty() {
            return;
        }
        match value {
            serde_json::Value::String(text) => {
                if !text.starts_with("data:")
                    && let Cow::Owned(redacted) = self.redact(text)
                {
                    *text = redacted;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|item| self.redact_json(item)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|item| self.redact_json(item)),
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
        }
    }

    /// JSON text with [`Self::redact_json`] applied; text that is not JSON is redacted as text.
    pub fn redact_json_text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.is_empty() {
            return Cow::Borrowed(text);
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(mut value) => {
                self.redact_json(&mut value);
                Cow::Owned(value.to_string())
            }
            Err(_) => self.redact(text),
        }
    }

    /// [`Self::redact`] on bytes that need not be UTF-8.
    pub fn redact_bytes<'t>(&self, bytes: &'t [u8]) -> Cow<'t, [u8]> {
        match &self.matcher {
            Some(matcher) if matcher.is_match(bytes) => Cow::Owned(matcher.replace(bytes)),
            _ => Cow::Borrowed(bytes),
        }
    }

    /// Wraps a writer: what is written is held until flushed or dropped, then redacted and passed on in one
    /// write. A tracing formatter writes each event through one such writer, so a value is never split between
    /// two writes. As a `tracing_subscriber` writer: `.with_writer(move || redactor.writer(std::io::stderr()))`.
    pub fn writer<W: Write>(&self, inner: W) -> RedactingWriter<W> {
        RedactingWriter { redactor: self.clone(), inner, held: Vec::new() }
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("patterns", &self.matcher.as_ref().map_or(0, |m| m.len())).finish()
    }
}

/// See [`Redactor::writer`].
pub struct RedactingWriter<W: Write> {
    redactor: Redactor,
    inner: W,
    held: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    fn pass_on(&mut self) -> std::io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        self.inner.write_all(&self.redactor.redact_bytes(&held))
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.redactor.is_empty() {
            return self.inner.write(buf);
        }
        self.held.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.pass_on()?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        let _ = self.pass_on();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn json_redaction_touches_string_values_only() {
        let r = Redactor::from_values(["1234", "user"]);
        let mut body = serde_json::json!({
            "max_tokens": 12345,
            "user": "the pin is 1234",
            "messages": [{ "content": [{ "type": "image_url", "image_url": { "url": "data:image/png;base64,AA1234user" } }] }],
        });
        r.redact_json(&mut body);
        assert_eq!(body["max_tokens"], 12345, "numbers stay");
        assert_eq!(body["user"], "the pin is ***", "keys stay, string values are masked");
        assert_eq!(body["messages"][0]["content"][0]["image_url"]["url"], "data:image/png;base64,AA1234user");
        assert_eq!(r.redact_json_text("{\"n\":1234,\"s\":\"1234\"}"), "{\"n\":1234,\"s\":\"***\"}");
        assert_eq!(r.redact_json_text("not json 1234"), "not json ***");
    }

    #[test]
    fn masks_values_and_their_escaped_forms() {
        let r = Redactor::from_values(["sk-live-123", "pa\"ss\nword", "abc"]);
        assert_eq!(r.redact("key=sk-live-123 end"), "key=*** end");
        assert_eq!(r.redact("json: \"pa\\\"ss\\nword\""), "json: \"***\"");
        assert_eq!(r.redact("raw pa\"ss\nword"), "raw ***");
        // Short values stay: masking every "abc" would shred the logs.
        assert_eq!(r.redact("abc"), "abc");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_longer_of_two_overlapping_values_goes_whole() {
        let r = Redactor::from_values(["token", "token-extended"]);
        assert_eq!(r.redact("a token-extended b token"), "a *** b ***");
    }

    #[test]
    fn empty_redactor_changes_nothing() {
        let r = Redactor::new(&Secrets::default());
        assert!(r.is_empty());
        assert_eq!(r.redact("sk-live-123"), "sk-live-123");
    }

    #[test]
    fn writer_redacts_a_value_split_across_writes() {
        let r = Redactor::from_values(["sk-live-123"]);
        let mut out = Vec::new();
        {
            let mut w = r.writer(&mut out);
            w.write_all(b"line with sk-li").unwrap();
            w.write_all(b"ve-123 inside\n").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "line with *** inside\n");
        assert_eq!(r.redact_bytes(b"\xff sk-live-123").as_ref(), b"\xff ***");
    }

    #[test]
    fn plain_fallback_matches_the_automaton() {
        let plain = Matcher::Plain(vec!["token-extended".into(), "token".into()]);
        assert_eq!(plain.replace(b"a token-extended b token"), b"a *** b ***");
        assert!(!plain.is_match(b"tok"));
    }
}
