//! `[orchestration].tool_ownership_mode`: which tools the main agent leaves to its specialists.
//! `shared` hides nothing; `exclusive` hides every tool some specialist is granted; `exclusive_mcp` hides only
//! the MCP tools granted to specialists. Servers in `shared_mcp_servers` are never hidden. The specialists are
//! the roster's (managed ones included) and are taken again when the roster changes ([`Ownership::refresh`]).

use minibot_agent::ToolPolicy;
use minibot_config::{AgentDefinition, Config, ToolOwnershipMode, load_agents};
use std::sync::RwLock;

type Specialists = Vec<(AgentDefinition, ToolPolicy)>;

pub struct Ownership {
    mode: ToolOwnershipMode,
    prefix: String,
    shared_servers: Vec<String>,
    /// The roster generation these specialists are from, and the specialists.
    specialists: RwLock<(u64, Specialists)>,
}

impl Ownership {
    pub fn load(config: &Config) -> anyhow::Result<Self> {
        let mode = config.orchestration.tool_ownership_mode;
        let agents = if mode != ToolOwnershipMode::Shared && config.specialists_enabled() {
            load_agents(&config.resolve_path(&config.orchestration.directory))?
        } else {
            Vec::new()
        };
        Ok(Self {
            mode,
            prefix: config.tools.mcp.name_prefix.clone(),
            shared_servers: config.orchestration.shared_mcp_servers.clone(),
            // No roster generation yet: the first refresh takes the roster's specialists, managed ones included.
            specialists: RwLock::new((u64::MAX, policies(agents)?)),
        })
    }

    /// Takes the roster's specialists when `generation` is not the one they were taken from. A specialist
    /// whose patterns do not compile grants nothing (the roster checked them when it read the file).
    pub fn refresh(&self, generation: u64, agents: impl FnOnce() -> Vec<AgentDefinition>) {
        if self.mode == ToolOwnershipMode::Shared {
            return;
        }
        let mut current = self.specialists.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if current.0 == generation {
            return;
        }
        let agents = agents().into_iter().filter(|a| ToolPolicy::from_lists(&a.tools_allow, &a.tools_deny).is_ok());
        *current = (generation, policies(agents.collect()).unwrap_or_default());
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, (u64, Specialists)> {
        self.specialists.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn is_shared(&self) -> bool {
        self.mode == ToolOwnershipMode::Shared || self.read().1.is_empty()
    }

    /// The MCP server of a tool name (`<prefix>_<server>__<tool>`), if it is an MCP tool.
    fn mcp_server<'a>(&self, name: &'a str) -> Option<&'a str> {
        let rest = name.strip_prefix(self.prefix.as_str())?.strip_prefix('_')?;
        rest.split_once("__").map(|(server, _)| server)
    }

    fn granted_to_a_specialist(&self, name: &str) -> bool {
        let server = self.mcp_server(name);
        self.read().1.iter().any(|(agent, policy)| match server {
            // MiniBot's rule: `tools_allow` does not filter MCP tools of listed servers, `tools_deny` does.
            Some(server) => {
                agent.mcp_servers.iter().any(|s| s == server)
                    && !matches!(policy, ToolPolicy::Deny(deny) if deny.matches(name))
            }
            None => match policy {
                ToolPolicy::All => false,
                _ => policy.permits(name),
            },
        })
    }

    pub fn hides(&self, name: &str) -> bool {
        if self.is_shared() {
            return false;
        }
        let server = self.mcp_server(name);
        if server.is_some_and(|s| self.shared_servers.iter().any(|shared| shared == s)) {
            return false;
        }
        match self.mode {
            ToolOwnershipMode::Shared => false,
            ToolOwnershipMode::ExclusiveMcp => server.is_some() && self.granted_to_a_specialist(name),
            ToolOwnershipMode::Exclusive => self.granted_to_a_specialist(name),
        }
    }
}

fn policies(agents: Vec<AgentDefinition>) -> anyhow::Result<Specialists> {
    let mut specialists = Vec::new();
    for agent in agents {
        let policy = ToolPolicy::from_lists(&agent.tools_allow, &agent.tools_deny)?;
        specialists.push((agent, policy));
    }
    Ok(specialists)
}
