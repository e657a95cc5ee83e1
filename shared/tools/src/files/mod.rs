//! Managed files: tools that list, read, write, move, delete and deliver files under `[tools.file_storage]
//! root_dir`. Every path goes through [`ManagedRoot::resolve`] (see `root.rs`) before it touches the disk.

mod code_read;
mod delete_file;
mod file_info;
mod glob_files;
mod list_files;
mod move_file;
mod read_file;
mod root;
mod self_insert_artifact;
mod send_file;
mod write_file;

pub use code_read::CodeRead;
pub use delete_file::DeleteFile;
pub use file_info::FileInfo;
pub use glob_files::GlobFiles;
pub use list_files::ListFiles;
pub use move_file::MoveFile;
pub use read_file::ReadFile;
pub use root::{ManagedPath, ManagedRoot, PathError};
pub use self_insert_artifact::SelfInsertArtifact;
pub use send_file::SendFile;
pub use write_file::WriteFile;

use crate::ToolServices;
use minibot_agent::{ToolError, ToolRegistry, dyn_tool};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::SystemTime;

/// Adds the managed-file tools when `[tools.file_storage]` is on.
pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    let Some(root) = services.files.clone() else {
        return;
    };
    let max_write = services.config.tools.file_storage.max_write_bytes.bytes();
    registry.register(dyn_tool(ListFiles::new(Arc::clone(&root))));
    registry.register(dyn_tool(GlobFiles::new(Arc::clone(&root))));
    registry.register(dyn_tool(FileInfo::new(Arc::clone(&root))));
    registry.register(dyn_tool(WriteFile::new(Arc::clone(&root), max_write)));
    registry.register(dyn_tool(ReadFile::new(Arc::clone(&root))));
    registry.register(dyn_tool(MoveFile::new(Arc::clone(&root))));
    registry.register(dyn_tool(DeleteFile::new(Arc::clone(&root))));
    registry.register(dyn_tool(SendFile::new(Arc::clone(&root))));
    registry.register(dyn_tool(CodeRead::new(Arc::clone(&root))));
    registry.register(dyn_tool(SelfInsertArtifact::new(root)));
}

/// The error for a path that does not exist. It tells the model not to repeat the call, since the same path
/// will fail the same way.
pub(crate) fn not_found(path: &ManagedPath) -> ToolError {
    ToolError::respond(
        "file_not_found",
        format!(
            "file not found: {}. Do not retry the same path; use list_files or glob_files to find the right name.",
            path.display()
        ),
    )
}

pub(crate) fn io_error(action: &str, path: &ManagedPath, err: &std::io::Error) -> ToolError {
    if err.kind() == std::io::ErrorKind::NotFound {
        return not_found(path);
    }
    ToolError::respond("file_io_error", format!("cannot {action} {}: {err}", path.display()))
}

/// An RFC 3339 UTC timestamp, as MiniBot reports `modified_at`.
pub(crate) fn timestamp(time: std::io::Result<SystemTime>) -> Option<String> {
    let time = time.ok()?;
    let utc: chrono::DateTime<chrono::Utc> = time.into();
    Some(utc.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// A result object that starts with `action` and the path description fields.
pub(crate) fn result(action: &str, path: &ManagedPath) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("action".into(), Value::from(action));
    out.insert("path".into(), Value::from(path.display()));
    path.describe_into(&mut out, "");
    out
}

pub(crate) fn mime_for(path: &std::path::Path) -> String {
    mime_guess::from_path(path).first_raw().unwrap_or("application/octet-stream").to_string()
}
