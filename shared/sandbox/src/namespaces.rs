//! New user, pid and mount namespaces for one command, set up by an unprivileged process: the user
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
    let flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID;
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

/// Whether the capped temp folder ran out of room (what is left is less than a write would need).
// The block counts are u64 here but narrower on 32-bit targets.
#[allow(clippy::useless_conversion)]
pub fn is_full(path: &std::path::Path) -> bool {
    let Ok(stat) = nix::sys::statvfs::statvfs(path) else { return false };
    let block = stat.fragment_size().max(1);
    let total = u64::from(stat.blocks()).saturating_mul(block);
    let free = u64::from(stat.blocks_available()).saturating_mul(block);
    free < (total / 64).clamp(block, 1024 * 1024)
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
