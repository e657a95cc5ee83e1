//! File operations on resolved managed paths. A path inside the root is handed to the root's directory handle
//! with its root-relative form, so the kernel (openat2 `RESOLVE_BENEATH`, or cap-std's component-by-component
//! walk) refuses a resolution that leaves the root at the moment of the open: a folder swapped for a link
//! after [`ManagedRoot::resolve`] checked it cannot carry the operation out. Paths outside the root exist only
//! when the operator set `allow_outside_root`; that mode is unconfined on purpose and uses plain `std::fs`.
//!
//! Writes that replace a file go to a new file in the same folder that is then renamed over the target, so a
//! file with other hard links (perhaps one outside the root) is never changed through the root, and readers see
//! the old content or the new, never half of it.

use super::walk::remove_tree;
use super::{ManagedPath, ManagedRoot, is_escape};
use cap_std::fs::{Dir, Metadata, OpenOptions, OpenOptionsExt};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where an operation happens.
enum Place<'a> {
    /// Below the root: the path relative to it.
    Inside(&'a Path),
    /// Outside the root, allowed by `allow_outside_root`: the absolute path.
    Outside(&'a Path),
}

impl ManagedRoot {
    /// The relative form comes from the absolute path, not from `relative` (which is for showing and has
    /// lost any bytes that are not UTF-8).
    fn place<'a>(&self, path: &'a ManagedPath) -> Place<'a> {
        let Some(shown) = &path.relative else {
            return Place::Outside(&path.absolute);
        };
        match path.absolute.strip_prefix(self.path()) {
            Ok(rest) if rest.as_os_str().is_empty() => Place::Inside(Path::new(".")),
            Ok(rest) => Place::Inside(rest),
            Err(_) => Place::Inside(Path::new(shown.as_str())),
        }
    }

    /// Opens a file for reading, following links only as far as they stay inside the root. `O_NONBLOCK` keeps a
    /// FIFO planted in the root from hanging the call; it changes nothing for regular files.
    pub fn open_read(&self, path: &ManagedPath) -> io::Result<std::fs::File> {
        match self.place(path) {
            Place::Inside(relative) => {
                let mut options = OpenOptions::new();
                options.read(true).custom_flags(libc::O_NONBLOCK);
                Ok(self.handle()?.open_with(relative, &options)?.into_std())
            }
            Place::Outside(absolute) => {
                use std::os::unix::fs::OpenOptionsExt as _;
                std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(absolute)
            }
        }
    }

    /// What `path` is, following links that stay inside the root.
    pub fn metadata(&self, path: &ManagedPath) -> io::Result<Metadata> {
        match self.place(path) {
            Place::Inside(relative) => self.handle()?.metadata(relative),
            Place::Outside(absolute) => std::fs::metadata(absolute).map(Metadata::from_just_metadata),
        }
    }

    /// What `path` is, a link being reported as a link.
    pub fn symlink_metadata(&self, path: &ManagedPath) -> io::Result<Metadata> {
        match self.place(path) {
            Place::Inside(relative) => self.handle()?.symlink_metadata(relative),
            Place::Outside(absolute) => std::fs::symlink_metadata(absolute).map(Metadata::from_just_metadata),
        }
    }

    /// A handle on a folder, for listing and walking it without leaving it.
    pub fn open_dir(&self, path: &ManagedPath) -> io::Result<Dir> {
        match self.place(path) {
            Place::Inside(relative) => self.handle()?.open_dir(relative),
            Place::Outside(absolute) => Dir::open_ambient_dir(absolute, cap_std::ambient_authority()),
        }
    }

    pub fn create_dir_all(&self, path: &ManagedPath) -> io::Result<()> {
        match self.place(path) {
            Place::Inside(relative) => self.create_dir_all_inside(relative),
            Place::Outside(absolute) => std::fs::create_dir_all(absolute),
        }
    }

    /// cap-std reports a link to a folder outside as "already exists" when asked to create it; the refusal to
    /// follow it is the real reason, and the one the caller should report. If the name is a folder by the time
    /// it is looked at again (the link was swapped away), the folder is there, which is all this promises:
    /// whatever comes next opens it through the handle again.
    fn create_dir_all_inside(&self, relative: &Path) -> io::Result<()> {
        match self.handle()?.create_dir_all(relative) {
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => match self.handle()?.metadata(relative) {
                Ok(meta) if meta.is_dir() => Ok(()),
                Err(refused) if is_escape(&refused) => Err(refused),
                _ => Err(err),
            },
            other => other,
        }
    }

    /// Creates the folders that would hold `path`.
    pub fn create_parent(&self, path: &ManagedPath) -> io::Result<()> {
        match self.place(path) {
            Place::Inside(relative) => match relative.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => self.create_dir_all_inside(parent),
                _ => Ok(()),
            },
            Place::Outside(absolute) => absolute.parent().map_or(Ok(()), std::fs::create_dir_all),
        }
    }

    /// Writes a file that must not exist yet (`O_EXCL`: a link planted at the name is not followed).
    pub fn create_new(&self, path: &ManagedPath, bytes: &[u8]) -> io::Result<()> {
        self.create_new_with_mode(path, bytes, 0o666)
    }

    /// [`Self::create_new`] with the permission bits a new file gets (before the umask).
    pub fn create_new_with_mode(&self, path: &ManagedPath, bytes: &[u8], mode: u32) -> io::Result<()> {
        match self.place(path) {
            Place::Inside(relative) => {
                let mut options = OpenOptions::new();
                options.write(true).create_new(true).mode(mode);
                self.handle()?.open_with(relative, &options)?.write_all(bytes)
            }
            Place::Outside(absolute) => {
                use std::os::unix::fs::OpenOptionsExt as _;
                std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(absolute)?.write_all(bytes)
            }
        }
    }

    /// Writes `bytes` as the whole content of `path`, created or replaced: a new file in the same folder renamed
    /// over the name. Other hard links to the old file keep the old content.
    pub fn replace(&self, path: &ManagedPath, bytes: &[u8]) -> io::Result<()> {
        let (folder, name) = self.folder_and_name(path)?;
        replace_in(&folder, name, bytes, None)
    }

    /// [`Self::replace`] with exactly `mode` for the new file, whatever the old file's bits or the umask; the old
    /// file at the name is not looked at.
    pub fn replace_with_mode(&self, path: &ManagedPath, bytes: &[u8], mode: u32) -> io::Result<()> {
        let (folder, name) = self.folder_and_name(path)?;
        replace_in(&folder, name, bytes, Some(mode))
    }

    /// Moves `from` to `to`, replacing a file there. Neither name's last component is followed.
    pub fn rename(&self, from: &ManagedPath, to: &ManagedPath) -> io::Result<()> {
        match (self.place(from), self.place(to)) {
            (Place::Inside(a), Place::Inside(b)) => {
                let root = self.handle()?;
                root.rename(a, &root, b)
            }
            (Place::Inside(a), Place::Outside(b)) => {
                let (folder, name) = ambient_parent(b)?;
                self.handle()?.rename(a, &folder, name)
            }
            (Place::Outside(a), Place::Inside(b)) => {
                let (folder, name) = ambient_parent(a)?;
                folder.rename(name, &*self.handle()?, b)
            }
            (Place::Outside(a), Place::Outside(b)) => std::fs::rename(a, b),
        }
    }

    /// Removes a file or a link (not what it points to).
    pub fn remove_file(&self, path: &ManagedPath) -> io::Result<()> {
        match self.place(path) {
            Place::Inside(relative) => self.handle()?.remove_file(relative),
            Place::Outside(absolute) => std::fs::remove_file(absolute),
        }
    }

    /// Removes a folder and everything in it, without following links inside it, and returns how many entries
    /// below it went. Not cap-std's or std's `remove_dir_all`: both recurse once per level, and the model can
    /// make the tree as deep as it likes (see `walk.rs`).
    pub fn remove_dir_all(&self, path: &ManagedPath) -> io::Result<u64> {
        let (folder, name) = self.folder_and_name(path)?;
        remove_tree(&folder, name)
    }

    /// The folder holding `path`, opened through the root's handle when it is inside, and its last name.
    fn folder_and_name<'p>(&self, path: &'p ManagedPath) -> io::Result<(Dir, &'p OsStr)> {
        match self.place(path) {
            Place::Inside(relative) => {
                let name = relative.file_name().ok_or_else(|| not_a_file_name(relative))?;
                let folder = match relative.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => self.handle()?.open_dir(parent)?,
                    _ => self.handle()?.try_clone()?,
                };
                Ok((folder, name))
            }
            Place::Outside(absolute) => ambient_parent(absolute),
        }
    }
}

