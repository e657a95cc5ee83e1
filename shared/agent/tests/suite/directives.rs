//! Directives in tool results, carried out by the loop: `send_file` reaches the caller as an event,
//! `self_insert_artifact` puts the file into the next request as content parts, `pre_response` attachments
//! come back with the outcome. Asserted on what the scripted model received.

use super::{limits, messages, tool_results};
use minibot_agent::{
    AgentEvent, AgentOutcome, AgentRun, ModelSettings, OutgoingFile, Tool, ToolContext, ToolRegistry, ToolResult,
    dyn_tool,
};
use minibot_config::Config;
use minibot_llm::ChatProvider;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A tool that answers a fixed result under a given name, standing in for the built-in that issues a directive.
struct Fixed {
    name: &'static str,
    result: Value,
}

impl Tool for Fixed {
    type Args = Value;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        format!("Test stand-in for `{}`.", self.name)
    }
    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {} })
    }
    async fn call(&self, _args: Value, _ctx: &ToolContext) -> ToolResult {
        Ok(self.result.clone())
    }
}

fn provider(llm: &ScriptedLlm) -> Arc<dyn ChatProvider> {
    let toml = format!("[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nretry_attempts = 0\n", llm.base_url());
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).expect("test config");
    minibot_llm::provider_for(&config.main_llm()).expect("provider")
}

/// Runs `user` against the scripted server with `tools`; returns the outcome and the events it reported.
async fn run(llm: &ScriptedLlm, tools: &ToolRegistry, user: &str) -> (AgentOutcome, Vec<AgentEvent>) {
    let provider = provider(llm);
    let model = ModelSettings { model: "test-model".into(), ..ModelSettings::default() };
    let events = Mutex::new(Vec::new());
    let on_event = |event: AgentEvent| events.lock().unwrap().push(event);
    let outcome = AgentRun {
        provider: provider.as_ref(),
        model: &model,
        tools,
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
        compaction: None,
    }
    .run()
    .await
    .unwrap();
    (outcome, events.into_inner().unwrap())
}

fn insert_directive(parts: Value) -> Value {
    json!({ "ok": true, "inserted": true,
            "directive": { "type": "append_message", "message": { "role": "user", "content": parts } } })
}

fn image_part(path: &Path) -> Value {
    json!({ "type": "image", "source": { "type": "managed_file", "path": path.display().to_string() },
            "mime": "image/png", "filename": "dot.png" })
}

fn registry(tools: Vec<Fixed>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(dyn_tool(tool));
    }
    registry
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d,
    0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn png_file(dir: &Path) -> PathBuf {
    let path = dir.join("dot.png");
    std::fs::write(&path, PNG).unwrap();
    path
}

#[tokio::test]
async fn an_inserted_image_is_a_content_part_of_the_next_request_after_every_tool_result() {
    let dir = tempfile::tempdir().unwrap();
    let png = png_file(dir.path());
    let llm = ScriptedLlm::start(vec![Script::new(
        "look at it",
        vec![Reply::tools_raw(&[("self_insert_artifact", "{}"), ("other", "{}")]), Reply::text("a dot")],
    )])
    .await;
    let tools = registry(vec![
        Fixed {
            name: "self_insert_artifact",
            result: insert_directive(json!([{ "type": "text", "text": "the chart" }, image_part(&png)])),
        },
        Fixed { name: "other", result: json!({ "ok": true }) },
    ]);
    let (outcome, _) = run(&llm, &tools, "look at it").await;
    assert_eq!(outcome.answer, "a dot");
    let second = &llm.requests()[1];
    let sent = messages(second);
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    // Both tool results first (the model's tool calls must be answered in one run), then the image.
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "user"]);
    let url = format!(
        "data:image/png;base64,{}",
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
    );
    assert_eq!(
        sent[5]["content"],
        json!([{ "type": "text", "text": "the chart" }, { "type": "image_url", "image_url": { "url": url } }])
    );
    let results = tool_results(second);
    assert_eq!(results[0], json!({ "ok": true, "inserted": true }), "the model reads the result without the directive");
}

#[tokio::test]
async fn an_inserted_text_file_arrives_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "# Notes\nbuy milk\n").unwrap();
    let llm = ScriptedLlm::start(vec![Script::new(
        "read my notes",
        vec![Reply::tools_raw(&[("self_insert_artifact", "{}")]), Reply::text("milk")],
    )])
    .await;
    let part = json!({ "type": "file", "source": { "type": "managed_file", "path": notes.display().to_string() },
                       "mime": "text/markdown", "filename": "notes.md" });
    let tools = registry(vec![Fixed { name: "self_insert_artifact", result: insert_directive(json!([part])) }]);
    run(&llm, &tools, "read my notes").await;
    let last = messages(&llm.requests()[1]).pop().unwrap();
    assert_eq!(last["content"], json!([{ "type": "text", "text": "File notes.md (17 bytes):\n# Notes\nbuy milk\n" }]));
}

