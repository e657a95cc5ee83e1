//! Shared setup: a scripted model, the real provider pointed at it, and small tools that count their calls.

mod approvals;
mod compaction;
mod directives;
mod errors;
mod guards;
mod limits;
mod replies;
mod safety;
mod spill;
mod steering;

use minibot_agent::{
    AgentError, AgentEvent, AgentOutcome, AgentRun, Limits, ModelSettings, SpillStore, SpilledFile, Steer, Tool,
    ToolContext, ToolError, ToolRegistry, ToolResult, dyn_tool,
};
use minibot_config::Config;
use minibot_llm::ChatProvider;
use minibot_test_support::{Script, ScriptedLlm};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// A spill store on a plain folder, by joined paths. The assistant's store (the file tools' `ManagedRoot`) keeps
/// every operation inside its root through a handle; these tests are about what the agent does with a store, not
/// about confinement, which the file tools' tests cover.
pub struct FolderStore(PathBuf);

/// A [`FolderStore`] on `root`, as the spill and the safety classifier take it.
pub fn folder_store(root: &Path) -> Arc<dyn SpillStore> {
    Arc::new(FolderStore(root.to_path_buf()))
}

impl SpillStore for FolderStore {
    fn create_spill(&self, subdir: &str, prefix: &str, suffix: &str, bytes: &[u8]) -> std::io::Result<SpilledFile> {
        let relative = format!("{subdir}/{prefix}{}{suffix}", uuid_like());
        let absolute = self.0.join(&relative);
        std::fs::create_dir_all(self.0.join(subdir))?;
        std::fs::write(&absolute, bytes)?;
        Ok(SpilledFile { relative, absolute })
    }

    fn open_spilled(&self, relative: &str) -> std::io::Result<std::fs::File> {
        std::fs::File::open(self.0.join(relative))
    }

    fn remove_spilled(&self, relative: &str) -> std::io::Result<()> {
        std::fs::remove_file(self.0.join(relative))
    }
}

