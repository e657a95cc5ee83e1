//! Builds the agent for one task: which specialist, its system prompt, its model and its tools.
//! Agent files are read again for every task, so an edited specialist takes effect without a restart.

use minibot_agent::{Limits, ModelSettings, PromptBuilder, PromptLibrary, ToolPolicy, ToolRegistry};
use minibot_config::{AgentDefinition, Config, LlmEndpoint, load_agents};
use minibot_protocol::TaskEnvelope;
use minibot_tools::ToolServices;
use std::sync::Arc;
use std::time::Duration;

/// Tools a worker never has: delegation belongs to the main agent.
pub const RESERVED_TOOLS: &[&str] =
    &["spawn_task", "delegate", "cancel_task", "list_tasks", "get_task", "message_task", "fetch_agent_info"];

const WORKER_SUFFIX: &str = "You are an isolated task worker. Complete the task you are given with the tools you \
have. Do not delegate and do not ask the user questions: nobody reads your intermediate messages. Return only the \
task result needed by the main agent.";

pub struct Assembled {
    pub endpoint: LlmEndpoint,
    pub model: ModelSettings,
    pub tools: ToolRegistry,
    pub system_prompt: String,
    pub limits: Limits,
    pub agent_label: String,
    /// The specialist's own MCP connections, opened for this task; shut them down after it.
    pub mcp: Option<Arc<minibot_mcp::McpHub>>,
}

/// What went wrong assembling: the task fails with this text.
pub type AssemblyError = String;

pub async fn assemble(config: &Arc<Config>, task: &TaskEnvelope) -> Result<Assembled, AssemblyError> {
    let library = PromptLibrary::new(Some(config.resolve_path(&config.llm.prompts_dir)));
    let agent = match task.agent_name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => Some(find_agent(config, name)?),
        None => None,
    };
    if let Some(agent) = &agent {
        refuse_mismatch(config, task, agent)?;
    }
    let overrides = &task.model_overrides;
    let provider = overrides.model_provider.as_deref().or(agent.as_ref().and_then(|a| a.model_provider.as_deref()));
    let model = overrides.model.as_deref().or(agent.as_ref().and_then(|a| a.model.as_deref()));
    let effort = overrides.reasoning_effort.as_deref().or(agent.as_ref().and_then(|a| a.reasoning_effort.as_deref()));
    let endpoint = config.llm_for(provider, model, effort)?;
    endpoint.require_key(&config.origin()).map_err(|e| e.to_string())?;

    let services = ToolServices::new(config.clone(), None)
        .map_err(|e| format!("tools.file_storage.root_dir: cannot create it: {e}"))?;
    let mut tools = match &agent {
        Some(agent) => specialist_tools(&minibot_tools::worker_tools(&services), agent)?,
        None => minibot_tools::worker_generic_tools(&services),
    };
    // Only a specialist that lists servers in `mcp_servers` gets MCP tools, from connections of its own.
    let mcp = match agent.as_ref().filter(|a| !a.mcp_servers.is_empty() && config.tools.mcp.enabled) {
        Some(agent) => {
            let hub = minibot_mcp::McpHub::start_subset(config, &agent.mcp_servers).await.map_err(|e| e.to_string())?;
            let deny = minibot_agent::Patterns::new(&agent.tools_deny).map_err(|e| e.to_string())?;
            let root = services.spill_store();
            let remote =
                hub.spilled_tools(|name| !deny.matches(name), &tools, &config.tools.tool_output_spill, root.as_ref());
            tools.register_missing(&remote);
            Some(hub)
        }
        None => None,
    };
    let tools =
        tools.filtered(&ToolPolicy::Deny(minibot_agent::Patterns::new(RESERVED_TOOLS).map_err(|e| e.to_string())?));
    // `[tools.safety_classifier]` checks a specialist's calls as it checks the main agent's; its questions go to
    // the task's chat through the worker's approver.
    let tools = match minibot_agent::SafetyClassifier::from_config(config).map_err(|e| e.to_string())? {
        Some(classifier) => classifier.wrap(&tools, services.spill_store().as_ref()),
        None => tools,
    };
    // get_settings reports these, not what the config enables.
    let names = tools.names();
    let servers = mcp.as_ref().map_or_else(Vec::new, |hub| hub.servers_serving(&names));
    services.running.set_tools(names, servers);

    let mut prompt = match &agent {
        Some(agent) => PromptBuilder::new(agent.system_prompt.clone()),
        None => {
            let base = minibot_agent::prompt::main_base_prompt(config, &library).map_err(|e| e.to_string())?;
            let mut builder = PromptBuilder::new(base);
            builder.push(WORKER_SUFFIX);
            builder
        }
    };
    prompt.push(minibot_agent::prompt::environment_fragment(config));
    let temperature = match &agent {
        Some(agent) if agent.omit_temperature => None,
        Some(agent) => agent.temperature.or(endpoint.temperature),
        None => endpoint.temperature,
    };
    let max_tokens = agent.as_ref().and_then(|a| a.max_new_tokens).or(endpoint.max_new_tokens);
    Ok(Assembled {
        model: ModelSettings {
            model: endpoint.model.clone(),
            temperature,
            max_tokens,
            reasoning_effort: endpoint.reasoning_effort.clone(),
        },
        tools,
        system_prompt: prompt.build(),
        limits: Limits {
            max_steps: task.limits.max_steps,
            max_tool_calls: task.limits.max_tool_calls,
            timeout: Duration::from_secs(task.limits.timeout_seconds.max(1)),
        },
        agent_label: agent.map_or_else(|| "task_worker".to_string(), |a| a.name),
        endpoint,
        mcp,
    })
}

