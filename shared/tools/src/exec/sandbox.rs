//! Sandbox modes for host execution. The mode comes from config and is applied as written: a mode this host
//! cannot provide stops start-up ([`check`]) and fails the call, never runs weaker in silence. Every result
//! names the mode applied (and for `contain`, its layers).
//!
//! `basic` is the floor of MiniBot's modes: new process group, allowlisted environment, a timeout that kills
//! the group, output caps (and for Python an isolated interpreter in a fresh temp folder). `contain` runs the
//! command through the `minibot-sandbox` helper (crate `minibot-sandbox`): read-only file system but for the
//! managed root and a private temp folder, the assistant's config, vault, data and logs unreadable, no network
//! unless `allow_network`, and nothing it starts outliving the call.

use super::runner::Rlimits;
use crate::files::ManagedRoot;
use minibot_config::{CgroupSection, Config, ContainLimitsSection, JailSection, RlimitSection, SandboxMode};
use minibot_sandbox::{Capabilities, Policy, Request, TempSpace};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The sandbox settings of one tool (`[tools.python_exec]` or `[tools.bash]`).
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The config section, for errors (`tools.bash`).
    pub section: &'static str,
    pub mode: SandboxMode,
    pub allow_network: bool,
    pub rlimit: RlimitSection,
    pub limits: ContainLimitsSection,
    pub cgroup: CgroupSection,
    pub jail: JailSection,
}

/// What a `contain` command may write and may not read, from the config.
#[derive(Debug, Clone, Default)]
pub struct SandboxScope {
    /// The managed root, when file storage is on.
    pub read_write: Vec<PathBuf>,
    /// The config file, the vault and its password file, the data folders and the log folder.
    pub hidden: Vec<PathBuf>,
    /// Where the private temp folders of contained calls are made (hidden as a whole, each call granted its
    /// own): next to the conversation database, a folder that is writable and hidden already, so it costs
    /// the Landlock rules nothing; the system's temp folder when there is no such database.
    pub temp_root: PathBuf,
    /// Paths the assistant runs or trusts (an agent file, an MCP server's script) that lie inside a folder
    /// commands may write, with what each is: Landlock cannot take them back out of a grant, so `contain`
    /// refuses to run rather than let a command change them without asking.
    pub writable_guarded: Vec<(PathBuf, String)>,
}

impl SandboxScope {
    pub fn from_config(config: &Config, files: Option<&ManagedRoot>) -> Self {
        let mut hidden = Vec::new();
        let mut hide = |path: PathBuf| {
            let path = std::path::absolute(&path).unwrap_or(path);
            if !hidden.contains(&path) {
                hidden.push(path);
            }
        };
        hide(config.config_file());
        hide(config.vault_file());
        if let Some(password_file) = config.vault_password_file() {
            hide(password_file);
        }
        hide(config.resolve_path("logs"));
        // The user's main assistant (`minibot init`'s files and the data folder), whichever config this is.
        if let Some(dirs) = minibot_config::PlatformDirs::current() {
            for file in dirs.secret_files() {
                hide(file);
            }
            hide(dirs.data_dir.clone());
        }
        let temp_root = minibot_config::sqlite_path_from_url(&config.memory.sqlite_url)
            .and_then(|file| config.resolve_path(&file).parent().map(|folder| folder.join("sandbox-tmp")))
            .map(|folder| std::path::absolute(&folder).unwrap_or(folder))
            .unwrap_or_else(|| std::env::temp_dir().join("minibot-sandbox-tmp"));
        for url in database_urls(config) {
            let Some(file) = minibot_config::sqlite_path_from_url(url) else { continue };
            let file = config.resolve_path(&file);
            match file.parent().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())) {
                // A folder of its own (MiniBot's `./data`) is hidden whole, with whatever the stores keep next
                // to their databases; a database in the config folder (or above it) hides only its files.
                Some(folder) if crate::files::is_state_folder(config, &folder) => hide(folder),
                _ => {
                    for suffix in ["", "-wal", "-shm", "-journal"] {
                        let mut name = file.clone().into_os_string();
                        name.push(suffix);
                        hide(PathBuf::from(name));
                    }
                }
            }
        }
        let read_write: Vec<PathBuf> = files.map(|root| vec![root.path().to_path_buf()]).unwrap_or_default();
        // Only a managed root is writable besides the call's own folders: without one there is nothing to check.
        let writable_guarded = if read_write.is_empty() {
            Vec::new()
        } else {
            writable_guarded(&crate::files::ProtectedPaths::from_config(config), &read_write)
        };
        Self { read_write, hidden, temp_root, writable_guarded }
    }
}

