use super::Env;
use minibot_agent::{Tool, ToolContext, ToolRegistry, ToolResult, dyn_tool, wrap_with_spill};
use minibot_config::ToolOutputSpillSection;
use serde::Deserialize;
use serde_json::{Value, json};

struct Chatty;

#[derive(Deserialize)]
struct NoArgs {}

impl Tool for Chatty {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "chatty"
    }
    fn description(&self) -> String {
        "talks a lot".into()
    }
    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {} })
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> ToolResult {
        Ok(json!({ "ok": true, "text": "é".repeat(2_000), "directive": { "type": "send_file", "path": "/x" } }))
    }
}

#[tokio::test]
async fn long_results_are_spilled_with_a_pointer_and_directives_survive() {
    let env = Env::new("");
    let mut registry = ToolRegistry::new();
    registry.register(dyn_tool(Chatty));
    for name in ["read_file", "code_read", "grep"] {
        registry.register(std::sync::Arc::clone(env.tools.get(name).unwrap()));
    }
    let config = ToolOutputSpillSection::default();
    let wrapped = wrap_with_spill(&registry, &config, env.services.spill_store().as_ref());
    // 2 000 × "é" is 2 000 characters but 12 000 once JSON-escaped: over the 8 000 threshold.
    let out = wrapped.get("chatty").unwrap().call_json(json!({}), &ToolContext::default()).await.unwrap();
    assert_eq!(out["output_storage"], "managed_file");
    assert_eq!(out["tool"], "chatty");
    assert_eq!(out["ok"], true);
    assert_eq!(out["directive"]["type"], "send_file");
    assert_eq!(out["output_preview"].as_str().unwrap().chars().count(), 800);
    assert!(out["output_notice"].as_str().unwrap().contains("code_read"));
    let rel = out["output_file_path"].as_str().unwrap();
    assert!(rel.starts_with("tool_output/tmp/tool-chatty-") && rel.ends_with(".json"), "{rel}");
    let text = std::fs::read_to_string(env.root().join(rel)).unwrap();
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(saved["text"].as_str().unwrap().chars().count(), 2_000);
    // Saved pretty-printed, one field per line, so code_read and grep can work through it.
    assert!(text.lines().count() > 3);
    let window = wrapped
        .get("grep")
        .unwrap()
        .call_json(json!({ "pattern": "\"type\"", "path": rel }), &ToolContext::default())
        .await
        .unwrap();
    assert_eq!(window["count"], 1, "{window}");
}

#[tokio::test]
async fn spill_needs_a_readback_tool_and_skips_excluded_tools() {
    let env = Env::new("");
    let mut lonely = ToolRegistry::new();
    lonely.register(dyn_tool(Chatty));
    let config = ToolOutputSpillSection::default();
    let cut = wrap_with_spill(&lonely, &config, env.services.spill_store().as_ref());
    let out = cut.get("chatty").unwrap().call_json(json!({}), &ToolContext::default()).await.unwrap();
    assert!(out.get("output_storage").is_none(), "no read-back tool: nothing to point at");
    // Cut instead: the directive survives, and the preview stays within the threshold as the model counts it
    // (each "é" is a 6-character escape).
    assert_eq!(out["output_truncated"], true, "{out}");
    assert_eq!(out["directive"]["type"], "send_file");
    let preview = out["output_preview"].as_str().unwrap();
    let counted: usize = preview.chars().map(|c| if c.is_ascii() { 1 } else { 6 }).sum();
    assert!((7_990..=8_000).contains(&counted), "preview counts {counted} chars");
    assert!(!env.root().join("tool_output").exists());

    lonely.register(std::sync::Arc::clone(env.tools.get("grep").unwrap()));
    let excluded = ToolOutputSpillSection { exclude_tools: vec!["chatty".into()], ..config };
    let wrapped = wrap_with_spill(&lonely, &excluded, env.services.spill_store().as_ref());
    let out = wrapped.get("chatty").unwrap().call_json(json!({}), &ToolContext::default()).await.unwrap();
    assert!(out.get("output_storage").is_none());
}

