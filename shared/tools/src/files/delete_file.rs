use super::walk::{MAX_WALK_DEPTH, Walked, count_entries};
use super::{ManagedRoot, ProtectedPaths, io_error, result};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

pub struct DeleteFile {
    root: Arc<ManagedRoot>,
    protected: Arc<ProtectedPaths>,
}

impl DeleteFile {
    pub fn new(root: Arc<ManagedRoot>, protected: Arc<ProtectedPaths>) -> Self {
        Self { root, protected }
    }
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Any,
    File,
    Folder,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    path: String,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    recursive: Option<bool>,
}

impl Tool for DeleteFile {
    type Args = Args;

    fn name(&self) -> &str {
        "delete_file"
    }

    fn description(&self) -> String {
        "Delete a managed file or folder permanently. A non-empty folder needs recursive=true.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "target": { "type": ["string", "null"], "enum": ["any", "file", "folder", null],
                            "description": "What the path must be (default any)." },
                "recursive": { "type": ["boolean", "null"], "description": "Delete a non-empty folder (default false)." }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let path = self.root.resolve_entry(&args.path)?;
        let target = args.target.unwrap_or(Target::Any);
        let recursive = args.recursive.unwrap_or(false);
        if path.absolute == self.root.path() {
            return Err(ToolError::respond("invalid_path", "the managed root itself cannot be deleted"));
        }
        let target_name = match target {
            Target::Any => "any",
            Target::File => "file",
            Target::Folder => "folder",
        };
        let mut out = result("delete", &path);
        out.insert("target".into(), json!(target_name));
        out.insert("recursive".into(), json!(recursive));
        let meta = match self.root.symlink_metadata(&path) {
            Ok(meta) => Some(meta),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(io_error("delete", &path, &err)),
        };
        let Some(meta) = meta else {
            out.insert("ok".into(), json!(true));
            out.insert("deleted".into(), json!(false));
            out.insert("deleted_count".into(), json!(0));
            out.insert("target_type".into(), Value::Null);
            out.insert("message".into(), json!(format!("{} does not exist; nothing deleted", path.display())));
            return Ok(Value::Object(out));
        };
        let is_dir = meta.is_dir();
        let target_type = if is_dir { "folder" } else { "file" };
        if (target == Target::File && is_dir) || (target == Target::Folder && !is_dir) {
            return Err(ToolError::respond(
                "target_mismatch",
                format!("{} is a {target_type}, not a {target_name}", path.display()),
            ));
        }
        let shown = json!({ "path": args.path, "target": target_name, "recursive": recursive });
        self.protected.guard(ctx, "delete_file", &shown, "deletes", &[&path.absolute]).await?;
        let deleted_count = if is_dir {
            let (count, walked) = self.root.open_dir(&path).map_or((0, Walked::default()), |dir| count_entries(&dir));
            let at_least = if walked.entries_capped { "at least " } else { "" };
            if count > 0 && !recursive {
                return Err(ToolError::respond(
                    "folder_not_empty",
                    format!(
                        "{} is not empty ({at_least}{count} entries); pass recursive=true to delete it",
                        path.display()
                    ),
                ));
            }
            // Refused whole rather than deleted down to the cap and left half there.
            if walked.too_deep > 0 {
                return Err(ToolError::respond(
                    "folder_too_deep",
                    format!(
                        "{} holds folders more than {MAX_WALK_DEPTH} levels deep, which delete_file does not walk; \
                         nothing was deleted",
                        path.display()
                    ),
                ));
            }
            let removed = self.root.remove_dir_all(&path).map_err(|e| io_error("delete", &path, &e))?;
            removed + 1
        } else {
            self.root.remove_file(&path).map_err(|e| io_error("delete", &path, &e))?;
            1
        };
        out.insert("ok".into(), json!(true));
        out.insert("deleted".into(), json!(true));
        out.insert("deleted_count".into(), json!(deleted_count));
        out.insert("target_type".into(), json!(target_type));
        out.insert("message".into(), json!(format!("deleted {target_type} {}", path.display())));
        Ok(Value::Object(out))
    }
}
