//! Sandbox modes for host execution. The *requested* mode comes from config; the *applied* one is what the
//! host could actually do, and every result reports it. A mode that cannot apply falls back to `basic` and
//! says why in `sandbox_note`, rather than silently running without the isolation the operator asked for.
//!
//! `basic` is the floor for every mode: new process group, allowlisted environment, timeout that kills the
//! group, output caps (and for Python an isolated interpreter in a fresh temp folder).

use super::runner::Rlimits;
use minibot_config::{CgroupSection, JailSection, RlimitSection, SandboxMode};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::OnceCell;

/// The sandbox settings of one tool (`[tools.python_exec]` or `[tools.bash]`).
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    pub rlimit: RlimitSection,
    pub cgroup: CgroupSection,
    pub jail: JailSection,
}

/// What will wrap the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedSandbox {
    pub requested: SandboxMode,
    pub applied: SandboxMode,
    /// Why the applied mode differs from the requested one.
    pub note: Option<String>,
    /// argv put before the command (systemd-run or the jail prefix).
    pub prefix: Vec<String>,
    pub rlimits: Option<Rlimits>,
}

impl AppliedSandbox {
    fn plain(requested: SandboxMode, applied: SandboxMode, note: Option<String>) -> Self {
        Self { requested, applied, note, prefix: Vec::new(), rlimits: None }
    }

    /// The program and arguments to run once the prefix is applied.
    pub fn wrap(&self, program: String, args: Vec<String>) -> (String, Vec<String>) {
        match self.prefix.split_first() {
            None => (program, args),
            Some((first, rest)) => {
                let mut all: Vec<String> = rest.to_vec();
                all.push(program);
                all.extend(args);
                (first.clone(), all)
            }
        }
    }

    pub fn describe(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        out.insert("sandbox_mode".into(), self.applied.as_str().into());
        if self.requested != self.applied {
            out.insert("sandbox_requested".into(), self.requested.as_str().into());
        }
        if let Some(note) = &self.note {
            out.insert("sandbox_note".into(), note.clone().into());
        }
    }
}

const MIB: u64 = 1024 * 1024;

/// Decides what the requested mode becomes on this host.
pub async fn plan(settings: &SandboxSettings) -> AppliedSandbox {
    let requested = settings.mode;
    let fallback = |note: String| AppliedSandbox::plain(requested, SandboxMode::Basic, Some(note));
    match requested {
        SandboxMode::None | SandboxMode::Basic => AppliedSandbox::plain(requested, requested, None),
        SandboxMode::Rlimit => {
            if !settings.rlimit.enabled {
                return fallback("sandbox_mode is rlimit but [rlimit] enabled = false; ran as basic".into());
            }
            let r = &settings.rlimit;
            let limits = Rlimits {
                cpu_seconds: r.cpu_seconds,
                memory_bytes: r.memory_mb.map(|mb| mb.saturating_mul(MIB)),
                fsize_bytes: r.fsize_mb.map(|mb| mb.saturating_mul(MIB)),
                nproc: r.nproc,
                nofile: r.nofile,
            };
            AppliedSandbox { rlimits: Some(limits), ..AppliedSandbox::plain(requested, requested, None) }
        }
        SandboxMode::Cgroup => {
            let c = &settings.cgroup;
            if !c.enabled {
                return fallback("sandbox_mode is cgroup but [cgroup] enabled = false; ran as basic".into());
            }
            if c.driver != "systemd" {
                return fallback(format!("cgroup driver `{}` is not supported (only systemd); ran as basic", c.driver));
            }
            if let Err(reason) = systemd_run_usable().await {
                return fallback(format!("cgroup sandbox unavailable: {reason}; ran as basic"));
            }
            let prefix = vec![
                "systemd-run".into(),
                "--user".into(),
                "--scope".into(),
                "--quiet".into(),
                "-p".into(),
                format!("MemoryMax={}M", c.memory_max_mb),
                "-p".into(),
                format!("CPUQuota={}%", c.cpu_quota_percent),
            ];
            AppliedSandbox { prefix, ..AppliedSandbox::plain(requested, requested, None) }
        }
        SandboxMode::Jail => {
            let j = &settings.jail;
            if !j.enabled {
                return fallback("sandbox_mode is jail but [jail] enabled = false; ran as basic".into());
            }
            let Some(argv0) = j.command_prefix.first() else {
                return fallback("sandbox_mode is jail but [jail] command_prefix is empty; ran as basic".into());
            };
            if find_program(argv0).is_none() {
                return fallback(format!("jail command `{argv0}` is not on PATH; ran as basic"));
            }
            AppliedSandbox { prefix: j.command_prefix.clone(), ..AppliedSandbox::plain(requested, requested, None) }
        }
    }
}

/// Finds a program the way `execvp` would.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `systemd-run --user --scope` needs a user manager on the session bus, which containers and services
/// often lack although the binary is installed; a trial run is the only reliable check. Cached for the
/// process lifetime.
async fn systemd_run_usable() -> Result<(), String> {
    static PROBE: OnceCell<Result<(), String>> = OnceCell::const_new();
    PROBE
        .get_or_init(|| async {
            if find_program("systemd-run").is_none() {
                return Err("systemd-run is not installed".to_string());
            }
            let probe = tokio::process::Command::new("systemd-run")
                .args(["--user", "--scope", "--quiet", "true"])
                .stdin(std::process::Stdio::null())
                .output();
            match tokio::time::timeout(Duration::from_secs(5), probe).await {
                Ok(Ok(out)) if out.status.success() => Ok(()),
                Ok(Ok(out)) => {
                    Err(format!("systemd-run --user --scope failed: {}", String::from_utf8_lossy(&out.stderr).trim()))
                }
                Ok(Err(err)) => Err(format!("cannot run systemd-run: {err}")),
                Err(_) => Err("systemd-run did not answer within 5 s".to_string()),
            }
        })
        .await
        .clone()
}