#[tokio::test]
async fn main_agent_tools_are_wrapped() {
    let env = Env::new("[tools.tool_output_spill]\nenabled = true\n");
    env.write("big.txt", &"x".repeat(20_000));
    let out = env.ok("read_file", json!({ "path": "big.txt" })).await;
    assert_eq!(out["output_storage"], "managed_file", "{out}");
}

/// Swaps the spill folder for a link to the outside folder, spills `chatty`'s output and checks nothing was
/// written outside; returns the result.
async fn spill_through_a_planted_link(env: &Env) -> Value {
    let mut registry = ToolRegistry::new();
    registry.register(dyn_tool(Chatty));
    registry.register(std::sync::Arc::clone(env.tools.get("grep").unwrap()));
    std::fs::create_dir_all(env.root().join("tool_output")).unwrap();
    std::os::unix::fs::symlink(env.outside(), env.root().join("tool_output/tmp")).unwrap();
    let before = super::tree(&env.outside());
    let wrapped = wrap_with_spill(&registry, &ToolOutputSpillSection::default(), env.services.spill_store().as_ref());
    let out = wrapped.get("chatty").unwrap().call_json(json!({}), &ToolContext::default()).await.unwrap();
    assert_eq!(super::tree(&env.outside()), before, "the spill wrote through the link: {out}");
    out
}

/// A contained `bash` can write the managed root, so it can swap the spill folder for a link to any folder
/// the assistant can write (red-team report: `repro_spill_symlink.sh`). The spill must not follow it: nothing is
/// written outside, and the result is cut with a notice instead.
#[tokio::test]
async fn a_spill_folder_swapped_for_a_link_is_not_followed() {
    let env = Env::new("");
    let out = spill_through_a_planted_link(&env).await;
    assert!(out.get("output_storage").is_none(), "{out}");
    assert_eq!(out["output_truncated"], true, "{out}");
    assert!(out["output_notice"].as_str().unwrap().contains("could not be saved"), "{out}");
}

/// The same with `allow_outside_root`: that lets the model name outside paths, not the model's commands steer
/// the assistant's own writes through a link they planted.
#[tokio::test]
async fn a_linked_spill_folder_is_refused_even_when_outside_paths_are_allowed() {
    let env = Env::new("[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\nallow_outside_root = true\n");
    let out = spill_through_a_planted_link(&env).await;
    assert_eq!(out["output_truncated"], true, "{out}");
}

/// The store reads and deletes spilled files only below the root, whatever path it is handed: a result can
/// claim to be spilled anywhere, and the safety check reads and deletes what it names.
#[test]
fn the_spill_store_reads_and_deletes_only_below_the_root() {
    let env = Env::new("");
    let store = env.services.spill_store().unwrap();
    let written = store.create_spill("tool_output/tmp", "tool-x-", ".txt", b"saved").unwrap();
    assert!(written.relative.starts_with("tool_output/tmp/tool-x-"), "{written:?}");
    assert_eq!(std::fs::read(&written.absolute).unwrap(), b"saved");
    assert!(store.open_spilled(&written.relative).is_ok());
    assert!(store.open_spilled("../outside/secret.txt").is_err());
    assert!(store.open_spilled(&env.outside().join("secret.txt").display().to_string()).is_err());
    std::os::unix::fs::symlink(env.outside(), env.root().join("out")).unwrap();
    assert!(store.open_spilled("out/secret.txt").is_err());
    assert!(store.remove_spilled("out/secret.txt").is_err());
    assert!(store.remove_spilled("../outside/secret.txt").is_err());
    assert!(env.outside().join("secret.txt").exists());
    store.remove_spilled(&written.relative).unwrap();
    assert!(!written.absolute.exists());
}
