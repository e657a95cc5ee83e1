//! Small pure helpers of the loop's guards: argument repair, failure signatures, iteration fingerprints and the
//! unwrapping of legacy JSON answers.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Parses the model's argument text. Repairs what models commonly get wrong: code fences around the JSON, and
/// closing braces cut off at the end. Empty text is an empty object.
pub fn parse_arguments(raw: &str) -> Result<Value, String> {
    let text = raw.trim();
    if text.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let text = strip_fences(text);
    let first = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(error) => {
            let open = text.matches('{').count().saturating_sub(text.matches('}').count());
            let repaired = format!("{text}{}", "}".repeat(open));
            match (open > 0).then(|| serde_json::from_str::<Value>(&repaired)) {
                Some(Ok(value)) => value,
                _ => return Err(format!("the arguments are not valid JSON ({error})")),
            }
        }
    };
    match first {
        Value::Object(_) => Ok(first),
        // Some models double-encode: a JSON string holding the object.
        Value::String(inner) => match serde_json::from_str::<Value>(&inner) {
            Ok(value @ Value::Object(_)) => Ok(value),
            _ => Err("the arguments must be a JSON object".into()),
        },
        _ => Err("the arguments must be a JSON object".into()),
    }
}

fn strip_fences(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

pub fn sha256_hex(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Old prompts taught models to answer `{"answer": {"kind", "content"}}` or `{"answer": "..."}`; show the text.
pub fn unwrap_legacy_answer(text: &str) -> String {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') && trimmed.contains("\"answer\"")) {
        return text.to_string();
    }
    match serde_json::from_str::<Value>(trimmed).ok().and_then(|v| v.get("answer").cloned()) {
        Some(Value::String(answer)) => answer,
        Some(Value::Object(inner)) => match inner.get("content") {
            Some(Value::String(content)) => content.clone(),
            _ => text.to_string(),
        },
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_fences_and_missing_braces() {
        assert_eq!(parse_arguments("```json\n{\"a\":1}\n```"), Ok(serde_json::json!({"a": 1})));
        assert_eq!(parse_arguments("{\"a\":{\"b\":1}"), Ok(serde_json::json!({"a": {"b": 1}})));
        assert_eq!(parse_arguments(""), Ok(serde_json::json!({})));
        assert_eq!(parse_arguments("\"{\\\"a\\\":2}\""), Ok(serde_json::json!({"a": 2})));
        assert!(parse_arguments("{\"a\": ").is_err());
        assert!(parse_arguments("[1,2]").is_err());
    }

    #[test]
    fn legacy_answers_are_unwrapped() {
        assert_eq!(unwrap_legacy_answer(r#"{"answer":"hi"}"#), "hi");
        assert_eq!(unwrap_legacy_answer(r#"{"answer":{"kind":"text","content":"yo"}}"#), "yo");
        assert_eq!(unwrap_legacy_answer("plain"), "plain");
    }
}
