//! The specialists the main agent can delegate to: the owner's files (`[orchestration] directory`) and, with
//! agent management on, the model-authored ones (`[orchestration.agent_management] directory`). Read at start-up
//! and again by `reload_agents`; a managed write changes its one entry. The whole roster is swapped at once, and
//! every swap bumps a generation, so whoever caches something built from it (the system prompt, tool ownership)
//! knows to build it again.

use minibot_config::managed_agents::{self, ManagedDefinition};
use minibot_config::{AgentDefinition, Config, check_agents, load_agents};
use minibot_tools::agents::RosterChange;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// One version of the roster.
#[derive(Debug, Clone, Default)]
pub struct Roster {
    /// The owner's specialists, by file name.
    pub owner: Vec<AgentDefinition>,
    /// The managed ones, by name; empty while agent management is off.
    pub managed: Vec<ManagedDefinition>,
}

impl Roster {
    /// Reads both folders now. Any file that does not load fails the whole read, with its path and reason.
    pub fn load(config: &Config) -> Result<Self, String> {
        if !config.specialists_enabled() {
            return Ok(Self::default());
        }
        let owner = load_agents(&config.resolve_path(&config.orchestration.directory)).map_err(|e| e.to_string())?;
        check_agents(config, &owner).map_err(|e| e.to_string())?;
        if !managed_agents::enabled(config) {
            return Ok(Self { owner, managed: Vec::new() });
        }
        managed_agents::check_directories(config)?;
        let owner_names: Vec<String> = owner.iter().map(|a| a.name.clone()).collect();
        let managed = managed_agents::files::load(config, &owner_names).map_err(|e| e.to_string())?;
        let agents: Vec<AgentDefinition> = managed.iter().map(|m| m.agent.clone()).collect();
        check_agents(config, &agents).map_err(|e| e.to_string())?;
        Ok(Self { owner, managed })
    }

    /// Every specialist, the owner's first.
    pub fn agents(&self) -> Vec<AgentDefinition> {
        self.owner.iter().cloned().chain(self.managed.iter().map(|m| m.agent.clone())).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.versions().into_keys().collect()
    }

    /// Names and descriptions, the owner's first, for the system prompt and the task tools.
    pub fn entries(&self) -> Vec<(String, String)> {
        self.agents().into_iter().map(|a| (a.name, a.description)).collect()
    }

    pub fn managed(&self, name: &str) -> Option<&ManagedDefinition> {
        self.managed.iter().find(|m| m.agent.name == name)
    }

    pub fn owner_names(&self) -> Vec<String> {
        self.owner.iter().map(|a| a.name.clone()).collect()
    }

    /// This roster with managed agent `name` replaced by `definition`, or removed when there is none.
    pub fn with_managed(&self, name: &str, definition: Option<ManagedDefinition>) -> Self {
        let mut managed: Vec<ManagedDefinition> =
            self.managed.iter().filter(|m| m.agent.name != name).cloned().collect();
        managed.extend(definition);
        managed.sort_by(|a, b| a.agent.name.cmp(&b.agent.name));
        Self { owner: self.owner.clone(), managed }
    }

    fn versions(&self) -> BTreeMap<String, String> {
        self.agents().into_iter().map(|a| (a.name, a.hash)).collect()
    }
}

/// The current roster, shared by the task service, the management tools and the runtime.
#[derive(Debug, Default)]
pub struct RosterCell {
    current: RwLock<Arc<Roster>>,
    generation: AtomicU64,
}

impl RosterCell {
    pub fn new(roster: Roster) -> Self {
        Self { current: RwLock::new(Arc::new(roster)), generation: AtomicU64::new(0) }
    }

    pub fn get(&self) -> Arc<Roster> {
        self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Bumped by every swap.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Puts `next` in place and says what changed.
    pub fn replace(&self, next: Roster) -> RosterChange {
        let mut current = self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (before, after) = (current.versions(), next.versions());
        let change = RosterChange {
            names: after.keys().cloned().collect(),
            added: after.keys().filter(|n| !before.contains_key(*n)).cloned().collect(),
            removed: before.keys().filter(|n| !after.contains_key(*n)).cloned().collect(),
            updated: after
                .iter()
                .filter(|(n, h)| before.get(*n).is_some_and(|old| old != *h))
                .map(|(n, _)| n.clone())
                .collect(),
        };
        *current = Arc::new(next);
        self.generation.fetch_add(1, Ordering::SeqCst);
        change
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::tasks::roster::*;
    use std::path::Path;

    fn agent(name: &str, prompt: &str) -> AgentDefinition {
        let text = format!("---\nname: {name}\n---\n{prompt}\n");
        minibot_config::parse_agent(&text, Path::new("x.md")).unwrap()
    }

    fn managed(name: &str, prompt: &str) -> ManagedDefinition {
        let text = format!("---\nname: {name}\n---\n{prompt}\n");
        ManagedDefinition { agent: minibot_config::parse_agent(&text, Path::new("x.md")).unwrap(), text }
    }

    #[test]
    fn a_swap_reports_what_came_went_and_changed() {
        let cell = RosterCell::new(Roster { owner: vec![agent("coder", "a")], managed: vec![managed("notes", "a")] });
        let first = cell.generation();
        let next = cell
            .get()
            .with_managed("notes", Some(managed("notes", "b")))
            .with_managed("maps", Some(managed("maps", "a")));
        let change = cell.replace(next);
        assert_eq!(change.names, ["coder", "maps", "notes"]);
        assert_eq!((change.added, change.updated), (vec!["maps".to_string()], vec!["notes".to_string()]));
        assert!(change.removed.is_empty());
        assert!(cell.generation() > first);
        let change = cell.replace(cell.get().with_managed("maps", None));
        assert_eq!(change.removed, ["maps"]);
        assert_eq!(cell.get().entries().iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["coder", "notes"]);
    }
}
