//! Opening a file that a tool checked earlier, later (a channel uploading it, the agent reading it into the
//! model's context). The tool resolved it to a real path inside the managed folder; in between, a command with
//! write access there could swap a folder on that path for a link to the vault's folder. Opening the same path
//! with `openat2(RESOLVE_NO_SYMLINKS)` refuses any link on the way, so what opens is what was checked.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// Opens `path` (absolute, as a tool resolved it) for reading, refusing a symbolic link anywhere on it (ELOOP).
/// A kernel without `openat2` (before 5.6) gets a plain open that refuses only a link in the last component.
#[allow(unsafe_code)]
pub fn open_without_links(path: &Path) -> io::Result<std::fs::File> {
    let text = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"))?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let how = OpenHow {
        flags: u64::from(flags.unsigned_abs()),
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `text` is a NUL-terminated path and `how` a fully initialised open_how of the size passed; the
    // kernel only reads both. A non-negative result is a new descriptor that nothing else owns.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, text.as_ptr(), &how as *const OpenHow, size_of::<OpenHow>())
    };
    if fd >= 0 {
        let fd = i32::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
        // SAFETY: see above.
        return Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::ENOSYS) {
        use std::os::unix::fs::OpenOptionsExt as _;
        return std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    }
    if error.raw_os_error() == Some(libc::ELOOP) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is no longer where it was checked (a link was put on its path)", path.display()),
        ));
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_on_the_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("root/sub")).unwrap();
        std::fs::create_dir_all(base.join("secret")).unwrap();
        std::fs::write(base.join("root/sub/a.txt"), "inside").unwrap();
        std::fs::write(base.join("secret/a.txt"), "vault").unwrap();
        let checked = base.join("root/sub/a.txt");
        assert!(open_without_links(&checked).is_ok());
        // The folder is swapped for a link to the secret's folder after the check.
        std::fs::rename(base.join("root/sub"), base.join("root/old")).unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("root/sub")).unwrap();
        let error = open_without_links(&checked).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied, "{error}");
    }
}