/// The guarded paths inside any of `folders`, as written and as they really are.
fn writable_guarded(guarded: &crate::files::ProtectedPaths, folders: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let folders: Vec<PathBuf> = folders.iter().flat_map(|f| minibot_sandbox::policy::forms(f)).collect();
    guarded
        .entries()
        .filter(|(path, _)| {
            minibot_sandbox::policy::forms(path).iter().any(|form| folders.iter().any(|f| form.starts_with(f)))
        })
        .map(|(path, what)| (path.to_path_buf(), what.to_string()))
        .collect()
}

fn database_urls(config: &Config) -> Vec<&str> {
    let mut urls = vec![
        config.memory.sqlite_url.as_str(),
        config.scheduler.prompts.sqlite_url.as_str(),
        config.tasks.sqlite.sqlite_url.as_str(),
    ];
    if config.tools.kv_memory.enabled {
        urls.push(config.tools.kv_memory.sqlite_url.as_str());
    }
    urls
}

/// The `contain` part of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contain {
    pub helper: minibot_sandbox::Helper,
    /// Where this call's private temp folder is made.
    pub temp_root: PathBuf,
    pub policy: Policy,
    pub layers: Vec<&'static str>,
    /// The call's bounds, each with the key that sets it.
    pub bounds: Vec<super::limits::Bound>,
    /// What `$TMPDIR` may hold, where the host lets pid 1 mount it (namespaces).
    pub temp_bytes: Option<u64>,
}

/// A command as it is started: what the tool asks for, or what runs it inside the sandbox.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: String,
    pub args: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub stdin: Option<Vec<u8>>,
    /// The word that marks the sandbox helper's own lines on stderr, for the runner to take out.
    pub report_tag: Option<String>,
}

/// What will wrap the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedSandbox {
    pub mode: SandboxMode,
    /// argv put before the command (systemd-run or the jail prefix).
    pub prefix: Vec<String>,
    pub rlimits: Option<Rlimits>,
    pub contain: Option<Contain>,
}

impl AppliedSandbox {
    fn plain(mode: SandboxMode) -> Self {
        Self { mode, prefix: Vec::new(), rlimits: None, contain: None }
    }

    /// What to start for `command`, given the call's private temp folder and any folders the command also
    /// writes (python's run folder). In `contain` mode that is the helper with a fixed command line and an
    /// empty environment; the command, its environment (plus `TMPDIR`) and its folder go to the helper on
    /// standard input, ahead of the command's own input.
    pub fn wrap(&self, command: Launch, temp: &Path, also_writable: &[&Path]) -> Result<Launch, String> {
        if let Some(contain) = &self.contain {
            let mut policy = contain.policy.clone();
            policy.read_write.push(temp.to_path_buf());
            policy.read_write.extend(also_writable.iter().map(|p| p.to_path_buf()));
            policy.temp = contain.temp_bytes.map(|bytes| TempSpace { path: temp.to_path_buf(), bytes });
            let mut env = command.env;
            env.retain(|(name, _)| name != "TMPDIR");
            env.push(("TMPDIR".to_string(), temp.display().to_string()));
            let mut argv = vec![command.program];
            argv.extend(command.args);
            let tag = report_tag().map_err(|e| format!("cannot make the sandbox's report tag: {e}"))?;
            let request = Request { policy, argv, env, cwd: command.cwd, report_tag: Some(tag.clone()) };
            let mut stdin = request.encode()?;
            stdin.extend(command.stdin.unwrap_or_default());
            let mut args = contain.helper.leading.clone();
            args.push(minibot_sandbox::RUN_ARG.to_string());
            return Ok(Launch {
                program: contain.helper.program.display().to_string(),
                args,
                env: Vec::new(),
                cwd: PathBuf::from("/"),
                stdin: Some(stdin),
                report_tag: Some(tag),
            });
        }
        Ok(match self.prefix.split_first() {
            None => command,
            Some((first, rest)) => {
                let mut args: Vec<String> = rest.to_vec();
                args.push(command.program);
                args.extend(command.args);
                Launch { program: first.clone(), args, ..command }
            }
        })
    }

