//! The tools a script can call: which of the agent's tools are exposed, the Python name of each, and the one-line
//! signatures the tool description lists.

use crate::protocol::ToolInfo;
use minibot_agent::{DynTool, Patterns, ToolRegistry};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The name of the tool this crate provides.
pub const TOOL_NAME: &str = "run_tools_script";

/// Tools a script never calls, and that stay direct tools of the agent: delegation hands work to other agents
/// and reports back to the turn; the skill tools and `self_insert_artifact` put content into the turn itself,
/// which a script result cannot carry.
pub const NEVER_EXPOSED: &[&str] = &[
    "delegate",
    "spawn_task",
    "fetch_agent_info",
    "list_tasks",
    "get_task",
    "cancel_task",
    "message_task",
    TOOL_NAME,
    "activate_skill",
    "list_skills",
    "self_insert_artifact",
];

/// About how many characters of signatures the tool description lists; the tools past it are named only.
pub const SIGNATURES_BUDGET: usize = 6_000;
/// Characters of a tool's description a signature line and `list_tools` repeat.
const SUMMARY_CHARS: usize = 120;

/// One tool a script can call.
pub struct Entry {
    /// The Python identifier: `tools.<ident>(...)`.
    pub ident: String,
    pub tool: Arc<dyn DynTool>,
    pub description: String,
    pub parameters: Arc<Value>,
    /// `ident(a: str, b: int = None)`.
    pub signature: String,
}

impl Entry {
    pub fn name(&self) -> &str {
        self.tool.name()
    }

    /// The first line of the description, shortened.
    pub fn summary(&self) -> String {
        summary(&self.description)
    }

    /// What the script's process knows of this tool.
    pub fn info(&self) -> ToolInfo {
        ToolInfo {
            ident: self.ident.clone(),
            name: self.name().to_string(),
            description: self.description.clone(),
            parameters: (*self.parameters).clone(),
            signature: self.signature.clone(),
        }
    }
}

/// The first line of a tool's description, shortened.
pub fn summary(description: &str) -> String {
    let line = description.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(SUMMARY_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The catalog as the script's process sees it: what each tool is called and how, without the tools.
#[derive(Default)]
pub struct ScriptTools {
    infos: Vec<ToolInfo>,
    by_ident: HashMap<String, usize>,
}

impl ScriptTools {
    pub fn new(infos: Vec<ToolInfo>) -> Self {
        let by_ident = infos.iter().enumerate().map(|(index, info)| (info.ident.clone(), index)).collect();
        Self { infos, by_ident }
    }

    pub fn entries(&self) -> &[ToolInfo] {
        &self.infos
    }

    /// By identifier, or by the tool's own name.
    pub fn find(&self, name: &str) -> Option<&ToolInfo> {
        match self.by_ident.get(name) {
            Some(&index) => self.infos.get(index),
            None => self.infos.iter().find(|info| info.name == name),
        }
    }
}

/// The tools one script can call, by identifier.
#[derive(Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    by_ident: HashMap<String, usize>,
}

impl Catalog {
    /// The tools of `registry` a script may call: all but [`NEVER_EXPOSED`] and those matching `exclude`. Two
    /// names that become one identifier keep the first tool.
    pub fn build(registry: &ToolRegistry, exclude: &Patterns) -> Self {
        let mut catalog = Self::default();
        for name in registry.names() {
            if !exposed(&name, exclude) {
                continue;
            }
            let Some(tool) = registry.get(&name) else { continue };
            let ident = python_ident(&name);
            if catalog.by_ident.contains_key(&ident) {
                tracing::warn!(tool = %name, ident = %ident, "two tools share one script name; the first is kept");
                continue;
            }
            let spec = tool.spec();
            let signature = signature(&ident, &spec.parameters);
            catalog.by_ident.insert(ident.clone(), catalog.entries.len());
            catalog.entries.push(Entry {
                ident,
                tool: Arc::clone(tool),
                description: spec.description,
                parameters: spec.parameters,
                signature,
            });
        }
        catalog
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// By identifier, or by the tool's own name.
    pub fn find(&self, name: &str) -> Option<&Entry> {
        match self.by_ident.get(name) {
            Some(&index) => self.entries.get(index),
            None => self.entries.iter().find(|entry| entry.name() == name),
        }
    }

    /// What the script's process knows of the tools.
    pub fn infos(&self) -> Vec<ToolInfo> {
        self.entries.iter().map(Entry::info).collect()
    }

    /// The tool names (not identifiers) a script can call.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|entry| entry.name().to_string()).collect()
    }

    /// One line per tool, `signature — summary`, up to about [`SIGNATURES_BUDGET`] characters; the tools past it
    /// are named only.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        let mut unlisted = Vec::new();
        for entry in &self.entries {
            let line = format!("- tools.{} — {}\n", entry.signature, entry.summary());
            if unlisted.is_empty() && out.len() + line.len() <= SIGNATURES_BUDGET {
                out.push_str(&line);
            } else {
                unlisted.push(entry.ident.as_str());
            }
        }
        if !unlisted.is_empty() {
            out.push_str(&format!("- also (describe_tool(name) gives their signatures): {}\n", unlisted.join(", ")));
        }
        out
    }
}

