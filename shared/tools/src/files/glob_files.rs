use super::{ManagedRoot, result, timestamp};
use globset::{GlobBuilder, GlobSetBuilder};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
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
        if !folder.absolute.is_dir() {
            return Err(ToolError::respond("folder_not_found", format!("folder not found: {}", folder.display())));
        }
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
        let walker = ignore::WalkBuilder::new(&folder.absolute)
            .standard_filters(false)
            .follow_links(false)
            .sort_by_file_path(|a, b| a.cmp(b))
            .build();
        let mut entries = Vec::new();
        let mut truncated = false;
        for entry in walker.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&folder.absolute) else {
                continue;
            };
            if !set.is_match(rel) {
                continue;
            }
            if entries.len() >= limit {
                truncated = true;
                break;
            }
            let meta = entry.metadata().ok();
            let shown = match entry.path().strip_prefix(self.root.path()) {
                Ok(inside) => inside.to_string_lossy().into_owned(),
                Err(_) => entry.path().display().to_string(),
            };
            entries.push(json!({
                "name": entry.file_name().to_string_lossy(),
                "path": shown,
                "is_dir": false,
                "size_bytes": meta.as_ref().map(|m| m.len()),
                "modified_at": meta.and_then(|m| timestamp(m.modified())),
            }));
        }
        let mut out = result("glob", &folder);
        out.insert("root_dir".into(), json!(self.root.path().display().to_string()));
        out.insert("folder".into(), json!(folder.display()));
        out.insert("pattern".into(), json!(pattern));
        out.insert("count".into(), json!(entries.len()));
        out.insert("truncated".into(), json!(truncated));
        out.insert("entries".into(), Value::Array(entries));
        Ok(Value::Object(out))
    }
}
