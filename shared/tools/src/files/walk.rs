//! Walking a folder through directory handles: each subfolder is opened from its parent's handle by name,
//! without following a link, so a folder swapped for a link while the walk runs is refused instead of walked.
//! Used by `glob_files`, `grep`, `delete_file` and the artifact export.
//!
//! The folders walked are the model's to shape (a contained command can make a chain of 19,000 nested folders
//! in the managed root or its run folder), so every walk here is a loop over an explicit stack, never a
//! recursion: a recursion that deep overflowed the thread's stack and aborted the whole assistant. Each level
//! holds its folder's handle, so the depth is capped too ([`MAX_WALK_DEPTH`], which also bounds the open
//! descriptors), and so is the number of entries listed ([`MAX_WALK_ENTRIES`], which bounds the time and the
//! memory). What lies past a cap is skipped and reported in [`Walked`], for the tools to tell the model.

use cap_std::fs::{Dir, Metadata, OpenOptions, OpenOptionsExt};
use std::ffi::{OsStr, OsString};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// Deepest folder level a walk enters, the starting folder being level 1. Real trees (a project with its
/// `node_modules`, a Python environment) stay well below; a deeper one is the model's doing.
pub(crate) const MAX_WALK_DEPTH: usize = 64;
/// Most entries one walk lists, across all its folders.
pub(crate) const MAX_WALK_ENTRIES: usize = 100_000;

/// Which entries a walk visits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalkOptions {
    /// Visit (and descend into) names starting with `.`.
    pub include_hidden: bool,
    /// `Some(1)`: the folder's own files only.
    pub max_depth: Option<usize>,
}

/// A regular file found by [`walk_files`].
pub(crate) struct Found<'a> {
    /// The folder holding it; open the file from here by [`Found::name`].
    pub folder: &'a Dir,
    pub name: &'a OsStr,
    /// Relative to the folder the walk started in.
    pub relative: &'a Path,
    /// What the entry was when listed (a link is reported as a link, so it is never visited).
    pub metadata: &'a Metadata,
}

/// What a walk left out because of its caps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Walked {
    /// Folders not entered because they lie deeper than [`MAX_WALK_DEPTH`].
    pub too_deep: u64,
    /// The walk stopped listing after [`MAX_WALK_ENTRIES`] entries.
    pub entries_capped: bool,
}

impl Walked {
    /// A sentence for the model when something was left out, `None` when the walk was complete.
    pub(crate) fn notice(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.too_deep > 0 {
            parts.push(format!(
                "{} folder(s) deeper than {MAX_WALK_DEPTH} levels were skipped; start from a deeper folder to see \
                 them",
                self.too_deep
            ));
        }
        if self.entries_capped {
            parts.push(format!("the walk stopped after {MAX_WALK_ENTRIES} entries; narrow the folder to see the rest"));
        }
        (!parts.is_empty()).then(|| format!("Incomplete: {}.", parts.join("; ")))
    }
}

/// One folder being walked: its handle, where it is, and the entries not yet visited.
struct Level {
    dir: Dir,
    prefix: PathBuf,
    depth: usize,
    entries: std::vec::IntoIter<(OsString, Metadata)>,
}

impl Level {
    /// The level of the folder `name` below this one, or `None` when it lies past [`MAX_WALK_DEPTH`] (counted in
    /// `walked`) or cannot be opened.
    fn enter(&self, name: &OsStr, prefix: PathBuf, budget: &mut usize, walked: &mut Walked) -> Option<Level> {
        if self.depth >= MAX_WALK_DEPTH {
            walked.too_deep += 1;
            return None;
        }
        let dir = open_subdir(&self.dir, name).ok()?;
        let entries = listed(&dir, budget, walked).into_iter();
        Some(Level { dir, prefix, depth: self.depth + 1, entries })
    }
}

