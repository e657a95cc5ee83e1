use super::{ManagedRoot, ProtectedPaths, io_error, result};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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
        if path.absolute.is_dir() {
            return Err(ToolError::respond("not_a_file", format!("{} is a folder", path.display())));
        }
        if path.absolute.exists() && !overwrite {
            return Err(ToolError::respond(
                "file_exists",
                format!("{} already exists; pass overwrite=true to replace it", path.display()),
            ));
        }
        let shown = json!({ "path": args.path, "overwrite": overwrite, "content": args.content });
        self.protected.guard(ctx, "write_file", &shown, "writes", &[&path.absolute]).await?;
        if let Some(parent) = path.absolute.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error("create the folder for", &path, &e))?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).truncate(true);
        if overwrite {
            options.create(true);
        } else {
            // create_new closes the window between the exists() check above and the write.
            options.create_new(true);
        }
        // O_NOFOLLOW: a symlink planted after resolution must not redirect the write out of the root.
        options.custom_flags(libc::O_NOFOLLOW);
        let mut file = options.open(&path.absolute).map_err(|e| io_error("write", &path, &e))?;
        file.write_all(args.content.as_bytes()).map_err(|e| io_error("write", &path, &e))?;
        let mut out = result("write", &path);
        out.insert("ok".into(), json!(true));
        out.insert("bytes_written".into(), json!(size));
        out.insert("overwrite".into(), json!(overwrite));
        Ok(Value::Object(out))
    }
}
