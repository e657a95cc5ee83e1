//! Directives: effects a tool asks the agent loop to carry out because the tool cannot reach them itself.
//! A tool result may hold `"directive": {"type": ...}`; the loop takes it out before the model reads the result
//! and acts on it:
//!
//! - `send_file` (`{"type": "send_file", "path", "relative", "caption"}`): the file is handed to the caller at
//!   once as [`AgentEvent::SendFile`]; the conversation passes it to the chat's channel.
//! - `append_message` (from `self_insert_artifact`): a user message of text and image parts is added after the
//!   step's tool results, so the model sees the file in its next request.
//! - `attach_to_answer` (from `pre_response`): the files go out with the final answer
//!   ([`crate::AgentOutcome::attachments`]); the last `pre_response` decides, like its `kind`.
//!
//! A directive names a file on disk, so only the built-in tool that issues each kind is believed: an MCP tool
//! that returns a `directive` field gets its result passed on untouched, and reads or sends nothing.

use crate::outcome::AgentEvent;
use minibot_llm::{ContentPart, Message};
use serde_json::Value;
use std::path::PathBuf;

/// Largest image `self_insert_artifact` puts into a request (OpenAI's vision inputs stop at 20 MB; most
/// OpenAI-compatible servers far earlier).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Longest text file `self_insert_artifact` puts into a request whole; a longer one is cut, and says so.
pub const MAX_TEXT_BYTES: usize = 100_000;

/// A file for the user of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingFile {
    /// Where it is on this machine.
    pub path: PathBuf,
    /// Its path relative to the managed root, when inside it: what a task result carries, since the worker and
    /// the orchestrator may see the root at different places.
    pub relative: Option<String>,
    pub caption: Option<String>,
}

/// The directives of one run: messages to add after the current step, files to send with the answer.
#[derive(Debug, Default)]
pub(crate) struct Directives {
    inserts: Vec<Message>,
    attachments: Vec<OutgoingFile>,
}

impl Directives {
    /// Carries out the directive in `tool`'s `result`, if it has one it may issue, and returns the result the
    /// model reads, without the directive.
    pub(crate) async fn apply(
        &mut self,
        tool: &str,
        mut result: Value,
        on_event: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> Value {
        let kind = result.pointer("/directive/type").and_then(Value::as_str).unwrap_or_default().to_string();
        let issuer = match kind.as_str() {
            "send_file" => "send_file",
            "append_message" => "self_insert_artifact",
            "attach_to_answer" => "pre_response",
            _ => return result,
        };
        if tool != issuer {
            tracing::warn!(tool, directive = kind, "directive from a tool that may not issue it; ignored");
            return result;
        }
        let Some(directive) = result.as_object_mut().and_then(|o| o.remove("directive")) else {
            return result;
        };
        match kind.as_str() {
            "send_file" => {
                if let Some(file) = outgoing(&directive) {
                    on_event(AgentEvent::SendFile(file));
                }
            }
            "append_message" => match user_parts(&directive).await {
                Ok(message) => self.inserts.push(message),
                Err(reason) => {
                    // The tool checked the file a moment ago; it went away or became unreadable since.
                    if let Some(object) = result.as_object_mut() {
                        object.insert("ok".into(), Value::Bool(false));
                        object.insert("inserted".into(), Value::Bool(false));
                        object.insert("error".into(), Value::String(reason));
                    }
                }
            },
            _ => {
                self.attachments = directive
                    .get("files")
                    .and_then(Value::as_array)
                    .map(|files| files.iter().filter_map(outgoing).collect())
                    .unwrap_or_default();
            }
        }
        result
    }

    /// The messages to add after this step's tool results, in the order the calls ran.
    pub(crate) fn take_inserts(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.inserts)
    }

    pub(crate) fn take_attachments(&mut self) -> Vec<OutgoingFile> {
        std::mem::take(&mut self.attachments)
    }
}

