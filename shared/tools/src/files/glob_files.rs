use super::{Found, ManagedRoot, WalkOptions, io_error, result, timestamp, walk_files};
use globset::{GlobBuilder, GlobSetBuilder};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::ErrorKind;
use std::ops::ControlFlow;
use std::sync::Arc;

const DEFAULT_LIMIT: u64 = 200;
const MAX_LIMIT: u64 = 1000;

tool_struct!(GlobFiles { root: Arc<ManagedRoot> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    pattern: String,
    #[serde(default)]
    folder: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

impl Tool for GlobFiles {
    type Args = Args;

    fn name(&self) -> &str {
        "glob_files"
    }

    fn description(&self) -> String {
        format!(
            "List managed files matching a glob pattern (`*.csv`, `reports/**/*.md`) at any depth under a folder \
             (default the root). At most `limit` results (default {DEFAULT_LIMIT}, max {MAX_LIMIT})."
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": { "type": "string" },
                "folder": { "type": ["string", "null"] },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT }
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT as i64).clamp(1, MAX_LIMIT as i64) as usize;
        let pattern = args.pattern.trim();
        if pattern.is_empty() || pattern.contains('\0') {
            return Err(ToolError::invalid_arguments("pattern must be a non-empty glob"));
        }
        if pattern.starts_with('/') || pattern.split('/').any(|part| part == "..") {
            return Err(ToolError::invalid_arguments("pattern must be relative and must not contain `..`"));
        }
        let folder = self.root.resolve(args.folder.as_deref().unwrap_or(""))?;
        // The walk starts from the folder the handle opened and opens every subfolder from its parent without
        // following links, so a folder swapped for a link mid-walk is skipped, not walked.
        let dir = match self.root.open_dir(&folder) {
            Ok(dir) => dir,
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Err(ToolError::respond("folder_not_found", format!("folder not found: {}", folder.display())));
            }
            Err(err) => return Err(io_error("list", &folder, &err)),
        };
        // Python's rglob matches the pattern at any depth, so a bare `*.txt` also matches `a/b/c.txt`.
        let mut set = GlobSetBuilder::new();
        for candidate in [pattern.to_string(), format!("**/{pattern}")] {
            let glob = GlobBuilder::new(&candidate)
                .literal_separator(true)
                .build()
                .map_err(|e| ToolError::invalid_arguments(format!("invalid glob pattern: {e}")))?;
            set.add(glob);
        }
        let set = set.build().map_err(|e| ToolError::invalid_arguments(format!("invalid glob pattern: {e}")))?;
        let mut entries = Vec::new();
        let mut truncated = false;
        let options = WalkOptions { include_hidden: true, max_depth: None };
        let walked = walk_files(&dir, options, &mut |found: Found<'_>| {
            if !set.is_match(found.relative) {
                return ControlFlow::Continue(());
            }
            if entries.len() >= limit {
                truncated = true;
                return ControlFlow::Break(());
            }
            let shown = folder.child(&found.relative.to_string_lossy()).display();
            entries.push(json!({
                "name": found.name.to_string_lossy(),
                "path": shown,
                "is_dir": false,
                "size_bytes": found.metadata.len(),
                "modified_at": timestamp(found.metadata.modified().map(|t| t.into_std())),
            }));
            ControlFlow::Continue(())
        });
        let mut out = result("glob", &folder);
        out.insert("root_dir".into(), json!(self.root.path().display().to_string()));
        out.insert("folder".into(), json!(folder.display()));
        out.insert("pattern".into(), json!(pattern));
        out.insert("count".into(), json!(entries.len()));
        out.insert("truncated".into(), json!(truncated));
        out.insert("entries".into(), Value::Array(entries));
        if let Some(notice) = walked.notice() {
            out.insert("notice".into(), json!(notice));
        }
        Ok(Value::Object(out))
    }
}
