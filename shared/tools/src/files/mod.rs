//! Managed files: tools that list, read, write, move, delete and deliver files under `[tools.file_storage]
//! root_dir`. Every path goes through [`ManagedRoot::resolve`] (see `root.rs`) before it touches the disk.

mod code_read;
mod delete_file;
mod file_info;
mod glob_files;
mod list_files;
mod move_file;
mod protected;
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
pub use protected::ProtectedPaths;
pub use read_file::ReadFile;
pub use root::{ManagedPath, ManagedRoot, PathError};
pub use self_insert_artifact::SelfInsertArtifact;
pub use send_file::SendFile;
pub use write_file::WriteFile;

use crate::ToolServices;
use minibot_agent::{ToolError, ToolRegistry, dyn_tool};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::SystemTime;

/// Adds the managed-file tools when `[tools.file_storage]` is on. `directives` adds the two tools whose
/// results are directives only the main agent's conversation carries out (`send_file`,
/// `self_insert_artifact`); workers go without them.
pub fn register(registry: &mut ToolRegistry, services: &ToolServices, directives: bool) {
    let Some(root) = services.files.clone() else {
        return;
    };
    let max_write = services.config.tools.file_storage.max_write_bytes.bytes();
    let protected = Arc::new(ProtectedPaths::from_config(&services.config));
    registry.register(dyn_tool(ListFiles::new(Arc::clone(&root))));
    registry.register(dyn_tool(GlobFiles::new(Arc::clone(&root))));
    registry.register(dyn_tool(FileInfo::new(Arc::clone(&root))));
    registry.register(dyn_tool(WriteFile::new(Arc::clone(&root), max_write, Arc::clone(&protected))));
    registry.register(dyn_tool(ReadFile::new(Arc::clone(&root))));
    registry.register(dyn_tool(MoveFile::new(Arc::clone(&root), Arc::clone(&protected))));
    registry.register(dyn_tool(DeleteFile::new(Arc::clone(&root), protected)));
    if directives {
        registry.register(dyn_tool(SendFile::new(Arc::clone(&root))));
    }
    registry.register(dyn_tool(CodeRead::new(Arc::clone(&root))));
    if directives {
        registry.register(dyn_tool(SelfInsertArtifact::new(root)));
    }
}

/// The arguments of a tool that takes one managed path and nothing else (`file_info`, `read_file`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    path: String,
}

impl PathArgs {
    /// The JSON schema of [`PathArgs`].
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": { "path": { "type": "string", "description": "Path relative to the managed root." } },
            "required": ["path"],
            "additionalProperties": false
        })
    }
}

/// Resolves a path that must name an existing regular file: `file_not_found` when nothing is there,
/// `not_a_file` for a folder.
pub(crate) fn existing_file(root: &ManagedRoot, written: &str) -> Result<ManagedPath, ToolError> {
    let path = root.resolve_required(written)?;
    if !path.absolute.exists() {
        return Err(not_found(&path));
    }
    if !path.absolute.is_file() {
        return Err(ToolError::respond("not_a_file", format!("{} is not a file", path.display())));
    }
    Ok(path)
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

/// Saves a large output under `<root>/<subdir>/<prefix>XXXXXX<suffix>` and returns where it went. The subdir
/// comes from config but still goes through the root check, so a bad config cannot write elsewhere.
pub(crate) fn write_spill(
    root: &ManagedRoot,
    subdir: &str,
    prefix: &str,
    suffix: &str,
    bytes: &[u8],
) -> std::io::Result<ManagedPath> {
    let folder = root.resolve(subdir).map_err(|e| std::io::Error::other(e.to_string()))?;
    std::fs::create_dir_all(&folder.absolute)?;
    let file = tempfile::Builder::new().prefix(prefix).suffix(suffix).rand_bytes(6).tempfile_in(&folder.absolute)?;
    std::fs::write(file.path(), bytes)?;
    let (_, path) = file.keep().map_err(|e| e.error)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let relative = folder.relative.map(|rel| if rel == "." { name.clone() } else { format!("{rel}/{name}") });
    Ok(ManagedPath { absolute: path, relative })
}

/// The first eight hex digits of the SHA-256 of `bytes`, used to make spill names recognisable.
pub(crate) fn sha8(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}