fn outgoing(value: &Value) -> Option<OutgoingFile> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    Some(OutgoingFile { path: PathBuf::from(text("path")?), relative: text("relative"), caption: text("caption") })
}

/// The user message of an `append_message` directive: its text parts as they are, each file part read from
/// disk (an image as a `data:` URL, a text file as text, cut to [`MAX_TEXT_BYTES`]).
async fn user_parts(directive: &Value) -> Result<Message, String> {
    let parts = directive.pointer("/message/content").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut out = Vec::with_capacity(parts.len());
    for part in &parts {
        let text = |key: &str| part.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        match part.get("type").and_then(Value::as_str) {
            Some("text") => out.push(ContentPart::Text(text("text"))),
            Some(kind @ ("image" | "file")) => {
                let path = part.pointer("/source/path").and_then(Value::as_str).unwrap_or_default();
                // Never more than the cap plus one byte: the file may have grown since the tool checked it.
                let cap = if kind == "image" { MAX_IMAGE_BYTES } else { MAX_TEXT_BYTES as u64 };
                let (bytes, size) =
                    read_at_most(path, cap + 1).await.map_err(|e| format!("cannot read {path}: {e}"))?;
                let name = text("filename");
                if kind == "image" {
                    if bytes.len() as u64 > MAX_IMAGE_BYTES {
                        return Err(format!("{name} is larger than {MAX_IMAGE_BYTES} bytes"));
                    }
                    out.push(ContentPart::image_data(&text("mime"), &bytes));
                } else {
                    out.push(ContentPart::Text(file_text(&name, &bytes, size)));
                }
            }
            _ => {}
        }
    }
    if out.is_empty() {
        return Err("the artifact message has no content".into());
    }
    Ok(Message::UserParts(out))
}

/// A text file as the model reads it: a header line, then the content, cut at [`MAX_TEXT_BYTES`] on a character
/// boundary with a note saying how much was left out.
fn file_text(name: &str, bytes: &[u8], total: u64) -> String {
    let (kept, cut) = if bytes.len() > MAX_TEXT_BYTES {
        (&bytes[..MAX_TEXT_BYTES], true)
    } else {
        (bytes, total > bytes.len() as u64)
    };
    let text = match std::str::from_utf8(kept) {
        Ok(text) => text,
        // Cut inside a character: drop its first bytes; anything else was refused by the tool already.
        Err(error) => std::str::from_utf8(&kept[..error.valid_up_to()]).unwrap_or_default(),
    };
    let mut out = format!("File {name} ({total} bytes):\n{text}");
    if cut {
        out.push_str(&format!(
            "\n[Cut: only the first {} of {total} bytes are shown; read the rest with a file tool.]",
            text.len()
        ));
    }
    out
}

/// The first `limit` bytes of the file the tool checked, and its whole size. Opened without following links: a
/// folder on the path swapped for a link since the check cannot bring another file into the conversation.
async fn read_at_most(path: &str, limit: u64) -> std::io::Result<(Vec<u8>, u64)> {
    use tokio::io::AsyncReadExt;
    let file = minibot_sandbox::open_without_links(std::path::Path::new(path))?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::new();
    tokio::fs::File::from_std(file).take(limit).read_to_end(&mut bytes).await?;
    Ok((bytes, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_says_so() {
        let mut bytes = vec![b'a'; MAX_TEXT_BYTES - 1];
        bytes.extend_from_slice("é and more".as_bytes());
        let text = file_text("big.txt", &bytes, bytes.len() as u64);
        assert!(text.starts_with(&format!("File big.txt ({} bytes):\n", bytes.len())));
        assert!(text.ends_with(&format!(
            "[Cut: only the first {} of {} bytes are shown; read the rest with a file tool.]",
            MAX_TEXT_BYTES - 1,
            bytes.len()
        )));
        assert_eq!(file_text("s.txt", b"short", 5), "File s.txt (5 bytes):\nshort");
    }
}
