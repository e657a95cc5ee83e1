//! The command's view of the file system under Landlock. Landlock only grants, so "everything read-only but
//! these secrets" is built by granting read access to every entry of `/` except those that lead to a hidden
//! path, and descending into the ones that do: the hidden path itself, and anything created later next to it,
//! is never granted. Rules hold inodes, so a symlink to a hidden file reads nothing either; a symlink whose
//! target is hidden (or holds a hidden path) is left out rather than granted through.

use crate::{Policy, SandboxError};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::collections::HashSet;
use std::os::unix::fs::{DirEntryExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// Of `/dev`, only these: a root command could otherwise read a disk (every hidden file with it) or the
/// memory devices, and the user's terminals under /dev/pts. Read-write: devices a command writes to as a
/// matter of course. `/dev/tty` opens nothing once the command has no controlling terminal.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
const READABLE_DEVICES: &[&str] = &["/dev/random", "/dev/urandom"];
const DEV: &str = "/dev";

/// The newest Landlock ABI this code was written and tested against; an older kernel gets what it offers of it
/// (best effort), which the probe reports.
const TARGET: ABI = ABI::V6;

/// The Landlock ABI the kernel offers (0: none).
#[allow(unsafe_code)]
pub fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with the VERSION flag and a null attribute pointer of size 0, landlock_create_ruleset only
    // returns the ABI version (or an error); it reads and writes no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).unwrap_or(0)
}

/// Restricts this process (and what it execs) as `policy` says. Sets `no_new_privs`. `private_pts`: the
/// namespace's pid 1 mounted a devpts of its own, whose pseudo-terminals the command may use.
pub fn restrict(policy: &Policy, private_pts: bool) -> Result<(), SandboxError> {
    if kernel_abi() == 0 {
        return Err(SandboxError::Landlock("not offered by this kernel".into()));
    }
    let abi = TARGET;
    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if !policy.network {
        // No rule grants a port: every TCP bind and connect is refused (seccomp refuses the sockets too).
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(err)?;
    }
    // No signals to, and no abstract sockets of, processes outside the sandbox. Without a pid namespace this is
    // what keeps `kill -9 -1` from reaching the assistant, so the probe requires ABI 6 there.
    ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    let mut created = ruleset.create().map_err(err)?;
    let mounts = crate::mounts::read();
    let hidden = expand_hidden(policy, &mounts);
    let read = AccessFs::from_read(abi);
    for path in readable(&hidden, &mounts) {
        created = add(created, &path, read)?;
    }
    for device in READABLE_DEVICES {
        created = add(created, Path::new(device), read)?;
    }
    let mut writable: Vec<&str> = WRITABLE_DEVICES.to_vec();
    if private_pts {
        writable.extend([crate::namespaces::PTS, crate::namespaces::PTMX]);
    }
    for device in writable {
        created = add(created, Path::new(device), read | AccessFs::from_write(abi))?;
    }
    for folder in &policy.read_write {
        created = add(created, folder, AccessFs::from_all(abi))?;
    }
    if policy.namespaces && Path::new(crate::namespaces::SHM).is_dir() {
        // pid 1 mounted a private tmpfs there (or failed the call): the host's is never granted.
        created = add(created, Path::new(crate::namespaces::SHM), AccessFs::from_all(abi))?;
    }
    let status = created.restrict_self().map_err(err)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::Landlock("the ruleset was not enforced".into()));
    }
    Ok(())
}

fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, SandboxError> {
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        // Gone since it was listed, or unreadable to us: nothing to grant.
        Err(_) => return Ok(created),
    };
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| SandboxError::Landlock(format!("rule for {}: {e}", path.display())))
}

/// Folders of Unix sockets that lead off the machine or out of the sandbox (the Docker socket, D-Bus, an SSH
/// agent, a local proxy): Landlock cannot refuse `connect` to a socket file before ABI 9, and seccomp must let
/// Unix sockets through, so without network these folders are not granted at all.
const SOCKET_FOLDERS: &[&str] = &["/run", "/var/run", "/tmp/.X11-unix"];

/// Each hidden path as written and as it really is (a config file that is a symlink hides both; a folder not
/// made yet is hidden where it will be).
fn expand_hidden(policy: &Policy, mounts: &[crate::mounts::Mount]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let sockets = SOCKET_FOLDERS.iter().map(PathBuf::from);
    // Only those that exist: a hidden path makes every folder on its way enumerated, and /tmp can be large.
    let mut extra: Vec<PathBuf> = if policy.network { Vec::new() } else { sockets.filter(|p| p.exists()).collect() };
    // Left out whole; the devices a command needs are granted one by one.
    extra.push(PathBuf::from(DEV));
    for path in policy.hidden.iter().chain(&extra) {
        for form in crate::policy::forms(path) {
            if !out.contains(&form) {
                out.push(form);
            }
        }
    }
    // The same files can be reached through another mount of their file system (a bind mount of the home
    // folder elsewhere): hidden there too.
    for alias in crate::mounts::aliases(mounts, &out) {
        if !out.contains(&alias) {
            out.push(alias);
        }
    }
    out
}

