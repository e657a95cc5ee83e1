//! Path confinement for the managed-file root. Every tool that touches managed files resolves the path the
//! model wrote through [`ManagedRoot::resolve`], which refuses anything that would land outside the root
//! unless `allow_outside_root` is on, and then acts on it through the root's directory handle (see
//! `confined.rs`), never by opening the checked path string.
//!
//! The check is done twice on purpose: once lexically (so `a/../../x` is refused even when `a` does not exist)
//! and once on the real file system, by canonicalising the deepest existing ancestor, so a symlink inside the
//! root that points elsewhere is refused with a clear message. Neither check is what keeps a file operation
//! inside: another process can swap a folder for a link between the check and the open. The handle does that.
//! Characters that only *look* like `/` or `.` are refused too: on Linux they are ordinary file-name
//! characters, but a model (or a prompt injection) that writes `．．∕etc` means to escape, and silently
//! creating a file with that name would hide the attempt.

use cap_std::fs::Dir;
use minibot_agent::ToolError;
use serde_json::{Map, Value, json};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

/// Longest accepted path, in bytes (Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted single component, in bytes (Linux `NAME_MAX`).
const MAX_COMPONENT_BYTES: usize = 255;

/// Why a path was refused. Each becomes a `RespondToModel` error with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("path contains a control character")]
    Control,
    #[error("path is too long ({0} bytes; the limit is {MAX_PATH_BYTES})")]
    TooLong(usize),
    #[error("a path component is too long (the limit is {MAX_COMPONENT_BYTES} bytes)")]
    ComponentTooLong,
    #[error("path contains `{0}` (U+{1:04X}), which looks like a path separator or dot; use plain `/` and `.`")]
    Lookalike(char, u32),
    #[error("path contains a backslash; use `/` to separate folders")]
    Backslash,
    #[error("path must be relative to managed root")]
    Absolute,
    #[error("path escapes managed root")]
    Escapes,
    #[error("path goes through a broken symbolic link")]
    DanglingLink,
    #[error("cannot check path: {0}")]
    Io(String),
}

impl PathError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Absolute | Self::Escapes | Self::DanglingLink => "path_outside_root",
            Self::Io(_) => "path_unavailable",
            Self::Empty
            | Self::Nul
            | Self::Control
            | Self::TooLong(_)
            | Self::ComponentTooLong
            | Self::Lookalike(..)
            | Self::Backslash => "invalid_path",
        }
    }
}

impl From<PathError> for ToolError {
    fn from(err: PathError) -> Self {
        ToolError::respond(err.code(), err.to_string())
    }
}

/// The managed-file root: a canonical folder, a handle on it that every operation inside goes through, and the
/// rule for paths outside it.
#[derive(Debug, Clone)]
pub struct ManagedRoot {
    root: PathBuf,
    /// Shared by clones, so one that reopens the handle (see [`ManagedRoot::handle`]) reopens it for all.
    dir: Arc<RwLock<Arc<Dir>>>,
    allow_outside_root: bool,
}

/// A path after resolution: where it really is, and how to show it to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedPath {
    pub absolute: PathBuf,
    /// Relative to the root with `/` separators (`"."` for the root itself); `None` outside the root.
    pub relative: Option<String>,
}

impl ManagedPath {
    pub fn inside_root(&self) -> bool {
        self.relative.is_some()
    }

    /// What the model is shown as `path`: the relative form inside the root, else the absolute one.
    pub fn display(&self) -> String {
        self.relative.clone().unwrap_or_else(|| self.absolute.display().to_string())
    }

    /// The entry `name` in this folder.
    pub fn child(&self, name: &str) -> ManagedPath {
        let relative =
            self.relative.as_ref().map(|rel| if rel == "." { name.to_string() } else { format!("{rel}/{name}") });
        ManagedPath { absolute: self.absolute.join(name), relative }
    }