    /// Wraps `command` ([`Self::wrap`]) and runs it with the runner: its output, or the tool's error when it
    /// could not start.
    pub async fn run(
        &self,
        command: Launch,
        temp: &Path,
        also_writable: &[&Path],
        timeout: Duration,
        max_output_bytes: usize,
    ) -> Result<super::runner::RunOutput, minibot_agent::ToolError> {
        let launch = self
            .wrap(command, temp, also_writable)
            .map_err(|e| minibot_agent::ToolError::respond("sandbox_failed", e))?;
        super::runner::run(super::runner::RunSpec {
            program: launch.program,
            args: launch.args,
            cwd: launch.cwd,
            env: launch.env,
            stdin: launch.stdin,
            timeout,
            max_output_bytes,
            rlimits: self.rlimits.clone(),
            graceful_stop: self.stops_gracefully(),
            report_tag: launch.report_tag,
        })
        .await
        .map_err(super::run_error)
    }

    /// Whether the runner should ask the helper to end the command (and all it started) before killing it.
    pub fn stops_gracefully(&self) -> bool {
        self.contain.is_some()
    }

    /// When a call ran into one of its bounds: `limit`, and an `error` (the call failed) or a `warning` (it went
    /// on) that names the key to raise.
    pub fn report_limit(
        &self,
        output: &super::runner::RunOutput,
        out: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        let Some(contain) = &self.contain else { return };
        if let Some(ran) = super::limits::ran_into(&contain.bounds, output) {
            out.insert("limit".into(), ran.limit);
            let field = if ran.failed { "error" } else { "warning" };
            out.insert(field.into(), ran.message.into());
        }
    }

    pub fn describe(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        out.insert("sandbox_mode".into(), self.mode.as_str().into());
        if let Some(contain) = &self.contain {
            out.insert("sandbox_layers".into(), contain.layers.clone().into());
            out.insert("sandbox_network".into(), contain.policy.network.into());
        }
    }
}

/// A random word for one call (128 bits, hex), which the command cannot guess.
fn report_tag() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(format!("minibot-sandbox-report-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// A mode this host cannot provide, with the key to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[{section}] sandbox_mode = \"{mode}\" cannot run here: {reason}")]
pub struct SandboxUnavailable {
    pub section: &'static str,
    pub mode: &'static str,
    pub reason: String,
}

const MIB: u64 = 1024 * 1024;

/// What `settings` becomes on this host, or why it cannot be had.
pub async fn plan(settings: &SandboxSettings, scope: &SandboxScope) -> Result<AppliedSandbox, SandboxUnavailable> {
    let mode = settings.mode;
    let unavailable = |reason: String| SandboxUnavailable { section: settings.section, mode: mode.as_str(), reason };
    match mode {
        SandboxMode::None | SandboxMode::Basic => Ok(AppliedSandbox::plain(mode)),
        SandboxMode::Rlimit => {
            if !settings.rlimit.enabled {
                return Err(unavailable(format!("[{}.rlimit] enabled = false", settings.section)));
            }
            Ok(AppliedSandbox { rlimits: Some(limits(&settings.rlimit)), ..AppliedSandbox::plain(mode) })
        }
        SandboxMode::Cgroup => {
            let c = &settings.cgroup;
            if !c.enabled {
                return Err(unavailable(format!("[{}.cgroup] enabled = false", settings.section)));
            }
            if c.driver != "systemd" {
                return Err(unavailable(format!("cgroup driver `{}` is not supported (only systemd)", c.driver)));
            }
            systemd_run_usable().await.map_err(unavailable)?;
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
            Ok(AppliedSandbox { prefix, ..AppliedSandbox::plain(mode) })
        }
        SandboxMode::Jail => {
            let j = &settings.jail;
            if !j.enabled {
                return Err(unavailable(format!("[{}.jail] enabled = false", settings.section)));
            }
            let Some(argv0) = j.command_prefix.first() else {
                return Err(unavailable(format!("[{}.jail] command_prefix is empty", settings.section)));
            };
            if find_program(argv0).is_none() {
                return Err(unavailable(format!("jail command `{argv0}` is not on PATH")));
            }
            Ok(AppliedSandbox { prefix: j.command_prefix.clone(), ..AppliedSandbox::plain(mode) })
        }
        SandboxMode::Contain => {
            if let Some((path, what)) = scope.writable_guarded.first() {
                return Err(unavailable(format!(
                    "{} ({what}) lies inside [tools.file_storage] root_dir, which commands may write: move it out, \
                     or give root_dir a folder of its own",
                    path.display()
                )));
            }
            let (helper, capabilities) = contain_host().map_err(|reason| unavailable(reason.clone()))?;
            let temp_root = prepare_temp_root(&scope.temp_root)
                .map_err(|e| unavailable(format!("cannot make {}: {e}", scope.temp_root.display())))?;
            let mut hidden = scope.hidden.clone();
            hidden.push(temp_root.clone());
            let namespaces = capabilities.namespaces_refused.is_none();
            let bounds = super::limits::Bounds::of(settings, namespaces);
            let policy = Policy {
                read_write: scope.read_write.clone(),
                hidden,
                network: settings.allow_network,
                namespaces,
                limits: Some(bounds.limits),
                temp: None,
                disk: bounds.disk,
            };
            if let Some((hidden, folder)) = policy.conflict() {
                return Err(unavailable(format!(
                    "{} must stay unreadable, but it lies inside [tools.file_storage] root_dir ({}), which commands \
                     may write: give root_dir a folder of its own",
                    hidden.display(),
                    folder.display()
                )));
            }
            let layers = capabilities.layers();
            let contain =
                Contain { helper, policy, layers, temp_root, bounds: bounds.list, temp_bytes: bounds.temp_bytes };
            Ok(AppliedSandbox { contain: Some(contain), ..AppliedSandbox::plain(mode) })
        }
    }
}

