//! What every conversation shares: config, provider, tools, store, prompts and limits. Built once at start-up
//! and read-mostly after that; it starts no actors (that is [`crate::boot`]'s job).

use crate::guardrail::Guardrail;
use crate::ownership::Ownership;
use crate::tasks::TaskHub;
use anyhow::Context;
use minibot_agent::prompt::environment_fragment;
use minibot_agent::{
    ApprovalGate, Limits, ModelSettings, Patterns, PromptBuilder, PromptLibrary, ToolPolicy, ToolRegistry,
};
use minibot_config::Config;
use minibot_llm::ChatProvider;
use minibot_mcp::McpHub;
use minibot_store::Store;
use minibot_tools::ToolServices;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The model a turn talks to: the configured one, or the one a chat switched to (`/model` in the console).
#[derive(Clone)]
pub struct SessionModel {
    /// The provider name as configured (`[llm] provider` or a `[providers.<name>]` section).
    pub provider_name: String,
    pub provider: Arc<dyn ChatProvider>,
    pub settings: ModelSettings,
}

pub struct Runtime {
    pub config: Arc<Config>,
    /// The skill folders, for the catalog in the system prompt (`[tools.skills] preload_catalog`).
    skills: minibot_skills::SkillRegistry,
    pub provider: Arc<dyn ChatProvider>,
    pub model: ModelSettings,
    /// Built-in and task tools, after the main agent's policy; MCP tools are added per turn ([`Runtime::tools`]).
    base_tools: ToolRegistry,
    /// `[tools.safety_classifier]`, when enabled: wraps the base tools once and each turn's MCP tools.
    safety: Option<Arc<minibot_agent::SafetyClassifier>>,
    policy: ToolPolicy,
    /// Tools hidden from the main agent because specialists own them (`tool_ownership_mode`).
    ownership: Ownership,
    pub mcp: Option<Arc<McpHub>>,
    /// `[orchestration].main_tool_use_guardrail = "llm_classifier"`.
    pub guardrail: Option<Guardrail>,
    spill_root: Option<Arc<dyn minibot_agent::SpillStore>>,
    pub store: Store,
    pub limits: Limits,
    /// Which tool calls need the user's approval (`[tools.approval] require_approval`).
    pub approvals: ApprovalGate,
    /// How long a turn waits for the user's answer (`[tools.approval] timeout_seconds`).
    pub approval_timeout: Duration,
    /// Show provider error details in replies (log level DEBUG), as MiniBot does.
    pub verbose_errors: bool,
    /// Background tasks, when `[tasks]` is enabled.
    pub tasks: Option<Arc<TaskHub>>,
    /// Scheduled prompts, when `[scheduler.prompts]` is on (MiniBot's default).
    pub scheduler: Option<SchedulerParts>,
    /// The tools' lazily opened databases (memory, graph), closed at exit.
    tool_stores: Arc<minibot_tools::Closers>,
    /// What `get_settings` reports as running: each turn's tools are recorded here.
    running: Arc<minibot_tools::runtime::Running>,
    prompts: PromptLibrary,
    base_prompt: String,
    channel_prompts: Mutex<HashMap<String, String>>,
    /// The roster generation the cached prompts were composed from: a changed roster (reload_agents, a managed
    /// write) empties the cache, so the next turn's prompt lists the specialists as they are.
    prompt_generation: std::sync::atomic::AtomicU64,
    /// Main-agent turns running now; the daemon waits for them at shutdown.
    active_turns: Arc<std::sync::atomic::AtomicUsize>,
    /// Set at shutdown: no new turn starts (queued ones stay pending for the next start).
    draining: std::sync::atomic::AtomicBool,
    /// When draining began: [`Runtime::close`] waits for running turns until `shutdown_grace_seconds` after it.
    drained_at: OnceLock<Instant>,
    /// Models chats switched to, by session id, for as long as this process runs.
    session_models: Mutex<HashMap<String, SessionModel>>,
}

