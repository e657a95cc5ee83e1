//! Where state lives when no config file says so. A run without a config file must not depend on the folder it
//! was started from (a run from another folder would start an empty history), so it uses the platform's
//! folders: the config folder (`~/.config/minibot`: `config.toml`, `agents/`, `prompts/`, the vault) and the
//! data folder (`~/.local/share/minibot`: what MiniBot kept in `./data`, and `logs/`). The config file in the
//! platform config folder uses the same split, so writing it (`minibot init`) keeps the history where it was.
//! Any other config file keeps everything next to itself.
//!
//! On Linux and the BSDs the folders follow the XDG rules, read from the loader's [`Vars`] (so tests set
//! `HOME`/`XDG_*` without touching the process environment); elsewhere the `directories` crate decides.

use crate::Vars;
use std::path::{Path, PathBuf};

/// The name of the folder inside the platform's config and data folders.
const APP: &str = "minibot";

/// The platform's config and data folders for minibot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformDirs {
    /// `$XDG_CONFIG_HOME/minibot`, by default `~/.config/minibot`.
    pub config_dir: PathBuf,
    /// `$XDG_DATA_HOME/minibot`, by default `~/.local/share/minibot`.
    pub data_dir: PathBuf,
}

impl PlatformDirs {
    /// The folders as the environment `vars` says; `None` without a home folder (no `HOME`, no `XDG_*`).
    pub fn from_vars(vars: &Vars) -> Option<Self> {
        platform(vars)
    }

    /// The folders for this process's environment.
    pub fn current() -> Option<Self> {
        Self::from_vars(&Vars::process())
    }

    /// `config.toml` in the config folder.
    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    /// The files in the platform config folder that hold secrets, whichever config a process loaded: the
    /// config, the vault and the password file `minibot init` writes. A project's own config must not leave
    /// them to its tools.
    pub fn secret_files(&self) -> [PathBuf; 3] {
        ["config.toml", "secrets.vault.yml", "vault.password"].map(|name| self.config_dir.join(name))
    }

    /// Whether `folder` is the platform config folder (compared after resolving links, so a symlinked home
    /// still counts).
    pub(crate) fn is_config_dir(&self, folder: &Path) -> bool {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| std::path::absolute(p).unwrap_or(p.into()));
        real(folder) == real(&self.config_dir)
    }
}

#[cfg(all(unix, not(target_os = "macos")))]
fn platform(vars: &Vars) -> Option<PlatformDirs> {
    let home = vars.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    // The XDG rule: a variable that is unset, empty or relative is ignored.
    let folder = |variable: &str, fallback: &str| {
        vars.get(variable)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home.as_ref().map(|home| home.join(fallback)))
            .map(|root| root.join(APP))
    };
    Some(PlatformDirs {
        config_dir: folder("XDG_CONFIG_HOME", ".config")?,
        data_dir: folder("XDG_DATA_HOME", ".local/share")?,
    })
}

#[cfg(not(all(unix, not(target_os = "macos"))))]
fn platform(_vars: &Vars) -> Option<PlatformDirs> {
    let dirs = directories::ProjectDirs::from("", "", APP)?;
    Some(PlatformDirs { config_dir: dirs.config_dir().to_path_buf(), data_dir: dirs.data_dir().to_path_buf() })
}

/// Where a loaded config keeps its state, for the start-up line: `config …; data …; logs …`, with the home
/// folder written `~`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locations {
    /// The config file loaded, or `None` for defaults.
    pub config_file: Option<PathBuf>,
    /// Where a config file would be found when there is none (the platform config file).
    pub would_be: PathBuf,
    pub data_dir: PathBuf,
    pub log_dir: PathBuf,
    pub home: Option<PathBuf>,
}

impl Locations {
    fn shown(&self, path: &Path) -> String {
        match self.home.as_deref().and_then(|home| path.strip_prefix(home).ok()) {
            Some(rest) if rest.as_os_str().is_empty() => "~".into(),
            Some(rest) => format!("~/{}", rest.display()),
            None => path.display().to_string(),
        }
    }
}

impl std::fmt::Display for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.config_file {
            Some(file) => write!(f, "config {}", self.shown(file))?,
            None => write!(f, "no config file (defaults; `minibot init` writes {})", self.shown(&self.would_be))?,
        }
        write!(f, "; data {}; logs {}", self.shown(&self.data_dir), self.shown(&self.log_dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn xdg_variables_win_over_home_and_relative_ones_are_ignored() {
        let vars: Vars = [("HOME", "/home/u")].into_iter().collect();
        let dirs = PlatformDirs::from_vars(&vars).unwrap();
        assert_eq!(dirs.config_file(), Path::new("/home/u/.config/minibot/config.toml"));
        assert_eq!(dirs.data_dir, Path::new("/home/u/.local/share/minibot"));
        let vars: Vars =
            [("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/x/conf"), ("XDG_DATA_HOME", "rel")].into_iter().collect();
        let dirs = PlatformDirs::from_vars(&vars).unwrap();
        assert_eq!(dirs.config_dir, Path::new("/x/conf/minibot"));
        assert_eq!(dirs.data_dir, Path::new("/home/u/.local/share/minibot"));
        assert_eq!(PlatformDirs::from_vars(&Vars::default()), None);
    }

    #[test]
    fn the_summary_names_each_place_once_with_the_home_as_tilde() {
        let locations = Locations {
            config_file: None,
            would_be: "/home/u/.config/minibot/config.toml".into(),
            data_dir: "/home/u/.local/share/minibot".into(),
            log_dir: "/home/u/.local/share/minibot/logs".into(),
            home: Some("/home/u".into()),
        };
        assert_eq!(
            locations.to_string(),
            "no config file (defaults; `minibot init` writes ~/.config/minibot/config.toml); data \
             ~/.local/share/minibot; logs ~/.local/share/minibot/logs"
        );
        let locations = Locations { config_file: Some("/srv/bot/config.toml".into()), ..locations };
        assert!(locations.to_string().starts_with("config /srv/bot/config.toml; data ~/"), "{locations}");
    }
}
