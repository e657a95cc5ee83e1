//! Walking a folder through directory handles: each subfolder is opened from its parent's handle by name,
//! without following a link, so a folder swapped for a link while the walk runs is refused instead of walked.
//! Used by `glob_files`, `grep`, `delete_file` and the artifact export.

use cap_std::fs::{Dir, Metadata, OpenOptions, OpenOptionsExt};
use std::ffi::{OsStr, OsString};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

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

/// Visits the regular files below `start`, depth first, each folder's entries in name order (the order
/// `ignore`'s `sort_by_file_path` gives). Links are never followed. Unreadable folders are skipped.
pub(crate) fn walk_files(
    start: &Dir,
    options: WalkOptions,
    visit: &mut dyn FnMut(Found<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    walk_in(start, Path::new(""), 1, options, visit)
}

fn walk_in(
    folder: &Dir,
    prefix: &Path,
    depth: usize,
    options: WalkOptions,
    visit: &mut dyn FnMut(Found<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for (name, metadata) in sorted_entries(folder) {
        if !options.include_hidden && name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let relative: PathBuf = prefix.join(&name);
        if metadata.is_file() {
            visit(Found { folder, name: &name, relative: &relative, metadata: &metadata })?;
        } else if metadata.is_dir() && options.max_depth.is_none_or(|max| depth < max) {
            let Ok(sub) = open_subdir(folder, &name) else {
                continue;
            };
            walk_in(&sub, &relative, depth + 1, options, visit)?;
        }
    }
    ControlFlow::Continue(())
}

/// A folder's entries with what each is (not following links), sorted by name.
pub(crate) fn sorted_entries(folder: &Dir) -> Vec<(OsString, Metadata)> {
    let Ok(entries) = folder.entries() else {
        return Vec::new();
    };
    let mut out: Vec<(OsString, Metadata)> =
        entries.flatten().filter_map(|entry| Some((entry.file_name(), entry.metadata().ok()?))).collect();
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
/// links.
pub(crate) fn count_entries(folder: &Dir) -> u64 {
    sorted_entries(folder)
        .into_iter()
        .map(
            |(name, metadata)| {
                if metadata.is_dir() { 1 + open_subdir(folder, &name).map_or(0, |sub| count_entries(&sub)) } else { 1 }
            },
        )
        .sum()
}
