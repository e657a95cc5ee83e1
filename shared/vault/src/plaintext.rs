//! The decrypted content: one `name: value` line per secret, as MiniBot writes it. A value is written
//! JSON-quoted when it is empty, has leading or trailing white space, spans lines (or holds any other control
//! character), starts with one of `"'#-`, or holds ` #` or `: ` (which a YAML reader would cut). Reading takes
//! plain values (trimmed), JSON double-quoted values and YAML single-quoted values; blank lines and `#` comment
//! lines are skipped. Errors give line numbers and names, never values.

use crate::name::is_valid_name;
use std::collections::BTreeMap;
use zeroize::Zeroizing;

/// A line of the plaintext that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct PlaintextError {
    pub line: usize,
    pub reason: String,
}

/// Parses `name: value` lines.
pub fn parse_plaintext(text: &str) -> Result<BTreeMap<String, String>, PlaintextError> {
    let mut entries = BTreeMap::new();
    let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let fail = |reason: String| PlaintextError { line, reason };
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((name, rest)) = trimmed.split_once(':') else {
            return Err(fail("expected `name: value`".into()));
        };
        let name = name.trim_end();
        if !is_valid_name(name) {
            return Err(fail(format!(
                "invalid secret name `{}`: use letters, digits, `_`, `.` and `-`, starting with a letter or `_`",
                name.escape_debug()
            )));
        }
        let value = parse_value(rest.trim_start()).map_err(|reason| fail(format!("secret `{name}`: {reason}")))?;
        if let Some(earlier) = first_seen.insert(name.to_string(), line) {
            return Err(fail(format!("secret `{name}` is already set on line {earlier}")));
        }
        entries.insert(name.to_string(), value);
    }
    Ok(entries)
}

fn parse_value(text: &str) -> Result<String, String> {
    if text.starts_with('"') {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<String>();
        let value = match stream.next() {
            Some(Ok(value)) => value,
            _ => return Err("the quoted value is not a valid JSON string".into()),
        };
        return trailing_is_blank(&text[stream.byte_offset()..]).map(|()| value);
    }
    if let Some(body) = text.strip_prefix('\'') {
        let mut value = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((index, c)) = chars.next() {
            if c != '\'' {
                value.push(c);
            } else if chars.peek().is_some_and(|(_, next)| *next == '\'') {
                chars.next();
                value.push('\'');
            } else {
                return trailing_is_blank(&body[index + 1..]).map(|()| value);
            }
        }
        return Err("the single-quoted value has no closing quote".into());
    }
    Ok(text.trim_end().to_string())
}

fn trailing_is_blank(rest: &str) -> Result<(), String> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') { Ok(()) } else { Err("text after the quoted value".into()) }
}

/// Writes entries as `name: value` lines, quoting values as described in the module docs.
pub fn format_plaintext<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::new());
    for (name, value) in entries {
        out.push_str(name);
        out.push_str(": ");
        if needs_quotes(value) {
            // A JSON string of valid UTF-8 always serialises.
            out.push_str(&Zeroizing::new(serde_json::to_string(value).unwrap_or_default()));
        } else {
            out.push_str(value);
        }
        out.push('\n');
    }
    out
}

fn needs_quotes(value: &str) -> bool {
    value.is_empty()
        || value.starts_with(char::is_whitespace)
        || value.ends_with(char::is_whitespace)
        || value.starts_with(['"', '\'', '#', '-'])
        || value.chars().any(char::is_control)
        || value.contains(" #")
        || value.contains(": ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn quotes_exactly_the_values_that_need_it() {
        let entries = map(&[
            ("plain", "sk-abc123"),
            ("empty", ""),
            ("padded", " x "),
            ("multi", "line1\nline2"),
            ("dq", "\"x"),
            ("sq", "'x"),
            ("hash", "#x"),
            ("dash", "-x"),
            ("inner", "a-b#c'd\"e"),
            ("unicode", "пароль"),
        ]);
        let text = format_plaintext(entries.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"plain: sk-abc123"), "{lines:?}");
        assert!(lines.contains(&"empty: \"\""));
        assert!(lines.contains(&"padded: \" x \""));
        assert!(lines.contains(&"multi: \"line1\\nline2\""));
        assert!(lines.contains(&"dq: \"\\\"x\""));
        assert!(lines.contains(&"sq: \"'x\""));
        assert!(lines.contains(&"hash: \"#x\""));
        assert!(lines.contains(&"dash: \"-x\""));
        assert!(lines.contains(&"inner: a-b#c'd\"e"));
        assert!(lines.contains(&"unicode: пароль"));
        assert_eq!(parse_plaintext(&text).unwrap(), entries);
    }

    #[test]
    fn reads_plain_double_and_single_quoted_values() {
        let text =
            "# a comment\n\nA: plain value  \nB: \"json \\\"q\\\" \\u00e9\"\nC: 'it''s'  \nD:\nE:   \"\"  # empty\n";
        let parsed = parse_plaintext(text).unwrap();
        assert_eq!(parsed, map(&[("A", "plain value"), ("B", "json \"q\" é"), ("C", "it's"), ("D", ""), ("E", "")]));
    }

    #[test]
    fn errors_name_the_line_and_never_the_value() {
        let cases = [
            ("A: 1\nno colon here\n", 2, "expected `name: value`"),
            ("9x: secretvalue\n", 1, "invalid secret name `9x`"),
            ("A: 1\nB: 2\nA: secretvalue\n", 3, "already set on line 1"),
            ("A: \"secretvalue\n", 1, "not a valid JSON string"),
            ("A: 'secretvalue\n", 1, "no closing quote"),
            ("A: \"secretvalue\" tail\n", 1, "text after the quoted value"),
        ];
        for (text, line, reason) in cases {
            let err = parse_plaintext(text).unwrap_err();
            assert_eq!(err.line, line, "{text}");
            assert!(err.reason.contains(reason), "{text}: {}", err.reason);
            assert!(!err.to_string().contains("secretvalue"), "{err}");
        }
    }
}
