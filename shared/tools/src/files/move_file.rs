use super::{ManagedRoot, ProtectedPaths, io_error, not_found};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

pub struct MoveFile {
    root: Arc<ManagedRoot>,
    protected: Arc<ProtectedPaths>,
}

impl MoveFile {
    pub fn new(root: Arc<ManagedRoot>, protected: Arc<ProtectedPaths>) -> Self {
        Self { root, protected }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    source_path: String,
    destination_path: String,
    #[serde(default)]
    overwrite: Option<bool>,
}

impl Tool for MoveFile {
    type Args = Args;

    fn name(&self) -> &str {
        "move_file"
    }

    fn description(&self) -> String {
        "Move or rename a managed file or folder. Set overwrite=true to replace an existing destination file.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "source_path": { "type": "string" },
                "destination_path": { "type": "string" },
                "overwrite": { "type": ["boolean", "null"], "description": "Replace an existing destination (default false)." }
            },
            "required": ["source_path", "destination_path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let source = self.root.resolve_entry(&args.source_path)?;
        let destination = self.root.resolve_entry(&args.destination_path)?;
        let overwrite = args.overwrite.unwrap_or(false);
        if let Err(err) = self.root.symlink_metadata(&source) {
            return Err(if err.kind() == std::io::ErrorKind::NotFound {
                not_found(&source)
            } else {
                io_error("move", &source, &err)
            });
        }
        if source.absolute == self.root.path() {
            return Err(ToolError::respond("invalid_path", "the managed root itself cannot be moved"));
        }
        if destination.absolute.starts_with(&source.absolute) {
            return Err(ToolError::respond("invalid_path", "cannot move a folder into itself"));
        }
        if self.root.symlink_metadata(&destination).is_ok() {
            if !overwrite {
                return Err(ToolError::respond(
                    "file_exists",
                    format!("{} already exists; pass overwrite=true to replace it", destination.display()),
                ));
            }
            if self.root.metadata(&destination).is_ok_and(|meta| meta.is_dir()) {
                return Err(ToolError::respond(
                    "not_a_file",
                    format!("{} is a folder and cannot be overwritten", destination.display()),
                ));
            }
        }
        let shown = json!({
            "source_path": args.source_path, "destination_path": args.destination_path, "overwrite": overwrite
        });
        let targets = [source.absolute.as_path(), destination.absolute.as_path()];
        self.protected.guard(ctx, "move_file", &shown, "moves or replaces", &targets).await?;
        self.root.create_parent(&destination).map_err(|e| io_error("create the folder for", &destination, &e))?;
        self.root.rename(&source, &destination).map_err(|e| io_error("move", &source, &e))?;
        let mut out = Map::new();
        out.insert("action".into(), json!("move"));
        out.insert("ok".into(), json!(true));
        out.insert("source_path".into(), json!(source.display()));
        out.insert("destination_path".into(), json!(destination.display()));
        out.insert("overwrite".into(), json!(overwrite));
        source.describe_into(&mut out, "source_");
        destination.describe_into(&mut out, "destination_");
        Ok(Value::Object(out))
    }
}
