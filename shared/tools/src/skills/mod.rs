//! Skills (`[tools.skills]`): `list_skills` and `activate_skill` over the skill folders and the bundled skills,
//! and `install_skill` (main agent only, with `install = true`). The engine is the `minibot-skills` crate; these
//! are the model's views of it.

mod activate_skill;
mod install_skill;
mod list_skills;

pub use activate_skill::ActivateSkill;
pub use install_skill::InstallSkill;
pub use list_skills::ListSkills;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};
use minibot_skills::{Installer, SkillRegistry};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Adds the skill tools when skills are on: `list_skills` and `activate_skill` always, `install_skill` only
/// when `main_agent` and `[tools.skills] install = true` (a worker never installs).
pub fn register(registry: &mut ToolRegistry, services: &ToolServices, main_agent: bool) {
    let skills = Arc::new(SkillRegistry::from_config(&services.config));
    if !skills.settings().enabled {
        return;
    }
    let access = WriteAccess::of(services, skills.write_dir());
    registry.register(dyn_tool(ListSkills::new(Arc::clone(&skills), access)));
    registry.register(dyn_tool(ActivateSkill::new(Arc::clone(&skills))));
    if main_agent && skills.settings().install {
        let base = services.files.as_ref().map(|root| root.path().to_path_buf());
        let write_dir = skills.write_dir().to_path_buf();
        match Installer::new(skills) {
            Ok(installer) => registry.register(dyn_tool(InstallSkill::new(installer, base, write_dir))),
            Err(error) => tracing::warn!(%error, "install_skill is unavailable"),
        }
    }
}

/// Which tool can write into the skill write folder (`write_dir_access`), and the path that tool takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteAccess {
    /// `write_file`, `bash` or `unavailable`.
    pub access: &'static str,
    /// The folder as `write_file` expects it (relative inside the managed root, absolute outside).
    pub filesystem_path: Option<String>,
}

impl WriteAccess {
    /// `write_file` when the folder is inside the managed root (or the root allows outside paths), else
    /// `bash` when bash is on, else `unavailable`.
    pub fn of(services: &ToolServices, write_dir: &Path) -> Self {
        if let Some(root) = &services.files {
            let real = real_or_lexical(write_dir);
            if let Ok(rest) = real.strip_prefix(root.path()) {
                let relative = rest.to_string_lossy().replace('\\', "/");
                let shown = if relative.is_empty() { ".".to_string() } else { relative };
                return Self { access: "write_file", filesystem_path: Some(shown) };
            }
            if root.allow_outside_root() {
                return Self { access: "write_file", filesystem_path: Some(real.to_string_lossy().into_owned()) };
            }
        }
        let access = if services.config.tools.bash.enabled { "bash" } else { "unavailable" };
        Self { access, filesystem_path: None }
    }
}

/// The path with its longest existing ancestor resolved through links (the managed root is canonical), the
/// rest as written: the folder may not exist yet.
fn real_or_lexical(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return missing.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
