//! Builds the agent for one task: which specialist, its system prompt, its model and its tools.
//! Agent files are read again for every task, so an edited specialist takes effect without a restart.
//! A managed (model-authored) specialist's task carries its definition instead ([`carried_agent`]): the worker
//! runs that text once its hash is the task's `agent_hash` and it passes this worker's own managed-agent ceiling.
//!
//! Whatever put the envelope on the queue, a worker trusts none of its numbers or sizes: texts longer than a task
//! may carry are refused before anything is built ([`check_sizes`]), and the limits are held to the worker's
//! own `[tasks]` settings ([`task_limits`]).

use minibot_agent::{Limits, ModelSettings, PromptBuilder, PromptLibrary, ToolPolicy, ToolRegistry};
use minibot_config::{AgentDefinition, Config, LlmEndpoint, load_agents, managed_agents};
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
    /// The prompt that summarises the run's conversation when it outgrows its budget.
    pub compact_prompt: String,
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
    check_sizes(task)?;
    let library = PromptLibrary::new(Some(config.resolve_path(&config.llm.prompts_dir)));
    let agent = match (task.agent_name.as_deref().filter(|n| !n.is_empty()), task.agent_definition.as_deref()) {
        (Some(name), Some(text)) => Some(carried_agent(config, task, name, text)?),
        (Some(name), None) => Some(find_agent(config, name)?),
        (None, Some(_)) => return Err(format!("{REFUSED}the task carries an agent definition but names no agent")),
        (None, None) => None,
    };
    if let Some(agent) = &agent {
        refuse_mismatch(config, task, agent)?;
    }
    let overrides = &task.model_overrides;
    let provider = overrides.model_provider.as_deref().or(agent.as_ref().and_then(|a| a.model_provider.as_deref()));
    let model = overrides.model.as_deref().or(agent.as_ref().and_then(|a| a.model.as_deref()));
    let effort = overrides.reasoning_effort.as_deref().or(agent.as_ref().and_then(|a| a.reasoning_effort.as_deref()));
    let mut endpoint = config.llm_for(provider, model, effort)?;
    if let Some(agent) = &agent {
        agent.apply_openrouter(&mut endpoint.options.openrouter);
    }
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
    let tools = match &agent {
        Some(agent) if codemode_for(config, agent) => {
            minibot_codemode::with_codemode(&tools, &config.tools.codemode).map_err(|e| e.to_string())?
        }
        _ => tools,
    };

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
        compact_prompt: minibot_agent::compaction::compact_prompt(&library),
        limits: task_limits(config, task),
        agent_label: agent.map_or_else(|| "task_worker".to_string(), |a| a.name),
        endpoint,
        mcp,
    })
}

/// The longest prompt a task may carry, in characters: what `spawn_task` and `delegate` allow the main agent
/// (`MAX_PROMPT_CHARS` in shared/tools/src/tasks/submit.rs), so an orchestrator never sends more.
pub const MAX_PROMPT_CHARS: usize = 32_000;
/// The longest `context_json` a task may carry, in characters.
pub const MAX_CONTEXT_CHARS: usize = 64_000;
/// The longest name or identifier a task may carry (specialist, model provider, model, reasoning effort,
/// definition hash, channel, owner), in characters.
pub const MAX_NAME_CHARS: usize = 256;