#[tokio::test]
async fn a_file_gone_before_the_insert_is_reported_not_inserted() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "look",
        vec![Reply::tools_raw(&[("self_insert_artifact", "{}")]), Reply::text("nothing there")],
    )])
    .await;
    let gone = image_part(Path::new("/nonexistent/minibot-test/dot.png"));
    let tools = registry(vec![Fixed { name: "self_insert_artifact", result: insert_directive(json!([gone])) }]);
    run(&llm, &tools, "look").await;
    let second = &llm.requests()[1];
    let result = &tool_results(second)[0];
    assert_eq!((result["ok"].as_bool(), result["inserted"].as_bool()), (Some(false), Some(false)), "{result}");
    assert!(result["error"].as_str().unwrap().contains("/nonexistent/minibot-test/dot.png"));
    assert_eq!(messages(second).last().unwrap()["role"], "tool", "no message was added");
}

#[tokio::test]
async fn a_directive_from_another_tool_is_neither_read_nor_removed() {
    let dir = tempfile::tempdir().unwrap();
    let png = png_file(dir.path());
    let llm = ScriptedLlm::start(vec![Script::new(
        "use the plugin",
        vec![Reply::tools_raw(&[("mcp_x__read", "{}")]), Reply::text("done")],
    )])
    .await;
    let result = insert_directive(json!([image_part(&png)]));
    let tools = registry(vec![Fixed { name: "mcp_x__read", result: result.clone() }]);
    run(&llm, &tools, "use the plugin").await;
    let second = &llm.requests()[1];
    assert_eq!(tool_results(second)[0], result);
    assert_eq!(messages(second).last().unwrap()["role"], "tool");
}

#[tokio::test]
async fn send_file_reaches_the_caller_as_an_event() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "send it",
        vec![Reply::tools_raw(&[("send_file", "{}")]), Reply::text("sent")],
    )])
    .await;
    let result = json!({ "ok": true, "sent": true, "directive": { "type": "send_file", "path": "/data/files/r.csv",
                         "relative": "r.csv", "caption": "Q3" } });
    let tools = registry(vec![Fixed { name: "send_file", result }]);
    let (_, events) = run(&llm, &tools, "send it").await;
    let sent: Vec<&OutgoingFile> =
        events.iter().filter_map(|e| if let AgentEvent::SendFile(f) = e { Some(f) } else { None }).collect();
    assert_eq!(
        sent,
        [&OutgoingFile {
            path: PathBuf::from("/data/files/r.csv"),
            relative: Some("r.csv".into()),
            caption: Some("Q3".into())
        }]
    );
    assert_eq!(tool_results(&llm.requests()[1])[0], json!({ "ok": true, "sent": true }));
}

/// Answers its results in turn, one per call (the last one again once they run out).
struct Sequence {
    name: &'static str,
    results: Vec<Value>,
    calls: std::sync::atomic::AtomicUsize,
}

impl Tool for Sequence {
    type Args = Value;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "Test tool with changing results.".into()
    }
    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {} })
    }
    async fn call(&self, _args: Value, _ctx: &ToolContext) -> ToolResult {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(self.results[n.min(self.results.len() - 1)].clone())
    }
}

#[tokio::test]
async fn the_last_pre_response_decides_the_attachments() {
    let files = json!([{ "path": "/data/files/a.csv", "relative": "a.csv", "caption": null }]);
    let with = json!({ "kind": "markdown", "directive": { "type": "attach_to_answer", "files": files } });
    let without = json!({ "kind": "text", "directive": { "type": "attach_to_answer", "files": [] } });
    let call = || Reply::tools_raw(&[("pre_response", "{}")]);
    let llm = ScriptedLlm::start(vec![
        Script::new("report", vec![call(), Reply::text("here it is")]),
        Script::new("changed my mind", vec![call(), call(), Reply::text("no files")]),
    ])
    .await;
    let mut tools = ToolRegistry::new();
    tools.register(dyn_tool(Sequence { name: "pre_response", results: vec![with.clone()], calls: Default::default() }));
    let (outcome, _) = run(&llm, &tools, "report").await;
    assert_eq!(
        outcome.attachments,
        [OutgoingFile { path: PathBuf::from("/data/files/a.csv"), relative: Some("a.csv".into()), caption: None }]
    );

    // A later call without attachments takes them back, as a later `kind` replaces an earlier one.
    let mut tools = ToolRegistry::new();
    tools.register(dyn_tool(Sequence {
        name: "pre_response",
        results: vec![with, without],
        calls: Default::default(),
    }));
    let (outcome, _) = run(&llm, &tools, "changed my mind").await;
    assert_eq!(outcome.answer, "no files");
    assert!(outcome.attachments.is_empty(), "{:?}", outcome.attachments);
}
