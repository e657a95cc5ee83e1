//! Configuration for minibot: reads MiniBot's `config.toml` format, expands `${VAR}` references, rejects
//! unknown sections and keys by name, applies MiniBot's defaults and checks the rules that span sections.
//!
//! [`Config::load`] finds the file (`--config`, then `MINIBOT_CONFIG`, then `./config.toml`, then the platform
//! config file `~/.config/minibot/config.toml`; no file means defaults, with state in the platform folders:
//! [`PlatformDirs`]), then layers `MINIBOT__SECTION__KEY` environment overrides on top through the `config` crate
//! (`overrides`, `layers`). Relative paths in the file resolve against the file's folder, so the program runs
//! from any working directory. [`Config::main_llm`] resolves `[llm]` and `[providers.<name>]` into one endpoint.
//! [`Config::redactor`] masks every credential the config holds, in logs, databases and provider requests.

mod agents;
mod bytesize;
mod credentials;
mod error;
mod expand;
mod keypath;
mod layers;
mod load;
pub mod managed_agents;
mod overrides;
mod paths;
mod places;
mod providers;
pub mod schema;
mod suggest;
pub mod support;
pub mod trust;
pub use load::writable_by_anyone;
mod validate;
mod vars;
mod vault;

pub use agents::{AgentDefinition, load_agents, parse_agent};
pub use bytesize::ByteSize;
pub use credentials::{is_assistant_secret_variable, is_secret_name, is_secret_variable};
pub use error::{ConfigError, Result};
pub use expand::expand_str;
pub use minibot_vault::Secrets;
pub use paths::sqlite_path_from_url;
pub use places::{Locations, PlatformDirs};
pub use providers::{
    ApiFormat, EndpointOptions, LlmEndpoint, MissingApiKey, NO_KEY_SENT, ProviderChoice, ProviderUnavailable,
    is_credential, is_loopback_url, is_plain_http_to_another_host,
};
pub use schema::*;
pub use support::{Unsupported, check_agents};
pub use vars::Vars;
pub use vault::Unlock;

use std::path::{Path, PathBuf};

/// What a configuration without a file is called in messages.
const DEFAULTS_ORIGIN: &str = "defaults (no config file)";

/// A loaded and validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    file: ConfigFile,
    /// The file it came from; `None` when no file exists and defaults apply.
    pub source: Option<PathBuf>,
    /// Where relative paths of the file resolve (but see [`Self::resolve_path`] for the platform layout).
    pub base_dir: PathBuf,
    /// The platform data folder, where `data/…` and `logs/…` resolve, when this config uses the platform
    /// layout ([`PlatformDirs`]): no config file, or the one in the platform config folder.
    state_dir: Option<PathBuf>,
    /// The unlocked vault's secrets (empty when `[vault]` is off). `${secret:NAME}` references are already
    /// expanded; this is for what names a secret directly (MCP `auth_secret`, `list_secrets`, redaction).
    pub secrets: minibot_vault::Secrets,
    /// The password the vault was unlocked with (by this process, or by the parent that handed the secrets
    /// over), kept only so that [`Config::redactor`] masks it too.
    pub vault_password: Option<minibot_vault::Password>,
}

impl std::ops::Deref for Config {
    type Target = ConfigFile;
    fn deref(&self) -> &ConfigFile {
        &self.file
    }
}

impl std::ops::DerefMut for Config {
    fn deref_mut(&mut self) -> &mut ConfigFile {
        &mut self.file
    }
}

impl Config {
    /// The config file: where this config was loaded from, or where a defaults-only run would find one
    /// (`config.toml` in its folder).
    pub fn config_file(&self) -> PathBuf {
        self.source.clone().unwrap_or_else(|| self.base_dir.join("config.toml"))
    }

    /// `[vault] path`, resolved, whether or not the vault is on.
    pub fn vault_file(&self) -> PathBuf {
        self.resolve_path(&self.vault.path)
    }

    /// `[vault] password_file`, resolved, when it is set.
    pub fn vault_password_file(&self) -> Option<PathBuf> {
        Some(&self.vault.password_file).filter(|f| !f.is_empty()).map(|f| self.resolve_path(f))
    }

    /// The log folder: `logs/` next to the config file, or in the platform data folder (no key sets it).
    pub fn log_dir(&self) -> PathBuf {
        self.resolve_path("logs")
    }

    /// The data folder: what `./data` in a path means (`./data/minibot.db` is the conversation database).
    /// `data/` next to the config file, or the platform data folder (`~/.local/share/minibot`).
    pub fn data_dir(&self) -> PathBuf {
        self.resolve_path("data")
    }

    /// Whether this config was loaded from the platform config file (`~/.config/minibot/config.toml`).
    pub fn is_platform_file(&self) -> bool {
        self.source.is_some() && self.state_dir.is_some()
    }

    /// The platform config file, `~/.config/minibot/config.toml` (after `XDG_CONFIG_HOME` and `HOME`): the last
    /// place [`Self::load`] looks, and where `minibot init` writes by default. `None` without a home folder.
    pub fn default_config_file() -> Option<PathBuf> {
        PlatformDirs::current().map(|dirs| dirs.config_file())
    }