/// A name part that differs between calls in this process.
fn uuid_like() -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    format!("{:06}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// What a [`CountingTool`] does when called.
#[derive(Clone, Copy)]
pub enum Behaviour {
    /// Answers `{"ok": true, "echo": <args>}`: the same arguments always give the same result.
    Echo,
    /// Answers an error the model should read (`RespondToModel`).
    Fail,
    /// Ends the run (`Fatal`).
    Fatal,
    /// Sleeps this long, then echoes.
    Sleep(Duration),
}

/// A test tool that counts how often it ran.
pub struct CountingTool {
    name: &'static str,
    behaviour: Behaviour,
    calls: Arc<AtomicUsize>,
}

impl Tool for CountingTool {
    type Args = Value;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> String {
        format!("Test tool `{}`.", self.name)
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": { "n": { "type": "integer" } } })
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> ToolResult {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.behaviour {
            Behaviour::Echo => Ok(json!({ "ok": true, "echo": args })),
            Behaviour::Fail => Err(ToolError::respond("broken", "the test tool always fails")),
            Behaviour::Fatal => Err(ToolError::Fatal("the test tool gave up".into())),
            Behaviour::Sleep(duration) => {
                tokio::time::sleep(duration).await;
                Ok(json!({ "ok": true, "echo": args }))
            }
        }
    }
}

/// Tool names the [`Agent`] registers.
pub const COUNTER: &str = "counter";
pub const FAILING: &str = "failing";
pub const FATAL: &str = "fatal";
pub const SLOW: &str = "slow";

/// Generous limits: a test lowers the one it is about.
pub fn limits() -> Limits {
    Limits { max_steps: Some(20), max_tool_calls: Some(50), timeout: Duration::from_secs(60) }
}

/// A scripted model, the real OpenAI-compatible provider over HTTP, and the counting tools.
pub struct Agent {
    pub llm: ScriptedLlm,
    provider: Arc<dyn ChatProvider>,
    model: ModelSettings,
    tools: ToolRegistry,
    counters: Vec<(&'static str, Arc<AtomicUsize>)>,
}

impl Agent {
    pub async fn start(scripts: Vec<Script>) -> Self {
        let llm = ScriptedLlm::start(scripts).await;
        // No retries: every request the agent makes reaches the server exactly once.
        let toml = format!(
            "[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nmodel = \"test-model\"\nretry_attempts = 0\n\
             request_timeout_seconds = 120\n",
            llm.base_url()
        );
        let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).expect("test config");
        let provider = minibot_llm::provider_for(&config.main_llm()).expect("provider");
        let mut tools = ToolRegistry::new();
        let mut counters = Vec::new();
        for (name, behaviour) in [
            (COUNTER, Behaviour::Echo),
            (FAILING, Behaviour::Fail),
            (FATAL, Behaviour::Fatal),
            (SLOW, Behaviour::Sleep(Duration::from_secs(60))),
        ] {
            let calls = Arc::new(AtomicUsize::new(0));
            tools.register(dyn_tool(CountingTool { name, behaviour, calls: calls.clone() }));
            counters.push((name, calls));
        }
        let model = ModelSettings { model: "test-model".into(), ..ModelSettings::default() };
        Self { llm, provider, model, tools, counters }
    }

    /// How often the tool `name` ran.
    pub fn calls(&self, name: &str) -> usize {
        let (_, calls) = self.counters.iter().find(|(n, _)| *n == name).expect("a registered test tool");
        calls.load(Ordering::SeqCst)
    }

    /// A run without steering.
    pub async fn run(&self, user: &str, limits: Limits) -> Result<AgentOutcome, AgentError> {
        self.run_with(user, limits, None, &|_| {}).await
    }

    pub async fn run_with(
        &self,
        user: &str,
        limits: Limits,
        inbox: Option<&mut UnboundedReceiver<Steer>>,
        on_event: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> Result<AgentOutcome, AgentError> {
        AgentRun {
            provider: self.provider.as_ref(),
            model: &self.model,
            tools: &self.tools,
            system_prompt: "You are a test agent.".into(),
            history: Vec::new(),
            user_message: user.into(),
            limits,
            context: ToolContext::default(),
            approvals: None,
            inbox,
            on_event,
            keys: Default::default(),
            stream: false,
            known_tokens: None,
            compaction: None,
        }
        .run()
        .await
    }

    /// A run that compacts its conversation at `threshold_tokens`; the events it reported.
    pub async fn run_compacting(
        &self,
        user: &str,
        threshold_tokens: u64,
    ) -> (Result<AgentOutcome, AgentError>, Vec<AgentEvent>) {
        let events = std::sync::Mutex::new(Vec::new());
        let on_event = |event: AgentEvent| events.lock().unwrap().push(event);
        let compaction = minibot_agent::compaction::RunCompaction {
            threshold_tokens,
            hard_limit: None,
            compactor: minibot_agent::compaction::Compactor {
                provider: self.provider.as_ref(),
                model: self.model.model.clone(),
                reasoning_effort: None,
                prompt: "Summarise.".into(),
                part_tokens: 10_000,
            },
        };
        let outcome = AgentRun {
            provider: self.provider.as_ref(),
            model: &self.model,
            tools: &self.tools,
            system_prompt: "You are a test agent.".into(),
            history: Vec::new(),
            user_message: user.into(),
            limits: limits(),
            context: ToolContext::default(),
            approvals: None,
            inbox: None,
            on_event: &on_event,
            keys: Default::default(),
            stream: false,
            known_tokens: None,
            compaction: Some(compaction),
        }
        .run()
        .await;
        (outcome, events.into_inner().unwrap())
    }

    /// Every request body the agent sent, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.llm.requests()
    }
}

/// The messages of one request.
pub fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().expect("a messages array")
}

/// The roles of a request's messages, in order.
pub fn roles(request: &Value) -> Vec<String> {
    messages(request).iter().map(|m| m["role"].as_str().expect("a role").to_string()).collect()
}

/// The texts of a request's user messages, in order.
pub fn user_texts(request: &Value) -> Vec<String> {
    messages(request)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().expect("user text").to_string())
        .collect()
}

/// The tool results of a request, parsed, in order.
pub fn tool_results(request: &Value) -> Vec<Value> {
    messages(request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().expect("tool content")).expect("JSON tool content"))
        .collect()
}

/// The last message of a request.
pub fn last_message(request: &Value) -> Value {
    messages(request).last().cloned().expect("at least one message")
}
