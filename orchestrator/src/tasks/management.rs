//! The orchestrator's side of the agent-management tools ([`minibot_tools::agents`]). Every call takes one lock
//! and does its reading, checking and writing on a blocking thread that holds the lock until the disk work and
//! the roster swap are done: a call the model gives up on (a cancelled turn) still finishes its write, and the
//! next call starts only after it. Nothing is written before the definition has passed the ceiling.

use super::roster::{Roster, RosterCell};
use futures_util::future::BoxFuture;
use minibot_config::managed_agents::{self, ManagedError, files};
use minibot_config::{Config, check_agents, load_agents};
use minibot_tools::agents::{AgentService, ChangeRefused, ChangeResult};
use std::sync::Arc;

pub struct AgentManager {
    config: Arc<Config>,
    roster: Arc<RosterCell>,
    lock: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    Create,
    Update,
}

impl AgentManager {
    pub fn new(config: Arc<Config>, roster: Arc<RosterCell>) -> Self {
        Self { config, roster, lock: Arc::default() }
    }

    /// Runs `job` on a blocking thread while holding the management lock.
    async fn locked<F>(&self, job: F) -> ChangeResult
    where
        F: FnOnce(&Config, &RosterCell) -> ChangeResult + Send + 'static,
    {
        let guard = self.lock.clone().lock_owned().await;
        let (config, roster) = (self.config.clone(), self.roster.clone());
        let done = tokio::task::spawn_blocking(move || {
            let result = job(&config, &roster);
            drop(guard);
            result
        })
        .await;
        done.unwrap_or_else(|e| {
            Err(refused(&self.roster.get(), "agent_management:failed", format!("the change did not finish: {e}")))
        })
    }
}

fn refused(roster: &Roster, code: &str, message: impl Into<String>) -> ChangeRefused {
    ChangeRefused { code: code.to_string(), message: message.into(), names: roster.names() }
}

fn from_managed(roster: &Roster, error: &ManagedError) -> ChangeRefused {
    refused(roster, error.code(), error.to_string())
}

/// The owner's specialists as the folder holds them now, with those of the roster: a managed name may take
/// neither (a file the owner just added counts before any reload).
fn owner_names(config: &Config, roster: &Roster) -> Vec<String> {
    let mut names = roster.owner_names();
    if let Ok(agents) = load_agents(&config.resolve_path(&config.orchestration.directory)) {
        names.extend(agents.into_iter().map(|a| a.name).filter(|n| !roster.owner_names().contains(n)));
    }
    names
}

fn reload(config: &Config, cell: &RosterCell) -> ChangeResult {
    match Roster::load(config) {
        Ok(next) => {
            let change = cell.replace(next);
            tracing::info!(names = ?change.names, added = ?change.added, removed = ?change.removed,
                updated = ?change.updated, "specialists reloaded");
            Ok(change)
        }
        Err(why) => Err(refused(
            &cell.get(),
            "agent_management:reload_failed",
            format!("{why}; the previous roster stays in place"),
        )),
    }
}

fn write(config: &Config, cell: &RosterCell, kind: Write, name: &str, text: &str) -> ChangeResult {
    let current = cell.get();
    if !managed_agents::valid_name(name) {
        return Err(from_managed(&current, &ManagedError::InvalidName(name.to_string())));
    }
    let dir = managed_agents::directory(config);
    let owners = owner_names(config, &current);
    let exists = files::exists(&dir, name);
    match kind {
        Write::Create if exists => {
            return Err(refused(
                &current,
                "agent_management:exists",
                format!("a managed agent named `{name}` exists already; use update_agent to change it"),
            ));
        }
        Write::Update if !exists => {
            let message = if owners.iter().any(|o| o == name) {
                format!("`{name}` is an owner-authored specialist; update_agent only changes managed agents")
            } else {
                format!("there is no managed agent named `{name}`; use create_agent to make one")
            };
            return Err(refused(&current, "agent_management:unknown_agent", message));
        }
        _ => {}
    }
    let definition = managed_agents::prepare(config, name, text, &owners).map_err(|e| from_managed(&current, &e))?;
    check_agents(config, std::slice::from_ref(&definition.agent))
        .map_err(|e| refused(&current, "agent_management:unsupported", e.to_string()))?;
    files::write(&dir, name, text).map_err(|e| refused(&current, "agent_management:write_failed", e.to_string()))?;
    let enabled = definition.agent.enabled;
    let change = cell.replace(current.with_managed(name, enabled.then_some(definition)));
    tracing::info!(agent = %name, created = (kind == Write::Create), enabled, "managed agent written");
    Ok(change)
}

fn delete(config: &Config, cell: &RosterCell, name: &str) -> ChangeResult {
    let current = cell.get();
    if !managed_agents::valid_name(name) {
        return Err(from_managed(&current, &ManagedError::InvalidName(name.to_string())));
    }
    let dir = managed_agents::directory(config);
    let removed =
        files::remove(&dir, name).map_err(|e| refused(&current, "agent_management:write_failed", e.to_string()))?;
    if !removed {
        let message = if owner_names(config, &current).iter().any(|o| o == name) {
            format!("`{name}` is an owner-authored specialist; delete_agent only removes managed agents")
        } else {
            format!("there is no managed agent named `{name}`")
        };
        return Err(refused(&current, "agent_management:unknown_agent", message));
    }
    let change = cell.replace(current.with_managed(name, None));
    tracing::info!(agent = %name, "managed agent deleted");
    Ok(change)
}

impl AgentService for AgentManager {
    fn reload(&self) -> BoxFuture<'_, ChangeResult> {
        Box::pin(self.locked(reload))
    }

    fn create<'a>(&'a self, name: &'a str, definition: &'a str) -> BoxFuture<'a, ChangeResult> {
        let (name, text) = (name.to_string(), definition.to_string());
        Box::pin(self.locked(move |config, cell| write(config, cell, Write::Create, &name, &text)))
    }

    fn update<'a>(&'a self, name: &'a str, definition: &'a str) -> BoxFuture<'a, ChangeResult> {
        let (name, text) = (name.to_string(), definition.to_string());
        Box::pin(self.locked(move |config, cell| write(config, cell, Write::Update, &name, &text)))
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ChangeResult> {
        let name = name.to_string();
        Box::pin(self.locked(move |config, cell| delete(config, cell, &name)))
    }
}