/// The paths to grant read access to: every entry on the way from `/` that neither is nor holds a hidden path.
pub fn readable(hidden: &[PathBuf], mounts: &[crate::mounts::Mount]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if hidden.is_empty() {
        out.push(PathBuf::from("/"));
    } else {
        let known = Identities::of(hidden, mounts);
        cover(Path::new("/"), hidden, &known, &mut out);
    }
    out
}

/// The hidden paths and the folders on the way to them by what they are (device and inode), not by name: a
/// Landlock rule holds an inode, so granting another name of one (a bind mount of the home folder elsewhere,
/// a hard link someone made of the vault) would grant the secret itself.
struct Identities {
    hidden: HashSet<(u64, u64)>,
    on_the_way: HashSet<(u64, u64)>,
    /// Inode numbers of both, to stat only the entries that may be one of them.
    inodes: HashSet<u64>,
    /// Mount points, whose directory entry shows the inode beneath the mount, not the mounted one.
    mount_points: HashSet<PathBuf>,
}

impl Identities {
    fn of(hidden: &[PathBuf], mounts: &[crate::mounts::Mount]) -> Self {
        let id = |path: &Path| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let hidden_ids: HashSet<_> = hidden.iter().filter_map(|p| id(p)).collect();
        let on_the_way: HashSet<_> = hidden
            .iter()
            .flat_map(|p| p.ancestors().skip(1).filter(|a| a.parent().is_some()))
            .filter_map(id)
            .filter(|i| !hidden_ids.contains(i))
            .collect();
        let inodes = hidden_ids.iter().chain(&on_the_way).map(|(_, ino)| *ino).collect();
        let mount_points = mounts.iter().map(|m| m.mount_point.clone()).collect();
        Self { hidden: hidden_ids, on_the_way, inodes, mount_points }
    }

    /// What `entry` is, when it is one of them.
    fn of_entry(&self, entry: &std::fs::DirEntry, path: &Path) -> Option<Known> {
        if !self.inodes.contains(&entry.ino()) && !self.mount_points.contains(path) {
            return None;
        }
        let meta = std::fs::symlink_metadata(path).ok()?;
        let id = (meta.dev(), meta.ino());
        if self.hidden.contains(&id) {
            Some(Known::Hidden)
        } else if self.on_the_way.contains(&id) {
            Some(Known::OnTheWay)
        } else {
            None
        }
    }
}

enum Known {
    Hidden,
    OnTheWay,
}

fn cover(dir: &Path, hidden: &[PathBuf], known: &Identities, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if hidden.contains(&path) {
            continue;
        }
        let Ok(kind) = entry.file_type() else { continue };
        let identity = known.of_entry(&entry, &path);
        if matches!(identity, Some(Known::Hidden)) {
            continue;
        }
        if matches!(identity, Some(Known::OnTheWay)) || hidden.iter().any(|h| h.starts_with(&path)) {
            if kind.is_dir() {
                cover(&path, hidden, known, out);
            }
            continue;
        }
        if kind.is_symlink() {
            match path.canonicalize() {
                Ok(target) if !hidden.iter().any(|h| target.starts_with(h) || h.starts_with(&target)) => {}
                _ => continue,
            }
        }
        out.push(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_and_links_to_them_are_left_out_and_their_neighbours_kept() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("data/files")).unwrap();
        std::fs::write(base.join("config.toml"), "key").unwrap();
        std::fs::write(base.join("data/minibot.db"), "db").unwrap();
        std::fs::write(base.join("agents.md"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("config.toml"), base.join("link.toml")).unwrap();
        // A hard link made before (a backup): another name of the same inode.
        std::fs::hard_link(base.join("config.toml"), base.join("backup.toml")).unwrap();
        let hidden = vec![base.join("config.toml"), base.join("data")];
        let granted = readable(&hidden, &crate::mounts::read());
        assert!(granted.contains(&base.join("agents.md")));
        assert!(granted.contains(&PathBuf::from("/usr")));
        for gone in ["config.toml", "link.toml", "backup.toml", "data", "data/files", "data/minibot.db"] {
            assert!(!granted.iter().any(|g| g.starts_with(base.join(gone))), "{gone} granted");
        }
        assert!(!granted.iter().any(|g| base.starts_with(g)), "an ancestor of the hidden files was granted");
    }
}