/// The folder of private temp folders, made if needed, as its real path. No command may read it, so one call
/// cannot see into another's temp folder; each call is granted its own.
fn prepare_temp_root(folder: &Path) -> std::io::Result<PathBuf> {
    minibot_sqlite::private_fs::create_dir_all(folder)?;
    folder.canonicalize()
}

/// A private temp folder for one call (removed when dropped): inside the scope's temp root for `contain`, the
/// system's temp folder otherwise.
pub fn private_temp(applied: &AppliedSandbox, prefix: &str) -> std::io::Result<Scratch> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    match &applied.contain {
        Some(contain) => builder.tempdir_in(&contain.temp_root),
        None => builder.tempdir(),
    }
    .map(Scratch::from)
}

const CLEANUP_STACK: usize = 256 * 1024 * 1024;

/// A call's temp or run folder, removed when dropped, also when the command made it deeper than this process
/// may hold folders open (a removal that needs a descriptor per level stops there and would leave the rest on
/// the disk for good).
pub struct Scratch(Option<tempfile::TempDir>);

impl From<tempfile::TempDir> for Scratch {
    fn from(dir: tempfile::TempDir) -> Self {
        Self(Some(dir))
    }
}

impl Scratch {
    pub fn path(&self) -> &Path {
        self.0.as_ref().map_or(Path::new(""), |dir| dir.path())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(dir) = self.0.take() else { return };
        let path = dir.keep();
        // std's removal recurses once per level: it runs on a thread with a stack large enough for any tree
        // `disk_files` lets a call make (only reserved, not used, for an ordinary folder), started once. The
        // call waits for it, so nothing is left when the process exits right after.
        let (done, finished) = std::sync::mpsc::sync_channel(1);
        match cleaner().map(|cleaner| cleaner.send((path.clone(), done))) {
            Some(Ok(())) => {
                let _ = finished.recv();
            }
            _ => remove_scratch(&path),
        }
    }
}

type CleanupJob = (PathBuf, std::sync::mpsc::SyncSender<()>);

fn cleaner() -> Option<&'static std::sync::mpsc::Sender<CleanupJob>> {
    static CLEANER: OnceLock<Option<std::sync::mpsc::Sender<CleanupJob>>> = OnceLock::new();
    CLEANER
        .get_or_init(|| {
            let (jobs, queue) = std::sync::mpsc::channel::<CleanupJob>();
            std::thread::Builder::new()
                .name("sandbox-cleanup".into())
                .stack_size(CLEANUP_STACK)
                .spawn(move || {
                    for (path, done) in queue {
                        remove_scratch(&path);
                        let _ = done.send(());
                    }
                })
                .ok()?;
            Some(jobs)
        })
        .as_ref()
}

