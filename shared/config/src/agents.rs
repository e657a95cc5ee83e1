//! Specialist definition files: `<orchestration.directory>/*.md`, MiniBot's format. A file starts with a `---`
//! line, then a frontmatter block in a small YAML subset, a closing `---` line, and the system prompt as the
//! body. The subset is MiniBot's: top-level `key: value` scalars, and a key with no value opens a block of
//! 2-space-indented `- item` lines (a list) or `k: v` lines (a map). No flow lists, no inline comments.

use crate::{ConfigError, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One specialist.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDefinition {
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub model_provider: Option<String>,
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub omit_temperature: bool,
    pub max_new_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    pub max_tool_iterations: Option<u32>,
    pub timeout_seconds: Option<u64>,
    pub tools_allow: Vec<String>,
    pub tools_deny: Vec<String>,
    pub mcp_servers: Vec<String>,
    pub openrouter_reasoning_enabled: Option<bool>,
    /// `openrouter_provider_<field>` keys, by field.
    pub openrouter_provider: BTreeMap<String, String>,
    /// Worker labels a worker must offer (`[worker] labels`) to take this specialist's tasks.
    pub requires: Vec<String>,
    /// The body: the specialist's system prompt.
    pub system_prompt: String,
    pub path: PathBuf,
    /// The version of the file ([`minibot_protocol::definition_hash`] of its bytes): a task carries it, and a
    /// worker holding another version refuses the task.
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Scalar(String),
    List(Vec<String>),
    Map(BTreeMap<String, String>),
}

/// Every enabled specialist in `dir`, by file name. A missing folder means none.
pub fn load_agents(dir: &Path) -> Result<Vec<AgentDefinition>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    let mut agents: Vec<AgentDefinition> = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ConfigError::Agent { path: path.clone(), message: format!("cannot read: {e}") })?;
        let agent = parse_agent(&text, &path)?;
        if let Some(other) = agents.iter().find(|a| a.name == agent.name) {
            return Err(ConfigError::Agent {
                path: path.clone(),
                message: format!("agent name `{}` is already defined in {}", agent.name, other.path.display()),
            });
        }
        if agent.enabled {
            agents.push(agent);
        }
    }
    Ok(agents)
}

pub fn parse_agent(text: &str, path: &Path) -> Result<AgentDefinition> {
    let fail = |message: String| ConfigError::Agent { path: path.to_path_buf(), message };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(fail("must start with a `---` line, then the frontmatter, then another `---` line".into()));
    }
    let mut front = Vec::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        front.push(line);
    }
    if !closed {
        return Err(fail("the frontmatter has no closing `---` line".into()));
    }
    let body: String = lines.collect::<Vec<_>>().join("\n").trim().to_string();
    if body.is_empty() {
        return Err(fail("the body (the agent's system prompt) is empty".into()));
    }
    let values = parse_frontmatter(&front).map_err(fail)?;
    let mut agent = build(values, body, path)?;
    agent.hash = minibot_protocol::definition_hash(text.as_bytes());
    Ok(agent)
}

fn parse_frontmatter(lines: &[&str]) -> std::result::Result<BTreeMap<String, Value>, String> {
    let mut values = BTreeMap::new();
    let mut open: Option<String> = None;
    for (index, raw) in lines.iter().enumerate() {
        let number = index + 2;
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        if raw.starts_with(' ') || raw.starts_with('\t') {
            let Some(key) = open.as_ref() else {
                return Err(format!("line {number}: indented line without a key above it"));
            };
            let item = raw.trim();
            let slot = values.get_mut(key).ok_or_else(|| format!("line {number}: no open key"))?;
            if let Some(rest) = item.strip_prefix("- ").or_else(|| (item == "-").then_some("")) {
                match slot {
                    Value::List(list) => list.push(unquote(rest.trim())),
                    Value::Scalar(s) if s.is_empty() => *slot = Value::List(vec![unquote(rest.trim())]),
                    _ => return Err(format!("line {number}: list item under `{key}`, which holds key-value pairs")),
                }
            } else if let Some((k, v)) = item.split_once(':') {
                match slot {
                    Value::Map(map) => {
                        map.insert(k.trim().to_string(), unquote(v.trim()));
                    }
                    Value::Scalar(s) if s.is_empty() => {
                        *slot = Value::Map(BTreeMap::from([(k.trim().to_string(), unquote(v.trim()))]));
                    }
                    _ => return Err(format!("line {number}: `{k}:` under `{key}`, which holds a list")),
                }
            } else {
                return Err(format!("line {number}: expected `- item` or `key: value` under `{key}`"));
            }
            continue;
        }
        let Some((key, value)) = raw.split_once(':') else {
            return Err(format!("line {number}: expected `key: value`, found `{}`", raw.trim()));
        };
        let key = key.trim().to_string();
        if values.contains_key(&key) {
            return Err(format!("line {number}: `{key}` is given twice"));
        }
        let value = value.trim();
        open = value.is_empty().then(|| key.clone());
        values.insert(key, Value::Scalar(value.to_string()));
    }
    Ok(values)
}

