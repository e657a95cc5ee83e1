use super::{ManagedRoot, ProtectedPaths, io_error, result};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

pub struct WriteFile {
    root: Arc<ManagedRoot>,
    max_write_bytes: u64,
    protected: Arc<ProtectedPaths>,
}

impl WriteFile {
    pub fn new(root: Arc<ManagedRoot>, max_write_bytes: u64, protected: Arc<ProtectedPaths>) -> Self {
        Self { root, max_write_bytes, protected }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    path: String,
    content: String,
    #[serde(default)]
    overwrite: Option<bool>,
}

impl Tool for WriteFile {
    type Args = Args;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> String {
        format!(
            "Create a managed text file (UTF-8, at most {} bytes). Set overwrite=true to replace an existing file.",
            self.max_write_bytes
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "Path relative to the managed root." },
                "content": { "type": "string", "description": "Text to write; must not be empty." },
                "overwrite": { "type": ["boolean", "null"], "description": "Replace an existing file (default false)." }
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let path = self.root.resolve_required(&args.path)?;
        let overwrite = args.overwrite.unwrap_or(false);
        if args.content.is_empty() {
            return Err(ToolError::invalid_arguments("content must not be empty"));
        }
        let size = args.content.len() as u64;
        if size > self.max_write_bytes {
            return Err(ToolError::respond(
                "content_too_large",
                format!("content is {size} bytes; the limit is {} bytes", self.max_write_bytes),
            ));
        }
        let existing = match self.root.metadata(&path) {
            Ok(meta) => Some(meta),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(io_error("write", &path, &err)),
        };
        if existing.as_ref().is_some_and(|meta| meta.is_dir()) {
            return Err(ToolError::respond("not_a_file", format!("{} is a folder", path.display())));
        }
        if existing.is_some() && !overwrite {
            return Err(ToolError::respond(
                "file_exists",
                format!("{} already exists; pass overwrite=true to replace it", path.display()),
            ));
        }
        let shown = json!({ "path": args.path, "overwrite": overwrite, "content": args.content });
        self.protected.guard(ctx, "write_file", &shown, "writes", &[&path.absolute]).await?;
        self.root.create_parent(&path).map_err(|e| io_error("create the folder for", &path, &e))?;
        let written = if overwrite {
            // A new file renamed over the old one: a hard link to the old file (perhaps from outside the root)
            // keeps its content.
            self.root.replace(&path, args.content.as_bytes())
        } else {
            // create_new closes the window between the check above and the write.
            self.root.create_new(&path, args.content.as_bytes())
        };
        written.map_err(|e| io_error("write", &path, &e))?;
        let mut out = result("write", &path);
        out.insert("ok".into(), json!(true));
        out.insert("bytes_written".into(), json!(size));
        out.insert("overwrite".into(), json!(overwrite));
        Ok(Value::Object(out))
    }
}
