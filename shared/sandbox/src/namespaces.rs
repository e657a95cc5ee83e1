//! New user, pid, mount and IPC namespaces for one command, set up by an unprivileged process: the user
//! namespace grants the rights to create the others. The ids map to themselves, so files the command writes
//! belong to the assistant's user, and the capabilities the namespace grants are gone once the command execs
//! as that (non-root) user; a root assistant stays root inside, held by Landlock and seccomp.

use crate::SandboxError;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{getgid, getuid};

/// Moves this process into new user and mount namespaces; its next child starts a new pid namespace as its
/// pid 1. No network namespace: making one costs 2.5 ms a call, and without network seccomp already refuses
/// every socket but Unix ones (and Landlock every TCP bind and connect).
pub fn enter() -> Result<(), SandboxError> {
    let uid = getuid();
    let gid = getgid();
    // A new IPC namespace too: the host's System V shared memory and message queues of the same user are out of
    // reach, and whatever the command leaves there goes with the namespace.
    let flags =
        CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
    unshare(flags).map_err(|e| SandboxError::Namespaces(format!("unshare: {e}")))?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| SandboxError::Namespaces(format!("cannot write {file}: {e}")))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    // Mounts made for the command (its /proc) must not propagate back to the host.
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| SandboxError::Namespaces(format!("cannot make the mounts private: {e}")))?;
    Ok(())
}

/// A `/dev/shm` of the command's own (POSIX shared memory and semaphores: Python's `multiprocessing`), so it
/// neither sees nor fills the host's. Called by the namespace's pid 1; a host without `/dev/shm` gets none.
pub fn mount_private_shm() -> Result<(), SandboxError> {
    if !std::path::Path::new(SHM).is_dir() {
        return Ok(());
    }
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("tmpfs"), SHM, Some("tmpfs"), flags, Some("size=64m,mode=1777"))
        .map_err(|e| SandboxError::Namespaces(format!("cannot mount {SHM}: {e}")))
}

pub const SHM: &str = "/dev/shm";

/// A /proc that shows only the new pid namespace: the command cannot list, or read the command lines of, the
/// assistant's processes. Called by the namespace's pid 1.
pub fn mount_proc() -> Result<(), SandboxError> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, None::<&str>)
        .map_err(|e| SandboxError::Namespaces(format!("cannot mount /proc: {e}")))
}

/// The command's `$TMPDIR` as a tmpfs of its own, capped: writing past the cap fails with "No space left on
/// device" instead of filling the assistant's disk. Called by the namespace's pid 1.
pub fn mount_temp(temp: &crate::TempSpace) -> Result<(), SandboxError> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    let options = format!("size={},mode=0700", temp.bytes.max(4096));
    mount(Some("tmpfs"), &temp.path, Some("tmpfs"), flags, Some(options.as_str()))
        .map_err(|e| SandboxError::Namespaces(format!("cannot mount {}: {e}", temp.path.display())))
}

/// A devpts of the namespace's own on /dev/pts, with its `ptmx` over /dev/ptmx: the command can open
/// pseudo-terminals, but never the host's, where the user's terminal is (reading it steals keystrokes).
/// Called by the namespace's pid 1.
pub fn mount_private_pts() -> Result<(), SandboxError> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    mount(Some("devpts"), PTS, Some("devpts"), flags, Some("newinstance,ptmxmode=0666,mode=0620"))
        .map_err(|e| SandboxError::Namespaces(format!("cannot mount {PTS}: {e}")))?;
    mount(Some("/dev/pts/ptmx"), PTMX, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| SandboxError::Namespaces(format!("cannot bind {PTMX}: {e}")))
}

pub const PTS: &str = "/dev/pts";
pub const PTMX: &str = "/dev/ptmx";

/// Makes every mount read-only but the command's writable folders, which stay as they were (bound back on
/// top). Landlock refuses writes, but not `chmod`, `chown`, extended attributes or times: on a read-only mount
/// those fail too, so the command cannot make the config world-readable or a copy of a shell setuid. Called by
/// the namespace's pid 1, before anything else is mounted.
#[allow(unsafe_code)]
pub fn make_read_only(writable: &[std::path::PathBuf]) -> Result<(), SandboxError> {
    use std::os::fd::{FromRawFd as _, OwnedFd};
    use std::os::unix::ffi::OsStrExt as _;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    const MOUNT_ATTR_RDONLY: u64 = 1;
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let c_path = |path: &std::path::Path| {
        std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| SandboxError::Namespaces(format!("{} contains a NUL byte", path.display())))
    };
    let mut clones = Vec::with_capacity(writable.len());
    for folder in writable {
        let text = c_path(folder)?;
        // SAFETY: `text` is a NUL-terminated path; open_tree only reads it and returns a new descriptor.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                text.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            // A folder that is not there (the managed root deleted meanwhile) has nothing to keep writable;
            // Landlock grants it nothing either.
            if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) {
                continue;
            }
            return Err(SandboxError::Namespaces(format!("cannot keep {} writable: {e}", folder.display())));
        }
        let fd = i32::try_from(fd).map_err(|_| SandboxError::Namespaces("descriptor out of range".into()))?;
        // SAFETY: a new descriptor that nothing else owns.
        clones.push((unsafe { OwnedFd::from_raw_fd(fd) }, text));
    }
    let attr = MountAttr { attr_set: MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: "/" is a NUL-terminated path and `attr` a fully initialised mount_attr of the size passed.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/".as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            size_of::<MountAttr>(),
        )
    };
    if done < 0 {
        let e = std::io::Error::last_os_error();
        return Err(SandboxError::Namespaces(format!("cannot make the file system read-only: {e}")));
    }
    for (fd, target) in &clones {
        use std::os::fd::AsRawFd as _;
        // SAFETY: a descriptor we own, an empty path with F_EMPTY_PATH, and a NUL-terminated target.
        let moved = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                fd.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if moved < 0 {
            let e = std::io::Error::last_os_error();
            return Err(SandboxError::Namespaces(format!("cannot keep {} writable: {e}", target.to_string_lossy())));
        }
    }
    Ok(())
}