/// The folder holding an absolute path, opened as a handle, and the last component.
fn ambient_parent(absolute: &Path) -> io::Result<(Dir, &OsStr)> {
    let name = absolute.file_name().ok_or_else(|| not_a_file_name(absolute))?;
    let parent = absolute.parent().unwrap_or(Path::new("/"));
    Ok((Dir::open_ambient_dir(parent, cap_std::ambient_authority())?, name))
}

fn not_a_file_name(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{} does not name a file", path.display()))
}

/// Writes a new file next to `name` in `folder` and renames it over `name`. The new file takes the old one's
/// permission bits, so replacing an executable script keeps it executable. A file the user made read-only stays
/// unwritable, as it was when files were written in place: only the folder's permission governs a rename. With
/// `mode`, the new file gets exactly that and the old one is not consulted.
fn replace_in(folder: &Dir, name: &OsStr, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    use cap_std::fs::PermissionsExt as _;
    let permissions = match mode {
        Some(mode) => Some(cap_std::fs::Permissions::from_mode(mode)),
        None => {
            let permissions = folder.symlink_metadata(name).ok().filter(Metadata::is_file).map(|m| m.permissions());
            if permissions.is_some() {
                let mut writable = OpenOptions::new();
                writable.write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
                folder.open_with(name, &writable)?;
            }
            permissions
        }
    };
    for _ in 0..100 {
        let temporary = temporary_name();
        let mut options = OpenOptions::new();
        // Private until it takes the old file's bits: a 0600 file's new content is never world-readable.
        options.write(true).create_new(true).mode(0o600);
        let mut file = match folder.open_with(&temporary, &options) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        };
        let final_permissions = permissions.clone().unwrap_or_else(default_permissions);
        let written = file
            .write_all(bytes)
            .and_then(|()| file.set_permissions(final_permissions))
            .and_then(|()| folder.rename(&temporary, folder, name));
        if written.is_err() {
            let _ = folder.remove_file(&temporary);
        }
        return written;
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name for the write"))
}

/// What a new file would get: 0666 less the process's umask (read without changing it, from /proc).
fn default_permissions() -> cap_std::fs::Permissions {
    use cap_std::fs::PermissionsExt as _;
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Umask:").map(|v| v.trim().to_string())))
        .and_then(|v| u32::from_str_radix(&v, 8).ok())
        .unwrap_or(0o022);
    cap_std::fs::Permissions::from_mode(0o666 & !umask)
}

/// A hidden name unlikely to be taken: process id, a per-process counter and the clock.
pub(super) fn temporary_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!(".minibot-write-{}-{count}-{nanos:08x}.tmp", std::process::id())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn replace_with_mode_sets_exactly_that_mode_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let root = ManagedRoot::create(dir.path(), false).unwrap();
        let target = root.resolve("in/upload.txt").unwrap();
        root.create_parent(&target).unwrap();
        std::fs::write(&target.absolute, b"old").unwrap();
        std::fs::set_permissions(&target.absolute, std::fs::Permissions::from_mode(0o644)).unwrap();
        root.replace_with_mode(&target, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&target.absolute).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&target.absolute).unwrap().permissions().mode() & 0o7777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("in")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["upload.txt"]);
    }
}