/// Whether a script may call the tool named `name`.
pub fn exposed(name: &str, exclude: &Patterns) -> bool {
    !NEVER_EXPOSED.contains(&name) && !exclude.matches(name)
}

/// `name` as a Python identifier: every character that cannot be in one becomes `_` (a leading digit too).
pub fn python_ident(name: &str) -> String {
    let mut ident: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        ident.insert(0, '_');
    }
    ident
}

/// `ident(a: str, b: int = 5, c: list[str] = None)` from a JSON schema: required parameters first as they are
/// listed, then the optional ones with their default (or `None`).
pub fn signature(ident: &str, schema: &Value) -> String {
    let empty = serde_json::Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut parameters = Vec::new();
    for (name, property) in properties.iter().filter(|(name, _)| required.contains(&name.as_str())) {
        parameters.push(format!("{name}: {}", python_type(property)));
    }
    for (name, property) in properties.iter().filter(|(name, _)| !required.contains(&name.as_str())) {
        let default = property.get("default").map_or_else(|| "None".to_string(), python_literal);
        parameters.push(format!("{name}: {} = {default}", python_type(property)));
    }
    if properties.is_empty() && schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        parameters.push("**kwargs".into());
    }
    format!("{ident}({})", parameters.join(", "))
}

fn python_type(schema: &Value) -> String {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = options.iter().take(6).map(python_literal).collect();
        let more = if options.len() > 6 { ", …" } else { "" };
        return format!("Literal[{}{more}]", shown.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return union(options.iter().map(python_type));
        }
    }
    match schema.get("type") {
        Some(Value::Array(types)) => union(types.iter().map(|t| single_type(t.as_str().unwrap_or(""), schema))),
        Some(Value::String(t)) => single_type(t, schema),
        _ => "Any".into(),
    }
}

fn single_type(name: &str, schema: &Value) -> String {
    match name {
        "string" => "str".into(),
        "integer" => "int".into(),
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" => match schema.get("items") {
            Some(items) => format!("list[{}]", python_type(items)),
            None => "list".into(),
        },
        "object" => "dict".into(),
        _ => "Any".into(),
    }
}

fn union(types: impl Iterator<Item = String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for t in types {
        if !unique.contains(&t) {
            unique.push(t);
        }
    }
    if unique.is_empty() { "Any".into() } else { unique.join(" | ") }
}

fn python_literal(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => format!("{s:?}"),
        other => {
            let text = other.to_string();
            if text.len() > 40 { "…".into() } else { text }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_become_identifiers() {
        assert_eq!(python_ident("mcp_exa__web_search"), "mcp_exa__web_search");
        assert_eq!(python_ident("my-tool.v2"), "my_tool_v2");
        assert_eq!(python_ident("2fa"), "_2fa");
    }

    #[test]
    fn signatures_come_from_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "format": {"type": ["string", "null"]},
                "query": {"type": "string"},
                "limit": {"type": "integer", "default": 5},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["a", "b"]}
            },
            "required": ["query"]
        });
        assert_eq!(
            signature("search", &schema),
            "search(query: str, format: str | None = None, limit: int = 5, mode: Literal[\"a\", \"b\"] = None, \
             tags: list[str] = None)"
        );
        assert_eq!(signature("open", &json!({"type": "object"})), "open(**kwargs)");
        assert_eq!(
            signature("closed", &json!({"type": "object", "properties": {}, "additionalProperties": false})),
            "closed()"
        );
    }
}
