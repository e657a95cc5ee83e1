//! `pre_response`: declares how the final answer is rendered, and which managed files go with it. The agent
//! loop reads the last call's `kind` and `meta`; the attachments travel as an `attach_to_answer` directive (see
//! `minibot_agent::directives`) and reach the user with the answer: through the chat's channel for the main
//! agent, with the task result for a task worker. The files are checked here, so the model hears about a
//! missing file or a channel that cannot take files now, not never.

use crate::files::{ManagedRoot, existing_file};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Telegram's caption limit, as for `send_file`.
const MAX_CAPTION_CHARS: usize = 1024;

/// Declares how the final answer is rendered and what it carries. `root` is the managed-file root attachments
/// are read from; without one (file storage off) attachments are refused.
pub struct PreResponse {
    root: Option<Arc<ManagedRoot>>,
}

impl PreResponse {
    pub fn new(root: Option<Arc<ManagedRoot>>) -> Self {
        Self { root }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    kind: String,
    #[serde(default)]
    meta: Option<Meta>,
    #[serde(default)]
    attachments: Option<Vec<Attachment>>,
}

#[derive(Deserialize, serde::Serialize, Default)]
#[serde(deny_unknown_fields)]
struct Meta {
    #[serde(default)]
    disable_link_preview: Option<bool>,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Attachment {
    path: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    caption: Option<String>,
}

impl Tool for PreResponse {
    type Args = Args;

    fn name(&self) -> &str {
        "pre_response"
    }

    fn description(&self) -> String {
        "Declare how your final answer should be rendered before you write it: `kind` is text, html or \
         markdown (the default); `meta.disable_link_preview` turns link previews off; `attachments` are managed \
         files sent to the user with the answer."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "kind": { "type": "string", "enum": ["text", "html", "markdown"] },
                "meta": {
                    "type": ["object", "null"],
                    "properties": { "disable_link_preview": { "type": ["boolean", "null"] } },
                    "additionalProperties": false
                },
                "attachments": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": { "type": "string", "description": "Path relative to the managed root." },
                            "type": { "type": "string" },
                            "caption": { "type": ["string", "null"] }
                        },
                        "required": ["path", "type"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["kind"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        if !matches!(args.kind.as_str(), "text" | "html" | "markdown") {
            return Err(ToolError::invalid_arguments(format!(
                "kind must be text, html or markdown, not `{}`",
                minibot_agent::excerpt(&args.kind)
            )));
        }
        let attachments = args.attachments.unwrap_or_default();
        let mut shown = Vec::with_capacity(attachments.len());
        let mut files = Vec::with_capacity(attachments.len());
        if !attachments.is_empty() {
            let root = self.checked_root(ctx)?;
            for (index, attachment) in attachments.iter().enumerate() {
                let path = existing_file(root, &attachment.path).map_err(|error| match error {
                    ToolError::RespondToModel { code, message } => {
                        ToolError::respond(code, format!("attachments[{index}]: {message}"))
                    }
                    fatal => fatal,
                })?;
                if attachment.caption.as_ref().is_some_and(|c| c.chars().count() > MAX_CAPTION_CHARS) {
                    return Err(ToolError::invalid_arguments(format!(
                        "attachments[{index}].caption is longer than {MAX_CAPTION_CHARS} characters"
                    )));
                }
                let absolute = path.absolute.display().to_string();
                shown.push(json!({ "path": path.display(), "type": attachment.kind, "caption": attachment.caption,
                                   "path_absolute": absolute }));
                files.push(json!({ "path": absolute, "relative": path.relative, "caption": attachment.caption }));
            }
        }
        let mut out = json!({
            "kind": args.kind,
            "meta": args.meta.unwrap_or_default(),
            "attachments": shown,
            // Always sent, so a later call without attachments drops those of an earlier one: the last call
            // decides, as it does for `kind`.
            "directive": { "type": "attach_to_answer", "files": files },
        });
        if !files.is_empty() {
            out["delivery"] = json!("The attachments are sent to the user with your answer.");
        }
        Ok(out)
    }
}

impl PreResponse {
    /// The root attachments come from, when this turn can deliver files at all.
    fn checked_root(&self, ctx: &ToolContext) -> Result<&ManagedRoot, ToolError> {
        if !ctx.capabilities.files {
            return Err(ToolError::respond(
                "channel_cannot_deliver_files",
                format!(
                    "this conversation's channel ({}) cannot deliver files; call pre_response without attachments \
                     and give the user the files' paths in your answer instead",
                    if ctx.channel.is_empty() { "none" } else { ctx.channel.as_str() }
                ),
            ));
        }
        self.root.as_deref().ok_or_else(|| {
            ToolError::respond(
                "file_storage_disabled",
                "attachments are managed files, and [tools.file_storage] is off; call pre_response without \
                 attachments",
            )
        })
    }
}