fn unquote(text: &str) -> String {
    let quoted = text.len() >= 2
        && ((text.starts_with('"') && text.ends_with('"')) || (text.starts_with('\'') && text.ends_with('\'')));
    if quoted { text[1..text.len() - 1].to_string() } else { text.to_string() }
}

const KEYS: &[&str] = &[
    "name",
    "description",
    "mode",
    "enabled",
    "model_provider",
    "model",
    "temperature",
    "omit_temperature",
    "max_new_tokens",
    "reasoning_effort",
    "max_tool_iterations",
    "timeout_seconds",
    "tools_allow",
    "tools_deny",
    "mcp_servers",
    "openrouter_reasoning_enabled",
    "requires",
];

fn build(values: BTreeMap<String, Value>, body: String, path: &Path) -> Result<AgentDefinition> {
    let fail = |message: String| ConfigError::Agent { path: path.to_path_buf(), message };
    let unknown: Vec<&str> = values
        .keys()
        .map(String::as_str)
        .filter(|k| !KEYS.contains(k) && !k.starts_with("openrouter_provider_"))
        .collect();
    if !unknown.is_empty() {
        return Err(fail(format!("unknown frontmatter keys: {} (known: {})", unknown.join(", "), KEYS.join(", "))));
    }
    let scalar = |key: &str| -> std::result::Result<Option<String>, ConfigError> {
        match values.get(key) {
            None => Ok(None),
            Some(Value::Scalar(s)) if s.is_empty() => Ok(None),
            Some(Value::Scalar(s)) => Ok(Some(unquote(s))),
            Some(_) => Err(fail(format!("`{key}` must be a single value"))),
        }
    };
    let list = |key: &str| -> std::result::Result<Vec<String>, ConfigError> {
        match values.get(key) {
            None => Ok(Vec::new()),
            Some(Value::List(items)) => Ok(items.clone()),
            Some(Value::Scalar(s)) if s.is_empty() => Ok(Vec::new()),
            Some(Value::Scalar(s)) => {
                Err(fail(format!("`{key}` must be a list written as indented `- item` lines, not `{s}`")))
            }
            Some(Value::Map(_)) => Err(fail(format!("`{key}` must be a list"))),
        }
    };
    let boolean = |key: &str| -> std::result::Result<Option<bool>, ConfigError> {
        match scalar(key)?.as_deref() {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(fail(format!("`{key}` must be true or false, not `{other}`"))),
        }
    };
    fn number<T: std::str::FromStr>(key: &str, value: Option<String>, path: &Path) -> Result<Option<T>> {
        value
            .map(|v| {
                v.parse::<T>().map_err(|_| ConfigError::Agent {
                    path: path.to_path_buf(),
                    message: format!("`{key}` must be a number, not `{v}`"),
                })
            })
            .transpose()
    }
    let name = scalar("name")?.ok_or_else(|| fail("`name` is required".into()))?;
    if !(3..=30).contains(&name.len()) || !name.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
        tracing::warn!(path = %path.display(), name = %name, "agent names should be 3-30 letters or underscores");
    }
    if let Some(mode) = scalar("mode")?
        && mode != "agent"
    {
        return Err(fail(format!("`mode` must be `agent`, not `{mode}`")));
    }
    let tools_allow = list("tools_allow")?;
    let tools_deny = list("tools_deny")?;
    if !tools_allow.is_empty() && !tools_deny.is_empty() {
        return Err(fail("set either tools_allow or tools_deny, not both".into()));
    }
    let requires = list("requires")?;
    if let Some(bad) = requires.iter().find(|label| !valid_label(label)) {
        return Err(fail(format!("`requires` label `{bad}` must be letters, digits, `-`, `_` or `.`")));
    }
    let mut openrouter_provider = BTreeMap::new();
    for (key, value) in &values {
        if let (Some(field), Value::Scalar(v)) = (key.strip_prefix("openrouter_provider_"), value) {
            openrouter_provider.insert(field.to_string(), unquote(v));
        }
    }
    Ok(AgentDefinition {
        description: scalar("description")?.unwrap_or_default(),
        enabled: boolean("enabled")?.unwrap_or(true),
        model_provider: scalar("model_provider")?,
        model: scalar("model")?,
        temperature: number("temperature", scalar("temperature")?, path)?,
        omit_temperature: boolean("omit_temperature")?.unwrap_or(false),
        max_new_tokens: number("max_new_tokens", scalar("max_new_tokens")?, path)?,
        reasoning_effort: scalar("reasoning_effort")?,
        max_tool_iterations: number("max_tool_iterations", scalar("max_tool_iterations")?, path)?,
        timeout_seconds: number("timeout_seconds", scalar("timeout_seconds")?, path)?,
        tools_allow,
        tools_deny,
        mcp_servers: list("mcp_servers")?,
        openrouter_reasoning_enabled: boolean("openrouter_reasoning_enabled")?,
        openrouter_provider,
        requires,
        system_prompt: body,
        path: path.to_path_buf(),
        hash: String::new(),
        name,
    })
}

