//! The mount table (`/proc/self/mountinfo`), for finding every place a hidden path can be reached: a file system
//! mounted twice, or a folder of it bound elsewhere, shows the same files under another path, and Landlock rules
//! hold inodes under the path they were granted on.

use std::path::{Path, PathBuf};

/// One mount: which file system (device), which folder of it (root), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub device: String,
    pub root: PathBuf,
    pub mount_point: PathBuf,
}

/// This process's mounts; empty when the table cannot be read.
pub fn read() -> Vec<Mount> {
    std::fs::read("/proc/self/mountinfo").map(|bytes| parse(&bytes)).unwrap_or_default()
}

/// `mountinfo` lines: `id parent major:minor root mount-point options ...`, as bytes (a path need not be UTF-8).
pub fn parse(text: &[u8]) -> Vec<Mount> {
    text.split(|b| *b == b'\n')
        .filter_map(|line| {
            let mut fields = line.split(|b| *b == b' ');
            let device = String::from_utf8_lossy(fields.nth(2)?).into_owned();
            let root = PathBuf::from(unescape(fields.next()?));
            let mount_point = PathBuf::from(unescape(fields.next()?));
            Some(Mount { device, root, mount_point })
        })
        .collect()
}

/// Paths in `mountinfo` escape space, tab, newline and backslash as `\\ooo`; other bytes are the path's own,
/// UTF-8 or not.
fn unescape(field: &[u8]) -> std::ffi::OsString {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).and_then(|o| std::str::from_utf8(o).ok());
        if field[i] == b'\\'
            && let Some(code) = octal.and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(field[i]);
        i += 1;
    }
    std::os::unix::ffi::OsStringExt::from_vec(out)
}

/// Every other path at which one of `hidden` (real, absolute paths) can be reached: for each, the mount it is
/// under (the longest mount point on its way) tells its file system and its path inside it; every other mount of
/// that file system whose root holds that path shows it too, and one whose root lies inside it is hidden whole.
pub fn aliases(mounts: &[Mount], hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in hidden {
        let Some(home) =
            mounts.iter().filter(|m| path.starts_with(&m.mount_point)).max_by_key(|m| m.mount_point.as_os_str().len())
        else {
            continue;
        };
        let Ok(inside) = path.strip_prefix(&home.mount_point) else { continue };
        let in_fs = home.root.join(inside);
        for other in mounts.iter().filter(|m| m.device == home.device && *m != home) {
            let alias = if let Ok(rest) = in_fs.strip_prefix(&other.root) {
                join(&other.mount_point, rest)
            } else if other.root.starts_with(&in_fs) {
                other.mount_point.clone()
            } else {
                continue;
            };
            if alias != *path && !out.contains(&alias) {
                out.push(alias);
            }
        }
    }
    out
}

fn join(base: &Path, rest: &Path) -> PathBuf {
    if rest.as_os_str().is_empty() { base.to_path_buf() } else { base.join(rest) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw
30 22 0:5 / /dev rw - devtmpfs udev rw
41 22 254:1 /home /mnt/home\\040copy rw,relatime - ext4 /dev/vda1 rw
42 22 254:1 /home/bot/data/files /srv/files rw - ext4 /dev/vda1 rw
43 22 254:2 / /home/other rw - ext4 /dev/vdb rw
";

    #[test]
    fn a_hidden_path_is_hidden_wherever_its_file_system_shows_it() {
        let mounts = parse(TABLE.as_bytes());
        assert_eq!(mounts[2].mount_point, PathBuf::from("/mnt/home copy"));
        let hidden = vec![PathBuf::from("/home/bot/config.toml"), PathBuf::from("/home/bot/data")];
        let found = aliases(&mounts, &hidden);
        assert!(found.contains(&PathBuf::from("/mnt/home copy/bot/config.toml")), "{found:?}");
        assert!(found.contains(&PathBuf::from("/mnt/home copy/bot/data")), "{found:?}");
        // A folder of the hidden one bound elsewhere is hidden whole.
        assert!(found.contains(&PathBuf::from("/srv/files")), "{found:?}");
        // Another file system is not the hidden one's.
        assert!(!found.iter().any(|p| p.starts_with("/home/other")), "{found:?}");
    }
}
