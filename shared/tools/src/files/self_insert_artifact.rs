//! `self_insert_artifact` puts a managed file or image into the agent's own context. Like `send_file` it
//! cannot do that itself: it returns `{"directive": {"type": "append_message", "message": {...}}}`, a user
//! message whose parts reference the file as `{"type": "managed_file", "path": <absolute>}`. Only the main
//! agent honours the directive; system-role inserts are refused because they would let file content speak
//! with the system prompt's authority.

use super::{ManagedRoot, mime_for, not_found};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

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
        "Insert a managed file or image into your own context as a user message, so you can look at it.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
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
        let path = self.root.resolve_required(&args.path)?;
        if !path.absolute.is_file() {
            return Err(not_found(&path));
        }
        let mime = args.mime.unwrap_or_else(|| mime_for(&path.absolute));
        if args.kind == Kind::Image && !mime.starts_with("image/") {
            return Err(ToolError::respond(
                "not_an_image",
                format!("{} has type {mime}; insert it with as=\"file\"", path.display()),
            ));
        }
        let size = std::fs::metadata(&path.absolute).map(|m| m.len()).unwrap_or(0);
        let absolute = path.absolute.display().to_string();
        let filename = args.filename.or_else(|| path.absolute.file_name().map(|n| n.to_string_lossy().into_owned()));
        let mut parts = Vec::new();
        if let Some(text) = args.text.filter(|t| !t.is_empty()) {
            parts.push(json!({ "type": "text", "text": text }));
        }
        let kind = if args.kind == Kind::Image { "image" } else { "file" };
        parts.push(json!({
            "type": kind,
            "source": { "type": "managed_file", "path": absolute },
            "mime": mime,
            "filename": filename,
        }));
        Ok(json!({
            "status": "ok",
            "ok": true,
            "path": path.display(),
            "path_absolute": absolute,
            "mime": mime,
            "size": size,
            "directive": { "type": "append_message", "message": { "role": "user", "content": parts } },
        }))
    }
}