/// A worker label (`[worker] labels`, a specialist's `requires`): it becomes part of queue names and log lines.
pub fn valid_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 64
        && label.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl AgentDefinition {
    /// This specialist's `openrouter_*` keys over the config's `[llm.openrouter]`: its reasoning switch, and each
    /// `openrouter_provider_<field>` as that field of the routing object. A value is read as JSON when it is
    /// JSON (`true`, `3`, `["a", "b"]`), else as text, since the file format writes every value as a scalar.
    pub fn apply_openrouter(&self, section: &mut crate::OpenRouterSection) {
        if let Some(enabled) = self.openrouter_reasoning_enabled {
            section.reasoning_enabled = Some(enabled);
        }
        for (field, text) in &self.openrouter_provider {
            let value = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|json| toml::Value::try_from(json).ok())
                .unwrap_or_else(|| toml::Value::String(text.clone()));
            section.provider.provider_extra.insert(field.clone(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentDefinition> {
        parse_agent(text, Path::new("agents/x.md"))
    }

    #[test]
    fn minibot_format() {
        let agent = parse(
            "---\nname: researcher\ndescription: \"Finds things\"\n# a comment\ntimeout_seconds: 600\n\
             tools_allow:\n  - http_request\n  - current_datetime\nmcp_servers:\n  - web\n---\n\nYou research.\n",
        )
        .expect("parses");
        assert_eq!(agent.name, "researcher");
        assert_eq!(agent.description, "Finds things");
        assert_eq!(agent.timeout_seconds, Some(600));
        assert_eq!(agent.tools_allow, ["http_request", "current_datetime"]);
        assert_eq!(agent.mcp_servers, ["web"]);
        assert_eq!(agent.system_prompt, "You research.");
        assert!(agent.requires.is_empty());
        assert_eq!(agent.hash.len(), 16);
    }

    #[test]
    fn requires_and_the_version_hash() {
        let text = "---\nname: renderer\nrequires:\n  - gpu\n  - big-disk\n---\nYou render.\n";
        let agent = parse(text).expect("parses");
        assert_eq!(agent.requires, ["gpu", "big-disk"]);
        let edited = parse(&text.replace("You render.", "You render fast.")).expect("parses");
        assert_ne!(agent.hash, edited.hash, "any edit is a new version");
        assert_eq!(agent.hash, parse(text).expect("parses").hash);
        let err = parse("---\nname: renderer\nrequires:\n  - a b\n---\nx").expect_err("bad label").to_string();
        assert!(err.contains("`requires` label `a b`"), "{err}");
    }

    #[test]
    fn bad_files_are_named_errors() {
        let cases = [
            ("name: x\n---\nbody", "must start with"),
            ("---\nname: x\nbody", "no closing"),
            ("---\nname: researcher\ntools: [a]\n---\nbody", "unknown frontmatter keys: tools"),
            ("---\nname: researcher\n---\n\n", "body"),
            ("---\ndescription: d\n---\nbody", "`name` is required"),
            ("---\nname: researcher\ntools_allow: [a, b]\n---\nbody", "indented `- item`"),
            ("---\nname: researcher\ntimeout_seconds: soon\n---\nbody", "must be a number"),
        ];
        for (text, expected) in cases {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(expected) && err.contains("agents/x.md"), "{text:?} → {err}");
        }
    }
}