    /// The `path_relative` / `path_absolute` / `path_scope` fields every file result carries, with an optional
    /// prefix (`source_` / `destination_` for moves).
    pub fn describe_into(&self, out: &mut Map<String, Value>, prefix: &str) {
        out.insert(format!("{prefix}path_relative"), json!(self.relative));
        out.insert(format!("{prefix}path_absolute"), json!(self.absolute.display().to_string()));
        let scope = if self.inside_root() { "inside_root" } else { "outside_root" };
        out.insert(format!("{prefix}path_scope"), json!(scope));
    }
}

impl ManagedRoot {
    /// Creates the root folder if needed, pins its canonical location and opens the handle every later
    /// operation inside it resolves from. A root made here (and any folder above it made with it) is private,
    /// 0700 whatever the umask; a folder that exists keeps the mode its owner gave it.
    pub fn create(root: &Path, allow_outside_root: bool) -> std::io::Result<Self> {
        minibot_sqlite::private_fs::create_dir_all(root)?;
        let root = root.canonicalize()?;
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())?;
        Ok(Self { root, dir: Arc::new(RwLock::new(Arc::new(dir))), allow_outside_root })
    }

    /// The handle every operation inside the root resolves from. If the folder at the root's path is no longer
    /// the one the handle holds (it was deleted, or moved away and made again), the handle is reopened, so
    /// files land where users look, not in a deleted folder; a missing root is made again, as it is at start.
    /// The root's path is opened without following a link at its end: a link put in the root's place is
    /// refused, not followed.
    pub(super) fn handle(&self) -> std::io::Result<Arc<Dir>> {
        use cap_std::fs::MetadataExt as _;
        use std::os::unix::fs::MetadataExt as _;
        let held = Arc::clone(&self.dir.read().unwrap_or_else(PoisonError::into_inner));
        let on_disk = match std::fs::symlink_metadata(&self.root) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                minibot_sqlite::private_fs::create_dir_all(&self.root)?;
                std::fs::symlink_metadata(&self.root)?
            }
            other => other?,
        };
        let current = held.dir_metadata()?;
        if (current.dev(), current.ino()) == (on_disk.dev(), on_disk.ino()) {
            return Ok(held);
        }
        if !on_disk.is_dir() {
            // Not PermissionDenied: that is how cap-std reports an escape, and this is a broken root, not one.
            return Err(std::io::Error::other("the managed root was replaced by something that is not a folder"));
        }
        let file = {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(&self.root)?
        };
        let fresh = Arc::new(Dir::from_std_file(file));
        *self.dir.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&fresh);
        Ok(fresh)
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    pub fn allow_outside_root(&self) -> bool {
        self.allow_outside_root
    }

    /// Resolves a path the model wrote. `""` and `"."` are the root.
    pub fn resolve(&self, written: &str) -> Result<ManagedPath, PathError> {
        check_text(written)?;
        let written_path = Path::new(written);
        let joined = if written_path.is_absolute() {
            if !self.allow_outside_root {
                return Err(PathError::Absolute);
            }
            written_path.to_path_buf()
        } else {
            self.root.join(written_path)
        };
        let lexical = normalize(&joined).ok_or(PathError::Escapes)?;
        if !self.allow_outside_root && !lexical.starts_with(&self.root) {
            return Err(PathError::Escapes);
        }
        let real = real_path(&lexical)?;
        let relative = real.strip_prefix(&self.root).ok().map(|rest| {
            let text = rest.to_string_lossy().replace('\\', "/");
            if text.is_empty() { ".".to_string() } else { text }
        });
        if relative.is_none() && !self.allow_outside_root {
            return Err(PathError::Escapes);
        }
        Ok(ManagedPath { absolute: real, relative })
    }

    /// Like [`Self::resolve`] but an empty path is an error (for tools whose `path` names a file).
    pub fn resolve_required(&self, written: &str) -> Result<ManagedPath, PathError> {
        if written.trim().is_empty() {
            return Err(PathError::Empty);
        }
        self.resolve(written)
    }

    /// Resolves the folder part and keeps the last component as written, so an operation on a symlink (move,
    /// delete) acts on the link itself and not on what it points to. The link target is still checked by
    /// [`Self::resolve`] first.
    pub fn resolve_entry(&self, written: &str) -> Result<ManagedPath, PathError> {
        let target = self.resolve_required(written)?;
        let trimmed = written.trim_end_matches('/');
        let path = Path::new(trimmed);
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(target);
        };
        let parent = self.resolve(&parent.to_string_lossy())?;
        let relative = parent.relative.as_ref().map(|rel| {
            let name = name.to_string_lossy();
            if rel == "." { name.into_owned() } else { format!("{rel}/{name}") }
        });
        Ok(ManagedPath { absolute: parent.absolute.join(name), relative })
    }
}

