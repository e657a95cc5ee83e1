//! Turning a `tools/call` result into the JSON the model reads.

use crate::McpError;
use serde_json::{Value, json};

/// Binary-looking fields longer than this are replaced by a length marker: the model cannot use base64 and it
/// would crowd out everything else in the context.
const MAX_INLINE_BLOB_CHARS: usize = 256;
const BLOB_FIELDS: &[&str] = &["data", "base64", "bytes", "blob"];

/// What a remote tool returned, already flattened to text.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    pub is_error: bool,
    /// The content parts joined by `"\n"`.
    pub text: String,
}

/// Flattens protocol content blocks (as JSON) into one text: text parts whole, images as a marker, anything else
/// as compact JSON with large binary fields elided.
pub fn flatten_content(blocks: &[Value]) -> String {
    blocks.iter().map(flatten_block).collect::<Vec<_>>().join("\n")
}

fn flatten_block(block: &Value) -> String {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
        Some("image") => {
            let mime = block.get("mimeType").and_then(Value::as_str).unwrap_or("unknown");
            format!("[image payload omitted ({mime})]")
        }
        _ => elide_blobs(block.clone()).to_string(),
    }
}

fn elide_blobs(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, v)| {
                    let v = match v {
                        Value::String(s)
                            if BLOB_FIELDS.contains(&key.as_str()) && s.chars().count() > MAX_INLINE_BLOB_CHARS =>
                        {
                            Value::String(format!("<omitted {} chars>", s.chars().count()))
                        }
                        other => elide_blobs(other),
                    };
                    (key, v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(elide_blobs).collect()),
        other => other,
    }
}

/// The result object both modes return for a completed call, whole: the bindings declare `inline_result_chars`
/// as their spill limit, and the spill wrapper spills or cuts past it.
pub fn call_result(server: &str, tool: &str, output: CallOutput) -> Value {
    json!({
        "ok": !output.is_error,
        "server": server,
        "tool": tool,
        "is_error": output.is_error,
        "result": output.text,
    })
}

/// The result of a `tools/call` that failed. An answer over the size cap has a code of its own: calling again with
/// the same arguments would fail the same way.
pub fn call_error(server: &str, tool: &str, err: &McpError) -> Value {
    let code = match err {
        McpError::TooLarge { .. } => "mcp_result_too_large",
        _ => "mcp_call_failed",
    };
    error_result(server, code, &err.to_string(), Some(tool))
}

/// The `{ok:false,...}` object for a failure that never produced a tool result. It is a result, not a tool
/// error, so it gets the agent's error cap here: the text (a server's message may echo the arguments) and the
/// tool name the model wrote are kept short.
pub fn error_result(server: &str, code: &str, error: &str, tool: Option<&str>) -> Value {
    let error = minibot_agent::cap_error_message(error);
    let mut out = json!({"ok": false, "server": server, "error_code": code, "error": error});
    if let (Some(tool), Value::Object(map)) = (tool, &mut out) {
        map.insert("tool".into(), Value::String(minibot_agent::excerpt(tool)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_parts() {
        let big = "A".repeat(300);
        let text = flatten_content(&[
            json!({"type": "text", "text": "hello"}),
            json!({"type": "image", "data": big, "mimeType": "image/png"}),
            json!({"type": "resource", "resource": {"uri": "x:/1", "blob": big, "mimeType": "a/b"}}),
            json!({"type": "resource", "resource": {"uri": "x:/2", "blob": "c2hvcnQ="}}),
        ]);
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines[0], "hello");
        assert_eq!(lines[1], "[image payload omitted (image/png)]");
        assert!(lines[2].contains("<omitted 300 chars>"), "{}", lines[2]);
        assert!(lines[3].contains("c2hvcnQ="));
    }

    #[test]
    fn results_are_whole() {
        let out = call_result("s", "t", CallOutput { is_error: false, text: "hi".into() });
        assert_eq!(out, json!({"ok": true, "server": "s", "tool": "t", "is_error": false, "result": "hi"}));
        let out = call_result("s", "t", CallOutput { is_error: true, text: "x".repeat(50_000) });
        assert_eq!(out["ok"], false);
        assert_eq!(out["result"].as_str().map(str::len), Some(50_000));
    }
}