/// Counts a turn as running for as long as it lives.
pub struct ActiveTurn(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for ActiveTurn {
    fn drop(&mut self) {
        // The last turn of a burst: what the turns used is free now; give it back.
        if self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            crate::memory_release::after_burst(self.0.clone());
        }
    }
}

impl Runtime {
    pub async fn build(config: Config) -> anyhow::Result<Arc<Self>> {
        let config = Arc::new(config);
        let endpoint = config.main_llm();
        let provider =
            minibot_llm::provider_for(&endpoint).with_context(|| format!("llm.provider = {}", endpoint.provider))?;
        let memory_path = minibot_config::sqlite_path_from_url(&config.memory.sqlite_url)
            .map(|p| config.resolve_path(&p))
            .context("memory.sqlite_url is not a SQLite URL")?;
        if config.specialists_enabled() {
            let agents = minibot_config::load_agents(&config.resolve_path(&config.orchestration.directory))?;
            minibot_config::check_agents(&config, &agents)?;
        }
        let store =
            Store::open(&memory_path, config.memory.max_history_messages).await?.with_redactor(config.redactor());

        let mut services = ToolServices::new(config.clone(), Some(store.clone()))
            .with_context(|| format!("tools.file_storage.root_dir = {}", config.tools.file_storage.root_dir))?;
        let scheduler = open_scheduler(&config).await?;
        if let Some(parts) = &scheduler {
            let section = &config.scheduler.prompts;
            services = services.with_scheduler(minibot_tools::scheduler::SchedulerService {
                store: parts.store.clone(),
                wake: parts.wake.clone(),
                min_interval_seconds: section.min_recurrence_interval_seconds.max(1),
                max_attempts: section.max_attempts.max(1),
            });
        }
        minibot_tools::files::check_root(&config, services.files.as_deref())?;
        minibot_tools::exec::sandbox::check(&config, services.files.as_deref()).await?;
        let main = &config.orchestration.main_agent;
        let policy = ToolPolicy::from_lists(&main.tools_allow, &main.tools_deny)
            .context("orchestration.main_agent tool patterns")?;
        let tasks = if config.tasks.enabled { Some(TaskHub::open(config.clone(), store.clone()).await?) } else { None };
        let mut tools = minibot_tools::main_agent_tools(&services);
        if let Some(hub) = &tasks {
            minibot_tools::tasks::register(&mut tools, hub.clone(), &config);
        }
        if let Some(hub) = tasks.as_ref().filter(|_| minibot_config::managed_agents::enabled(&config)) {
            // The roster may grow from empty: fetch_agent_info is there from the start, and hidden while no
            // specialist exists (`Runtime::tools`).
            if tools.get("fetch_agent_info").is_none() {
                let info = minibot_tools::tasks::FetchAgentInfo::new(hub.clone(), config.clone());
                tools.register(minibot_agent::dyn_tool(info));
            }
            let manager = crate::tasks::management::AgentManager::new(config.clone(), hub.roster_cell());
            minibot_tools::agents::register(&mut tools, Arc::new(manager), &config);
        }
        let safety = minibot_agent::SafetyClassifier::from_config(&config)?;
        let base_tools = tools.filtered(&policy);
        let base_tools = match &safety {
            Some(classifier) => classifier.wrap(&base_tools, services.spill_store().as_ref()),
            None => base_tools,
        };
        let mcp = if config.tools.mcp.enabled {
            let hub = McpHub::start(&config).await?;
            tracing::info!(servers = config.tools.mcp.servers.len(), tools = hub.tools().len(), "mcp servers started");
            Some(hub)
        } else {
            None
        };
        let ownership = Ownership::load(&config)?;
        let approvals = ApprovalGate::from_config(&config.tools.approval)?;
        minibot_codemode::with_codemode(&ToolRegistry::new(), &config.tools.codemode)?;
        let guardrail = Guardrail::from_config(&config)?;
        let spill_root = services.spill_store();
        // The console is this version's only channel, and a runtime exists only to serve it ([channels.telegram]
        // and [http] are refused at load while they are not built).
        services.running.set_channels(vec!["console".into()]);

        let prompts = PromptLibrary::new(Some(config.resolve_path(&config.llm.prompts_dir)));
        let base_prompt = minibot_agent::prompt::main_base_prompt(&config, &prompts)?;
        let max_steps = config.llm.max_tool_iterations.max(1);
        let level = config.runtime.log_level.as_deref().unwrap_or(&config.logging.log_level).to_ascii_lowercase();
        Ok(Arc::new(Self {
            skills: minibot_skills::SkillRegistry::from_config(&config),
            model: ModelSettings {
                model: endpoint.model.clone(),
                temperature: endpoint.temperature,
                max_tokens: endpoint.max_new_tokens,
                reasoning_effort: endpoint.reasoning_effort.clone(),
            },
            provider,
            base_tools,
            safety,
            policy,
            ownership,
            mcp,
            guardrail,
            spill_root,
            store,
            limits: Limits {
                max_steps: Some(max_steps),
                max_tool_calls: Some((2 * max_steps).max(12)),
                timeout: Duration::from_secs(config.runtime.agent_timeout_seconds.max(1)),
            },
            approvals,
            approval_timeout: Duration::from_secs(config.tools.approval.timeout_seconds.max(1)),
            verbose_errors: level == "debug" || level == "trace",
            tasks,
            scheduler,
            tool_stores: services.closers.clone(),
            running: services.running.clone(),
            prompts,
            base_prompt,
            channel_prompts: Mutex::new(HashMap::new()),
            prompt_generation: std::sync::atomic::AtomicU64::new(0),
            active_turns: Arc::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
            drained_at: OnceLock::new(),
            session_models: Mutex::new(HashMap::new()),
            config,
        }))
    }

