//! What the assistant runs or trusts, read from the config: the set [`ProtectedPaths`] guards, and the
//! start-up refusal of a managed folder that holds the assistant's own state ([`check_root`]).
//!
//! Paths count whether or not the feature that reads them is on (the vault, MCP, specialists, skills): turning
//! it on later must not load a file the model wrote. An MCP server's program counts when it is written as a
//! path or found on `PATH` outside the system's folders (an interpreter the package manager installed is not
//! the model's to replace, and guarding it would only add noise); its arguments count when they name a file,
//! or a path that does not exist yet but reads like one (a script the next start would run once the model
//! wrote it). Folder arguments do not count: they are mostly data (a filesystem server's allowed folders).

use super::{ManagedRoot, ProtectedPaths};
use minibot_config::schema::{McpServerSection, McpTransport};
use minibot_config::{Config, sqlite_path_from_url};
use std::path::{Path, PathBuf};

/// Where programs installed by the system live; a program found there is not guarded.
const SYSTEM_FOLDERS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt", "/nix/store", "/snap"];

/// Extensions of files an interpreter runs: an argument with one is a script even before it exists.
const SCRIPT_EXTENSIONS: &[&str] =
    &["py", "pyz", "js", "mjs", "cjs", "ts", "mts", "cts", "sh", "bash", "rb", "pl", "php", "lua", "jar"];

impl ProtectedPaths {
    /// Everything the assistant runs or trusts, from `config`; relative MCP arguments resolve against this
    /// process's folder (where a server without `cwd` starts) and the config's.
    pub fn from_config(config: &Config) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| config.base_dir.clone());
        Self::from_config_in(config, &cwd)
    }

    /// [`Self::from_config`] with `cwd` as the folder a stdio MCP server without `cwd` starts in.
    pub fn from_config_in(config: &Config, cwd: &Path) -> Self {
        // The config file counts where a defaults-only run would find one (`config.toml` in its folder), and
        // the vault at `[vault] path` whether or not the vault is on.
        let mut set = ProtectedPaths::new()
            .state_file(&config.config_file(), "the assistant's config file")
            .state_file(&config.vault_file(), "the assistant's secrets vault file");
        if let Some(password_file) = config.vault_password_file() {
            set = set.state_file(&password_file, "the vault's password file");
        }
        set = databases(set, config).state_folder(&config.log_dir(), "the assistant's log folder");
        set = platform_state(set);
        let folders = [
            (&config.orchestration.directory, "the assistant's agents folder"),
            (&config.orchestration.agent_management.directory, "the assistant's managed agents folder"),
            (&config.llm.prompts_dir, "the assistant's prompts folder"),
            (&config.tools.skills.write_path, "the assistant's skill install folder"),
        ];
        for (written, what) in folders.into_iter().filter(|(written, _)| !written.trim().is_empty()) {
            set = set.folder(&config.resolve_path(written), what);
        }
        // Every folder skills are discovered in (the written `paths`, or the default project and user folders):
        // a file the model put there would become instructions it is given later.
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        for root in minibot_skills::SkillSettings::from_config_in(config, cwd, home.as_deref()).roots {
            set = set.folder(&root.path, "a skills folder of the assistant");
        }
        let files = [
            (&config.llm.system_prompt_file, "the assistant's system prompt file"),
            (&config.rabbitmq.tls_ca_file, "the task broker's CA file"),
        ];
        for (written, what) in files {
            if let Some(written) = written.as_deref().filter(|w| !w.trim().is_empty()) {
                set = set.file(&config.resolve_path(written), what);
            }
        }
        for server in &config.tools.mcp.servers {
            set = mcp_server(set, config, server, cwd);
        }
        // A jail program runs every command of its tool, outside any sandbox of ours.
        let jails = [
            (&config.tools.bash.jail, "`[tools.bash.jail]`"),
            (&config.tools.python_exec.jail, "`[tools.python_exec.jail]`"),
        ];
        for (jail, section) in jails {
            if let Some(program) = jail.command_prefix.first().and_then(|p| program_path(config, p)) {
                set = set.file(&program, format!("the {section} program"));
            }
        }
        set = programs(set);
        let storage = &config.tools.file_storage;
        if storage.enabled {
            set = set.except(&config.resolve_path(&storage.root_dir));
        }
        set
    }
}

/// Whether a database's folder is the assistant's own, to be hidden and guarded whole: a folder under the config's
/// folder (MiniBot's `./data`), or the platform data folder a run without a config file keeps its state in
/// (`~/.local/share/minibot`), which is not under the config folder. The config folder itself is not: it holds
/// the user's files too.
pub fn is_state_folder(config: &Config, folder: &Path) -> bool {
    let base = std::path::absolute(&config.base_dir).unwrap_or_else(|_| config.base_dir.clone());
    let data = std::path::absolute(config.data_dir()).unwrap_or_else(|_| config.data_dir());
    (folder.starts_with(&base) && folder != base) || (folder.starts_with(&data) && data != base)
}

/// The platform folders' state (`minibot init`'s config, vault and password file, and the data folder), guarded
/// whichever config is loaded: a project's config must not hand the user's main assistant over to its tools.
fn platform_state(mut set: ProtectedPaths) -> ProtectedPaths {
    let Some(dirs) = minibot_config::PlatformDirs::current() else { return set };
    for file in dirs.secret_files() {
        set = set.state_file(&file, "the user's main minibot config or vault");
    }
    set.state_folder(&dirs.data_dir, "the user's main minibot data folder")
        .folder(&dirs.config_dir.join("agents"), "the user's main minibot agents folder")
        .folder(&dirs.config_dir.join("prompts"), "the user's main minibot prompts folder")
}

