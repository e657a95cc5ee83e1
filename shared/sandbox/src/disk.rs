//! Disk use of a command: the bound on what it may take under its writable folders ([`DiskWatch`], measured
//! while it runs, since there is no quota to lean on), and whether its capped temp folder filled up.

use std::path::{Path, PathBuf};

/// The free space and inodes under each writable folder when the command started.
pub struct DiskWatch {
    bound: crate::DiskBound,
    start: Vec<(PathBuf, u64, u64)>,
}

/// Below this much free space the command is stopped whatever its bound: the assistant's own database lives
/// on these disks too.
const DISK_RESERVE: u64 = 256 * 1024 * 1024;

impl DiskWatch {
    /// `folders` without the capped temp folder, which is a tmpfs of its own (and bounded by its size).
    pub fn start(bound: crate::DiskBound, folders: &[PathBuf], temp: Option<&Path>) -> Self {
        let start = folders
            .iter()
            .filter(|folder| Some(folder.as_path()) != temp)
            .filter_map(|folder| free_under(folder).map(|(bytes, files)| (folder.clone(), bytes, files)))
            .collect();
        Self { bound, start }
    }

    /// The report line of a bound passed, if one was.
    pub fn passed(&self) -> Option<&'static str> {
        for (folder, bytes_then, files_then) in &self.start {
            let Some((bytes, files)) = free_under(folder) else { continue };
            let taken = bytes_then.saturating_sub(bytes);
            if taken > self.bound.bytes || (taken > 0 && bytes < DISK_RESERVE) {
                return Some(crate::LIMIT_DISK);
            }
            if files_then.saturating_sub(files) > self.bound.files {
                return Some(crate::LIMIT_FILES);
            }
        }
        None
    }
}

/// Free bytes and inodes of the file system `folder` is on.
fn free_under(folder: &Path) -> Option<(u64, u64)> {
    let stat = nix::sys::statvfs::statvfs(folder).ok()?;
    Some((available_bytes(&stat), stat.files_available()))
}

/// Whether the capped temp folder ran out of room (what is left is less than a write would need).
pub fn is_full(path: &Path) -> bool {
    let Ok(stat) = nix::sys::statvfs::statvfs(path) else { return false };
    let block = stat.fragment_size().max(1);
    let total = blocks(stat.blocks()).saturating_mul(block);
    let free = available_bytes(&stat);
    free < (total / 64).clamp(block, 1024 * 1024)
}

fn available_bytes(stat: &nix::sys::statvfs::Statvfs) -> u64 {
    blocks(stat.blocks_available()).saturating_mul(stat.fragment_size())
}

/// Block counts are u64 here but narrower on 32-bit targets.
#[allow(clippy::useless_conversion)]
fn blocks(count: libc::fsblkcnt_t) -> u64 {
    u64::from(count)
}
