use crate::endings;
use crate::fs::{PatchFs, StdFs};
use crate::matcher::{Windowed, seek, seek_window};
use crate::parser::{Chunk, Hunk};
use crate::{PatchError, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How far a unified header's line number may be off.
const UNIFIED_WINDOW: usize = 3;

#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// End every updated file with a newline.
    pub preserve_trailing_newline: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { preserve_trailing_newline: true }
    }
}

/// A change ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    Write { path: PathBuf, contents: String, added: bool },
    Delete { path: PathBuf },
    Move { from: PathBuf, to: PathBuf, contents: String },
}

/// What a patch did, in the `A x` / `M y` / `D z` form models know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

impl Summary {
    pub fn text(&self) -> String {
        let mut out = String::from("Success. Updated the following files:");
        for (tag, list) in [("A", &self.added), ("M", &self.modified), ("D", &self.deleted)] {
            for path in list {
                out.push_str(&format!("\n{tag} {path}"));
            }
        }
        out
    }

    pub fn files(&self) -> Vec<String> {
        self.added.iter().chain(&self.modified).chain(&self.deleted).cloned().collect()
    }
}

/// Applies an update's chunks to `original`.
///
/// Every line keeps its own ending (`\n`, `\r\n` or a lone `\r`), so one CRLF line in a LF file does not turn
/// the whole file CRLF; a line the patch adds takes the ending of the lines around it (see [`endings`]).
pub fn apply_chunks(original: &str, chunks: &[Chunk], path: &str, options: Options) -> Result<String> {
    let had_newline = original.ends_with(['\n', '\r']);
    let mut lines = endings::split(original);
    let texts: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut cursor = 0usize;
    for chunk in chunks {
        if let Some(context) = &chunk.context {
            let target = [context.clone()];
            match seek(&texts, &target, cursor, false) {
                Some(found) => cursor = found + 1,
                None => {
                    return Err(PatchError::ContextNotFound { path: path.into(), context: context.clone() });
                }
            }
        }
        if chunk.old_lines.is_empty() {
            let at = if let Some(header) = chunk.unified.filter(|_| !chunk.is_end_of_file) {
                cursor.max(header.old_start.saturating_sub(1)).min(texts.len())
            } else if chunk.context.is_some() && !chunk.is_end_of_file {
                cursor
            } else {
                // Only added lines and nothing to anchor them: the format appends them to the file (Codex's
                // rule), which is also what a bare `@@` followed by `+` lines means to a model.
                texts.len()
            };
            replacements.push((at, 0, chunk.new_lines.clone()));
            cursor = at;
            continue;
        }
        let (start, old, new) = locate(&texts, chunk, cursor, path)?;
        cursor = start + old.len();
        replacements.push((start, old.len(), new));
    }
    // Bottom-up, so earlier indices stay valid; at one index the later chunk goes first, so an insertion
    // recorded before a replacement at the same line ends up above it.
    let mut ordered: Vec<_> = replacements.into_iter().enumerate().collect();
    ordered.sort_by_key(|(order, (start, _, _))| std::cmp::Reverse((*start, *order)));
    for (_, (start, len, new)) in ordered {
        let end = (start + len).min(lines.len());
        let replaced = endings::carry(&lines[start..end], new);
        lines.splice(start..end, replaced);
    }
    let keep_final = options.preserve_trailing_newline || had_newline;
    Ok(endings::join(lines, endings::majority(original), keep_final))
}

/// Finds the chunk's old lines; retries without a trailing blank line, which models add at the end of chunks.
fn locate(lines: &[String], chunk: &Chunk, cursor: usize, path: &str) -> Result<(usize, Vec<String>, Vec<String>)> {
    let mut old = chunk.old_lines.clone();
    let mut new = chunk.new_lines.clone();
    loop {
        let found = match chunk.unified {
            Some(header) => {
                let anchor = header.old_start.saturating_sub(1);
                let from = anchor.saturating_sub(UNIFIED_WINDOW).max(cursor);
                match seek_window(lines, &old, from, anchor + UNIFIED_WINDOW, anchor) {
                    Windowed::Found(at) => Ok(at),
                    Windowed::Ambiguous => Err(PatchError::Ambiguous { path: path.into(), line: header.old_start }),
                    Windowed::Missing => Err(PatchError::NoMatchNear { path: path.into(), line: header.old_start }),
                }
            }
            None => seek(lines, &old, cursor, chunk.is_end_of_file)
                .ok_or_else(|| PatchError::LinesNotFound { path: path.into(), lines: old.join("\n") }),
        };
        match found {
            Ok(at) => return Ok((at, old, new)),
            Err(err) => {
                if old.last().is_some_and(String::is_empty) && old.len() > 1 {
                    old.pop();
                    if new.last().is_some_and(String::is_empty) {
                        new.pop();
                    }
                    continue;
                }
                return Err(err);
            }
        }
    }
}

/// Reads and checks everything a patch touches and returns the writes it implies. Nothing is written.
/// `resolve` maps a path written in the patch to a real path, or refuses it.
pub fn plan_changes(
    hunks: &[Hunk],
    resolve: &dyn Fn(&str) -> Result<PathBuf>,
    options: Options,
) -> Result<(Vec<FileChange>, Summary)> {
    plan_changes_in(&StdFs, hunks, resolve, options)
}