/// Refuses a task whose texts are longer than a task may have, before its agent is built or its model called:
/// the prompt would go whole to the model and be copied into every request, and a name into every request or
/// error message. The error names the field and the limit, never the text.
pub fn check_sizes(task: &TaskEnvelope) -> Result<(), AssemblyError> {
    if longer_than(&task.prompt, MAX_PROMPT_CHARS) {
        return Err(format!(
            "{REFUSED}the prompt is longer than {MAX_PROMPT_CHARS} characters, the most a task's prompt may have; put \
             the material in a file and point to it"
        ));
    }
    if task.context_json.as_deref().is_some_and(|context| longer_than(context, MAX_CONTEXT_CHARS)) {
        return Err(format!(
            "{REFUSED}context_json is longer than {MAX_CONTEXT_CHARS} characters, the most a task's context may \
             have; put the material in a file and point to it"
        ));
    }
    let overrides = &task.model_overrides;
    let names = [
        ("agent_name", task.agent_name.as_deref()),
        ("model_provider", overrides.model_provider.as_deref()),
        ("model", overrides.model.as_deref()),
        ("reasoning_effort", overrides.reasoning_effort.as_deref()),
        ("agent_hash", task.agent_hash.as_deref()),
        ("channel", Some(task.channel.as_str())),
        ("owner_id", Some(task.owner_id.as_str())),
    ];
    for (field, value) in names {
        if value.is_some_and(|value| longer_than(value, MAX_NAME_CHARS)) {
            return Err(format!("{REFUSED}{field} is longer than {MAX_NAME_CHARS} characters, the most it may have"));
        }
    }
    if let Some(text) = task.agent_definition.as_deref().filter(|t| t.len() > managed_agents::MAX_DEFINITION_BYTES) {
        return Err(format!(
            "{REFUSED}agent_definition is {} bytes, more than the {} a managed definition may have",
            text.len(),
            managed_agents::MAX_DEFINITION_BYTES
        ));
    }
    Ok(())
}

/// Whether `text` has more than `max` characters. Counting stops past the limit, so a huge text costs no more
/// to check than one just over it.
fn longer_than(text: &str, max: usize) -> bool {
    // A character is at least one byte.
    text.len() > max && text.chars().nth(max).is_some()
}

/// The task's limits, held to this worker's own `[tasks]` settings: a task never gets more time, model calls or
/// tool calls than `worker_timeout_seconds`, `worker_max_steps` and `worker_max_tool_calls` allow here, whatever
/// its envelope asks (an orchestrator with the same settings never asks for more). A cut is logged.
pub fn task_limits(config: &Config, task: &TaskEnvelope) -> Limits {
    let allowed = &config.tasks;
    let asked = &task.limits;
    let timeout_seconds = asked.timeout_seconds.max(1).min(allowed.worker_timeout_seconds.max(1));
    let max_steps = at_most(asked.max_steps, allowed.worker_max_steps.max());
    let max_tool_calls = at_most(asked.max_tool_calls, allowed.worker_max_tool_calls.max());
    if timeout_seconds < asked.timeout_seconds || max_steps != asked.max_steps || max_tool_calls != asked.max_tool_calls
    {
        tracing::warn!(
            task_id = %task.task_id,
            asked_timeout_seconds = asked.timeout_seconds,
            timeout_seconds,
            asked_max_steps = ?asked.max_steps,
            max_steps = ?max_steps,
            asked_max_tool_calls = ?asked.max_tool_calls,
            max_tool_calls = ?max_tool_calls,
            "the task asked for more than this worker's [tasks] worker_timeout_seconds, worker_max_steps or \
             worker_max_tool_calls allow; clamped to them"
        );
    }
    Limits { max_steps, max_tool_calls, timeout: Duration::from_secs(timeout_seconds) }
}

