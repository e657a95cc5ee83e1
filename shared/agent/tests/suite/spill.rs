//! The output spill as an agent meets it: the notice names only the read-back tools the agent really has (its
//! tools can be filtered after wrapping, by a specialist's `tools_allow` or the main agent's policy), and an
//! agent with none gets the result cut instead of pointed at a file it cannot open.

use super::{folder_store, limits, tool_results};
use futures_util::future::BoxFuture;
use minibot_agent::{
    AgentRun, DynTool, ModelSettings, Patterns, ToolContext, ToolPolicy, ToolRegistry, ToolResult, wrap_with_spill,
};
use minibot_config::{Config, ToolOutputSpillSection};
use minibot_llm::ToolSpec;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// A tool with a long result and, optionally, a limit of its own (as MCP bindings declare).
struct Long {
    name: &'static str,
    chars: usize,
    own_limit: Option<usize>,
}

impl DynTool for Long {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: "long output".into(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        }
    }
    fn name(&self) -> &str {
        self.name
    }
    fn spill_after_chars(&self) -> Option<usize> {
        self.own_limit
    }
    fn call_json<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move { Ok(json!({ "ok": true, "content": "x".repeat(self.chars) })) })
    }
}

fn long(name: &'static str) -> Arc<dyn DynTool> {
    Arc::new(Long { name, chars: 20_000, own_limit: None })
}

/// Wraps `tools` for spill into `root`, keeps only `keep` (as a policy applied after wrapping does), lets the
/// model call `call` once and returns the result it read.
async fn result_seen(
    tools: Vec<Arc<dyn DynTool>>,
    keep: &[&str],
    config: &ToolOutputSpillSection,
    root: &Path,
) -> Value {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool);
    }
    let wrapped = wrap_with_spill(&registry, config, Some(&folder_store(root)));
    let patterns: Vec<String> = keep.iter().map(|k| k.to_string()).collect();
    let agent_tools = wrapped.filtered(&ToolPolicy::Allow(Patterns::new(&patterns).unwrap()));
    let llm =
        ScriptedLlm::start(vec![Script::new("go", vec![Reply::tools_raw(&[(keep[0], "{}")]), Reply::text("done")])])
            .await;
    let toml = format!("[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nretry_attempts = 0\n", llm.base_url());
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    let provider = minibot_llm::provider_for(&config.main_llm()).unwrap();
    let model = ModelSettings { model: "m".into(), ..ModelSettings::default() };
    AgentRun {
        provider: provider.as_ref(),
        model: &model,
        tools: &agent_tools,
        system_prompt: "test".into(),
        history: Vec::new(),
        user_message: "go".into(),
        limits: limits(),
        context: ToolContext::default(),
        approvals: None,
        inbox: None,
        on_event: &|_| {},
        keys: Default::default(),
        stream: false,
        known_tokens: None,
        compaction: None,
    }
    .run()
    .await
    .unwrap();
    tool_results(&llm.requests()[1]).remove(0)
}

#[tokio::test]
async fn the_notice_names_only_the_read_back_tools_the_agent_has() {
    let root = tempfile::tempdir().unwrap();
    let tools = vec![long("chatty"), long("grep"), long("read_file"), long("code_read")];
    let seen = result_seen(tools, &["chatty", "grep"], &ToolOutputSpillSection::default(), root.path()).await;
    assert_eq!(seen["output_storage"], "managed_file", "{seen}");
    let notice = seen["output_notice"].as_str().unwrap();
    assert!(notice.contains("Use grep on output_file_path"), "{notice}");
    assert!(!notice.contains("read_file") && !notice.contains("code_read"), "names tools the agent lacks: {notice}");
    let saved = std::fs::read_to_string(root.path().join(seen["output_file_path"].as_str().unwrap())).unwrap();
    assert!(saved.contains(&"x".repeat(20_000)), "the whole result is in the file");
}

#[tokio::test]
async fn without_a_read_back_tool_the_result_is_cut_not_spilled() {
    let root = tempfile::tempdir().unwrap();
    // The registry had read-back tools when it was wrapped; the agent's policy then took them away.
    let tools = vec![long("chatty"), long("grep"), long("bash")];
    let seen = result_seen(tools, &["chatty"], &ToolOutputSpillSection::default(), root.path()).await;
    assert!(seen.get("output_storage").is_none(), "{seen}");
    assert_eq!(seen["output_truncated"], true);
    assert_eq!(seen["ok"], true);
    assert_eq!(seen["tool"], "chatty");
    // The one long text field is previewed as text, cut at the 8 000-char threshold.
    assert_eq!(seen["output_preview"].as_str().unwrap(), "x".repeat(8_000));
    assert!(seen["output_notice"].as_str().unwrap().contains("no tool to read one back"), "{seen}");
    assert!(!root.path().join("tool_output").exists(), "nothing was written");
}

#[tokio::test]
async fn a_tool_with_its_own_limit_is_cut_there_when_spill_is_off_and_spills_past_the_higher_limit() {
    let root = tempfile::tempdir().unwrap();
    let off = ToolOutputSpillSection { enabled: false, ..ToolOutputSpillSection::default() };
    let bound = || -> Vec<Arc<dyn DynTool>> {
        vec![Arc::new(Long { name: "mcp_s__t", chars: 12_000, own_limit: Some(10_000) }), long("grep")]
    };
    let seen = result_seen(bound(), &["mcp_s__t", "grep"], &off, root.path()).await;
    assert_eq!(seen["output_truncated"], true, "{seen}");
    assert_eq!(seen["output_preview"].as_str().unwrap().len(), 10_000);

    // Spill on: the threshold is max(8 000, 10 000), so 12 000 chars spill.
    let seen = result_seen(bound(), &["mcp_s__t", "grep"], &ToolOutputSpillSection::default(), root.path()).await;
    assert_eq!(seen["output_storage"], "managed_file", "{seen}");
    // And a result between the two limits passes whole.
    let short: Vec<Arc<dyn DynTool>> =
        vec![Arc::new(Long { name: "mcp_s__t", chars: 9_000, own_limit: Some(10_000) }), long("grep")];
    let seen = result_seen(short, &["mcp_s__t", "grep"], &ToolOutputSpillSection::default(), root.path()).await;
    assert_eq!(seen["content"].as_str().map(str::len), Some(9_000), "{seen}");
}

#[tokio::test]
async fn an_excluded_tool_without_a_limit_of_its_own_passes_whole() {
    let root = tempfile::tempdir().unwrap();
    let config = ToolOutputSpillSection { exclude_tools: vec!["chatty".into()], ..ToolOutputSpillSection::default() };
    let seen = result_seen(vec![long("chatty"), long("grep")], &["chatty", "grep"], &config, root.path()).await;
    assert_eq!(seen["content"].as_str().map(str::len), Some(20_000), "{seen}");
}
