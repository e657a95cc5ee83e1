use super::{ManagedRoot, PathArgs, io_error, mime_for, result, timestamp};
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(FileInfo { root: Arc<ManagedRoot> });

impl Tool for FileInfo {
    type Args = PathArgs;

    fn name(&self) -> &str {
        "file_info"
    }

    fn description(&self) -> String {
        "Return size, MIME type and modification time of a managed file or folder.".into()
    }

    fn parameters(&self) -> Value {
        PathArgs::schema()
    }

    async fn call(&self, args: PathArgs, _ctx: &ToolContext) -> ToolResult {
        let path = self.root.resolve_required(&args.path)?;
        let meta = self.root.metadata(&path).map_err(|e| io_error("inspect", &path, &e))?;
        let mime = if meta.is_dir() { "inode/directory".to_string() } else { mime_for(&path.absolute) };
        let mut out = result("info", &path);
        out.insert("ok".into(), json!(true));
        out.insert("name".into(), json!(path.absolute.file_name().map(|n| n.to_string_lossy().into_owned())));
        out.insert("extension".into(), json!(path.absolute.extension().map(|e| format!(".{}", e.to_string_lossy()))));
        out.insert("is_dir".into(), json!(meta.is_dir()));
        out.insert("is_image".into(), json!(mime.starts_with("image/")));
        out.insert("mime".into(), json!(mime));
        out.insert("size_bytes".into(), json!(meta.len()));
        out.insert("modified_at".into(), json!(timestamp(meta.modified().map(|t| t.into_std()))));
        Ok(Value::Object(out))
    }
}