/// The smaller of two limits, `None` being unlimited.
fn at_most(asked: Option<u32>, allowed: Option<u32>) -> Option<u32> {
    match (asked, allowed) {
        (Some(asked), Some(allowed)) => Some(asked.min(allowed)),
        (None, allowed) => allowed,
        (asked, None) => asked,
    }
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

/// The managed specialist a task carries. Refused when the text is not the version the task names (it was
/// altered after the orchestrator checked it), or when it exceeds this worker's own ceiling or takes the name of
/// one of this worker's owner specialists: the worker trusts its config, not the sender's.
fn carried_agent(
    config: &Config,
    task: &TaskEnvelope,
    name: &str,
    text: &str,
) -> Result<AgentDefinition, AssemblyError> {
    if !config.specialists_enabled() {
        return Err("specialists are disabled ([orchestration.specialists] enabled = false)".into());
    }
    let actual = minibot_protocol::definition_hash(text.strip_prefix('\u{feff}').unwrap_or(text).as_bytes());
    let Some(sent) = task.agent_hash.as_deref() else {
        return Err(format!("{REFUSED}the task carries a definition of `{name}` without its version (agent_hash)"));
    };
    if sent != actual {
        return Err(format!(
            "{REFUSED}the definition the task carries for managed specialist `{name}` is not version {sent} (its \
             text is version {actual}); it was changed after it was sent and is not run"
        ));
    }
    let dir = config.resolve_path(&config.orchestration.directory);
    let owners: Vec<String> = load_agents(&dir).map_err(|e| e.to_string())?.into_iter().map(|a| a.name).collect();
    let override_provider = task.model_overrides.model_provider.as_deref();
    let definition = managed_agents::check_for_worker(config, name, text, override_provider, &owners)
        .map_err(|e| format!("{REFUSED}managed specialist `{name}`: {e}"))?;
    minibot_config::check_agents(config, std::slice::from_ref(&definition.agent)).map_err(|e| e.to_string())?;
    Ok(definition.agent)
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

/// Whether a specialist gets `run_tools_script` over its tools: `[tasks] worker_extensions` lists `"codemode"`
/// and the specialist's policy keeps the tool (its `tools_allow` names it, or it has only `tools_deny` and that
/// does not). A specialist with neither list has no tools for a script to call.
fn codemode_for(config: &Config, agent: &AgentDefinition) -> bool {
    if !config.tools.codemode.enabled || !config.tasks.worker_extensions.iter().any(|e| e == "codemode") {
        return false;
    }
    if agent.tools_allow.is_empty() && agent.tools_deny.is_empty() {
        return false;
    }
    ToolPolicy::from_lists(&agent.tools_allow, &agent.tools_deny)
        .is_ok_and(|policy| policy.permits(minibot_codemode::TOOL_NAME))
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use minibot_protocol::{ModelOverrides, PROTOCOL_VERSION, TaskLimits};

    fn config(extra: &str) -> Config {
        let toml = format!("[llm]\napi_key = \"sk-test\"\n{extra}");
        Config::from_toml(&toml, "test.toml", std::path::Path::new("/tmp"), &|_| None).unwrap()
    }

    fn envelope(timeout_seconds: u64, max_steps: Option<u32>, max_tool_calls: Option<u32>) -> TaskEnvelope {
        TaskEnvelope {
            version: PROTOCOL_VERSION,
            task_id: "t1".into(),
            agent_name: None,
            prompt: "hello".into(),
            context_json: None,
            model_overrides: ModelOverrides::default(),
            limits: TaskLimits { timeout_seconds, max_steps, max_tool_calls },
            owner_id: "primary".into(),
            channel: "test".into(),
            chat_id: None,
            user_id: None,
            max_attempts: u32::MAX,
            agent_hash: None,
            requires: Vec::new(),
            agent_definition: None,
        }
    }

    #[tokio::test]
    async fn codemode_is_given_to_the_specialists_that_ask_for_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agents")).unwrap();
        for (name, policy) in [
            ("scripter", "tools_allow:\n  - current_datetime\n  - run_tools_script\n"),
            ("plain", "tools_allow:\n  - current_datetime\n"),
            ("denier", "tools_deny:\n  - bash\n"),
        ] {
            let text = format!("---\nname: {name}\ndescription: test\n{policy}---\nYou test.\n");
            std::fs::write(dir.path().join(format!("agents/{name}.md")), text).unwrap();
        }
        let toml = "[llm]\napi_key = \"sk-test\"\n[tasks]\nenabled = true\nworker_extensions = [\"codemode\"]\n\
                    [tools.codemode]\nenabled = true\n";
        let config = Arc::new(Config::from_toml(toml, "test.toml", dir.path(), &|_| None).unwrap());
        let tools_of = |agent: Option<&str>| {
            let config = config.clone();
            let mut task = envelope(60, None, None);
            task.agent_name = agent.map(str::to_string);
            async move { assemble(&config, &task).await.unwrap().tools.names() }
        };
        let scripter = tools_of(Some("scripter")).await;
        assert!(scripter.contains(&"run_tools_script".to_string()), "{scripter:?}");
        assert!(!scripter.contains(&"current_datetime".to_string()), "called from scripts now: {scripter:?}");
        assert!(!tools_of(Some("plain")).await.contains(&"run_tools_script".to_string()));
        assert!(tools_of(Some("denier")).await.contains(&"run_tools_script".to_string()));
        assert!(!tools_of(None).await.contains(&"run_tools_script".to_string()), "a task without an agent");
    }

    #[test]
    fn limits_are_held_to_the_workers_own_settings() {
        let defaults = config("");
        for huge in [1 << 63, u64::MAX] {
            let limits = task_limits(&defaults, &envelope(huge, None, None));
            assert_eq!(limits.timeout, Duration::from_secs(1800), "[tasks] worker_timeout_seconds' default");
            assert_eq!((limits.max_steps, limits.max_tool_calls), (None, None), "unlimited by default");
        }
        assert_eq!(task_limits(&defaults, &envelope(0, None, None)).timeout, Duration::from_secs(1));
        let within = task_limits(&defaults, &envelope(60, Some(5), Some(0)));
        assert_eq!(
            (within.timeout, within.max_steps, within.max_tool_calls),
            (Duration::from_secs(60), Some(5), Some(0))
        );

        let strict = config("[tasks]\nworker_timeout_seconds = 30\nworker_max_steps = 4\nworker_max_tool_calls = 9\n");
        let clamped = task_limits(&strict, &envelope(u64::MAX, Some(u32::MAX), None));
        assert_eq!(
            (clamped.timeout, clamped.max_steps, clamped.max_tool_calls),
            (Duration::from_secs(30), Some(4), Some(9)),
            "an unlimited ask gets the worker's limit"
        );
        let lower = task_limits(&strict, &envelope(10, Some(2), Some(3)));
        assert_eq!((lower.timeout, lower.max_steps, lower.max_tool_calls), (Duration::from_secs(10), Some(2), Some(3)));
        // A worker's own limit beyond the clock's reach still makes a duration (the runner's deadline saturates).
        let most = i64::MAX - 1;
        let endless = config(&format!(
            "[tasks]\nworker_timeout_seconds = {most}\n[tasks.sqlite]\nlease_timeout_seconds = {}\n",
            i64::MAX
        ));
        let limits = task_limits(&endless, &envelope(u64::MAX, None, None));
        assert_eq!(limits.timeout, Duration::from_secs(most.unsigned_abs()));
    }

    #[test]
    fn texts_longer_than_a_task_may_carry_are_refused_by_name_and_limit() {
        let mut task = envelope(60, None, None);
        task.prompt = "é".repeat(MAX_PROMPT_CHARS);
        task.context_json = Some("x".repeat(MAX_CONTEXT_CHARS));
        task.model_overrides.model = Some("m".repeat(MAX_NAME_CHARS));
        assert_eq!(check_sizes(&task), Ok(()), "at the limits");

        task.prompt.push('x');
        let error = check_sizes(&task).unwrap_err();
        assert!(error.starts_with(REFUSED) && error.contains("prompt is longer than 32000 characters"), "{error}");
        task.prompt.pop();

        task.context_json.as_mut().unwrap().push('x');
        let error = check_sizes(&task).unwrap_err();
        assert!(error.contains("context_json is longer than 64000 characters"), "{error}");
        task.context_json = None;

        task.model_overrides.model.as_mut().unwrap().push('x');
        let error = check_sizes(&task).unwrap_err();
        assert!(error.contains("model is longer than 256 characters"), "{error}");
        task.model_overrides.model = None;

        task.agent_name = Some("a".repeat(10_000_000));
        let error = check_sizes(&task).unwrap_err();
        assert!(error.contains("agent_name is longer than 256 characters") && error.len() < 200, "{error}");
    }
}
