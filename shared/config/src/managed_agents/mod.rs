//! Model-authored ("managed") specialists: definitions the main agent writes with `create_agent` and
//! `update_agent` into `[orchestration.agent_management] directory`, one `<name>.md` file each, in the same format
//! as the owner's files ([`crate::parse_agent`]).
//!
//! A managed definition is never more powerful than the owner's ceiling ([`check_ceiling`]): it names exact tools
//! the ceiling's patterns allow, claims only listed MCP servers, targets only listed providers, and never uses
//! `tools_deny`. The orchestrator checks a definition before writing it and when it reads the folder; a worker
//! checks it again, against its own config, before running it ([`check_for_worker`]). Owner-authored files are
//! not held to the ceiling.
//!
//! Files are written atomically and only ever inside the managed folder ([`files`]).

mod ceiling;
pub mod files;

pub use ceiling::{MANAGEMENT_TOOLS, RESERVED_DELEGATION_TOOLS, check_ceiling, check_override_provider};

use crate::{AgentDefinition, Config, ConfigError, parse_agent};
use std::path::{Path, PathBuf};

/// The longest definition (frontmatter and prompt) a managed agent may have, in bytes: it travels inside every
/// task envelope of that agent.
pub const MAX_DEFINITION_BYTES: usize = 64 * 1024;

/// Why a managed definition was refused. Each variant is a different thing for the model to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagedError {
    #[error("`{0}` is not a valid managed agent name: use 3 to 30 letters (a-z, A-Z) or underscores")]
    InvalidName(String),
    #[error("the definition's frontmatter names `{found}`, but the call names `{expected}`; they must be equal")]
    NameMismatch { expected: String, found: String },
    #[error("the definition is {0} bytes; a managed definition may have at most {MAX_DEFINITION_BYTES}")]
    TooLarge(usize),
    #[error("the definition does not parse: {0}")]
    Unparsable(String),
    #[error("the definition exceeds the managed-agent ceiling ([orchestration.agent_management]): {}", .0.join("; "))]
    Ceiling(Vec<String>),
    #[error("`{0}` is the name of an owner-authored specialist or of the main agent; choose another name")]
    Collision(String),
    #[error("agent management is off in this config ([orchestration.agent_management] reload and write are false)")]
    Disabled,
}

impl ManagedError {
    /// A stable code for tool results.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidName(_) => "agent_management:invalid_name",
            Self::NameMismatch { .. } => "agent_management:name_mismatch",
            Self::TooLarge(_) => "agent_management:too_large",
            Self::Unparsable(_) => "agent_management:invalid_definition",
            Self::Ceiling(_) => "agent_management:ceiling",
            Self::Collision(_) => "agent_management:name_collision",
            Self::Disabled => "agent_management:disabled",
        }
    }
}

/// A managed definition as read or written: the parsed agent and the exact text it was parsed from (a task of
/// the agent carries that text, and its hash is the agent's version).
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedDefinition {
    pub agent: AgentDefinition,
    pub text: String,
}

/// Whether the config reads the managed folder at all (`reload` or `write`).
pub fn enabled(config: &Config) -> bool {
    let management = &config.orchestration.agent_management;
    management.reload || management.write
}

/// The managed folder, resolved against the config's folder.
pub fn directory(config: &Config) -> PathBuf {
    config.resolve_path(&config.orchestration.agent_management.directory)
}

/// Refuses a managed folder that is, holds or lies inside the owner's agents folder: a model-authored file must
/// never be read as the owner's, nor an owner's file be rewritten or deleted as a managed one.
pub fn check_directories(config: &Config) -> Result<(), String> {
    let managed = lexical(&directory(config));
    let owner = lexical(&config.resolve_path(&config.orchestration.directory));
    if managed.starts_with(&owner) || owner.starts_with(&managed) {
        let file = config.source.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default();
        return Err(format!(
            "{file}[orchestration.agent_management] directory ({}) must not overlap [orchestration] directory ({})",
            managed.display(),
            owner.display()
        ));
    }
    Ok(())
}

/// `path` with `.` dropped and `..` applied to the part before it, so `x/../agents` compares as `agents`.
fn lexical(path: &std::path::Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// MiniBot's strict rule for managed names, `^[a-zA-Z_]{3,30}$`: the name is also the file's stem, so it can
/// never hold a path separator or a dot.
pub fn valid_name(name: &str) -> bool {
    (3..=30).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
}

/// Parses `text` as the managed definition `name` and checks the name rules and the ceiling. Nothing is read
/// from or written to disk; `owner_names` are the owner-authored specialists (a managed agent may not take
/// their names, nor the main agent's).
pub fn prepare(
    config: &Config,
    name: &str,
    text: &str,
    owner_names: &[String],
) -> Result<ManagedDefinition, ManagedError> {
    if !valid_name(name) {
        return Err(ManagedError::InvalidName(name.to_string()));
    }
    if text.len() > MAX_DEFINITION_BYTES {
        return Err(ManagedError::TooLarge(text.len()));
    }
    let path = directory(config).join(format!("{name}.md"));
    let agent = parse_agent(text, &path).map_err(|e| ManagedError::Unparsable(parse_message(&e)))?;
    if agent.name != name {
        return Err(ManagedError::NameMismatch { expected: name.to_string(), found: agent.name });
    }
    check_name_free(config, name, owner_names)?;
    check_ceiling(config, &agent)?;
    Ok(ManagedDefinition { agent, text: text.to_string() })
}

/// Refuses a managed name that an owner-authored specialist or the main agent already has.
pub fn check_name_free(config: &Config, name: &str, owner_names: &[String]) -> Result<(), ManagedError> {
    if owner_names.iter().any(|owner| owner.eq_ignore_ascii_case(name))
        || config.orchestration.main_agent.name.eq_ignore_ascii_case(name)
    {
        return Err(ManagedError::Collision(name.to_string()));
    }
    Ok(())
}

/// A worker's check of a definition a task carries: the worker's own config must enable agent management, and
/// the definition must pass the worker's own ceiling and name rules, with the task's provider override.
/// `owner_names` are the worker's own owner-authored specialists.
pub fn check_for_worker(
    config: &Config,
    name: &str,
    text: &str,
    override_provider: Option<&str>,
    owner_names: &[String],
) -> Result<ManagedDefinition, ManagedError> {
    if !enabled(config) {
        return Err(ManagedError::Disabled);
    }
    let definition = prepare(config, name, text, owner_names)?;
    if let Some(provider) = override_provider.filter(|p| !p.is_empty()) {
        check_override_provider(config, provider)?;
    }
    Ok(definition)
}

/// The parser's message without the file name it prefixes (the model wrote text, not a file).
fn parse_message(error: &ConfigError) -> String {
    match error {
        ConfigError::Agent { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The file of managed agent `name` in `dir`. Only valid names make a path, so it never leaves `dir`.
pub fn file_of(dir: &Path, name: &str) -> Option<PathBuf> {
    valid_name(name).then(|| dir.join(format!("{name}.md")))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
