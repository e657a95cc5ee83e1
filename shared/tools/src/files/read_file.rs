use super::{ManagedRoot, PathArgs, io_error, open_file, result};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde_json::{Value, json};
use std::io::Read;
use std::sync::Arc;

/// MiniBot returns at most this many bytes; `code_read` pages through longer files.
const MAX_READ_BYTES: u64 = 131_072;

tool_struct!(ReadFile { root: Arc<ManagedRoot> });

impl Tool for ReadFile {
    type Args = PathArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> String {
        format!(
            "Read a managed UTF-8 text file (first {MAX_READ_BYTES} bytes; use code_read for a line window of a \
             longer file)."
        )
    }

    fn parameters(&self) -> Value {
        PathArgs::schema()
    }

    async fn call(&self, args: PathArgs, _ctx: &ToolContext) -> ToolResult {
        let (path, file, meta) = open_file(&self.root, &args.path)?;
        let size = meta.len();
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES).read_to_end(&mut bytes).map_err(|e| io_error("read", &path, &e))?;
        let truncated = size > MAX_READ_BYTES;
        let content = match String::from_utf8(bytes) {
            Ok(text) => text,
            // The cut may split a multi-byte character; that alone does not make the file binary.
            Err(err) if truncated && err.utf8_error().error_len().is_none() => {
                let valid = err.utf8_error().valid_up_to();
                let mut bytes = err.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).unwrap_or_default()
            }
            Err(_) => {
                return Err(ToolError::respond(
                    "not_utf8",
                    format!("{} is not UTF-8 text; use file_info to see its type", path.display()),
                ));
            }
        };
        let mut out = result("read", &path);
        out.insert("ok".into(), json!(true));
        out.insert("content".into(), json!(content));
        out.insert("size_bytes".into(), json!(size));
        out.insert("truncated".into(), json!(truncated));
        Ok(Value::Object(out))
    }
}
