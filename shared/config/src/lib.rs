//! Configuration for minibot: reads MiniBot's `config.toml` format, expands `${VAR}` references, rejects
//! unknown sections and keys by name, applies MiniBot's defaults and checks the rules that span sections.
//!
//! [`Config::load`] finds the file (`--config`, then `MINIBOT_CONFIG`, then `./config.toml`; no file means
//! defaults). Relative paths in the file resolve against the file's folder, so the program runs from any working
//! directory. [`Config::main_llm`] resolves `[llm]` and `[providers.<name>]` into one endpoint.

mod agents;
mod bytesize;
mod error;
mod expand;
mod load;
mod paths;
mod providers;
pub mod schema;
pub mod support;
mod validate;
mod vault;

pub use agents::{AgentDefinition, load_agents, parse_agent};
pub use bytesize::ByteSize;
pub use error::{ConfigError, Result};
pub use expand::expand_str;
pub use minibot_vault::Secrets;
pub use paths::sqlite_path_from_url;
pub use providers::{ApiFormat, LlmEndpoint, MissingApiKey, ProviderChoice, ProviderUnavailable, is_credential};
pub use schema::*;
pub use support::{Unsupported, check_agents};
pub use vault::Unlock;

use std::path::{Path, PathBuf};

/// A loaded and validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    file: ConfigFile,
    /// The file it came from; `None` when no file exists and defaults apply.
    pub source: Option<PathBuf>,
    /// Where relative paths of the file resolve.
    pub base_dir: PathBuf,
    /// The unlocked vault's secrets (empty when `[vault]` is off). `${secret:NAME}` references are already
    /// expanded; this is for what names a secret directly (MCP `auth_secret`, `list_secrets`, redaction).
    pub secrets: minibot_vault::Secrets,
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

    /// Defaults only, with relative paths under `base_dir`.
    pub fn defaults(base_dir: impl Into<PathBuf>) -> Self {
        Self { file: ConfigFile::default(), source: None, base_dir: base_dir.into(), secrets: Default::default() }
    }

    /// Finds and loads the config: `explicit` (from `--config`), else `MINIBOT_CONFIG`, else `./config.toml`.
    /// A missing default file means defaults; a missing explicit file is an error. With `[vault] enabled`, the
    /// vault is unlocked with `[vault] password_file`, `MINIBOT_VAULT_PASSWORD` or a terminal prompt.
    pub fn load(explicit: Option<&Path>) -> Result<Self> {
        Self::load_with(explicit, Unlock::Password(&minibot_vault::TtyPrompt))
    }

    /// [`Self::load`] with the vault unlocked as `unlock` says.
    pub fn load_with(explicit: Option<&Path>, unlock: Unlock<'_>) -> Result<Self> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let (path, required) = match explicit {
            Some(path) => (path.to_path_buf(), true),
            None => match std::env::var_os("MINIBOT_CONFIG").filter(|v| !v.is_empty()) {
                Some(path) => (PathBuf::from(path), true),
                None => (cwd.join("config.toml"), false),
            },
        };
        if !path.exists() && !required {
            return Ok(Self::defaults(cwd));
        }
        load::from_file(&path, &|name| std::env::var(name).ok(), unlock)
    }

    /// Loads from text; `origin` names the text in errors. A vault opens only with a password from
    /// `[vault] password_file` or `MINIBOT_VAULT_PASSWORD` (through `lookup`): nobody is asked.
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
        let base_dir = base_dir.into();
        let (file, secrets) = load::parse(text, &vault::Origin { name: origin, base_dir: &base_dir, lookup }, unlock)?;
        let config = Self { file, source: None, base_dir, secrets };
        validate::check(&config, origin)?;
        Ok(config)
    }

    /// Resolves a path written in the config: `~` is the home folder, relative paths sit under [`Self::base_dir`].
    pub fn resolve_path(&self, written: &str) -> PathBuf {
        paths::resolve(&self.base_dir, written)
    }

    /// The file name shown in messages: the config path, or "defaults".
    pub fn origin(&self) -> String {
        self.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "defaults (no config file)".into())
    }

    /// Whether specialists are on: explicit `[orchestration.specialists].enabled`, else `[tasks].enabled`.
    pub fn specialists_enabled(&self) -> bool {
        self.orchestration.specialists.enabled.unwrap_or(self.tasks.enabled)
    }
}
