//! What one command may do, as the tool decides it and the helper reads it (JSON in its arguments).

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
}

/// `setrlimit` values; `None` leaves a limit as inherited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub cpu_seconds: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub fsize_bytes: Option<u64>,
    pub nproc: Option<u64>,
    pub nofile: Option<u64>,
}

impl Limits {
    /// Applies the limits (and no core files) to this process with `setrlimit`. Allocates nothing, so it may
    /// run between fork and exec.
    #[cfg(target_os = "linux")]
    pub fn apply(&self) -> Result<(), nix::Error> {
        use nix::sys::resource::{Resource, setrlimit};
        setrlimit(Resource::RLIMIT_CORE, 0, 0)?;
        let pairs = [
            (Resource::RLIMIT_CPU, self.cpu_seconds),
            (Resource::RLIMIT_AS, self.memory_bytes),
            (Resource::RLIMIT_FSIZE, self.fsize_bytes),
            (Resource::RLIMIT_NPROC, self.nproc),
            (Resource::RLIMIT_NOFILE, self.nofile),
        ];
        for (resource, value) in pairs {
            if let Some(value) = value {
                setrlimit(resource, value, value)?;
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