    /// The main agent's system prompt for a channel, composed once per channel.
    pub fn system_prompt(&self, channel: &str) -> String {
        let mut cache = self.channel_prompts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = self.tasks.as_ref().map_or(0, |hub| hub.roster_generation());
        if self.prompt_generation.swap(generation, std::sync::atomic::Ordering::SeqCst) != generation {
            cache.clear();
        }
        cache
            .entry(channel.to_string())
            .or_insert_with(|| {
                let mut builder = PromptBuilder::new(self.base_prompt.clone());
                for policy in self.prompts.policies().unwrap_or_default() {
                    builder.push(policy);
                }
                let delegation_visible =
                    self.base_tools.get("delegate").is_some() || self.base_tools.get("spawn_task").is_some();
                if delegation_visible {
                    if let Ok(Some(policy)) = self.prompts.get("delegation.md") {
                        builder.push(policy);
                    }
                    if let Some(roster) = self.tasks.as_ref().and_then(|hub| hub.roster_prompt()) {
                        builder.push(roster);
                    }
                }
                if let Ok(Some(fragment)) = self.prompts.get(&format!("channels/{channel}.md")) {
                    builder.push(fragment);
                }
                builder.push(environment_fragment(&self.config));
                builder.build()
            })
            .clone()
    }
}

impl Runtime {
    /// The main agent's tools for one turn: built-ins and task tools, plus the MCP tools as they are now (a
    /// reload changes them), after the main agent's policy and tool ownership.
    pub fn tools(&self) -> ToolRegistry {
        if let Some(hub) = &self.tasks {
            self.ownership.refresh(hub.roster_generation(), || hub.agent_definitions());
        }
        let tools = self.turn_tools();
        // With agent management the roster can empty: then there is no specialist to read about.
        let tools = match &self.tasks {
            Some(hub) if hub.roster_is_empty() && tools.get("fetch_agent_info").is_some() => {
                tools.filtered(&ToolPolicy::Deny(Patterns::new(&["fetch_agent_info"]).unwrap_or_default()))
            }
            _ => tools,
        };
        let names = tools.names();
        let servers = self.mcp.as_ref().map_or_else(Vec::new, |hub| hub.servers_serving(&names));
        self.running.set_tools(names, servers);
        self.with_codemode(tools)
    }