/// Whether an I/O error is the root handle refusing a resolution that would leave it (through `..`, an
/// absolute link, or a link swapped in after the path was checked). cap-std reports that as a
/// permission error of its own, with no OS error number; a real `EACCES` carries one.
pub fn is_escape(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::PermissionDenied && err.raw_os_error().is_none()
}

fn check_text(written: &str) -> Result<(), PathError> {
    if written.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong(written.len()));
    }
    for c in written.chars() {
        match c {
            '\0' => return Err(PathError::Nul),
            '\\' => return Err(PathError::Backslash),
            c if is_lookalike(c) => return Err(PathError::Lookalike(c, u32::from(c))),
            c if c.is_control() || is_invisible(c) => return Err(PathError::Control),
            _ => {}
        }
    }
    if written.split('/').any(|part| part.len() > MAX_COMPONENT_BYTES) {
        return Err(PathError::ComponentTooLong);
    }
    Ok(())
}

/// Characters that render like `/`, `\` or `.`.
fn is_lookalike(c: char) -> bool {
    matches!(
        c,
        '\u{2215}' // division slash
            | '\u{2044}' // fraction slash
            | '\u{29F8}' // big solidus
            | '\u{FF0F}' // fullwidth solidus
            | '\u{FF3C}' // fullwidth reverse solidus
            | '\u{29F5}' // reverse solidus operator
            | '\u{FE68}' // small reverse solidus
            | '\u{FF0E}' // fullwidth full stop
            | '\u{2024}' // one dot leader
            | '\u{2025}' // two dot leader
            | '\u{FE52}' // small full stop
            | '\u{3002}' // ideographic full stop
    )
}

/// Zero-width and bidi-control characters that hide what a path really says.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Removes `.` and resolves `..` without touching the disk; `None` when `..` climbs above `/`.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
        }
    }
    Some(out)
}

/// The path with every symlink in its existing part resolved; the part that does not exist yet is appended
/// as written.
pub(super) fn real_path(lexical: &Path) -> Result<PathBuf, PathError> {
    let mut existing = lexical.to_path_buf();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(real) => {
                let mut out = real;
                for part in missing.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                if existing.symlink_metadata().is_ok() {
                    return Err(PathError::DanglingLink);
                }
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    return Err(PathError::Io(err.to_string()));
                };
                missing.push(name);
                if !existing.pop() {
                    return Err(PathError::Io(err.to_string()));
                }
            }
            Err(err) => return Err(PathError::Io(err.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_without_the_disk() {
        assert_eq!(normalize(Path::new("/r/a/./b/../c")), Some(PathBuf::from("/r/a/c")));
        assert_eq!(normalize(Path::new("/../..")), None);
    }

    #[test]
    fn text_checks_name_the_problem() {
        assert_eq!(check_text("a\u{FF0E}b"), Err(PathError::Lookalike('\u{FF0E}', 0xFF0E)));
        assert_eq!(check_text("a\u{202E}b"), Err(PathError::Control));
        assert_eq!(check_text(&"a".repeat(256)), Err(PathError::ComponentTooLong));
        assert_eq!(check_text("ünïcödé/名前.txt"), Ok(()), "ordinary non-ASCII names are fine");
    }

    #[test]
    fn relative_paths_display_with_slashes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = ManagedRoot::create(dir.path(), false).expect("root");
        assert_eq!(root.resolve("").expect("root").relative.as_deref(), Some("."));
        assert_eq!(root.resolve("a/./b/../c.txt").expect("path").relative.as_deref(), Some("a/c.txt"));
    }
}
