//! Shared setup: real tools from a config, `run_tools_script` over them, and a scripted model that calls it once.

mod approvals;
mod limits;
mod mcp;
mod scripts;

use minibot_agent::{
    AgentEvent, AgentOutcome, AgentRun, ApprovalGate, Approver, Limits, ModelSettings, Patterns, ToolContext,
    ToolRegistry,
};
use minibot_config::Config;
use minibot_llm::ChatProvider;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tempfile::TempDir;

/// The config every test starts from: file storage, bash and wait on, spill off unless a test turns it on.
const BASE: &str = "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n[tools.bash]\nenabled = true\n\
                    [tools.wait]\nenabled = true\n";

pub struct Env {
    pub _dir: TempDir,
    /// The agent's tools with run_tools_script over them.
    pub tools: ToolRegistry,
}

impl Env {
    /// `extra` is appended to [`BASE`] and a `[tools.codemode]` that is on.
    pub fn new(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let codemode = if extra.contains("[tools.codemode]") { "" } else { "[tools.codemode]\nenabled = true\n" };
        let spill = if extra.contains("[tools.tool_output_spill]") {
            ""
        } else {
            "[tools.tool_output_spill]\nenabled = false\n"
        };
        let toml = format!("{BASE}{codemode}{spill}{extra}");
        let config = Arc::new(Config::from_toml(&toml, "test.toml", dir.path(), &|_| None).unwrap());
        let services = minibot_tools::ToolServices::new(config.clone(), None).unwrap();
        // Built as the assistant builds them: spill-wrapped when spill is on.
        let direct = minibot_tools::main_agent_tools(&services);
        let tools = minibot_codemode::with_codemode(&direct, &config.tools.codemode).unwrap();
        Self { _dir: dir, tools }
    }

    /// An environment whose script tools are `tools`.
    pub fn over(tools: &ToolRegistry, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let toml = format!("[tools.codemode]\nenabled = true\n{extra}");
        let config = Arc::new(Config::from_toml(&toml, "test.toml", dir.path(), &|_| None).unwrap());
        let tools = minibot_codemode::with_codemode(tools, &config.tools.codemode).unwrap();
        Self { _dir: dir, tools }
    }
}

/// What one turn did: the script tool's result as the model read it, the events, the outcome.
pub struct Turn {
    pub result: Value,
    pub events: Vec<AgentEvent>,
    pub outcome: AgentOutcome,
}

impl Turn {
    /// The nested calls' `ToolStarted` events: (call id, name, parent call id).
    pub fn nested_started(&self) -> Vec<(String, String, String)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ToolStarted { call_id, name, parent_call_id: Some(parent) } => {
                    Some((call_id.clone(), name.clone(), parent.clone()))
                }
                _ => None,
            })
            .collect()
    }
}

/// How a turn is run: the approvals and limits around it.
pub struct Around {
    pub gate: Option<ApprovalGate>,
    pub approver: Option<Approver>,
    pub limits: Limits,
    pub timeout_seconds: Option<f64>,
}

impl Default for Around {
    fn default() -> Self {
        Self {
            gate: None,
            approver: None,
            limits: Limits { max_steps: Some(5), max_tool_calls: Some(5), timeout: Duration::from_secs(120) },
            timeout_seconds: None,
        }
    }
}

pub fn gate(patterns: &[&str]) -> ApprovalGate {
    ApprovalGate::new(Patterns::new(patterns).unwrap())
}

/// The model calls run_tools_script with `code` once, then answers "done".
pub async fn run(env: &Env, code: &str) -> Turn {
    run_with(env, code, Around::default()).await
}

pub async fn run_with(env: &Env, code: &str, around: Around) -> Turn {
    let mut arguments = json!({ "code": code });
    if let Some(seconds) = around.timeout_seconds {
        arguments["timeout_seconds"] = json!(seconds);
    }
    let llm = ScriptedLlm::start(vec![Script::new(
        "go",
        vec![Reply::tool("run_tools_script", arguments), Reply::text("done")],
    )])
    .await;
    let toml = format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nmodel = \"test-model\"\nretry_attempts = 0\n",
        llm.base_url()
    );
    let llm_config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    let provider: Arc<dyn ChatProvider> = minibot_llm::provider_for(&llm_config.main_llm()).unwrap();
    let model = ModelSettings { model: "test-model".into(), ..ModelSettings::default() };
    let events = Mutex::new(Vec::new());
    let on_event = |event: AgentEvent| events.lock().unwrap().push(event);
    let outcome = AgentRun {
        provider: provider.as_ref(),
        model: &model,
        tools: &env.tools,
        system_prompt: "You are a test agent.".into(),
        history: Vec::new(),
        user_message: "go".into(),
        limits: around.limits,
        context: ToolContext { approver: around.approver, owner_id: "primary".into(), ..ToolContext::default() },
        approvals: around.gate.as_ref(),
        inbox: None,
        on_event: &on_event,
        keys: Default::default(),
        stream: false,
        known_tokens: None,
        compaction: None,
    }
    .run()
    .await
    .unwrap();
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "the model is asked again after the script");
    let tool_message = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("the script's result");
    let result = serde_json::from_str(tool_message["content"].as_str().unwrap()).unwrap();
    Turn { result, events: events.into_inner().unwrap(), outcome }
}

/// The result of a script that must have succeeded.
pub fn ok(turn: &Turn) -> &Value {
    assert_eq!(turn.result["ok"], true, "{}", turn.result);
    &turn.result["result"]
}

/// The error code of a script that must have failed.
pub fn failed(turn: &Turn) -> &str {
    assert_eq!(turn.result["ok"], false, "{}", turn.result);
    turn.result["error_code"].as_str().unwrap()
}
