use super::{ManagedRoot, io_error, open_file};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::Read;
use std::sync::Arc;

const DEFAULT_LIMIT: u64 = 200;
const MAX_LIMIT: u64 = 400;
/// Larger files are refused: a line window of a file this big is better found with `grep`.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

tool_struct!(CodeRead { root: Arc<ManagedRoot> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    path: String,
    #[serde(default)]
    offset: Option<i64>,
    #[serde(default)]
    limit: Option<i64>,
}

impl Tool for CodeRead {
    type Args = Args;

    fn name(&self) -> &str {
        "code_read"
    }

    fn description(&self) -> String {
        format!(
            "Read a window of lines from a managed text file: `offset` lines are skipped (0-based), then up to \
             `limit` lines (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}) are returned."
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "offset": { "type": ["integer", "null"], "minimum": 0 },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let offset = u64::try_from(args.offset.unwrap_or(0))
            .map_err(|_| ToolError::invalid_arguments("offset must be 0 or more"))?;
        let limit = u64::try_from(args.limit.unwrap_or(DEFAULT_LIMIT as i64))
            .ok()
            .filter(|l| *l >= 1)
            .ok_or_else(|| ToolError::invalid_arguments("limit must be at least 1"))?
            .min(MAX_LIMIT);
        let (path, file, meta) = open_file(&self.root, &args.path)?;
        let size = meta.len();
        if size > MAX_FILE_BYTES {
            return Err(ToolError::respond(
                "file_too_large",
                format!("{} is {size} bytes; use grep to find the lines you need", path.display()),
            ));
        }
        let mut bytes = Vec::new();
        // Capped by the limit, not by the size read a moment ago: the file may grow in between.
        file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).map_err(|e| io_error("read", &path, &e))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::respond("not_utf8", format!("{} is not UTF-8 text", path.display())))?;
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len() as u64;
        let start = offset.min(total);
        let end = (start + limit).min(total);
        let window = lines.get(start as usize..end as usize).unwrap_or_default();
        Ok(json!({
            "ok": true,
            "path": path.display(),
            "path_absolute": path.absolute.display().to_string(),
            "offset": offset,
            "limit": limit,
            "start_line": if window.is_empty() { 0 } else { start + 1 },
            "end_line": end,
            "total_lines": total,
            "has_more": end < total,
            "content": window.join("\n"),
        }))
    }
}
