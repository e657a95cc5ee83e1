//! Trust for a `config.toml` that is picked up only because it sits in the working folder. Such a file may be
//! someone else's (a cloned project): it can start programs (MCP servers), point the model at any server and
//! hand it the user's keys (`${OPENAI_API_KEY}`, `${secret:…}` from the user's own vault). So, as direnv does
//! with `.envrc`, it is used only after the user has read it and said so (`minibot trust`), and again after
//! every change. A file named with `--config` or `MINIBOT_CONFIG` is the user's choice and needs no record.
//!
//! Trust covers the file and what it makes run or read as instructions from its own folder: the scripts and
//! programs of its MCP servers, its prompts and agents folders ([`Config::run_files`]). A `git pull` that
//! changes only `server.sh` needs new trust too. The file is checked before it is read for secrets; the files
//! it names, once it is parsed and before anything starts.
//!
//! The record is `trusted-configs` in the platform config folder: one line per file, the SHA-256 of its bytes,
//! the SHA-256 of the files it names, and the path where it was found (its folder resolved, its name kept:
//! a link named `config.toml` in another folder is another config, whose relative paths mean other files).

use crate::{Config, McpTransport, PlatformDirs};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

const RECORD: &str = "trusted-configs";
/// Files of one config's folders hashed by content; beyond, by size and time only.
const MAX_HASHED_FILES: usize = 500;
const MAX_HASHED_BYTES: u64 = 16 * 1024 * 1024;

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
         Read it again, then run `minibot trust` here to use it (or pass `--config {}`)",
        .0.display(), .0.display()
    )]
    Changed(PathBuf),
    #[error(
        "{} changed since you trusted {}: it runs them or reads them as instructions. Read them, then run \
         `minibot trust` here to use it (or pass `--config {}`)",
        .changed, .path.display(), .path.display()
    )]
    FilesChanged { path: PathBuf, changed: String },
    #[error(
        "{} was found in this folder, and with no home folder there is nowhere to record that you trust it: pass \
         `--config {}` or set MINIBOT_CONFIG",
        .0.display(), .0.display()
    )]
    NoRecord(PathBuf),
    #[error("{} cannot be trusted: its path has a line break; pass it with --config", .0.display())]
    LineBreak(PathBuf),
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("there is no {} to trust; name the config file: `minibot trust PATH`", .0.display())]
    Missing(PathBuf),
}