    /// `run_tools_script` over the turn's tools when `[tools.codemode]` is on and the main agent's policy keeps it;
    /// it replaces the tools scripts can call as direct tools (reference 3.15).
    fn with_codemode(&self, tools: ToolRegistry) -> ToolRegistry {
        let section = &self.config.tools.codemode;
        if !section.enabled || !self.policy.permits(minibot_codemode::TOOL_NAME) {
            return tools;
        }
        // The patterns were checked at start-up.
        let scripted = minibot_codemode::with_codemode(&tools, section).unwrap_or_else(|_| tools.clone());
        // What the script tool replaced is reached through it; get_settings reports those tools too.
        let replaced = tools.names().into_iter().filter(|name| scripted.get(name).is_none()).collect();
        self.running.set_script_tools(replaced);
        scripted
    }

    fn turn_tools(&self) -> ToolRegistry {
        let mut tools = self.base_tools.clone();
        if let Some(hub) = &self.mcp {
            let remote = hub.spilled_tools(
                |name| self.policy.permits(name) && !self.ownership.hides(name),
                &self.base_tools,
                &self.config.tools.tool_output_spill,
                self.spill_root.as_ref(),
            );
            // The safety classifier covers MCP tools too (the read-back tools in `remote` are wrapped already and
            // are not taken from it).
            let remote = match &self.safety {
                Some(classifier) => classifier.wrap(&remote, self.spill_root.as_ref()),
                None => remote,
            };
            tools.register_missing(&remote);
        }
        if self.ownership.is_shared() {
            return tools;
        }
        let ownership = &self.ownership;
        tools.filtered(&ToolPolicy::Deny(
            Patterns::new(&tools.names().into_iter().filter(|n| ownership.hides(n)).collect::<Vec<_>>())
                .unwrap_or_default(),
        ))
    }

    /// The system prompt for a turn: the channel's composed prompt plus the instructions of the MCP servers
    /// whose tools the agent can see.
    /// The prompt that summarises a chat's history (`compact.md`).
    pub fn compact_prompt(&self) -> String {
        minibot_agent::compaction::compact_prompt(&self.prompts)
    }

    pub fn system_prompt_for(&self, channel: &str, tools: &ToolRegistry) -> String {
        let mut prompt = self.system_prompt(channel);
        if let Some(hub) = &self.mcp {
            // A server's tools reached only from scripts still need its instructions.
            let names = match tools.get(minibot_codemode::TOOL_NAME) {
                Some(_) => self.turn_tools().names(),
                None => tools.names(),
            };
            for fragment in hub.instructions_for(&names) {
                prompt.push_str("\n\n");
                prompt.push_str(&fragment);
            }
        }
        // Read per turn: an installed or edited skill shows from the next turn on (only changed files are re-read).
        if tools.get("activate_skill").is_some()
            && let Some(catalog) = self.skills.catalog_prompt()
        {
            prompt.push_str("\n\n");
            prompt.push_str(&catalog);
        }
        prompt
    }

    /// Closes the databases before the process ends (sqlx drops a pooled connection on the runtime, so the pools
    /// must close while it still runs). No turn starts from now on; turns still running get until
    /// `[runtime] shutdown_grace_seconds` after draining began to finish, because a turn that meets a closed
    /// store fails (and its message would be answered with a store error). A turn still running after that stays
    /// pending and is answered at the next start. Then it waits at most a few seconds for queries in flight.
    pub async fn close(&self) {
        self.finish_turns().await;
        let close = async {
            if let Some(hub) = &self.tasks {
                hub.close().await;
            }
            if let Some(scheduler) = &self.scheduler {
                scheduler.store.close().await;
            }
            self.tool_stores.close_all().await;
            self.store.close().await;
        };
        if tokio::time::timeout(Duration::from_secs(3), close).await.is_err() {
            tracing::warn!("databases still busy at exit; closing without waiting");
        }
    }

