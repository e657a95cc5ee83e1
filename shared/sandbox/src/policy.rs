//! What one command may do and what it is, as the tool decides it and the helper reads it: a [`Request`],
//! length-prefixed JSON on the helper's standard input. Nothing of it is in the helper's arguments or
//! environment: the helper starts with a fixed command line and an empty environment, so nothing the model
//! chose (an `LD_PRELOAD` in `env`, say) reaches the dynamic loader before the confinement is in place.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The helper's exit code when it could not set the sandbox up (the command never ran).
pub const SETUP_FAILED_EXIT: i32 = 125;
/// How the helper's own error line on stderr starts.
pub const SETUP_FAILED_PREFIX: &str = "minibot-sandbox: ";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Folders the command may change (the managed root, its private temp folder). Everything else that is
    /// not hidden is read-only.
    pub read_write: Vec<PathBuf>,
    /// Files and folders the command may not read at all (config, vault, data, logs). None may lie inside a
    /// `read_write` folder: [`Policy::conflict`] says so before anything runs.
    pub hidden: Vec<PathBuf>,
    /// Whether the command may open network sockets.
    pub network: bool,
    /// Run in new user, pid and mount namespaces. The probe says whether the host
    /// allows them; when asked for and refused, the helper fails rather than run weaker.
    pub namespaces: bool,
    pub limits: Option<Limits>,
    /// A private, size-capped temp folder: with namespaces, pid 1 mounts a tmpfs of `bytes` on `path` (one of
    /// `read_write`), so the command cannot fill the disk through `$TMPDIR`.
    #[serde(default)]
    pub temp: Option<TempSpace>,
    /// How much the command may take of the disks under its writable folders; past it the helper stops it.
    #[serde(default)]
    pub disk: Option<DiskBound>,
}

/// Measured as the drop in free space and free inodes of the file systems holding the writable folders, every
/// quarter second while the command runs: a quota without quota support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskBound {
    pub bytes: u64,
    pub files: u64,
}

/// The command's `$TMPDIR` and how much it may hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TempSpace {
    pub path: PathBuf,
    pub bytes: u64,
}

/// Everything the helper needs for one call. The command's program, arguments, environment and working
/// folder apply only to the final exec, inside the confinement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub policy: Policy,
    /// The program (a path, or a name looked up on the `PATH` of `env`) and its arguments.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// The word the helper puts before its own report lines on stderr (see the crate's `status`).
    #[serde(default)]
    pub report_tag: Option<String>,
}

/// The largest request the helper reads (a command line and its environment).
pub const MAX_REQUEST_BYTES: u32 = 16 * 1024 * 1024;

impl Request {
    /// The bytes to put first on the helper's standard input: the length (u32, little-endian), then JSON.
    /// Whatever follows is the command's own standard input.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let json = serde_json::to_vec(self).map_err(|e| format!("cannot write the sandbox request: {e}"))?;
        let len = u32::try_from(json.len())
            .ok()
            .filter(|len| *len <= MAX_REQUEST_BYTES)
            .ok_or_else(|| format!("the command and its environment are over {MAX_REQUEST_BYTES} bytes"))?;
        let mut out = Vec::with_capacity(json.len() + 4);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&json);
        Ok(out)
    }

    /// Reads a request from `input`, byte-exact: nothing after it is consumed.
    pub fn read_from(input: &mut impl std::io::Read) -> Result<Self, String> {
        let mut len = [0u8; 4];
        input.read_exact(&mut len).map_err(|e| format!("no request on standard input: {e}"))?;
        let len = u32::from_le_bytes(len);
        if len > MAX_REQUEST_BYTES {
            return Err(format!("request of {len} bytes is over {MAX_REQUEST_BYTES}"));
        }
        let mut json = vec![0u8; len as usize];
        input.read_exact(&mut json).map_err(|e| format!("truncated request: {e}"))?;
        serde_json::from_slice(&json).map_err(|e| format!("unreadable request: {e}"))
    }
}