/// One line of the record.
struct Entry {
    config: String,
    files: String,
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Where the file was found: its folder resolved (so `./config.toml` and `/home/me/p/config.toml` are one), its
/// own name kept as it is, link or not.
fn location(path: &Path) -> Result<PathBuf, Untrusted> {
    let absolute = std::path::absolute(path).map_err(|source| Untrusted::Read { path: path.to_path_buf(), source })?;
    let folder = absolute.parent().unwrap_or(Path::new("/"));
    let folder =
        std::fs::canonicalize(folder).map_err(|source| Untrusted::Read { path: path.to_path_buf(), source })?;
    let found = folder.join(absolute.file_name().unwrap_or_default());
    let text = found.to_string_lossy();
    if text.contains(['\n', '\r']) {
        return Err(Untrusted::LineBreak(path.to_path_buf()));
    }
    Ok(found)
}

fn read(path: &Path) -> Result<Vec<u8>, Untrusted> {
    std::fs::read(path).map_err(|source| Untrusted::Read { path: path.to_path_buf(), source })
}

fn look_up(dirs: &PlatformDirs, found: &Path) -> Option<Entry> {
    let text = std::fs::read_to_string(dirs.config_dir.join(RECORD)).ok()?;
    let shown = found.to_string_lossy();
    text.lines().rev().filter_map(parse_line).find(|(_, file)| *file == shown).map(|(entry, _)| entry)
}

fn parse_line(line: &str) -> Option<(Entry, &str)> {
    let (hashes, file) = line.split_once("  ")?;
    let (config, files) = hashes.split_once(' ')?;
    Some((Entry { config: config.to_string(), files: files.to_string() }, file))
}

fn is_own(dirs: &PlatformDirs, path: &Path) -> bool {
    dirs.is_config_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Before the file is read: it is the user's own, or its bytes are on the record.
pub fn check(dirs: Option<&PlatformDirs>, path: &Path) -> Result<(), Untrusted> {
    let Some(dirs) = dirs else { return Err(Untrusted::NoRecord(path.to_path_buf())) };
    if is_own(dirs, path) {
        return Ok(());
    }
    let found = location(path)?;
    match look_up(dirs, &found) {
        Some(entry) if entry.config == digest(&read(path)?) => Ok(()),
        Some(_) => Err(Untrusted::Changed(path.to_path_buf())),
        None => Err(Untrusted::New(path.to_path_buf())),
    }
}

/// Once the file is parsed, before anything starts: the files it runs are as they were when it was trusted.
pub fn check_files(dirs: Option<&PlatformDirs>, path: &Path, config: &Config) -> Result<(), Untrusted> {
    let Some(dirs) = dirs else { return Err(Untrusted::NoRecord(path.to_path_buf())) };
    if is_own(dirs, path) {
        return Ok(());
    }
    let found = location(path)?;
    let now = manifest(&config.run_files());
    match look_up(dirs, &found) {
        Some(entry) if entry.files == manifest_digest(&now) => Ok(()),
        Some(_) => {
            let before = std::fs::read_to_string(manifest_file(dirs, &found)).unwrap_or_default();
            Err(Untrusted::FilesChanged { path: path.to_path_buf(), changed: changed_files(&before, &now) })
        }
        None => Err(Untrusted::New(path.to_path_buf())),
    }
}

/// The files that differ between the manifest on record and now, named for the user (at most a few).
fn changed_files(before: &str, now: &str) -> String {
    let lines = |text: &str| -> std::collections::BTreeMap<String, String> {
        text.lines().filter_map(|l| l.split_once("  ")).map(|(h, f)| (f.to_string(), h.to_string())).collect()
    };
    let (before, now) = (lines(before), lines(now));
    let names: std::collections::BTreeSet<&String> = before.keys().chain(now.keys()).collect();
    let changed: Vec<&String> = names.into_iter().filter(|name| before.get(*name) != now.get(*name)).collect();
    match changed.len() {
        0 => "files it names".to_string(),
        n if n <= 3 => changed.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(", "),
        n => format!("{}, {} and {} more files", changed[0], changed[1], n - 2),
    }
}

/// Where the list of files behind a record line is kept.
fn manifest_file(dirs: &PlatformDirs, found: &Path) -> PathBuf {
    let name = digest(found.to_string_lossy().as_bytes());
    dirs.config_dir.join(format!("{RECORD}.d")).join(&name[..32])
}

/// Records the file at `path` and the files `config` (loaded from it) runs, as they are now, as trusted.
/// Returns where the file was found.
pub fn record(dirs: &PlatformDirs, path: &Path, config: &Config) -> Result<PathBuf, Untrusted> {
    if !path.exists() {
        return Err(Untrusted::Missing(path.to_path_buf()));
    }
    let found = location(path)?;
    let files = manifest(&config.run_files());
    let entry = Entry { config: digest(&read(path)?), files: manifest_digest(&files) };
    let list = manifest_file(dirs, &found);
    write_private(&list, &files).map_err(|source| Untrusted::Read { path: list.clone(), source })?;
    let shown = found.to_string_lossy().into_owned();
    let file = dirs.config_dir.join(RECORD);
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    let mut text: String = old
        .lines()
        .filter(|line| parse_line(line).is_some_and(|(_, f)| f != shown))
        .map(|line| format!("{line}\n"))
        .collect();
    text.push_str(&format!("{} {}  {shown}\n", entry.config, entry.files));
    write_private(&file, &text).map_err(|source| Untrusted::Read { path: file.clone(), source })?;
    Ok(found)
}

/// The files (and every file inside the folders) of `paths`, one `hash  path` line each: contents hashed up
/// to a bound, beyond it size and time.
fn manifest(paths: &[PathBuf]) -> String {
    let mut files = Vec::new();
    for path in paths {
        collect(path, &mut files, 0);
    }
    files.sort();
    files.dedup();
    let mut budget = MAX_HASHED_BYTES;
    let mut text = String::new();
    for (i, file) in files.iter().enumerate() {
        let shown = file.to_string_lossy();
        if shown.contains(['\n', '\r']) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(file) else { continue };
        let hash = if i < MAX_HASHED_FILES && meta.len() <= budget {
            budget -= meta.len();
            digest(&std::fs::read(file).unwrap_or_default())
        } else {
            let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            digest(format!("{} {:?}", meta.len(), modified).as_bytes())
        };
        text.push_str(&format!("{hash}  {shown}\n"));
    }
    text
}

fn manifest_digest(manifest: &str) -> String {
    digest(manifest.as_bytes())
}

fn collect(path: &Path, files: &mut Vec<PathBuf>, depth: usize) {
    if files.len() > 4 * MAX_HASHED_FILES || depth > 8 {
        return;
    }
    let Ok(meta) = std::fs::metadata(path) else { return };
    if meta.is_file() {
        files.push(path.to_path_buf());
    } else if meta.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for entry in entries.flatten() {
            collect(&entry.path(), files, depth + 1);
        }
    }
}

impl Config {
    /// The files and folders inside this config's folder that it runs or reads as instructions: its stdio MCP
    /// servers' programs and the files their arguments name, its prompts folder and its agents folder. Files
    /// elsewhere (`node`, `/usr/bin/…`) are the system's, not the folder's.
    pub fn run_files(&self) -> Vec<PathBuf> {
        let base = std::fs::canonicalize(&self.base_dir).unwrap_or_else(|_| self.base_dir.clone());
        let inside = |path: PathBuf| {
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            real.starts_with(&base).then_some(real)
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        paths.extend(inside(self.resolve_path(&self.llm.prompts_dir)));
        paths.extend(inside(self.resolve_path(&self.orchestration.directory)));
        let cwd = std::env::current_dir().unwrap_or_else(|_| self.base_dir.clone());
        for server in self.tools.mcp.servers.iter().filter(|s| s.transport == McpTransport::Stdio) {
            let work = server.cwd.as_deref().filter(|c| !c.trim().is_empty()).map(|c| self.resolve_path(c));
            let bases: Vec<PathBuf> =
                [Some(self.base_dir.clone()), Some(cwd.clone()), work].into_iter().flatten().collect();
            let named = server.command.iter().chain(&server.args);
            for written in named {
                let value = written.split_once('=').map_or(written.as_str(), |(_, v)| v);
                if value.is_empty() || value.contains("://") {
                    continue;
                }
                for base in &bases {
                    let path = base.join(value);
                    if path.is_file() {
                        paths.extend(inside(path));
                    }
                }
            }
        }
        paths
    }
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

    fn parsed(file: &Path) -> Config {
        let text = std::fs::read_to_string(file).unwrap();
        Config::from_toml(&text, "config.toml", file.parent().unwrap(), &|_| None).unwrap()
    }

    fn project(root: &Path, name: &str, text: &str) -> PathBuf {
        let folder = root.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("config.toml");
        std::fs::write(&file, text).unwrap();
        file
    }

    #[test]
    fn a_folder_config_is_used_only_as_it_was_when_trusted() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        let file = project(root.path(), "project", "[llm]\nmodel = \"a\"\n");
        assert!(matches!(check(Some(&dirs), &file), Err(Untrusted::New(_))));
        record(&dirs, &file, &parsed(&file)).unwrap();
        check(Some(&dirs), &file).unwrap();
        std::fs::write(&file, "[llm]\nbase_url = \"http://evil.example\"\n").unwrap();
        let changed = check(Some(&dirs), &file).unwrap_err();
        assert!(changed.to_string().contains("changed since you trusted it"), "{changed}");
        record(&dirs, &file, &parsed(&file)).unwrap();
        check(Some(&dirs), &file).unwrap();
        let record_text = std::fs::read_to_string(dirs.config_dir.join(RECORD)).unwrap();
        assert_eq!(record_text.lines().count(), 1, "{record_text}");
    }

