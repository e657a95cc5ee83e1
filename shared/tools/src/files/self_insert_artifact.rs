//! `self_insert_artifact` puts a managed image or text file into the agent's own context. Like `send_file` it
//! cannot do that itself: it checks the file and returns `{"directive": {"type": "append_message", "message":
//! {...}}}`, a user message whose parts reference the file as `{"type": "managed_file", "path": <absolute>}`.
//! The agent loop reads the file and adds the message after the step's tool results, so the model's next
//! request carries it: an image as an `image_url` part with a `data:` URL, a text file as a text part (see
//! `minibot_agent::directives`). System-role inserts are refused because they would let file content speak
//! with the system prompt's authority.

use super::{ManagedRoot, existing_file, mime_for};
use minibot_agent::directives::{MAX_IMAGE_BYTES, MAX_TEXT_BYTES};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::Read;
use std::sync::Arc;

/// Opens the file through the root's handle (each check reads it from the start).
type Open<'a> = &'a dyn Fn() -> std::io::Result<std::fs::File>;

/// The image types OpenAI-compatible vision inputs take.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

tool_struct!(SelfInsertArtifact { root: Arc<ManagedRoot> });

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Image,
    File,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    path: String,
    #[serde(rename = "as")]
    kind: Kind,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    mime: Option<String>,
    #[serde(default)]
    filename: Option<String>,
}

impl Tool for SelfInsertArtifact {
    type Args = Args;

    fn name(&self) -> &str {
        "self_insert_artifact"
    }

    fn description(&self) -> String {
        format!(
            "Look at a managed file yourself: it is added to your context as a user message right after this \
             result. `as`: \"image\" for a PNG, JPEG, GIF or WebP image (up to {} MB), \"file\" for a UTF-8 text \
             file (the first {} KB).",
            MAX_IMAGE_BYTES / (1024 * 1024),
            MAX_TEXT_BYTES / 1000
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "Path relative to the managed root." },
                "as": { "type": "string", "enum": ["image", "file"] },
                "role": { "type": ["string", "null"], "enum": ["user", "system", null], "description": "Only user is honoured." },
                "text": { "type": ["string", "null"], "description": "Text to put before the artifact." },
                "mime": { "type": ["string", "null"] },
                "filename": { "type": ["string", "null"] }
            },
            "required": ["path", "as"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let role = args.role.as_deref().unwrap_or("user");
        if role != "user" {
            return Err(ToolError::respond(
                "role_not_allowed",
                format!("role `{role}` is not allowed; artifacts are inserted as user messages only"),
            ));
        }
        let path = existing_file(&self.root, &args.path)?;
        let shown = path.display();
        let mime = args.mime.unwrap_or_else(|| mime_for(&path.absolute));
        let size = self
            .root
            .metadata(&path)
            .map(|m| m.len())
            .map_err(|e| ToolError::respond("file_io_error", format!("cannot read {shown}: {e}")))?;
        let open = || self.root.open_read(&path);
        let filename = args
            .filename
            .or_else(|| path.absolute.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| shown.clone());
        // An image's type comes from its bytes, not from the model's `mime` or the file name: a provider
        // refuses a data URL whose content does not match, and the refused part would stay in the run.
        let mime = match args.kind {
            Kind::Image => sniff_image(&open).map_or(mime, str::to_string),
            Kind::File => mime,
        };
        let truncated = match args.kind {
            Kind::Image => {
                check_image(&shown, &mime, size)?;
                if sniff_image(&open).is_none() {
                    return Err(ToolError::respond(
                        "not_an_image",
                        format!("{shown} does not hold a PNG, JPEG, GIF or WebP image; insert it with as=\"file\""),
                    ));
                }
                false
            }
            Kind::File => check_text(&open, &shown, &mime)?,
        };
        let absolute = path.absolute.display().to_string();
        let kind = if args.kind == Kind::Image { "image" } else { "file" };
        let label = args.text.filter(|t| !t.is_empty()).unwrap_or_else(|| {
            format!("{kind} {filename} ({mime}, {size} bytes), inserted with self_insert_artifact:")
        });
        let parts = vec![
            json!({ "type": "text", "text": label }),
            json!({ "type": kind, "source": { "type": "managed_file", "path": absolute }, "mime": mime,
                    "filename": filename }),
        ];
        let notice = if truncated {
            format!(
                "The first {MAX_TEXT_BYTES} of {size} bytes of {shown} are added to your context as the user \
                 message after this result; the rest was cut."
            )
        } else {
            format!("{shown} is added to your context as the user message after this result.")
        };
        Ok(json!({
            "status": "ok",
            "ok": true,
            "inserted": true,
            "as": kind,
            "path": shown,
            "path_absolute": absolute,
            "mime": mime,
            "size": size,
            "truncated": truncated,
            "message": notice,
            "directive": { "type": "append_message", "message": { "role": "user", "content": parts } },
        }))
    }
}

fn check_image(shown: &str, mime: &str, size: u64) -> Result<(), ToolError> {
    if !mime.starts_with("image/") {
        return Err(ToolError::respond("not_an_image", format!("{shown} has type {mime}; insert it with as=\"file\"")));
    }
    if !IMAGE_TYPES.contains(&mime) {
        return Err(ToolError::respond(
            "unsupported_image_type",
            format!("{shown} is {mime}; models take PNG, JPEG, GIF and WebP images only"),
        ));
    }
    if size > MAX_IMAGE_BYTES {
        return Err(ToolError::respond(
            "file_too_large",
            format!("{shown} is {size} bytes; images up to {MAX_IMAGE_BYTES} bytes can be inserted"),
        ));
    }
    Ok(())
}

/// Checks that the part that will be inserted is UTF-8 text; returns whether the file is longer than that.
fn check_text(open: Open<'_>, shown: &str, mime: &str) -> Result<bool, ToolError> {
    let read_error = |e: std::io::Error| ToolError::respond("file_io_error", format!("cannot read {shown}: {e}"));
    let file = open().map_err(read_error)?;
    let mut head = Vec::with_capacity(MAX_TEXT_BYTES + 1);
    file.take(MAX_TEXT_BYTES as u64 + 1).read_to_end(&mut head).map_err(read_error)?;
    let truncated = head.len() > MAX_TEXT_BYTES;
    head.truncate(MAX_TEXT_BYTES);
    let text_ok = match std::str::from_utf8(&head) {
        Ok(_) => true,
        // A character cut by the size limit is fine; an invalid byte anywhere else is not text.
        Err(error) => truncated && error.error_len().is_none(),
    };
    if !text_ok {
        let hint = if mime.starts_with("image/") { "; insert an image with as=\"image\"" } else { "" };
        return Err(ToolError::respond(
            "not_text",
            format!("{shown} is not UTF-8 text ({mime}); only text files and images can be inserted{hint}"),
        ));
    }
    Ok(truncated)
}

/// The image type the file's first bytes show, among those models take.
fn sniff_image(open: Open<'_>) -> Option<&'static str> {
    let mut head = [0u8; 12];
    let mut file = open().ok()?;
    let read = file.read(&mut head).ok()?;
    let head = &head[..read];
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() == 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}
