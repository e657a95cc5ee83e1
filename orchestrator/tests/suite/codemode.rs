//! Codemode for the main agent: with `[tools.codemode]` on, the model is offered run_tools_script instead of the
//! tools scripts call, its script runs them, and the chat sees the nested calls under the script's call.

use super::harness::Harness;
use minibot_agent::AgentEvent;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::json;

fn tool_names(request: &serde_json::Value) -> Vec<String> {
    request["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
}

#[actix::test]
async fn the_main_agent_calls_its_tools_through_a_script() {
    let code = "a = await tools.calculate_expression(expression='6*7')\nt = await tools.current_datetime()\na";
    let llm = ScriptedLlm::start(vec![Script::new(
        "compute",
        vec![Reply::tool("run_tools_script", json!({ "code": code })), Reply::text("It is 42.")],
    )])
    .await;
    let mut h = Harness::start(&llm.base_url(), "[tools.codemode]\nenabled = true\n").await;
    h.send(1, "compute");
    assert_eq!(h.reply().await.text, "It is 42.");

    let requests = llm.requests();
    let offered = tool_names(&requests[0]);
    assert!(offered.contains(&"run_tools_script".to_string()), "{offered:?}");
    assert!(!offered.contains(&"calculate_expression".to_string()), "replaced by the script tool: {offered:?}");
    let result = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    let result: serde_json::Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["ok"], true, "{result}");

    let mut parent = None;
    let mut nested = Vec::new();
    while let Ok(progress) = h.progress.try_recv() {
        match progress.event {
            AgentEvent::ToolStarted { call_id, parent_call_id: None, .. } => parent = Some(call_id),
            AgentEvent::ToolStarted { name, parent_call_id: Some(p), .. } => nested.push((name, p)),
            _ => {}
        }
    }
    let parent = parent.expect("the script call");
    assert_eq!(
        nested,
        [("calculate_expression".to_string(), parent.clone()), ("current_datetime".to_string(), parent)]
    );
}

#[actix::test]
async fn a_policy_without_the_script_tool_keeps_the_tools_direct() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let mut h = Harness::start(
        &llm.base_url(),
        "[tools.codemode]\nenabled = true\n[orchestration.main_agent]\ntools_deny = [\"run_tools_script\"]\n",
    )
    .await;
    h.send(1, "hi");
    assert_eq!(h.reply().await.text, "hello");
    let offered = tool_names(&llm.requests()[0]);
    assert!(!offered.contains(&"run_tools_script".to_string()), "{offered:?}");
    assert!(offered.contains(&"calculate_expression".to_string()), "{offered:?}");
}

#[actix::test]
async fn get_settings_reports_the_tools_reached_only_through_scripts() {
    let code = "s = await tools.get_settings()\n{'names': sorted(s['script_tools'].keys()), \
                'calc': s['script_tools']['calculate_expression']}";
    let llm = ScriptedLlm::start(vec![Script::new(
        "settings",
        vec![Reply::tool("run_tools_script", json!({ "code": code })), Reply::text("listed")],
    )])
    .await;
    let mut h = Harness::start(&llm.base_url(), "[tools.codemode]\nenabled = true\n").await;
    h.send(1, "settings");
    assert_eq!(h.reply().await.text, "listed");
    let requests = llm.requests();
    let result = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    let result: serde_json::Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["ok"], true, "{result}");
    let names: Vec<&str> = result["result"]["names"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    for expected in ["calculate_expression", "current_datetime", "get_settings"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    assert!(!names.contains(&"run_tools_script"), "{names:?}");
    assert_eq!(result["result"]["calc"]["default_scale"], 28, "{result}");
}