fn find_agent(config: &Config, name: &str) -> Result<AgentDefinition, AssemblyError> {
    if !config.specialists_enabled() {
        return Err("specialists are disabled ([orchestration.specialists] enabled = false)".into());
    }
    let dir = config.resolve_path(&config.orchestration.directory);
    let agents = load_agents(&dir).map_err(|e| e.to_string())?;
    let names: Vec<String> = agents.iter().map(|a| a.name.clone()).collect();
    let agent = agents
        .into_iter()
        .find(|a| a.name == name)
        .ok_or_else(|| format!("no specialist named `{name}` in {}; available: {}", dir.display(), names.join(", ")))?;
    // The file may have changed since the orchestrator checked it at start-up.
    minibot_config::check_agents(config, std::slice::from_ref(&agent)).map_err(|e| e.to_string())?;
    Ok(agent)
}

/// Prefix of the error of a task this worker refuses to run (another version of the specialist, labels it
/// lacks): the runner names the worker in front of it.
pub const REFUSED: &str = "refused: ";

/// A task sent for another version of the specialist's file than this host holds, or needing labels this worker
/// does not offer, is refused rather than run with another prompt or in the wrong place.
fn refuse_mismatch(config: &Config, task: &TaskEnvelope, agent: &AgentDefinition) -> Result<(), AssemblyError> {
    if let Some(sent) = task.agent_hash.as_deref().filter(|sent| *sent != agent.hash) {
        return Err(format!(
            "{REFUSED}the task was sent for version {sent} of specialist `{}`, and this worker holds version {} \
             ({}); give every host the same agents folder, then restart its workers",
            agent.name,
            agent.hash,
            agent.path.display()
        ));
    }
    let missing: Vec<&str> =
        agent.requires.iter().filter(|label| !config.worker.labels.contains(label)).map(String::as_str).collect();
    if !missing.is_empty() {
        return Err(format!(
            "{REFUSED}specialist `{}` requires the labels {} that this worker does not offer ([worker] labels)",
            agent.name,
            missing.join(", ")
        ));
    }
    Ok(())
}

/// MiniBot's specialist policy: `tools_allow` grants only the matching tools, `tools_deny` grants everything
/// else, and a specialist with neither gets no built-in tools.
fn specialist_tools(all: &ToolRegistry, agent: &AgentDefinition) -> Result<ToolRegistry, AssemblyError> {
    if agent.tools_allow.is_empty() && agent.tools_deny.is_empty() {
        return Ok(ToolRegistry::new());
    }
    let policy = ToolPolicy::from_lists(&agent.tools_allow, &agent.tools_deny)
        .map_err(|e| format!("agent {}: {e}", agent.name))?;
    Ok(all.filtered(&policy))
}
