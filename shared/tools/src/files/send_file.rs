//! `send_file` cannot reach a channel from inside the tool crate, so it returns a directive instead of
//! sending: `{"directive": {"type": "send_file", "path": <absolute>, "relative": <path|null>, "caption":
//! <text|null>}}`. The agent loop takes it out of the result and hands the file to the conversation, which
//! passes it to the chat's channel at once (see `minibot_agent::directives`). A channel that cannot deliver
//! files at all (its [`minibot_agent::ChannelCapabilities`] say so) gets an error instead of a directive, so the
//! model is never told a file was sent when it was not.

use super::{ManagedRoot, existing_file, mime_for, result};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Telegram's caption limit; longer captions are refused rather than cut silently.
const MAX_CAPTION_CHARS: usize = 1024;

tool_struct!(SendFile { root: Arc<ManagedRoot> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    path: String,
    #[serde(default)]
    caption: Option<String>,
}

impl Tool for SendFile {
    type Args = Args;

    fn name(&self) -> &str {
        "send_file"
    }

    fn description(&self) -> String {
        "Deliver a managed file to the user in the current conversation, with an optional caption. The file is \
         sent right away; say in your answer what you sent."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "Path relative to the managed root." },
                "caption": { "type": ["string", "null"] }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        // Asked first, so the model never hears "sent" for a file that no one will deliver.
        if !ctx.capabilities.files {
            return Err(ToolError::respond(
                "channel_cannot_deliver_files",
                format!(
                    "this conversation's channel ({}) cannot deliver files; tell the user the file's path instead",
                    if ctx.channel.is_empty() { "none" } else { ctx.channel.as_str() }
                ),
            ));
        }
        let path = existing_file(&self.root, &args.path)?;
        if args.caption.as_ref().is_some_and(|c| c.chars().count() > MAX_CAPTION_CHARS) {
            return Err(ToolError::invalid_arguments(format!("caption is longer than {MAX_CAPTION_CHARS} characters")));
        }
        let absolute = path.absolute.display().to_string();
        let mut out = result("send", &path);
        out.insert("ok".into(), json!(true));
        out.insert("channel".into(), json!(ctx.channel));
        out.insert("chat_id".into(), json!(ctx.chat_id));
        out.insert("mime".into(), json!(mime_for(&path.absolute)));
        out.insert("size_bytes".into(), json!(self.root.metadata(&path).map(|m| m.len()).ok()));
        out.insert("sent".into(), json!(true));
        out.insert(
            "directive".into(),
            json!({ "type": "send_file", "path": absolute, "relative": path.relative, "caption": args.caption }),
        );
        Ok(Value::Object(out))
    }
}
