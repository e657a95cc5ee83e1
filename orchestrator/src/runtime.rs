//! What every conversation shares: config, provider, tools, store, prompts and limits. Built once at start-up.

use anyhow::Context;
use minibot_agent::{
    Limits, ModelSettings, PromptBuilder, PromptLibrary, ToolPolicy, ToolRegistry,
};
use minibot_config::Config;
use minibot_llm::ChatProvider;
use minibot_store::Store;
use minibot_tools::ToolServices;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Runtime {
    pub config: Arc<Config>,
    pub provider: Arc<dyn ChatProvider>,
    pub model: ModelSettings,
    pub tools: ToolRegistry,
    pub store: Store,
    pub limits: Limits,
    /// Show provider error details in replies (log level DEBUG), as MiniBot does.
    pub verbose_errors: bool,
    prompts: PromptLibrary,
    base_prompt: String,
    channel_prompts: Mutex<HashMap<String, String>>,
}

impl Runtime {
    pub async fn build(config: Config) -> anyhow::Result<Arc<Self>> {
        let config = Arc::new(config);
        let endpoint = config.main_llm();
        let provider = minibot_llm::provider_for(&endpoint)
            .with_context(|| format!("llm.provider = {}", endpoint.provider))?;
        let memory_path = minibot_config::sqlite_path_from_url(&config.memory.sqlite_url)
            .map(|p| config.resolve_path(&p))
            .context("memory.sqlite_url is not a SQLite URL")?;
        let store = Store::open(&memory_path, config.memory.max_history_messages).await?;

        let services = ToolServices {
            config: config.clone(),
            store: Some(store.clone()),
        };
        let main = &config.orchestration.main_agent;
        let policy = ToolPolicy::from_lists(&main.tools_allow, &main.tools_deny)
            .context("orchestration.main_agent tool patterns")?;
        let tools = minibot_tools::main_agent_tools(&services).filtered(&policy);

        let prompts = PromptLibrary::new(Some(config.resolve_path(&config.llm.prompts_dir)));
        let base_prompt = base_prompt(&config, &prompts)?;
        let max_steps = config.llm.max_tool_iterations.max(1);
        let level = config
            .runtime
            .log_level
            .as_deref()
            .unwrap_or(&config.logging.log_level)
            .to_ascii_lowercase();
        Ok(Arc::new(Self {
            model: ModelSettings {
                model: endpoint.model.clone(),
                temperature: endpoint.temperature,
                max_tokens: endpoint.max_new_tokens,
                reasoning_effort: endpoint.reasoning_effort.clone(),
            },
            provider,
            tools,
            store,
            limits: Limits {
                max_steps: Some(max_steps),
                max_tool_calls: Some((2 * max_steps).max(12)),
                timeout: Duration::from_secs(config.runtime.agent_timeout_seconds.max(1)),
            },
            verbose_errors: level == "debug" || level == "trace",
            prompts,
            base_prompt,
            channel_prompts: Mutex::new(HashMap::new()),
            config,
        }))
    }

    /// The main agent's system prompt for a channel, composed once per channel.
    pub fn system_prompt(&self, channel: &str) -> String {
        let mut cache = self
            .channel_prompts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache
            .entry(channel.to_string())
            .or_insert_with(|| {
                let mut builder = PromptBuilder::new(self.base_prompt.clone());
                for policy in self.prompts.policies().unwrap_or_default() {
                    builder.push(policy);
                }
                if let Ok(Some(fragment)) = self.prompts.get(&format!("channels/{channel}.md")) {
                    builder.push(fragment);
                }
                builder.push(self.environment_fragment());
                builder.build()
            })
            .clone()
    }

    fn environment_fragment(&self) -> String {
        let cwd = std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        format!(
            "Environment: minibot {} (Rust). Working directory: {cwd}. Config: {}.",
            env!("CARGO_PKG_VERSION"),
            self.config.origin()
        )
    }
}

/// `[llm].system_prompt_file` when set (it must exist), else `<prompts_dir>/main_agent_system.md` when present,
/// else `[llm].system_prompt` when set, else the built-in prompt.
fn base_prompt(config: &Config, prompts: &PromptLibrary) -> anyhow::Result<String> {
    if let Some(file) = &config.llm.system_prompt_file {
        let path = config.resolve_path(file);
        return minibot_agent::prompt::read(&path)
            .map_err(|e| anyhow::anyhow!("llm.system_prompt_file: {e}"));
    }
    let override_path = config
        .resolve_path(&config.llm.prompts_dir)
        .join("main_agent_system.md");
    if override_path.is_file() {
        return Ok(minibot_agent::prompt::read(&override_path)?);
    }
    if let Some(prompt) = config
        .llm
        .system_prompt
        .as_ref()
        .filter(|p| !p.trim().is_empty())
    {
        return Ok(prompt.clone());
    }
    Ok(prompts.get("main_agent_system.md")?.unwrap_or_default())
}
