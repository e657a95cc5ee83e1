//! The owner's ceiling on managed definitions (`[orchestration.agent_management]` `tools_allow`, `mcp_servers`,
//! `providers`), MiniBot's `managed_agent_policy`.
//!
//! The ceiling's own `tools_allow` may hold fnmatch patterns (`file*`); a managed definition's entries must be
//! exact names, because only an exact name can be checked against a pattern without knowing every tool that
//! exists now or later. `tools_deny` grants everything except what it lists, so no ceiling can bound it: it is
//! refused outright.

use super::ManagedError;
use crate::{AgentDefinition, Config};
use globset::Glob;

/// The agent-management tools: never granted to a specialist.
pub const MANAGEMENT_TOOLS: &[&str] = &["reload_agents", "create_agent", "update_agent", "delete_agent"];

/// The delegation and task tools: they belong to the main agent, never to a specialist.
pub const RESERVED_DELEGATION_TOOLS: &[&str] =
    &["spawn_task", "delegate", "cancel_task", "list_tasks", "get_task", "message_task", "fetch_agent_info"];

/// The longest description a managed definition may have (MiniBot warns past it).
const MAX_DESCRIPTION_CHARS: usize = 1000;

/// Every way `agent` exceeds the ceiling, all at once.
pub fn check_ceiling(config: &Config, agent: &AgentDefinition) -> Result<(), ManagedError> {
    let ceiling = &config.orchestration.agent_management;
    let mut problems = Vec::new();
    if !agent.tools_deny.is_empty() {
        problems.push(
            "`tools_deny` is not allowed in a managed definition (it grants every other tool); list the tools it \
             needs in `tools_allow`"
                .to_string(),
        );
    }
    let (patterns, bad_patterns) = compile(&ceiling.tools_allow);
    problems.extend(bad_patterns);
    for tool in agent.tools_allow.iter().map(|t| t.trim()) {
        if let Some(problem) = tool_problem(config, tool, &patterns) {
            problems.push(problem);
        }
    }
    for server in &agent.mcp_servers {
        if !ceiling.mcp_servers.iter().any(|allowed| allowed == server) {
            problems.push(format!(
                "MCP server `{server}` is not in the ceiling's mcp_servers ({})",
                listed(&ceiling.mcp_servers)
            ));
        }
    }
    if let Some(provider) = agent.model_provider.as_deref().filter(|p| !p.is_empty())
        && let Err(ManagedError::Ceiling(mut why)) = check_override_provider(config, provider)
    {
        problems.append(&mut why);
    }
    // The description goes into the main agent's system prompt, on one line of the roster.
    if agent.description.chars().count() > MAX_DESCRIPTION_CHARS {
        problems.push(format!("the description is longer than {MAX_DESCRIPTION_CHARS} characters"));
    }
    if agent.description.chars().any(char::is_control) {
        problems.push("the description must be one line, without control characters".to_string());
    }
    if !agent.requires.is_empty() {
        problems.push(
            "`requires` is not allowed in a managed definition: a managed agent's tasks go to every worker".to_string(),
        );
    }
    if problems.is_empty() { Ok(()) } else { Err(ManagedError::Ceiling(problems)) }
}

/// A model provider a managed agent may target, in its file or as a task's override: one the ceiling lists,
/// or the provider the main agent already runs on (reusing it is no escalation).
pub fn check_override_provider(config: &Config, provider: &str) -> Result<(), ManagedError> {
    let ceiling = &config.orchestration.agent_management;
    if provider == config.llm.provider || ceiling.providers.iter().any(|p| p == provider) {
        return Ok(());
    }
    let mut allowed = vec![config.llm.provider.clone()];
    allowed.extend(ceiling.providers.iter().filter(|p| **p != config.llm.provider).cloned());
    Err(ManagedError::Ceiling(vec![format!(
        "model provider `{provider}` is not allowed for managed agents (allowed: {})",
        allowed.join(", ")
    )]))
}

fn tool_problem(config: &Config, tool: &str, ceiling: &[globset::GlobMatcher]) -> Option<String> {
    // An empty entry would leave a policy with no pattern, and `{a,b}` is an alternation: only plain names pass.
    if tool.is_empty() {
        return Some("an empty `tools_allow` entry; list exact tool names".to_string());
    }
    if tool.contains(['*', '?', '[', ']', '{', '}', '!']) {
        return Some(format!("`{tool}` is a pattern; a managed definition lists exact tool names"));
    }
    if !tool.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Some(format!("`{tool}` is not a tool name; a managed definition lists exact tool names"));
    }
    if is_mcp_name(&config.tools.mcp.name_prefix, tool) {
        return Some(format!("`{tool}` is an MCP tool; claim its server through `mcp_servers` instead"));
    }
    if MANAGEMENT_TOOLS.contains(&tool) || RESERVED_DELEGATION_TOOLS.contains(&tool) {
        return Some(format!("`{tool}` is a delegation or agent-management tool, which no specialist may have"));
    }
    if !ceiling.iter().any(|m| m.is_match(tool)) {
        let listed = listed(&config.orchestration.agent_management.tools_allow);
        return Some(format!("tool `{tool}` is not allowed by the ceiling's tools_allow ({listed})"));
    }
    None
}

/// MiniBot's rule: an MCP tool's name starts with `<prefix>_` and holds `__`.
fn is_mcp_name(prefix: &str, name: &str) -> bool {
    name.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('_')).is_some_and(|rest| rest.contains("__"))
}

/// The ceiling's patterns, and a problem for each one that is not a valid pattern (it then allows nothing).
fn compile(patterns: &[String]) -> (Vec<globset::GlobMatcher>, Vec<String>) {
    let mut matchers = Vec::new();
    let mut problems = Vec::new();
    for pattern in patterns.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        match Glob::new(pattern) {
            Ok(glob) => matchers.push(glob.compile_matcher()),
            Err(e) => problems.push(format!("the ceiling's tools_allow pattern `{pattern}` is invalid: {}", e.kind())),
        }
    }
    (matchers, problems)
}

fn listed(items: &[String]) -> String {
    if items.is_empty() { "it lists none".to_string() } else { items.join(", ") }
}
