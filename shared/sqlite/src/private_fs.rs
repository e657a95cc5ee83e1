//! Private files at rest: what minibot creates to keep (the data, log and managed-file folders, the databases,
//! the logs, saved uploads) is readable by its own account only, whatever the umask of the shell that started
//! it. Folders are made 0700 and files 0600 with explicit modes at creation (then set exactly, since a umask
//! can only take bits away), so a run by hand under umask 022 leaves nothing for other accounts to read.
//!
//! Folders that already exist are left as they are: one the user pointed at (an existing managed root, the
//! folder of a database they placed) is theirs to set. Files that are ours (databases and their journals, the
//! log and its rotated copies) and that an older version or another umask left open to the group or others are
//! narrowed with [`tighten`] at start-up.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every folder minibot creates for itself.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file minibot creates for itself.
pub const FILE_MODE: u32 = 0o600;
/// The permission bits of the group and of others.
const GROUP_AND_OTHERS: u32 = 0o077;

/// Creates `path` and every missing folder above it with mode 0700. Folders that exist are not changed.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    // The missing folders, deepest first; the walk stops at the first one that exists (at once when `path` does).
    let mut missing = Vec::new();
    let mut current = Some(path);
    while let Some(folder) = current.filter(|f| !f.as_os_str().is_empty()) {
        match std::fs::metadata(folder) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a folder", folder.display()),
                ));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => missing.push(folder),
            Err(err) => return Err(err),
        }
        current = folder.parent();
    }
    let mut builder = DirBuilder::new();
    builder.mode(DIR_MODE);
    for folder in missing.into_iter().rev() {
        match builder.create(folder) {
            // Exactly 0700: the umask may have taken more (it cannot have added anything).
            Ok(()) => std::fs::set_permissions(folder, Permissions::from_mode(DIR_MODE))?,
            // Made meanwhile by another process (the orchestrator and its local workers start together).
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists && folder.is_dir() => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Creates `path` as an empty file with mode 0600 unless something is there already; says whether it did.
/// An existing file is left to [`tighten`].
pub fn create_file(path: &Path) -> io::Result<bool> {
    match OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path) {
        Ok(file) => {
            file.set_permissions(Permissions::from_mode(FILE_MODE))?;
            Ok(true)
        }
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err),
    }
}

/// Opens `path` for appending, creating it with mode 0600 when missing. The mode of an existing file is left
/// to [`tighten_open`].
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(FILE_MODE).open(path)
}

/// `mode` without the group's and others' bits: what [`tighten`] leaves.
pub fn private_mode(mode: u32) -> u32 {
    mode & !GROUP_AND_OTHERS
}

/// The permission bits of a file the group or others can access; `None` for one that is private, or not a file.
fn too_open(meta: &std::fs::Metadata) -> Option<u32> {
    let mode = meta.permissions().mode() & 0o7777;
    (meta.is_file() && mode & GROUP_AND_OTHERS != 0).then_some(mode)
}

/// Takes the group's and others' bits off an existing file of ours; returns the mode it had when that changed
/// it. A missing file, or one that is already private, is left alone (`None`).
pub fn tighten(path: &Path) -> io::Result<Option<u32>> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let Some(mode) = too_open(&meta) else { return Ok(None) };
    std::fs::set_permissions(path, Permissions::from_mode(private_mode(mode)))?;
    Ok(Some(mode))
}

/// [`tighten`] on a file already open (no name to look up again).
pub fn tighten_open(file: &File) -> io::Result<Option<u32>> {
    let Some(mode) = too_open(&file.metadata()?) else { return Ok(None) };
    file.set_permissions(Permissions::from_mode(private_mode(mode)))?;
    Ok(Some(mode))
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The permission bits of `path` in octal.
    pub(crate) fn mode(path: &Path) -> String {
        format!("{:o}", std::fs::metadata(path).unwrap().permissions().mode() & 0o7777)
    }

    #[test]
    fn folders_are_made_0700_and_existing_ones_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, Permissions::from_mode(0o755)).unwrap();
        let deep = theirs.join("a/b/c");
        create_dir_all(&deep).unwrap();
        for folder in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&theirs.join(folder)), "700", "{folder}");
        }
        assert_eq!(mode(&theirs), "755", "an existing folder keeps its mode");
        create_dir_all(&deep).unwrap();
        create_dir_all(Path::new("")).unwrap();
    }

    #[test]
    fn a_file_in_the_way_of_a_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(create_dir_all(&file.join("below")).is_err());
        assert!(create_dir_all(&file).is_err());
    }

    #[test]
    fn files_are_made_0600_and_open_ones_are_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        assert!(create_file(&path).unwrap());
        assert_eq!(mode(&path), "600");
        assert!(!create_file(&path).unwrap(), "an existing file is not made again");

        let log = dir.path().join("x.log");
        drop(open_append(&log).unwrap());
        assert_eq!(mode(&log), "600");

        std::fs::set_permissions(&log, Permissions::from_mode(0o644)).unwrap();
        let file = open_append(&log).unwrap();
        assert_eq!(tighten_open(&file).unwrap(), Some(0o644));
        assert_eq!(mode(&log), "600");
        assert_eq!(tighten_open(&file).unwrap(), None);
    }

    #[test]
    fn tighten_takes_off_the_group_and_others_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o664)).unwrap();
        assert_eq!(tighten(&path).unwrap(), Some(0o664));
        assert_eq!(mode(&path), "600");
        assert_eq!(tighten(&path).unwrap(), None, "already private");
        std::fs::set_permissions(&path, Permissions::from_mode(0o444)).unwrap();
        assert_eq!(tighten(&path).unwrap(), Some(0o444));
        assert_eq!(mode(&path), "400", "a read-only file stays read-only");
        assert_eq!(tighten(&dir.path().join("missing")).unwrap(), None);
        assert_eq!(tighten(dir.path()).unwrap(), None, "folders are not tightened");
    }
}
