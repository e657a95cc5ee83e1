//! Agent skills (MiniBot's `[tools.skills]`): folders holding a `SKILL.md`, frontmatter plus instructions the
//! model loads on demand.
//!
//! - [`SkillSettings`] resolves the config into discovery folders, in priority order, and the bundled skills
//!   to hide; [`SkillRegistry`] holds the skills found there plus the [`bundled`] ones, re-read when a
//!   `SKILL.md` changes, ranks them for `list_skills` ([`rank`]) and writes the system prompt's catalog
//!   ([`SkillRegistry::catalog_prompt`], or [`catalog_prompt`] straight from a config).
//! - [`line`] holds names and descriptions to one line of the catalog, whoever wrote them.
//! - [`frontmatter`] is the `SKILL.md` parser, MiniBot's minimal one rather than YAML.
//! - [`install`] previews and installs published skills from GitHub, an archive URL or a local path.
//!
//! ```no_run
//! # fn demo(config: &minibot_config::Config) {
//! let registry = minibot_skills::SkillRegistry::from_config(config);
//! for skill in registry.search(Some("pdf")).matches {
//!     println!("{}: {}", skill.name, skill.description);
//! }
//! # }
//! ```

pub mod bundled;
pub mod frontmatter;
pub mod install;
pub mod line;
pub mod rank;
mod registry;
mod settings;

pub use install::{InstallError, InstallRequest, Installer, Outcome};
pub use rank::Ranked;
pub use registry::{MAX_RESOURCES, Skill, SkillRegistry, describe};
pub use settings::{Root, SkillSettings, SkillSource};

/// The skill catalog for the main agent's system prompt, from the config: `None` when skills are off,
/// `preload_catalog` is off, or no skill is available. The caller adds it only when the agent has
/// `activate_skill` (a specialist never gets it). Reads the skill folders now; build a [`SkillRegistry`] once
/// and call [`SkillRegistry::catalog_prompt`] to re-read only what changed.
pub fn catalog_prompt(config: &minibot_config::Config) -> Option<String> {
    SkillRegistry::from_config(config).catalog_prompt()
}