fn remove_scratch(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    // The command may have taken the rights off its own folders (chmod 000): the owner can always give them
    // back. coreutils' chmod and rm walk any depth with a bounded number of descriptors.
    for (program, args) in [("chmod", &["-R", "u+rwx", "--"][..]), ("rm", &["-rf", "--one-file-system", "--"][..])] {
        let _ = std::process::Command::new(program)
            .args(args)
            .arg(path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    if path.exists() {
        tracing::warn!(folder = %path.display(), "could not remove a sandboxed call's folder");
    }
}

/// Removes what earlier runs left in the temp root (a crash, a kill -9) and is older than a day: no call
/// lives that long, and a worker sharing the folder may be in the middle of a young one.
fn sweep_temp_root(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    let day_ago = std::time::SystemTime::now() - Duration::from_secs(24 * 3600);
    for entry in entries.flatten() {
        let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|modified| modified < day_ago);
        if old && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let Ok(dir) = tempfile::TempDir::with_prefix_in("sweep-", folder) else { return };
            // Moved into a fresh TempDir, whose Scratch removes it however deep it is.
            let target = dir.path().join("old");
            if std::fs::rename(entry.path(), &target).is_ok() {
                drop(Scratch::from(dir));
            }
        }
    }
}

/// The helper's own failure (it could not set the sandbox up, so the command never ran), as the tool's error.
/// Read from the helper's status pipe only: a command that prints the same words on its stderr and exits 125
/// is still a command that ran.
pub fn setup_failure(applied: &AppliedSandbox, output: &super::runner::RunOutput) -> Option<minibot_agent::ToolError> {
    applied.contain.as_ref()?;
    if output.exit_code != Some(minibot_sandbox::SETUP_FAILED_EXIT) {
        return None;
    }
    let line = output.helper_report.lines().find(|l| l.starts_with(minibot_sandbox::SETUP_FAILED_PREFIX))?;
    Some(minibot_agent::ToolError::respond("sandbox_failed", format!("the command did not run: {line}")))
}

/// The modes of every enabled execution tool, planned once at start-up: the first that cannot run here.
pub async fn check(config: &Config, files: Option<&ManagedRoot>) -> Result<(), SandboxUnavailable> {
    let scope = SandboxScope::from_config(config, files);
    sweep_temp_root(&scope.temp_root);
    let tools = &config.tools;
    if tools.bash.enabled {
        plan(&bash_settings(&tools.bash), &scope).await?;
    }
    if tools.python_exec.enabled {
        plan(&python_settings(&tools.python_exec), &scope).await?;
    }
    Ok(())
}

pub fn bash_settings(section: &minibot_config::BashSection) -> SandboxSettings {
    SandboxSettings {
        section: "tools.bash",
        mode: section.sandbox_mode,
        allow_network: section.allow_network,
        rlimit: section.rlimit.clone(),
        limits: section.limits.clone(),
        cgroup: section.cgroup.clone(),
        jail: section.jail.clone(),
    }
}

pub fn python_settings(section: &minibot_config::PythonExecSection) -> SandboxSettings {
    SandboxSettings {
        section: "tools.python_exec",
        mode: section.sandbox_mode,
        allow_network: section.allow_network,
        rlimit: section.rlimit.clone(),
        limits: section.limits.clone(),
        cgroup: section.cgroup.clone(),
        jail: section.jail.clone(),
    }
}

pub(super) fn limits(r: &RlimitSection) -> Rlimits {
    Rlimits {
        cpu_seconds: r.cpu_seconds,
        memory_bytes: r.memory_mb.map(|mb| mb.saturating_mul(MIB)),
        data_bytes: None,
        fsize_bytes: r.fsize_mb.map(|mb| mb.saturating_mul(MIB)),
        nproc: r.nproc,
        nofile: r.nofile,
    }
}

/// The helper and what this host lets it do.
type ContainHost = (minibot_sandbox::Helper, Capabilities);

/// The helper and what this host lets it do, found once per process.
fn contain_host() -> Result<ContainHost, String> {
    static HOST: OnceLock<Result<ContainHost, String>> = OnceLock::new();
    HOST.get_or_init(|| {
        let helper = minibot_sandbox::helper().ok_or_else(|| {
            format!(
                "the `{}` helper is not installed next to this program (or set {})",
                minibot_sandbox::locate::HELPER_NAME,
                minibot_sandbox::locate::HELPER_ENV
            )
        })?;
        let capabilities = minibot_sandbox::probe(&helper)?;
        if let Some(missing) = capabilities.missing() {
            return Err(missing);
        }
        hide_this_process();
        Ok((helper, capabilities))
    })
    .clone()
}

/// The assistant's own memory and environment (its API keys) are not for the commands it runs: a process
/// that is not dumpable can only be read by one holding CAP_SYS_PTRACE, which the helper drops.
#[allow(unsafe_code)]
fn hide_this_process() {
    // SAFETY: PR_SET_DUMPABLE takes its value by value and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
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
    static PROBE: tokio::sync::OnceCell<Result<(), String>> = tokio::sync::OnceCell::const_new();
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