/// [`plan_changes`] reading through `fs`, on the paths `resolve` returns.
pub fn plan_changes_in(
    fs: &dyn PatchFs,
    hunks: &[Hunk],
    resolve: &dyn Fn(&str) -> Result<PathBuf>,
    options: Options,
) -> Result<(Vec<FileChange>, Summary)> {
    // The files as the patch has left them so far: several hunks on one file chain through this.
    let mut state: HashMap<PathBuf, Option<String>> = HashMap::new();
    let mut changes = Vec::new();
    let mut summary = Summary::default();
    let read = |state: &HashMap<PathBuf, Option<String>>, path: &Path, shown: &str| -> Result<String> {
        match state.get(path) {
            Some(Some(text)) => Ok(text.clone()),
            Some(None) => {
                Err(PatchError::Io { path: shown.into(), message: "file was deleted earlier in this patch".into() })
            }
            None if fs.is_dir(path) => Err(PatchError::Io {
                path: shown.into(),
                message: "Failed to read file to update: it is a folder".into(),
            }),
            None => fs.read(path).and_then(utf8).map_err(|e| PatchError::Io {
                path: shown.into(),
                message: format!("Failed to read file to update: {e}"),
            }),
        }
    };
    for hunk in hunks {
        match hunk {
            Hunk::Add { path, contents } => {
                let real = resolve(path)?;
                if fs.is_dir(&real) {
                    return Err(PatchError::Io { path: path.clone(), message: "is a folder".into() });
                }
                state.insert(real.clone(), Some(contents.clone()));
                changes.push(FileChange::Write { path: real, contents: contents.clone(), added: true });
                summary.added.push(path.clone());
            }
            Hunk::Delete { path } => {
                let real = resolve(path)?;
                let exists = match state.get(&real) {
                    Some(entry) => entry.is_some(),
                    None if fs.is_dir(&real) => {
                        return Err(PatchError::Io {
                            path: path.clone(),
                            message: "Failed to delete file: it is a folder, and apply_patch deletes files only".into(),
                        });
                    }
                    None => fs.is_file(&real),
                };
                if !exists {
                    return Err(PatchError::Io {
                        path: path.clone(),
                        message: "Failed to delete file: not found".into(),
                    });
                }
                state.insert(real.clone(), None);
                changes.push(FileChange::Delete { path: real });
                summary.deleted.push(path.clone());
            }
            Hunk::Update { path, move_to, chunks } => {
                let real = resolve(path)?;
                let original = read(&state, &real, path)?;
                let updated = apply_chunks(&original, chunks, path, options)?;
                match move_to {
                    Some(target) => {
                        let to = resolve(target)?;
                        state.insert(real.clone(), None);
                        state.insert(to.clone(), Some(updated.clone()));
                        changes.push(FileChange::Move { from: real, to, contents: updated });
                        summary.modified.push(target.clone());
                    }
                    None => {
                        state.insert(real.clone(), Some(updated.clone()));
                        changes.push(FileChange::Write { path: real, contents: updated, added: false });
                        summary.modified.push(path.clone());
                    }
                }
            }
        }
    }
    Ok((changes, summary))
}

/// What a path held before the patch, to put back if a later write fails.
enum Backup {
    Absent(PathBuf),
    Content(PathBuf, Vec<u8>),
}

/// Writes planned changes. If one fails, the files already changed are restored, so a patch lands whole or
/// not at all (short of a crash mid-way).
pub fn commit_changes(changes: &[FileChange]) -> Result<()> {
    commit_changes_in(&StdFs, changes)
}

/// [`commit_changes`] writing through `fs`.
pub fn commit_changes_in(fs: &dyn PatchFs, changes: &[FileChange]) -> Result<()> {
    let mut backups: Vec<Backup> = Vec::new();
    for change in changes {
        let outcome = match change {
            FileChange::Write { path, contents, .. } => remember(fs, path, &mut backups)
                .and_then(|()| fs.write(path, contents.as_bytes()).map_err(|e| io(path, e))),
            FileChange::Delete { path } => {
                remember(fs, path, &mut backups).and_then(|()| fs.remove_file(path).map_err(|e| io(path, e)))
            }
            FileChange::Move { from, to, contents } => remember(fs, from, &mut backups)
                .and_then(|()| remember(fs, to, &mut backups))
                .and_then(|()| fs.write(to, contents.as_bytes()).map_err(|e| io(to, e)))
                .and_then(|()| if from == to { Ok(()) } else { fs.remove_file(from).map_err(|e| io(from, e)) }),
        };
        if let Err(err) = outcome {
            for backup in backups.iter().rev() {
                let _ = match backup {
                    Backup::Absent(path) => fs.remove_file(path),
                    Backup::Content(path, bytes) => fs.write(path, bytes),
                };
            }
            return Err(err);
        }
    }
    Ok(())
}

/// Keeps what `path` holds before it is changed. Only a file that is really not there is restored by removing
/// it: a read that fails for another reason (permissions, a folder swapped for a link) stops the patch, since
/// "restoring" such a path by deleting it would destroy a file the patch never had.
fn remember(fs: &dyn PatchFs, path: &Path, backups: &mut Vec<Backup>) -> Result<()> {
    match fs.read(path) {
        Ok(bytes) => backups.push(Backup::Content(path.to_path_buf(), bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => backups.push(Backup::Absent(path.to_path_buf())),
        Err(err) => return Err(io(path, err)),
    }
    Ok(())
}

/// The text of a file the patch updates; the message is the one `read_to_string` gives.
fn utf8(bytes: Vec<u8>) -> std::io::Result<String> {
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))
}

fn io(path: &Path, err: std::io::Error) -> PatchError {
    PatchError::Io { path: path.display().to_string(), message: err.to_string() }
}