/// The SQLite databases: a folder of their own (MiniBot's `./data`) is guarded whole, with whatever the stores
/// keep next to their databases; a database in the config folder (or outside it) only with its own files, as the
/// `contain` sandbox hides them. Databases of features that are off count too.
fn databases(mut set: ProtectedPaths, config: &Config) -> ProtectedPaths {
    let urls = [
        (&config.memory.sqlite_url, "the assistant's conversation database"),
        (&config.scheduler.prompts.sqlite_url, "the assistant's scheduled prompts database"),
        (&config.tasks.sqlite.sqlite_url, "the assistant's task queue database"),
        (&config.tools.kv_memory.sqlite_url, "the assistant's key-value memory database"),
    ];
    for (url, what) in urls {
        let Some(file) = sqlite_path_from_url(url) else { continue };
        let file = std::path::absolute(config.resolve_path(&file)).unwrap_or_else(|_| config.resolve_path(&file));
        match file.parent() {
            Some(folder) if crate::files::is_state_folder(config, folder) => {
                set = set.state_folder(folder, "the assistant's data folder");
            }
            _ => {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut name = file.clone().into_os_string();
                    name.push(suffix);
                    set = set.state_file(Path::new(&name), what);
                }
            }
        }
    }
    set
}

/// A stdio server's program, its working folder and the scripts its arguments name.
fn mcp_server(mut set: ProtectedPaths, config: &Config, server: &McpServerSection, cwd: &Path) -> ProtectedPaths {
    if server.transport != McpTransport::Stdio {
        return set;
    }
    let name = &server.name;
    let work = server.cwd.as_deref().filter(|c| !c.trim().is_empty()).map(|c| config.resolve_path(c));
    if let Some(work) = &work {
        set = set.folder(work, format!("MCP server `{name}`'s working folder"));
    }
    if let Some(program) = server.command.as_deref().and_then(|c| program_path(config, c)) {
        set = set.file(&program, format!("MCP server `{name}`'s program"));
    }
    // Without `cwd` the server starts in this process's folder; a daemon and a console may be started from
    // different ones, and a script written relative to the config folder is the likelier meaning.
    let bases = match work {
        Some(work) => vec![work],
        None if cwd == config.base_dir => vec![cwd.to_path_buf()],
        None => vec![cwd.to_path_buf(), config.base_dir.clone()],
    };
    for arg in server.args.iter().filter_map(|arg| path_argument(arg)) {
        for base in &bases {
            let path = base.join(arg);
            if names_script(&path, arg) {
                set = set.file(&path, format!("MCP server `{name}`'s script"));
            }
        }
    }
    set
}

/// The part of an argument that may name a file: the argument itself, or the value of `--opt=value`; `None`
/// for other options and URLs.
fn path_argument(arg: &str) -> Option<&str> {
    let value = match arg.strip_prefix('-') {
        Some(option) => option.split_once('=').map(|(_, value)| value)?,
        None => arg,
    };
    (!value.trim().is_empty() && !value.contains("://")).then_some(value)
}

/// Whether `path` (from the argument `arg`) is a script the server runs: an existing file, or a missing path
/// that reads like one.
fn names_script(path: &Path, arg: &str) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) => meta.is_file(),
        Err(_) => {
            arg.contains('/')
                || Path::new(arg)
                    .extension()
                    .and_then(|ext| ext.to_str())
                    .is_some_and(|ext| SCRIPT_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
        }
    }
}

/// The file a program name starts: a path (it has a `/`) under the config folder when relative, as the MCP
/// client resolves it; a bare name as `PATH` finds it, unless the system installed it.
fn program_path(config: &Config, written: &str) -> Option<PathBuf> {
    let written = written.trim();
    if written.is_empty() {
        return None;
    }
    if written.contains('/') {
        return Some(config.resolve_path(written));
    }
    let found = std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(written)).find(|p| p.is_file())?;
    let real = found.canonicalize().unwrap_or_else(|_| found.clone());
    let system = |path: &Path| SYSTEM_FOLDERS.iter().any(|folder| path.starts_with(folder));
    (!system(&found) || !system(&real)).then_some(found)
}

/// The assistant's own programs: this one (local workers and, often, the sandbox helper are this same file)
/// and the sandbox helper.
fn programs(mut set: ProtectedPaths) -> ProtectedPaths {
    if let Ok(program) = std::env::current_exe() {
        set = set.file(&program, "the assistant's own program");
    }
    if let Some(helper) = minibot_sandbox::helper() {
        set = set.file(&helper.program, "the assistant's sandbox helper");
    }
    set
}

/// A managed folder (`[tools.file_storage] root_dir`) that holds the assistant's own state: the file tools may
/// change anything in their folder, so nothing there can be guarded from them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tools.file_storage.root_dir: {} holds {held}, which the file tools must not change; give root_dir a folder \
     of its own",
    root.display()
)]
pub struct RootHoldsState {
    pub root: PathBuf,
    /// What it holds, each with its path.
    pub held: String,
}

/// Refuses a managed folder that holds the config file, the vault or its password file, a data folder or
/// database, or the log folder. Both binaries run it at start-up.
pub fn check_root(config: &Config, files: Option<&ManagedRoot>) -> Result<(), RootHoldsState> {
    let Some(root) = files else { return Ok(()) };
    let guarded = ProtectedPaths::from_config(config);
    let held: Vec<String> =
        guarded.state_in(root.path()).iter().map(|(path, what)| format!("{what} ({})", path.display())).collect();
    match held.split_last() {
        None => Ok(()),
        Some((last, [])) => Err(RootHoldsState { root: root.path().to_path_buf(), held: last.clone() }),
        Some((last, rest)) => {
            Err(RootHoldsState { root: root.path().to_path_buf(), held: format!("{} and {last}", rest.join(", ")) })
        }
    }
}
