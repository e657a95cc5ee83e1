//! System prompt composition. The default texts are compiled into the binary so the program runs from any
//! folder; a file of the same relative name under the configured prompts folder overrides each of them.
//!
//! Order, joined by blank lines: base prompt → policies (sorted by name) → extra fragments (roster, MCP
//! instructions, …) → channel fragment → environment fragment.

use std::path::{Path, PathBuf};

const BUILTIN: &[(&str, &str)] = &[
    ("main_agent_system.md", include_str!("../../../prompts/main_agent_system.md")),
    ("delegation.md", include_str!("../../../prompts/delegation.md")),
    ("policies/tool_usage.md", include_str!("../../../prompts/policies/tool_usage.md")),
    ("channels/console.md", include_str!("../../../prompts/channels/console.md")),
    ("channels/telegram.md", include_str!("../../../prompts/channels/telegram.md")),
    ("channels/web.md", include_str!("../../../prompts/channels/web.md")),
    ("compact.md", include_str!("../../../prompts/compact.md")),
];

/// Where prompt texts come from: the override folder first, then the built-in copy.
#[derive(Debug, Clone)]
pub struct PromptLibrary {
    overrides: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
#[error("prompt file {path}: {reason}")]
pub struct PromptError {
    pub path: PathBuf,
    pub reason: String,
}

impl PromptLibrary {
    pub fn new(overrides: Option<PathBuf>) -> Self {
        Self { overrides: overrides.filter(|dir| dir.is_dir()) }
    }

    /// The text of `name` (for example `channels/console.md`): the override when present, else built-in.
    pub fn get(&self, name: &str) -> Result<Option<String>, PromptError> {
        if let Some(dir) = &self.overrides {
            let path = dir.join(name);
            if path.is_file() {
                return read(&path).map(Some);
            }
        }
        Ok(BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, text)| (*text).to_string()))
    }

    /// Every policy fragment: built-in ones and `policies/*.md` of the override folder, sorted by name.
    pub fn policies(&self) -> Result<Vec<String>, PromptError> {
        let mut names: Vec<String> =
            BUILTIN.iter().filter_map(|(n, _)| n.strip_prefix("policies/").map(str::to_string)).collect();
        if let Some(dir) = &self.overrides
            && let Ok(entries) = std::fs::read_dir(dir.join("policies"))
        {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if name.ends_with(".md") && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if let Some(text) = self.get(&format!("policies/{name}"))? {
                out.push(text);
            }
        }
        Ok(out)
    }
}

pub fn read(path: &Path) -> Result<String, PromptError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| PromptError { path: path.to_path_buf(), reason: e.to_string() })?;
    if text.trim().is_empty() {
        return Err(PromptError { path: path.to_path_buf(), reason: "the file is empty".into() });
    }
    Ok(text)
}

/// The main agent's base prompt: `[llm].system_prompt_file` when set (it must exist), else
/// `<prompts_dir>/main_agent_system.md` when present, else `[llm].system_prompt` when set, else built-in.
pub fn main_base_prompt(config: &minibot_config::Config, library: &PromptLibrary) -> Result<String, PromptError> {
    if let Some(file) = &config.llm.system_prompt_file {
        let path = config.resolve_path(file);
        return read(&path)
            .map_err(|e| PromptError { path: e.path, reason: format!("{} (llm.system_prompt_file)", e.reason) });
    }
    let override_path = config.resolve_path(&config.llm.prompts_dir).join("main_agent_system.md");
    if override_path.is_file() {
        return read(&override_path);
    }
    if let Some(prompt) = config.llm.system_prompt.as_ref().filter(|p| !p.trim().is_empty()) {
        return Ok(prompt.clone());
    }
    Ok(library.get("main_agent_system.md")?.unwrap_or_default())
}

/// Version, working directory and config path, so the model can answer questions about its setup.
pub fn environment_fragment(config: &minibot_config::Config) -> String {
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
    format!(
        "Environment: minibot {} (Rust). Working directory: {cwd}. Config: {}.",
        env!("CARGO_PKG_VERSION"),
        config.origin()
    )
}

/// Builds a system prompt from its parts.
#[derive(Debug, Default)]
pub struct PromptBuilder {
    parts: Vec<String>,
}

impl PromptBuilder {
    pub fn new(base: impl Into<String>) -> Self {
        let mut builder = Self::default();
        builder.push(base);
        builder
    }

    pub fn push(&mut self, part: impl Into<String>) -> &mut Self {
        let part = part.into();
        let trimmed = part.trim();
        if !trimmed.is_empty() {
            self.parts.push(trimmed.to_string());
        }
        self
    }

    pub fn build(&self) -> String {
        self.parts.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_folder_wins_and_adds_policies() {
        let dir = std::env::temp_dir().join(format!("minibot-prompts-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("policies")).expect("dir");
        std::fs::write(dir.join("channels").with_extension(""), "").ok();
        std::fs::write(dir.join("policies/zz_house.md"), "House rules.").expect("write");
        std::fs::write(dir.join("main_agent_system.md"), "You are Pat.").expect("write");
        let library = PromptLibrary::new(Some(dir.clone()));
        assert_eq!(library.get("main_agent_system.md").ok().flatten().as_deref(), Some("You are Pat."));
        let policies = library.policies().expect("policies");
        assert_eq!(policies.last().map(String::as_str), Some("House rules."));
        assert!(library.get("channels/console.md").ok().flatten().is_some(), "built-in fallback");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn delegation_policy_is_built_in_and_can_be_overridden() {
        let builtin = PromptLibrary::new(None).get("delegation.md").expect("read").expect("built in");
        assert_eq!(builtin, include_str!("../../../prompts/delegation.md"));
        assert!(builtin.contains("spawn_task"), "{builtin}");

        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("delegation.md"), "Delegate sparingly.").expect("write");
        let library = PromptLibrary::new(Some(dir.path().to_path_buf()));
        assert_eq!(library.get("delegation.md").expect("read").as_deref(), Some("Delegate sparingly."));
    }
}
