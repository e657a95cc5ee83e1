//! Where a patch reads and writes. The engine never opens a path itself: it asks a [`PatchFs`], so a caller
//! that confines files to a folder (through a directory handle rather than a checked path string) decides how
//! every read and write is done. [`StdFs`] is plain `std::fs` on the paths the resolver returned.

use std::io;
use std::path::Path;

/// The file operations a patch needs, on paths the caller's resolver returned.
pub trait PatchFs {
    /// Whether `path` is a folder (following links).
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether `path` is a regular file (following links).
    fn is_file(&self, path: &Path) -> bool;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Makes `contents` the whole content of `path`, creating missing folders on the way.
    fn write(&self, path: &Path, contents: &[u8]) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
}

/// `std::fs` on the resolved paths as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdFs;

impl PatchFs for StdFs {
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn write(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, contents)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
}
