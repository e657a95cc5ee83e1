//! What this worker offers: the specialists it can run (those in its agents folder whose `requires` its
//! `[worker] labels` meet), the routes it therefore takes tasks of, and the status it announces.

use minibot_config::{AgentDefinition, Config, load_agents};
use minibot_protocol::{SpecialistVersion, WorkerState, WorkerStatus, route_for};

#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The generic worker's route `""` first, then one per specialist.
    pub routes: Vec<String>,
    pub specialists: Vec<SpecialistVersion>,
    /// Specialists in the folder this worker leaves to others, with the labels it lacks.
    pub declined: Vec<(String, Vec<String>)>,
    /// This machine's name, read once.
    pub host: String,
}

impl Offer {
    /// Reads the agents folder now. A folder that does not parse is an error (the worker would refuse every
    /// task of those specialists anyway).
    pub fn read(config: &Config) -> Result<Self, minibot_config::ConfigError> {
        let agents = if config.specialists_enabled() {
            load_agents(&config.resolve_path(&config.orchestration.directory))?
        } else {
            Vec::new()
        };
        Ok(Self::from_agents(&config.worker.labels, &agents))
    }

    pub fn from_agents(labels: &[String], agents: &[AgentDefinition]) -> Self {
        let mut offer =
            Self { routes: vec![String::new()], specialists: Vec::new(), declined: Vec::new(), host: host_name() };
        for agent in agents {
            let missing: Vec<String> = agent.requires.iter().filter(|r| !labels.contains(r)).cloned().collect();
            if !missing.is_empty() {
                offer.declined.push((agent.name.clone(), missing));
                continue;
            }
            offer.routes.push(route_for(Some(&agent.name)));
            offer.specialists.push(SpecialistVersion {
                name: agent.name.clone(),
                hash: agent.hash.clone(),
                requires: agent.requires.clone(),
            });
        }
        offer
    }

    /// The status to announce, with how many tasks run now (`load`; which ones is not announced).
    pub fn status(&self, config: &Config, worker_id: &str, load: usize, state: WorkerState) -> WorkerStatus {
        let mut status = WorkerStatus::new(worker_id, &self.host);
        status.app_version = env!("CARGO_PKG_VERSION").to_string();
        status.state = state;
        status.labels = config.worker.labels.clone();
        status.specialists = self.specialists.clone();
        status.generic = true;
        status.capacity = 1;
        status.load = u32::try_from(load).unwrap_or(u32::MAX);
        status.heartbeat_ms = config.worker.heartbeat_seconds.max(1).saturating_mul(1000);
        status
    }
}

/// This machine's name (`/etc/hostname`, else `HOSTNAME`), for the roster.
pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn agent(name: &str, requires: &[&str]) -> AgentDefinition {
        let lines: String = requires.iter().map(|r| format!("  - {r}\n")).collect();
        let requires = if requires.is_empty() { String::new() } else { format!("requires:\n{lines}") };
        let text = format!("---\nname: {name}\n{requires}---\nYou are {name}.\n");
        minibot_config::parse_agent(&text, Path::new("agents/x.md")).expect("parses")
    }

    #[test]
    fn a_worker_offers_the_specialists_its_labels_meet() {
        let agents = [agent("coder", &[]), agent("renderer", &["gpu"]), agent("scraper", &["gpu", "browser"])];
        let offer = Offer::from_agents(&["gpu".to_string()], &agents);
        assert_eq!(offer.routes, ["", "agent.coder", "agent.renderer"]);
        assert_eq!(offer.declined, [("scraper".to_string(), vec!["browser".to_string()])]);
        let plain = Offer::from_agents(&[], &agents);
        assert_eq!(plain.routes, ["", "agent.coder"]);
        assert_eq!(plain.specialists[0].hash, agents[0].hash);
    }

    #[test]
    fn a_status_counts_the_running_tasks_without_naming_them() {
        let config = minibot_config::Config::from_toml("", "test.toml", Path::new("."), &|_| None).unwrap();
        let offer = Offer::from_agents(&[], &[]);
        let status = offer.status(&config, "w1", 1, WorkerState::Up);
        assert_eq!((status.load, status.capacity), (1, 1));
        let bytes = status.encode().unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("running"), "a heartbeat names no task field: {text}");
    }
}
