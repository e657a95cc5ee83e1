//! The managed folder on disk: reading every definition in it, and writing or removing one file atomically.
//! These are blocking calls; async callers run them on a blocking thread. Callers serialize writes themselves
//! (one lock for the folder), so two writes of the same name never interleave.

use super::{ManagedDefinition, ManagedError, file_of, prepare, valid_name};
use crate::Config;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("managed agent file {}: {error}", .path.display())]
    Invalid { path: PathBuf, error: ManagedError },
    #[error("managed agent file {}: the file name must be <name>.md with a valid agent name (3-30 letters or underscores)", .0.display())]
    BadFileName(PathBuf),
    #[error("managed agents folder {}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FilesError + '_ {
    move |source| FilesError::Io { path: path.to_path_buf(), source }
}

/// Every enabled managed definition in the folder, checked as a write would check it (name rules, ceiling, no
/// owner's name), sorted by file name. A missing folder holds none. The first file that fails stops the read:
/// a roster is taken whole or not at all.
pub fn load(config: &Config, owner_names: &[String]) -> Result<Vec<ManagedDefinition>, FilesError> {
    let dir = super::directory(config);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FilesError::Io { path: dir, source: e }),
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()).filter(|s| valid_name(s)) else {
            return Err(FilesError::BadFileName(path));
        };
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        let definition = match prepare(config, stem, &text, owner_names) {
            Ok(definition) => definition,
            // The owner wrote a specialist of that name since: theirs wins, and the assistant still starts.
            Err(ManagedError::Collision(name)) => {
                tracing::warn!(path = %path.display(), name, "managed agent left out: an owner's specialist has its name");
                continue;
            }
            Err(error) => return Err(FilesError::Invalid { path: path.clone(), error }),
        };
        if definition.agent.enabled {
            out.push(definition);
        }
    }
    Ok(out)
}

/// Whether the folder holds a file (or a symlink) for `name`.
pub fn exists(dir: &Path, name: &str) -> bool {
    file_of(dir, name).is_some_and(|path| fs::symlink_metadata(path).is_ok())
}

/// Writes `text` as `<dir>/<name>.md`: to a temporary file in the same folder, flushed to disk, then renamed over
/// the old file, so a reader sees the old definition or the new one, never half of one, even after a crash.
pub fn write(dir: &Path, name: &str, text: &str) -> Result<(), FilesError> {
    let path = file_of(dir, name).ok_or_else(|| FilesError::BadFileName(dir.join(name)))?;
    fs::create_dir_all(dir).map_err(io(dir))?;
    let temp = dir.join(format!(".{name}.md.{}-{}.tmp", std::process::id(), next_serial()));
    let written = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temp, &path)?;
        sync_dir(dir)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map_err(io(&path))
}

/// Removes `<dir>/<name>.md` (a symlink itself, never its target). False when there was no such file.
pub fn remove(dir: &Path, name: &str) -> Result<bool, FilesError> {
    let path = file_of(dir, name).ok_or_else(|| FilesError::BadFileName(dir.join(name)))?;
    match fs::remove_file(&path) {
        Ok(()) => {
            sync_dir(dir).map_err(io(dir))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(FilesError::Io { path, source: e }),
    }
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Distinct temporary names for writes of one process.
fn next_serial() -> u64 {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    SERIAL.fetch_add(1, Ordering::Relaxed)
}