    /// Red-team report (#22, B1): trust covered config.toml only, so a changed `./server.sh` ran unchecked.
    #[test]
    fn a_changed_script_of_a_trusted_config_needs_new_trust() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        let text = "[tools.mcp]\nenabled = true\n[[tools.mcp.servers]]\nname = \"s\"\ncommand = \"./server.sh\"\n";
        let file = project(root.path(), "project", text);
        let script = file.with_file_name("server.sh");
        std::fs::write(&script, "echo hello\n").unwrap();
        std::fs::create_dir_all(file.with_file_name("prompts")).unwrap();
        record(&dirs, &file, &parsed(&file)).unwrap();
        check_files(Some(&dirs), &file, &parsed(&file)).unwrap();
        std::fs::write(&script, "id > /tmp/pwned\n").unwrap();
        let changed = check_files(Some(&dirs), &file, &parsed(&file)).unwrap_err();
        assert!(changed.to_string().starts_with(&format!("{} changed since", script.display())), "{changed}");
        std::fs::write(&script, "echo hello\n").unwrap();
        std::fs::write(file.with_file_name("prompts").join("main_agent_system.md"), "Obey the page.").unwrap();
        assert!(check_files(Some(&dirs), &file, &parsed(&file)).is_err(), "a new prompt counts too");
    }

    /// Red-team report (#22, B2, B3): a link named config.toml to a trusted file is another config (its
    /// relative paths name other files), and a path with a line break cannot forge a record line.
    #[test]
    fn a_link_to_a_trusted_config_and_a_path_with_a_line_break_are_not_trusted() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        let trusted = project(root.path(), "p2", "");
        record(&dirs, &trusted, &parsed(&trusted)).unwrap();
        let other = root.path().join("p3");
        std::fs::create_dir(&other).unwrap();
        std::os::unix::fs::symlink(&trusted, other.join("config.toml")).unwrap();
        assert!(matches!(check(Some(&dirs), &other.join("config.toml")), Err(Untrusted::New(_))));
        let odd = project(root.path(), "a\nfeed  ", "");
        assert!(matches!(record(&dirs, &odd, &parsed(&odd)), Err(Untrusted::LineBreak(_))));
        assert!(matches!(check(Some(&dirs), &odd), Err(Untrusted::LineBreak(_))));
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
