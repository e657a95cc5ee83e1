//! Reading a downloaded (or local) source into a [`Tree`]: a `.zip`, a `.tar.gz` (or plain `.tar`), or a lone
//! `SKILL.md`; or a local folder.
//!
//! Only regular files and folders are accepted. A link (symbolic or hard), a device, a FIFO, an encrypted zip
//! member, a name that would land outside the extraction folder, more than [`MAX_FILES`] files or more than
//! [`MAX_BYTES`] bytes refuses the whole source. Sizes are counted on the bytes really read, never on what a
//! header declares, and the decompressed tar stream is capped as a whole, so a small archive that inflates to
//! gigabytes stops at the cap.

use super::InstallError;
use super::tree::{MAX_BYTES, MAX_FILES, MAX_PATH_BYTES, Tree, clean_name, too_big};
use std::cell::Cell;
use std::fs::File;
use std::io::{Cursor, Read};
use std::path::Path;
use std::rc::Rc;

/// Entries of any kind (folders included) an archive may list; a header-only bomb stops here.
const MAX_ENTRIES: usize = 5 * MAX_FILES;
/// The decompressed tar stream at most: the file bytes plus a header and padding per entry.
const MAX_TAR_STREAM: u64 = MAX_BYTES + (MAX_ENTRIES as u64) * 2048;

/// Whether `bytes` open like a zip, a gzip or a tar archive.
pub fn is_archive(bytes: &[u8]) -> bool {
    is_zip(bytes) || is_gzip(bytes) || is_tar(bytes)
}

fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

fn is_tar(bytes: &[u8]) -> bool {
    bytes.get(257..262) == Some(b"ustar")
}

/// Reads `bytes` as whichever form they are in.
pub fn unpack(bytes: &[u8]) -> Result<Tree, InstallError> {
    let tree = if is_zip(bytes) {
        unpack_zip(bytes)?
    } else if is_gzip(bytes) {
        unpack_tar(flate2::read::GzDecoder::new(bytes))?
    } else if is_tar(bytes) {
        unpack_tar(bytes)?
    } else {
        if std::str::from_utf8(bytes).is_err() {
            return Err(InstallError::Refused(
                "the source is neither a .zip, a .tar.gz nor a SKILL.md text file".into(),
            ));
        }
        let mut tree = Tree::default();
        tree.add("SKILL.md".into(), bytes.to_vec())?;
        return Ok(tree);
    };
    tree.check_shape()?;
    Ok(tree.without_single_top())
}

fn unpack_zip(bytes: &[u8]) -> Result<Tree, InstallError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| InstallError::Refused(format!("not a readable zip archive: {e}")))?;
    if archive.len() > MAX_ENTRIES {
        return Err(too_many());
    }
    let mut tree = Tree::default();
    for index in 0..archive.len() {
        let mut entry =
            archive.by_index(index).map_err(|e| InstallError::Refused(format!("unreadable zip entry: {e}")))?;
        let raw = entry
            .name()
            .map_err(|e| InstallError::Refused(format!("a zip entry name is unreadable: {e}")))?
            .into_owned();
        let name = clean_name(&raw)?;
        if entry.encrypted() {
            return Err(InstallError::Refused(format!("`{raw}` is encrypted")));
        }
        // The Unix file type lives in the high bits of the external attributes.
        let kind = entry.unix_mode().map(|mode| mode & 0o170_000).unwrap_or(0);
        if entry.is_symlink() || !matches!(kind, 0 | 0o100_000 | 0o040_000) {
            return Err(not_a_file(&raw));
        }
        if entry.is_dir() {
            continue;
        }
        let Some(name) = name else { return Err(not_a_file(&raw)) };
        let content = read_capped(&mut entry, tree.room(), &raw)?;
        tree.add(name, content)?;
    }
    Ok(tree)
}

fn unpack_tar(reader: impl Read) -> Result<Tree, InstallError> {
    let exceeded = Rc::new(Cell::new(false));
    let capped = Capped { inner: reader, left: MAX_TAR_STREAM, exceeded: Rc::clone(&exceeded) };
    let mut archive = tar::Archive::new(capped);
    let result = read_tar_entries(&mut archive);
    if exceeded.get() {
        return Err(too_big());
    }
    result
}