    /// Task ids the turn handed off (its reply says so, and `--once` waits for them).
    pub fn take_handoffs(&self, turn_id: &str) -> Vec<String> {
        self.tasks.as_ref().map(|hub| hub.take_handoffs(turn_id)).unwrap_or_default()
    }
}

/// The scheduler's part of the runtime: the store the tools write and the wake-up they ring. The actor that
/// fires jobs ([`crate::scheduler`]) reads them from here.
#[derive(Clone)]
pub struct SchedulerParts {
    pub store: minibot_scheduler::SchedulerStore,
    pub wake: minibot_scheduler::Wake,
}

/// Opens the scheduled prompts database when `[scheduler.prompts]` is on (it is unless `enabled = false`).
async fn open_scheduler(config: &Config) -> anyhow::Result<Option<SchedulerParts>> {
    let section = &config.scheduler.prompts;
    if section.enabled == Some(false) {
        return Ok(None);
    }
    let path = minibot_config::sqlite_path_from_url(&section.sqlite_url)
        .map(|p| config.resolve_path(&p))
        .context("scheduler.prompts.sqlite_url is not a SQLite URL")?;
    let settings = minibot_scheduler::StoreSettings {
        batch_size: section.batch_size.max(1),
        lease: Duration::from_secs(section.lease_timeout_seconds.max(1)),
    };
    let store = minibot_scheduler::SchedulerStore::open(&path, section.pool_size.max(1), settings)
        .await
        .with_context(|| format!("scheduler.prompts.sqlite_url = {}", section.sqlite_url))?;
    Ok(Some(SchedulerParts { store, wake: minibot_scheduler::Wake::default() }))
}

impl Runtime {
    /// Marks a turn as running until the returned guard drops.
    pub fn turn_started(&self) -> ActiveTurn {
        self.active_turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ActiveTurn(self.active_turns.clone())
    }

    /// The channels this process serves, as `get_settings` reports them.
    pub fn set_channels(&self, channels: Vec<String>) {
        self.running.set_channels(channels);
    }

    /// The channels this process serves.
    pub fn channels(&self) -> Vec<String> {
        self.running.snapshot().channels
    }

    /// Drains, then waits for running turns until `[runtime] shutdown_grace_seconds` after draining began (a
    /// second call does not wait again); returns how many still run, and logs them: they stay pending and are
    /// answered after the next start.
    pub async fn finish_turns(&self) -> usize {
        self.drain();
        let grace = Duration::from_secs(self.config.runtime.shutdown_grace_seconds);
        let deadline = self.drained_at.get().copied().unwrap_or_else(Instant::now) + grace;
        while self.active_turns() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let unfinished = self.active_turns();
        if unfinished > 0 {
            tracing::warn!(
                turns = unfinished,
                "turns still running at the end of the grace period; they are answered after the next start"
            );
        }
        unfinished
    }

    /// From now on no turn starts; the running ones finish.
    pub fn drain(&self) {
        self.drained_at.get_or_init(Instant::now);
        self.draining.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many main-agent turns are running.
    pub fn active_turns(&self) -> usize {
        self.active_turns.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Runtime {
    /// The model a session's next turn uses: the one it switched to, else the configured one.
    pub fn model_for(&self, session: &str) -> SessionModel {
        let switched =
            self.session_models.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(session).cloned();
        switched.unwrap_or_else(|| SessionModel {
            provider_name: self.config.llm.provider.clone(),
            provider: self.provider.clone(),
            settings: self.model.clone(),
        })
    }

    /// Switches a session to `model` for as long as this process runs (a running turn keeps its model).
    pub fn set_model(&self, session: &str, model: SessionModel) {
        self.session_models.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(session.to_string(), model);
    }
}