/// `setrlimit` values; `None` leaves a limit as inherited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub cpu_seconds: Option<u64>,
    /// Address space (`RLIMIT_AS`): MiniBot's `rlimit` mode.
    pub memory_bytes: Option<u64>,
    /// Usable private memory (`RLIMIT_DATA`): what `contain` bounds by default, because it counts what a
    /// program writes, not the address space it reserves (a JIT's or WebAssembly's guard regions).
    #[serde(default)]
    pub data_bytes: Option<u64>,
    pub fsize_bytes: Option<u64>,
    pub nproc: Option<u64>,
    pub nofile: Option<u64>,
}

impl Limits {
    /// Applies the limits (and no core files) to this process with `setrlimit`, each clamped to the inherited
    /// hard limit (which an unprivileged process cannot raise). Allocates nothing, so it may run between fork
    /// and exec.
    #[cfg(target_os = "linux")]
    pub fn apply(&self) -> Result<(), nix::Error> {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        let set = |resource: Resource, soft: u64, hard: u64| -> Result<(), nix::Error> {
            let (_, inherited) = getrlimit(resource)?;
            let hard = hard.min(inherited);
            setrlimit(resource, soft.min(hard), hard)
        };
        // 1, not 0: a core_pattern that pipes to a program (apport, systemd-coredump) ignores 0 but gives up on 1,
        // and a file core needs at least a page.
        set(Resource::RLIMIT_CORE, 1, 1)?;
        if let Some(seconds) = self.cpu_seconds {
            // A hard limit above the soft one: the command gets SIGXCPU (which names the limit) before SIGKILL.
            set(Resource::RLIMIT_CPU, seconds, seconds.saturating_add(2))?;
        }
        let pairs = [
            (Resource::RLIMIT_AS, self.memory_bytes),
            (Resource::RLIMIT_DATA, self.data_bytes),
            (Resource::RLIMIT_FSIZE, self.fsize_bytes),
            (Resource::RLIMIT_NPROC, self.nproc),
            (Resource::RLIMIT_NOFILE, self.nofile),
        ];
        for (resource, value) in pairs {
            if let Some(value) = value {
                set(resource, value, value)?;
            }
        }
        Ok(())
    }
}

impl Policy {
    /// A hidden path inside a read-write folder cannot be hidden (Landlock only grants), so such a policy is
    /// refused: `(hidden, folder)`.
    /// Paths are compared as written and as they really are, so a writable folder that is a symlink to (or
    /// through) the folder of a secret is caught too.
    pub fn conflict(&self) -> Option<(&PathBuf, &PathBuf)> {
        self.hidden.iter().find_map(|hidden| {
            let hidden_forms = forms(hidden);
            self.read_write
                .iter()
                .find(|rw| forms(rw).iter().any(|rw| hidden_forms.iter().any(|h| h.starts_with(rw))))
                .map(|rw| (hidden, rw))
        })
    }
}

/// A path as written and as it really is: symlinks in its existing part resolved, the rest appended.
pub fn forms(path: &Path) -> Vec<PathBuf> {
    let mut out = vec![path.to_path_buf()];
    let mut existing = path.to_path_buf();
    let mut missing = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut real = real;
            for part in missing.iter().rev() {
                real.push(part);
            }
            if !out.contains(&real) {
                out.push(real);
            }
            return out;
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.pop()) {
            (Some(name), true) => missing.push(name),
            _ => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_inside_a_writable_folder_is_a_conflict() {
        let policy = Policy {
            read_write: vec!["/srv/bot/files".into()],
            hidden: vec!["/srv/bot/config.toml".into(), "/srv/bot/files/config.toml".into()],
            ..Policy::default()
        };
        assert_eq!(policy.conflict().map(|(h, _)| h.clone()), Some("/srv/bot/files/config.toml".into()));
        let fine = Policy { hidden: vec!["/srv/bot/data".into()], ..policy };
        assert_eq!(fine.conflict(), None);
    }
}