fn read_tar_entries<R: Read>(archive: &mut tar::Archive<R>) -> Result<Tree, InstallError> {
    let broken = |e: std::io::Error| InstallError::Refused(format!("not a readable tar archive: {e}"));
    let mut tree = Tree::default();
    let mut entries = 0usize;
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        entries += 1;
        if entries > MAX_ENTRIES {
            return Err(too_many());
        }
        let bytes = entry.path_bytes();
        if bytes.len() > MAX_PATH_BYTES {
            return Err(InstallError::Refused(format!(
                "an entry name is {} bytes long; names are limited to {MAX_PATH_BYTES} bytes",
                bytes.len()
            )));
        }
        let raw = String::from_utf8(bytes.into_owned())
            .map_err(|_| InstallError::Refused("an entry name is not UTF-8".into()))?;
        use tar::EntryType;
        match entry.header().entry_type() {
            // pax headers: GitHub's tarballs open with one holding the commit id.
            EntryType::XGlobalHeader | EntryType::XHeader => continue,
            EntryType::Directory => {
                clean_name(&raw)?;
            }
            EntryType::Regular | EntryType::Continuous => {
                let Some(name) = clean_name(&raw)? else { return Err(not_a_file(&raw)) };
                if entry.header().size().is_ok_and(|size| size > tree.room()) {
                    return Err(too_big());
                }
                let content = read_capped(&mut entry, tree.room(), &raw)?;
                tree.add(name, content)?;
            }
            _ => return Err(not_a_file(&raw)),
        }
    }
    Ok(tree)
}

/// Reads a folder on this machine; links and special files refuse it, as in an archive, and names are held to
/// the same rules ([`clean_name`]). Tooling folders (`.git`, `node_modules`) are not read.
pub fn read_folder(root: &Path) -> Result<Tree, InstallError> {
    let mut tree = Tree::default();
    walk(root, "", &mut tree)?;
    Ok(tree)
}

fn walk(dir: &Path, relative_dir: &str, tree: &mut Tree) -> Result<(), InstallError> {
    let unreadable =
        |path: &Path, e: std::io::Error| InstallError::Refused(format!("cannot read {}: {e}", path.display()));
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| unreadable(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| unreadable(dir, e))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| unreadable(&path, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            return Err(InstallError::Refused(format!("the name of {} is not UTF-8", path.display())));
        };
        if kind.is_dir() && matches!(name.as_str(), ".git" | "node_modules") {
            continue;
        }
        let joined = if relative_dir.is_empty() { name } else { format!("{relative_dir}/{name}") };
        // Checked before going deeper, so the walk stops at the same depth an archive does.
        let Some(relative) = clean_name(&joined)? else { return Err(not_a_file(&joined)) };
        if kind.is_dir() {
            walk(&path, &relative, tree)?;
        } else if kind.is_file() {
            let file = open_regular(&path).map_err(|e| unreadable(&path, e))?;
            let content = read_capped(file, tree.room(), &relative)?;
            tree.add(relative, content)?;
        } else {
            return Err(not_a_file(&relative));
        }
    }
    Ok(())
}

/// Opens `path` for reading only if it is a regular file. Opening a FIFO for reading waits for a writer, so
/// the open does not block (`O_NONBLOCK`, no effect on a regular file), and the type is checked on the open
/// file itself: a file swapped for a FIFO or a device after it was listed is still refused.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file (links, devices and FIFOs are not allowed)"));
    }
    Ok(file)
}

/// Reads the file `name` up to `room` bytes; one more means the source is over [`MAX_BYTES`].
fn read_capped(reader: impl Read, room: u64, name: &str) -> Result<Vec<u8>, InstallError> {
    let mut content = Vec::new();
    reader
        .take(room + 1)
        .read_to_end(&mut content)
        .map_err(|e| InstallError::Refused(format!("cannot read `{name}`: {e}")))?;
    if content.len() as u64 > room {
        return Err(too_big());
    }
    Ok(content)
}

fn too_many() -> InstallError {
    InstallError::Refused(format!("the source holds more than {MAX_FILES} files"))
}

fn not_a_file(raw: &str) -> InstallError {
    InstallError::Refused(format!("`{raw}` is not a regular file or folder (links, devices and FIFOs are not allowed)"))
}

/// A reader that fails once more than `left` bytes went through, and says so in `exceeded`.
struct Capped<R> {
    inner: R,
    left: u64,
    exceeded: Rc<Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        if read as u64 > self.left {
            self.exceeded.set(true);
            return Err(std::io::Error::other("decompressed stream over the limit"));
        }
        self.left -= read as u64;
        Ok(read)
    }
}
