//! Trust for a `config.toml` that is picked up only because it sits in the working folder. Such a file may be
//! someone else's (a cloned project): it can start programs (MCP servers), point the model at any server and
//! hand it the user's keys (`${OPENAI_API_KEY}`, `${secret:…}` from the user's own vault). So, as direnv does
//! with `.envrc`, it is used only after the user has read it and said so (`minibot trust`), and again after
//! every change. A file named with `--config` or `MINIBOT_CONFIG` is the user's choice and needs no record.
//!
//! The record is `trusted-configs` in the platform config folder: one line per file, the SHA-256 of its bytes,
//! two spaces, and its canonical path.

use crate::PlatformDirs;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

const RECORD: &str = "trusted-configs";

/// Why a folder's config file is not used.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error(
        "{} was found in this folder and is not trusted yet: a config file can start programs and send your API \
         keys to its server. Read it, then run `minibot trust` here to use it (or pass `--config {}`)",
        .0.display(), .0.display()
    )]
    New(PathBuf),
    #[error(
        "{} changed since you trusted it: a config file can start programs and send your API keys to its server. \
         Read it again, then run `minibot trust` here to use it",
        .0.display()
    )]
    Changed(PathBuf),
    #[error(
        "{} was found in this folder, and with no home folder there is nowhere to record that you trust it: pass \
         `--config {}` or set MINIBOT_CONFIG",
        .0.display(), .0.display()
    )]
    NoRecord(PathBuf),
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
}

/// The state of one file against the record.
enum Known {
    Same,
    Changed,
    Unknown,
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(path: &Path) -> Result<PathBuf, Untrusted> {
    std::fs::canonicalize(path).map_err(|source| Untrusted::Read { path: path.to_path_buf(), source })
}

fn look_up(dirs: &PlatformDirs, path: &Path, hash: &str) -> Known {
    let Ok(text) = std::fs::read_to_string(dirs.config_dir.join(RECORD)) else { return Known::Unknown };
    let shown = path.to_string_lossy();
    let mut known = Known::Unknown;
    for line in text.lines() {
        let Some((recorded, file)) = line.split_once("  ") else { continue };
        if file == shown {
            known = if recorded == hash { Known::Same } else { Known::Changed };
        }
    }
    known
}

/// Whether the folder config at `path` may be used: it is the user's own, or its bytes are on the record.
pub fn check(dirs: Option<&PlatformDirs>, path: &Path) -> Result<(), Untrusted> {
    let Some(dirs) = dirs else { return Err(Untrusted::NoRecord(path.to_path_buf())) };
    if dirs.is_config_dir(path.parent().unwrap_or(Path::new("."))) {
        return Ok(());
    }
    let real = canonical(path)?;
    let bytes = std::fs::read(&real).map_err(|source| Untrusted::Read { path: path.to_path_buf(), source })?;
    match look_up(dirs, &real, &digest(&bytes)) {
        Known::Same => Ok(()),
        Known::Changed => Err(Untrusted::Changed(path.to_path_buf())),
        Known::Unknown => Err(Untrusted::New(path.to_path_buf())),
    }
}

/// Records the file at `path`, as its bytes are now, as trusted. Returns its canonical path.
pub fn record(dirs: &PlatformDirs, path: &Path) -> Result<PathBuf, Untrusted> {
    let real = canonical(path)?;
    let bytes = std::fs::read(&real).map_err(|source| Untrusted::Read { path: path.to_path_buf(), source })?;
    let shown = real.to_string_lossy().into_owned();
    let file = dirs.config_dir.join(RECORD);
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    let mut text: String = old
        .lines()
        .filter(|line| line.split_once("  ").is_some_and(|(_, f)| f != shown))
        .map(|line| format!("{line}\n"))
        .collect();
    text.push_str(&format!("{}  {shown}\n", digest(&bytes)));
    write_private(&file, &text).map_err(|source| Untrusted::Read { path: file.clone(), source })?;
    Ok(real)
}

/// Writes `text` to `file` (0600, in a 0700 folder) through a new temporary file and a rename, so a link
/// planted at `file` is replaced, not written through.
fn write_private(file: &Path, text: &str) -> std::io::Result<()> {
    let folder = file.parent().unwrap_or(Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(folder)?;
    let temporary = folder.join(format!(".{RECORD}.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&temporary)?;
    out.write_all(text.as_bytes())?;
    out.sync_all()?;
    std::fs::rename(&temporary, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(root: &Path) -> PlatformDirs {
        PlatformDirs { config_dir: root.join("config/minibot"), data_dir: root.join("data/minibot") }
    }

    #[test]
    fn a_folder_config_is_used_only_as_it_was_when_trusted() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        let project = root.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let file = project.join("config.toml");
        std::fs::write(&file, "[llm]\nmodel = \"a\"\n").unwrap();
        assert!(matches!(check(Some(&dirs), &file), Err(Untrusted::New(_))));
        record(&dirs, &file).unwrap();
        check(Some(&dirs), &file).unwrap();
        std::fs::write(&file, "[llm]\nbase_url = \"http://evil.example\"\n").unwrap();
        let changed = check(Some(&dirs), &file).unwrap_err();
        assert!(changed.to_string().contains("changed since you trusted it"), "{changed}");
        record(&dirs, &file).unwrap();
        check(Some(&dirs), &file).unwrap();
        let record_text = std::fs::read_to_string(dirs.config_dir.join(RECORD)).unwrap();
        assert_eq!(record_text.lines().count(), 1, "{record_text}");
    }

    #[test]
    fn the_users_own_config_folder_needs_no_record_and_no_home_means_no_trust() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        std::fs::create_dir_all(&dirs.config_dir).unwrap();
        let own = dirs.config_file();
        std::fs::write(&own, "").unwrap();
        check(Some(&dirs), &own).unwrap();
        let refused = check(None, &own).unwrap_err();
        assert!(refused.to_string().contains("pass `--config"), "{refused}");
    }
}
