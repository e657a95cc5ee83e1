//! The checks of this machine: the config and its vault, where state lives, and free disk.

use super::report::Report;
use minibot_config::{Config, ConfigError, Unlock};
use minibot_vault::VaultError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Below this much free space in the data folder the report warns: databases, logs and files the assistant
/// keeps grow, and SQLite fails writes on a full disk.
const LOW_DISK_BYTES: u64 = 1024 * 1024 * 1024;

/// What loading gave the rest of the checks.
pub enum Loaded {
    /// Everything loaded, secrets included.
    Full(Config),
    /// The file is fine but its vault did not open: what needs no secret can still be checked.
    WithoutSecrets(Config),
    /// The file did not load; only the folder it lives in is known.
    Broken { folder: PathBuf },
}

/// The file `minibot` would read, as `Config::load` finds it: `--config`, `MINIBOT_CONFIG`, `./config.toml`,
/// the platform config file. Only needed to say where a config that did not load lives.
fn config_location(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    if let Some(path) = std::env::var_os("MINIBOT_CONFIG").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")).join("config.toml");
    if here.exists() {
        return here;
    }
    Config::default_config_file().filter(|file| file.exists()).unwrap_or(here)
}

/// The `config` and `vault` lines.
pub fn load(explicit: Option<&Path>, report: &mut Report<impl Write>) -> Loaded {
    let file = config_location(explicit);
    let shown = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
    let error = match Config::load(explicit) {
        Ok(config) => {
            match &config.source {
                Some(source) => report.ok("config", source.display().to_string()),
                None => report.warn(
                    "config",
                    "no config file: built-in defaults apply",
                    format!("run `minibot init` (it writes {}), or pass --config", config.config_file().display()),
                ),
            }
            vault_line(&config, report);
            return Loaded::Full(config);
        }
        Err(error) => error,
    };
    let folder = shown.parent().map(Path::to_path_buf).unwrap_or_default();
    if is_vault_error(&error)
        && let Ok(config) = Config::load_with(explicit, Unlock::Skip)
    {
        report.ok("config", format!("{} (read; its vault did not open)", shown.display()));
        report.fail("vault", with_causes(&error), config_fix(&error, &shown));
        return Loaded::WithoutSecrets(config);
    }
    report.fail("config", with_causes(&error), config_fix(&error, &shown));
    Loaded::Broken { folder }
}

fn vault_line(config: &Config, report: &mut Report<impl Write>) {
    if !config.vault.enabled {
        report.skip("vault", "off ([vault] enabled = false)");
        return;
    }
    let names = config.secrets.len();
    report.ok("vault", format!("{} unlocked, {names} secret(s)", config.vault_file().display()));
}

fn is_vault_error(error: &ConfigError) -> bool {
    matches!(error, ConfigError::Vault { .. } | ConfigError::MissingSecret { .. })
}

/// What to do about a config that did not load; the error itself already names the file and the key.
fn config_fix(error: &ConfigError, file: &Path) -> String {
    let file = file.display();
    match error {
        ConfigError::Read { .. } if not_found(error) => {
            format!("write it with `minibot init --config {file}`, or point --config / MINIBOT_CONFIG at your file")
        }
        ConfigError::Read { .. } => format!("make {file} readable by this user"),
        ConfigError::NotAFile(_) | ConfigError::NotToml(_) => {
            "point --config (or MINIBOT_CONFIG) at a .toml file".into()
        }
        ConfigError::Syntax { .. } => format!("correct the TOML of {file} where the message points"),
        ConfigError::UnsetVariable { var, .. } => format!("export {var}, or write $${{{var}}} for a literal `${{`"),
        ConfigError::UnknownSection { section, .. } => format!("remove or rename [{section}] in {file}"),
        ConfigError::InvalidKey { key, .. } => format!("correct or remove `{key}` in {file}"),
        ConfigError::Override { var, .. } => format!("correct or unset the environment variable {var}"),
        ConfigError::Agent { path, .. } => format!("correct {}", path.display()),
        ConfigError::SecretWithoutVault { .. } => {
            "set [vault] enabled = true (make the vault with `minibot vault init`), or write the value itself".into()
        }
        ConfigError::MissingSecret { name, .. } => format!("add it with `minibot vault set {name}`"),
        ConfigError::SecretInVaultSection { .. } => "write [vault] values without ${secret:…}".into(),
        ConfigError::Vault { error, .. } => vault_fix(error),
        ConfigError::Untrusted(minibot_config::trust::Untrusted::FilesChanged { .. }) => {
            format!("read the files named, then run `minibot trust` in its folder (or pass --config {file})")
        }
        ConfigError::Untrusted(_) => {
            format!("read {file}, then run `minibot trust` in its folder (or pass --config {file})")
        }
        ConfigError::Unsupported(_) => format!("remove the keys named from {file}, or turn them off"),
        _ => format!("change what the message names in {file}"),
    }
}

