use super::{ManagedRoot, io_error, result, timestamp};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::ErrorKind;
use std::sync::Arc;

/// Entries beyond this are left out, so a huge folder cannot flood the context.
const MAX_ENTRIES: usize = 1000;

tool_struct!(ListFiles { root: Arc<ManagedRoot> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    folder: Option<String>,
}

impl Tool for ListFiles {
    type Args = Args;

    fn name(&self) -> &str {
        "list_files"
    }

    fn description(&self) -> String {
        "List managed files and folders in a folder (default: the managed root), sorted by name.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "folder": { "type": ["string", "null"], "description": "Folder relative to the managed root." }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let folder = self.root.resolve(args.folder.as_deref().unwrap_or(""))?;
        // The listing reads the folder the handle opened, so a folder swapped for a link after the check is
        // refused, not listed.
        let dir = match self.root.open_dir(&folder) {
            Ok(dir) => dir,
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Err(ToolError::respond(
                    "folder_not_found",
                    format!("folder not found: {}. Use list_files without a folder to see the root.", folder.display()),
                ));
            }
            Err(err) => return Err(io_error("list", &folder, &err)),
        };
        let mut entries = Vec::new();
        let mut truncated = false;
        let reader = dir.entries().map_err(|e| io_error("list", &folder, &e))?;
        for entry in reader.flatten() {
            if entries.len() >= MAX_ENTRIES {
                truncated = true;
                break;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            // The entry's own metadata: a link is reported as what it is, not what it points to, so listing
            // never follows a link out of the root.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let path = folder.child(&name).display();
            entries.push(json!({
                "name": name,
                "path": path,
                "is_dir": meta.is_dir(),
                "size_bytes": if meta.is_file() { Some(meta.len()) } else { None },
                "modified_at": timestamp(meta.modified().map(|t| t.into_std())),
            }));
        }
        entries.sort_by_key(|e| e["name"].as_str().unwrap_or_default().to_lowercase());
        let mut out = result("list", &folder);
        out.insert("root_dir".into(), json!(self.root.path().display().to_string()));
        out.insert("folder".into(), json!(folder.display()));
        out.insert("count".into(), json!(entries.len()));
        out.insert("truncated".into(), json!(truncated));
        out.insert("entries".into(), Value::Array(entries));
        Ok(Value::Object(out))
    }
}