/// Visits the regular files below `start`, depth first, each folder's entries in name order (the order
/// `ignore`'s `sort_by_file_path` gives). Links are never followed. Unreadable folders are skipped, and so is
/// what lies past the caps; the result says what was.
pub(crate) fn walk_files(
    start: &Dir,
    options: WalkOptions,
    visit: &mut dyn FnMut(Found<'_>) -> ControlFlow<()>,
) -> Walked {
    let mut walked = Walked::default();
    let mut budget = MAX_WALK_ENTRIES;
    let Ok(dir) = start.try_clone() else {
        return walked;
    };
    let entries = listed(&dir, &mut budget, &mut walked).into_iter();
    let mut stack = vec![Level { dir, prefix: PathBuf::new(), depth: 1, entries }];
    while let Some(level) = stack.last_mut() {
        let Some((name, metadata)) = level.entries.next() else {
            stack.pop();
            continue;
        };
        if !options.include_hidden && name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let relative = level.prefix.join(&name);
        if metadata.is_file() {
            let found = Found { folder: &level.dir, name: &name, relative: &relative, metadata: &metadata };
            if visit(found).is_break() {
                break;
            }
        } else if metadata.is_dir()
            && options.max_depth.is_none_or(|max| level.depth < max)
            && let Some(next) = level.enter(&name, relative, &mut budget, &mut walked)
        {
            stack.push(next);
        }
    }
    walked
}

/// A folder's entries in name order, at most `budget` of them (taken from it); running out marks the walk.
fn listed(folder: &Dir, budget: &mut usize, walked: &mut Walked) -> Vec<(OsString, Metadata)> {
    let Ok(entries) = folder.entries() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        if *budget == 0 {
            walked.entries_capped = true;
            break;
        }
        *budget -= 1;
        if let Ok(metadata) = entry.metadata() {
            out.push((entry.file_name(), metadata));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Opens a subfolder by name; a link at that name is refused (`O_NOFOLLOW`), not followed.
pub(crate) fn open_subdir(folder: &Dir, name: &OsStr) -> io::Result<Dir> {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW);
    Ok(Dir::from_std_file(folder.open_with(name, &options)?.into_std()))
}

/// Opens a regular file by name for reading; a link at that name is refused, and anything that is not a
/// regular file once open (a FIFO, a device, a folder swapped in) is refused too.
pub(crate) fn open_regular(folder: &Dir, name: &OsStr) -> io::Result<(std::fs::File, std::fs::Metadata)> {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = folder.open_with(name, &options)?.into_std();
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok((file, metadata))
}

/// How many entries are below a folder (folders count, and so does everything in them), without following
/// links, within the walk's caps: `walked` says whether the count stopped short.
pub(crate) fn count_entries(folder: &Dir) -> (u64, Walked) {
    let mut walked = Walked::default();
    let mut budget = MAX_WALK_ENTRIES;
    let Ok(dir) = folder.try_clone() else {
        return (0, walked);
    };
    let entries = listed(&dir, &mut budget, &mut walked).into_iter();
    let mut count = entries.len() as u64;
    let mut stack = vec![Level { dir, prefix: PathBuf::new(), depth: 1, entries }];
    while let Some(level) = stack.last_mut() {
        let Some((name, metadata)) = level.entries.next() else {
            stack.pop();
            continue;
        };
        if !metadata.is_dir() {
            continue;
        }
        if let Some(next) = level.enter(&name, PathBuf::new(), &mut budget, &mut walked) {
            count += next.entries.len() as u64;
            stack.push(next);
        }
    }
    (count, walked)
}

/// One folder being emptied: its handle, its name in its parent, and the entries not yet removed.
struct Emptying {
    dir: Dir,
    name: OsString,
    entries: std::vec::IntoIter<(OsString, bool)>,
}

/// Removes the folder `name` in `parent` and everything in it, without following links (a link is removed,
/// not what it points to), and returns how many entries below it went. A loop, not a recursion, holding one
/// handle per level: a tree deeper than [`MAX_WALK_DEPTH`] is refused before anything is removed below that
/// level (what was removed above it stays removed), rather than walked to the bottom.
pub(crate) fn remove_tree(parent: &Dir, name: &OsStr) -> io::Result<u64> {
    let mut removed = 0u64;
    let dir = open_subdir(parent, name)?;
    let entries = names(&dir)?.into_iter();
    let mut stack = vec![Emptying { dir, name: name.to_os_string(), entries }];
    loop {
        let depth = stack.len();
        let Some(level) = stack.last_mut() else { break };
        match level.entries.next() {
            Some((child, true)) => {
                if depth >= MAX_WALK_DEPTH {
                    return Err(io::Error::other(format!(
                        "the folder is more than {MAX_WALK_DEPTH} levels deep; it was only partly deleted"
                    )));
                }
                let dir = open_subdir(&level.dir, &child)?;
                let entries = names(&dir)?.into_iter();
                stack.push(Emptying { dir, name: child, entries });
            }
            Some((child, false)) => {
                level.dir.remove_file(&child)?;
                removed += 1;
            }
            None => {
                let Some(done) = stack.pop() else { break };
                match stack.last() {
                    Some(above) => {
                        above.dir.remove_dir(&done.name)?;
                        removed += 1;
                    }
                    None => parent.remove_dir(&done.name)?,
                }
            }
        }
    }
    Ok(removed)
}

/// A folder's entry names, each with whether it is a folder (a link is not).
fn names(folder: &Dir) -> io::Result<Vec<(OsString, bool)>> {
    let mut out = Vec::new();
    for entry in folder.entries()? {
        let entry = entry?;
        let is_dir = entry.file_type()?.is_dir();
        out.push((entry.file_name(), is_dir));
    }
    Ok(out)
}