fn not_found(error: &ConfigError) -> bool {
    std::error::Error::source(error)
        .and_then(|cause| cause.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
}

/// The message with its causes, as `{:#}` of anyhow prints it: some errors keep their cause as `source()`.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn vault_fix(error: &VaultError) -> String {
    match error {
        VaultError::Missing { path } => format!("make it with `minibot vault init {}`", path.display()),
        VaultError::WrongPassword { .. } => "use the password the vault was made with".into(),
        VaultError::NoPassword { .. } | VaultError::Prompt { .. } => format!(
            "set [vault] password_file, or {} in the environment, or run doctor in a terminal to be asked",
            minibot_vault::PASSWORD_ENV
        ),
        VaultError::PasswordFile { path, .. } | VaultError::EmptyPasswordFile { path } => {
            format!("put the vault password in {} (or correct [vault] password_file)", path.display())
        }
        VaultError::Read { path, .. } | VaultError::Format { path, .. } | VaultError::Plaintext { path, .. } => {
            format!("restore {} from a backup, or make a new one with `minibot vault init`", path.display())
        }
        VaultError::Write { .. } | VaultError::PasswordMismatch { .. } | VaultError::EmptyPassword { .. } => {
            "see the message".into()
        }
    }
}

/// The data folder (MiniBot's `./data`: the databases, and the files the assistant keeps).
pub fn data_folder(config: &Config) -> PathBuf {
    let folder = config.data_dir();
    std::path::absolute(&folder).unwrap_or(folder)
}

/// The `data` and `logs` lines: where they are, and that this user can write there. They sit next to the
/// config file (in the platform data folder for the platform config file or none): no key moves them.
pub fn state_folders(config: &Config, report: &mut Report<impl Write>) {
    let data = data_folder(config);
    folder_line("data", "", &data, report);
    let logs = config.log_dir();
    folder_line("logs", "", &std::path::absolute(&logs).unwrap_or(logs), report);
    database_folders(config, &data, report);
}

/// A line for each database the config puts outside the data folder (the ones inside are covered by its line):
/// a folder that cannot be made stops start-up, or, for the memory and graph files, fails the first call.
fn database_folders(config: &Config, data: &Path, report: &mut Report<impl Write>) {
    let scheduler = &config.scheduler.prompts;
    let databases = [
        ("memory.sqlite_url", Some(config.memory.sqlite_url.clone())),
        ("tasks.sqlite.sqlite_url", config.tasks.enabled.then(|| config.tasks.sqlite.sqlite_url.clone())),
        ("scheduler.prompts.sqlite_url", (scheduler.enabled != Some(false)).then(|| scheduler.sqlite_url.clone())),
        (
            "tools.kv_memory.sqlite_url",
            config.tools.kv_memory.enabled.then(|| config.tools.kv_memory.sqlite_url.clone()),
        ),
        ("graph sqlite_url", config.extensions.graph_sqlite_url()),
    ];
    for (key, url) in databases {
        let Some(path) = url.as_deref().and_then(minibot_config::sqlite_path_from_url) else { continue };
        let path = config.resolve_path(&path);
        let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let folder = std::path::absolute(&folder).unwrap_or(folder);
        if folder != data {
            folder_line("database", &format!("{key}: "), &folder, report);
        }
    }
}

/// The line about `folder`, its message starting with `label`.
fn folder_line(topic: &str, label: &str, folder: &Path, report: &mut Report<impl Write>) {
    let shown = format!("{label}{}", folder.display());
    match std::fs::metadata(folder) {
        Ok(meta) if !meta.is_dir() => report.fail(topic, format!("{shown} is not a folder"), "move that file away"),
        Ok(_) if !writable(folder) => {
            report.fail(topic, format!("{shown} is not writable"), "give the user minibot runs as write access")
        }
        Ok(_) => report.ok(topic, &shown),
        Err(_) => match existing_ancestor(folder) {
            Some(parent) if writable(&parent) => report.ok(topic, format!("{shown} (made at first start)")),
            _ => report.fail(
                topic,
                format!("{shown} does not exist and cannot be made"),
                "make it, and give the user minibot runs as write access",
            ),
        },
    }
}

fn writable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// The nearest part of `path` that exists, when it is a folder (a file in the way means no folder can be made).
fn existing_ancestor(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|p| p.exists()).filter(|p| p.is_dir()).map(Path::to_path_buf)
}

/// The `disk` line: free space where the data folder lives (or would).
pub fn disk(folder: &Path, report: &mut Report<impl Write>) {
    let Some(existing) = existing_ancestor(folder) else {
        report.skip("disk", format!("no part of {} exists", folder.display()));
        return;
    };
    match nix::sys::statvfs::statvfs(&existing) {
        Ok(stats) => {
            let free = stats.blocks_available().saturating_mul(stats.fragment_size());
            let text = format!("{} free at {}", human(free), existing.display());
            if free < LOW_DISK_BYTES {
                report.warn("disk", text, format!("free some space: below {} writes may fail", human(LOW_DISK_BYTES)));
            } else {
                report.ok("disk", text);
            }
        }
        Err(error) => report.warn("disk", format!("cannot read free space of {}: {error}", existing.display()), ""),
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}
