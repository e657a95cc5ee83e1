//! Where skills come from, resolved from `[tools.skills]`: the discovery folders in priority order (reference
//! §9) and which bundled skills are hidden.
//!
//! Order, first wins on a name: `write_path` (project) → the `paths` list (project) or, when it is empty,
//! `./.minibot/skills`, `./.agents/skills` (project, in the working folder) and `~/.minibot/skills`,
//! `~/.agents/skills` (user) → the bundled skills (native). A folder listed twice is scanned once.

use crate::bundled::{CREATE_AGENT, INSTALL_SKILL};
use minibot_config::Config;
use std::path::{Path, PathBuf};

/// Which tier a skill was found in; shown to the model as `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    Project,
    User,
    Native,
}

impl SkillSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Project => "project",
            Self::User => "user",
            Self::Native => "native",
        }
    }
}

/// One discovery folder: each of its subfolders holding a `SKILL.md` is a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub path: PathBuf,
    pub source: SkillSource,
}

/// `[tools.skills]` resolved to paths.
#[derive(Debug, Clone)]
pub struct SkillSettings {
    /// `enabled` (on unless written `false`).
    pub enabled: bool,
    pub preload_catalog: bool,
    /// Where new skills are written and installed; also the first discovery folder.
    pub write_dir: PathBuf,
    /// The folders on disk, in priority order, without repeats.
    pub roots: Vec<Root>,
    /// Whether the bundled tier is on.
    pub native: bool,
    /// Bundled skills left out: `native_disabled`, plus `install-skill` without `install`, plus `create-agent`
    /// without agent management writes.
    pub hidden_native: Vec<String>,
    /// `install = true`: `install_skill` is offered.
    pub install: bool,
}

const PROJECT_DIRS: &[&str] = &[".minibot/skills", ".agents/skills"];

impl SkillSettings {
    /// The settings `config` describes, with the default project folders in this process's working folder and
    /// the user folders in `$HOME`.
    pub fn from_config(config: &Config) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| config.base_dir.clone());
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::from_config_in(config, &cwd, home.as_deref())
    }

    /// [`Self::from_config`] with the working folder and home folder given.
    pub fn from_config_in(config: &Config, cwd: &Path, home: Option<&Path>) -> Self {
        let section = &config.tools.skills;
        let paths: Vec<PathBuf> = section
            .paths
            .iter()
            .filter(|p| !p.trim().is_empty())
            .map(|p| absolute(&config.resolve_path(p.trim())))
            .collect();
        let mut defaults: Vec<Root> = PROJECT_DIRS
            .iter()
            .map(|dir| Root { path: absolute(&cwd.join(dir)), source: SkillSource::Project })
            .collect();
        if let Some(home) = home {
            defaults.extend(
                PROJECT_DIRS.iter().map(|dir| Root { path: absolute(&home.join(dir)), source: SkillSource::User }),
            );
        }
        let write_dir = match section.write_path.trim() {
            "" => paths.first().cloned().or_else(|| defaults.first().map(|root| root.path.clone())),
            written => Some(absolute(&config.resolve_path(written))),
        }
        .unwrap_or_else(|| absolute(&cwd.join(PROJECT_DIRS[0])));

        let mut roots = vec![Root { path: write_dir.clone(), source: SkillSource::Project }];
        if paths.is_empty() {
            roots.extend(defaults);
        } else {
            roots.extend(paths.into_iter().map(|path| Root { path, source: SkillSource::Project }));
        }
        let mut hidden_native = section.native_disabled.clone();
        if !section.install {
            hidden_native.push(INSTALL_SKILL.into());
        }
        if !config.orchestration.agent_management.write {
            hidden_native.push(CREATE_AGENT.into());
        }
        Self {
            enabled: section.enabled != Some(false),
            preload_catalog: section.preload_catalog,
            write_dir,
            roots: dedupe(roots),
            native: section.native,
            hidden_native,
            install: section.install,
        }
    }

    /// Settings over the given folders only (no bundled tier), for tests and tools that build their own.
    pub fn with_roots(write_dir: PathBuf, roots: Vec<Root>) -> Self {
        let mut all = vec![Root { path: write_dir.clone(), source: SkillSource::Project }];
        all.extend(roots);
        Self {
            enabled: true,
            preload_catalog: true,
            write_dir,
            roots: dedupe(all),
            native: false,
            hidden_native: Vec::new(),
            install: false,
        }
    }
}

/// The path made absolute without touching the disk (a folder that does not exist yet still counts).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Keeps the first of folders that are the same on disk (through links) or written the same.
fn dedupe(roots: Vec<Root>) -> Vec<Root> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for root in roots {
        let key = root.path.canonicalize().unwrap_or_else(|_| root.path.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(root);
    }
    out
}
