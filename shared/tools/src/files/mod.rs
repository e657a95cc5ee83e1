//! Managed files: tools that list, read, write, move, delete and deliver files under `[tools.file_storage]
//! root_dir`. Every path goes through [`ManagedRoot::resolve`] (see `root.rs`) and is then opened, written or
//! listed through the root's directory handle (see `confined.rs`), never as a path string.

mod code_read;
mod confined;
mod delete_file;
mod file_info;
mod glob_files;
mod guarded;
mod list_files;
mod move_file;
mod protected;
mod read_file;
mod root;
mod self_insert_artifact;
mod send_file;
mod walk;
mod write_file;

pub use code_read::CodeRead;
pub use delete_file::DeleteFile;
pub use file_info::FileInfo;
pub use glob_files::GlobFiles;
pub use guarded::{RootHoldsState, check_root, is_state_folder};
pub use list_files::ListFiles;
pub use move_file::MoveFile;
pub use protected::{Hit, ProtectedPaths, Relation};
pub use read_file::ReadFile;
pub use root::{ManagedPath, ManagedRoot, PathError, is_escape};
pub use self_insert_artifact::SelfInsertArtifact;
pub use send_file::SendFile;
pub(crate) use walk::{Found, WalkOptions, open_regular, walk_files};
pub use write_file::WriteFile;

use crate::ToolServices;
use minibot_agent::{SpillStore, SpilledFile, ToolError, ToolRegistry, dyn_tool};
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
    let meta = root.metadata(&path).map_err(|e| io_error("inspect", &path, &e))?;
    if !meta.is_file() {
        return Err(not_a_file(&path));
    }
    Ok(path)
}

/// Resolves and opens a file for reading through the root's handle; what was opened (not what the path named
/// a moment before) must be a regular file.
pub(crate) fn open_file(
    root: &ManagedRoot,
    written: &str,
) -> Result<(ManagedPath, std::fs::File, std::fs::Metadata), ToolError> {
    let path = root.resolve_required(written)?;
    let file = root.open_read(&path).map_err(|e| io_error("read", &path, &e))?;
    let meta = file.metadata().map_err(|e| io_error("read", &path, &e))?;
    if !meta.is_file() {
        return Err(not_a_file(&path));
    }
    Ok((path, file, meta))
}

fn not_a_file(path: &ManagedPath) -> ToolError {
    ToolError::respond("not_a_file", format!("{} is not a file", path.display()))
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

/// The error for a failed file operation. The root's handle refusing to leave the root is the same refusal
/// [`ManagedRoot::resolve`] gives, so the model sees one code for it however late it was caught.
pub(crate) fn io_error(action: &str, path: &ManagedPath, err: &std::io::Error) -> ToolError {
    if is_escape(err) {
        return PathError::Escapes.into();
    }
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
/// comes from config but still goes through the root check and the root's handle, so a bad config (or a
/// folder swapped for a link) cannot write elsewhere. The folder must be inside the root even when
/// `allow_outside_root` is on: that lets the model name outside paths, not the model's commands (which can write
/// the root) redirect the assistant's own writes through a link they planted.
pub(crate) fn write_spill(
    root: &ManagedRoot,
    subdir: &str,
    prefix: &str,
    suffix: &str,
    bytes: &[u8],
) -> std::io::Result<ManagedPath> {
    let folder = inside_root(root, subdir)?;
    root.create_dir_all(&folder)?;
    for _ in 0..100 {
        let name = format!("{prefix}{}{suffix}", random_tag(6));
        let path = folder.child(&name);
        // Private, as the temporary files they used to be were: spilled output may hold anything.
        match root.create_new_with_mode(&path, bytes, 0o600) {
            Ok(()) => return Ok(path),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "no free spill file name"))
}

/// Resolves a path the assistant itself chose (a spill folder or file) and requires it to be below the root.
fn inside_root(root: &ManagedRoot, written: &str) -> std::io::Result<ManagedPath> {
    let path = root.resolve(written).map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
    if !path.inside_root() {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, PathError::Escapes));
    }
    Ok(path)
}

/// The generic output spill (`[tools.tool_output_spill]`) and the safety check's read-back go through the
/// root's handle like the file tools.
impl SpillStore for ManagedRoot {
    fn create_spill(&self, subdir: &str, prefix: &str, suffix: &str, bytes: &[u8]) -> std::io::Result<SpilledFile> {
        let path = write_spill(self, subdir, prefix, suffix, bytes)?;
        let relative = path.relative.clone().unwrap_or_else(|| path.display());
        Ok(SpilledFile { relative, absolute: path.absolute })
    }

    fn open_spilled(&self, relative: &str) -> std::io::Result<std::fs::File> {
        let path = inside_root(self, relative)?;
        let file = self.open_read(&path)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Ok(file)
    }

    fn remove_spilled(&self, relative: &str) -> std::io::Result<()> {
        let path =
            self.resolve_entry(relative).map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
        if !path.inside_root() {
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, PathError::Escapes));
        }
        self.remove_file(&path)
    }
}

/// `len` letters and digits, different on every call (not for secrets: only to make names unlikely to clash).
fn random_tag(len: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let mut value = hasher.finish();
    (0..len)
        .map(|_| {
            let c = ALPHABET[(value % ALPHABET.len() as u64) as usize];
            value /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

/// The first eight hex digits of the SHA-256 of `bytes`, used to make spill names recognisable.
pub(crate) fn sha8(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}
