//! The agent-management tools: `reload_agents` (`[orchestration.agent_management] reload`) and `create_agent`,
//! `update_agent`, `delete_agent` (`write`). They check the model's arguments and hand the work to an
//! [`AgentService`], which the orchestrator implements over its roster of specialists; every call answers
//! MiniBot's `{ok, action, names, added, removed, updated, [name], [error]}`.

mod create_agent;
mod delete_agent;
mod reload_agents;
mod update_agent;

pub use create_agent::CreateAgent;
pub use delete_agent::DeleteAgent;
pub use reload_agents::ReloadAgents;
pub use update_agent::UpdateAgent;

use futures_util::future::BoxFuture;
use minibot_agent::{ToolRegistry, dyn_tool};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// What a change did to the roster of specialists: every name on it afterwards, and which names came, went or
/// changed version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RosterChange {
    pub names: Vec<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub updated: Vec<String>,
}

/// A change that did not happen: a stable code, what to fix, and the roster as it stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRefused {
    pub code: String,
    pub message: String,
    pub names: Vec<String>,
}

pub type ChangeResult = Result<RosterChange, ChangeRefused>;

/// What the orchestrator offers the management tools. A write is checked against the managed-agent ceiling
/// before anything touches the disk, and a successful call has refreshed the roster by the time it answers.
pub trait AgentService: Send + Sync {
    /// Reads the owner's and the managed definitions again; a folder that does not load keeps the old roster.
    fn reload(&self) -> BoxFuture<'_, ChangeResult>;
    fn create<'a>(&'a self, name: &'a str, definition: &'a str) -> BoxFuture<'a, ChangeResult>;
    fn update<'a>(&'a self, name: &'a str, definition: &'a str) -> BoxFuture<'a, ChangeResult>;
    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ChangeResult>;
}

/// Adds `reload_agents` when `reload` is on, and the three writing tools when `write` is on.
pub fn register(registry: &mut ToolRegistry, service: Arc<dyn AgentService>, config: &Config) {
    let management = &config.orchestration.agent_management;
    if management.reload {
        registry.register(dyn_tool(ReloadAgents::new(service.clone())));
    }
    if management.write {
        registry.register(dyn_tool(CreateAgent::new(service.clone())));
        registry.register(dyn_tool(UpdateAgent::new(service.clone())));
        registry.register(dyn_tool(DeleteAgent::new(service)));
    }
}

/// The arguments of `create_agent` and `update_agent`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefinitionArgs {
    name: String,
    definition: String,
}

fn definition_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "The agent's name: 3-30 letters or underscores, equal to the `name` in the definition's frontmatter." },
            "definition": { "type": "string", "description": "The whole definition file: a `---` line, the frontmatter, a `---` line, then the system prompt." }
        },
        "required": ["name", "definition"],
        "additionalProperties": false
    })
}

/// What the model reads back.
fn answer(action: &str, name: Option<&str>, outcome: ChangeResult) -> Value {
    let mut out = match outcome {
        Ok(change) => json!({
            "ok": true, "action": action, "names": change.names, "added": change.added,
            "removed": change.removed, "updated": change.updated,
        }),
        Err(refused) => json!({
            "ok": false, "action": action, "names": refused.names, "added": [], "removed": [], "updated": [],
            "error_code": refused.code, "error": refused.message,
        }),
    };
    if let Some(name) = name {
        out["name"] = json!(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_have_minibots_shape() {
        let change =
            RosterChange { names: vec!["a".into(), "b".into()], added: vec!["b".into()], ..Default::default() };
        let ok = answer("create", Some("b"), Ok(change));
        assert_eq!(
            ok,
            json!({ "ok": true, "action": "create", "name": "b", "names": ["a", "b"], "added": ["b"], "removed": [],
                    "updated": [] })
        );
        let refused = ChangeRefused { code: "c".into(), message: "why".into(), names: vec!["a".into()] };
        let failed = answer("reload", None, Err(refused));
        assert_eq!(failed["ok"], false);
        assert_eq!(failed["error"], "why");
        assert_eq!(failed["names"], json!(["a"]));
        assert!(failed.get("name").is_none());
    }
}