    /// Where this config keeps its state, as one line for start-up messages: `config …; data …; logs …`.
    pub fn locations(&self) -> Locations {
        Locations {
            config_file: self.source.clone(),
            would_be: self.config_file(),
            data_dir: self.data_dir(),
            log_dir: self.log_dir(),
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
        }
    }

    /// Defaults only, with relative paths under `base_dir`.
    pub fn defaults(base_dir: impl Into<PathBuf>) -> Self {
        Self {
            file: ConfigFile::default(),
            source: None,
            base_dir: base_dir.into(),
            state_dir: None,
            secrets: Default::default(),
            vault_password: None,
        }
    }

    /// Finds and loads the config: `explicit` (from `--config`), else `MINIBOT_CONFIG`, else `./config.toml`,
    /// else the platform config file ([`Self::default_config_file`]). A missing explicit file is an error; no file
    /// at all means defaults, with `data/` and `logs/` in the platform data folder and the rest (agents,
    /// prompts, vault) in the platform config folder (in the working directory when there is no home folder). `MINIBOT__SECTION__KEY`
    /// variables override the file's keys (and apply without a file too). With `[vault] enabled`, the vault is
    /// unlocked with `[vault] password_file`, `MINIBOT_VAULT_PASSWORD` or a terminal prompt.
    pub fn load(explicit: Option<&Path>) -> Result<Self> {
        Self::load_with(explicit, Unlock::Password(&minibot_vault::TtyPrompt))
    }

    /// [`Self::load`] with the vault unlocked as `unlock` says. Reads the process environment once.
    pub fn load_with(explicit: Option<&Path>, unlock: Unlock<'_>) -> Result<Self> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::load_from(explicit, &cwd, &Vars::process(), unlock)
    }

    /// [`Self::load_with`] with the environment given: `vars` stands for the process environment
    /// (`MINIBOT_CONFIG`, `${NAME}` references, `MINIBOT_VAULT_PASSWORD`, `MINIBOT__…` overrides) and `cwd` for
    /// the working directory (where `config.toml` is looked for, and the base of a run without a file).
    pub fn load_from(explicit: Option<&Path>, cwd: &Path, vars: &Vars, unlock: Unlock<'_>) -> Result<Self> {
        let overrides = overrides::collect(vars)?;
        let lookup = |name: &str| vars.get(name).map(String::from);
        let platform = PlatformDirs::from_vars(vars);
        let mut found_here = false;
        let (path, required) = match explicit {
            Some(path) => (path.to_path_buf(), true),
            None => match vars.get("MINIBOT_CONFIG").filter(|v| !v.is_empty()) {
                Some(path) => (PathBuf::from(path), true),
                None => {
                    let here = cwd.join("config.toml");
                    found_here = here.exists();
                    let platform_file = platform.as_ref().map(PlatformDirs::config_file).filter(|f| f.exists());
                    (platform_file.filter(|_| !here.exists()).unwrap_or(here), false)
                }
            },
        };
        if path.exists() || required {
            return load::from_file(&path, &lookup, &overrides, unlock, platform.as_ref(), found_here);
        }
        let (base_dir, state_dir) = match platform {
            Some(dirs) => (dirs.config_dir, Some(dirs.data_dir)),
            None => (cwd.to_path_buf(), None),
        };
        if overrides.is_empty() {
            return Ok(Self { state_dir, ..Self::defaults(base_dir) });
        }
        let file = load::File { text: "", origin: DEFAULTS_ORIGIN, path: None, base_dir, state_dir };
        load::build(file, &lookup, &overrides, unlock)
    }

    /// Loads from text; `origin` names the text in errors. A vault opens only with a password from
    /// `[vault] password_file` or `MINIBOT_VAULT_PASSWORD` (through `lookup`): nobody is asked. No overrides
    /// apply: `lookup` cannot list variables (see [`Self::load_from`]).
    pub fn from_toml(
        text: &str,
        origin: &str,
        base_dir: impl Into<PathBuf>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        Self::from_toml_with(text, origin, base_dir, lookup, Unlock::Password(&minibot_vault::NoPrompt))
    }

    /// [`Self::from_toml`] with the vault unlocked as `unlock` says.
    pub fn from_toml_with(
        text: &str,
        origin: &str,
        base_dir: impl Into<PathBuf>,
        lookup: &dyn Fn(&str) -> Option<String>,
        unlock: Unlock<'_>,
    ) -> Result<Self> {
        let file = load::File { text, origin, path: None, base_dir: base_dir.into(), state_dir: None };
        load::build(file, lookup, &[], unlock)
    }

    /// Resolves a path written in the config: `~` is the home folder, relative paths sit under [`Self::base_dir`],
    /// except in the platform layout, where paths under `data/` sit in the platform data folder
    /// (`./data/minibot.db` is `~/.local/share/minibot/minibot.db`) and `logs` is `~/.local/share/minibot/logs`.
    pub fn resolve_path(&self, written: &str) -> PathBuf {
        paths::resolve(&self.base_dir, self.state_dir.as_deref(), written)
    }

    /// The file name shown in messages: the config path, or "defaults".
    pub fn origin(&self) -> String {
        self.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| DEFAULTS_ORIGIN.into())
    }

    /// Whether specialists are on: explicit `[orchestration.specialists].enabled`, else `[tasks].enabled`.
    pub fn specialists_enabled(&self) -> bool {
        self.orchestration.specialists.enabled.unwrap_or(self.tasks.enabled)
    }
}
