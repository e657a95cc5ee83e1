//! The skills that ship inside the binary (MiniBot's native tier), compiled in from `bundled/*/SKILL.md` so the
//! program needs no files beside it. They have no folder: their `skill_dir` is the virtual `bundled:<name>`.

/// One compiled-in skill.
pub struct BundledSkill {
    /// The `name` its frontmatter declares (checked by a test).
    pub name: &'static str,
    pub text: &'static str,
}

/// How a bundled skill's location is shown (`skill_dir`, `discovery_paths`).
pub const BUNDLED_PREFIX: &str = "bundled:";

/// Shown only with `[tools.skills] install = true`: without it the tool it describes does not exist.
pub const INSTALL_SKILL: &str = "install-skill";
/// Shown only with `[orchestration.agent_management] write = true`, for the same reason.
pub const CREATE_AGENT: &str = "create-agent";

pub const BUNDLED: &[BundledSkill] = &[
    BundledSkill { name: CREATE_AGENT, text: include_str!("../bundled/create-agent/SKILL.md") },
    BundledSkill { name: "create-skill", text: include_str!("../bundled/create-skill/SKILL.md") },
    BundledSkill { name: INSTALL_SKILL, text: include_str!("../bundled/install-skill/SKILL.md") },
    BundledSkill { name: "minibot-docs", text: include_str!("../bundled/minibot-docs/SKILL.md") },
];
