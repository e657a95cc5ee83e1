//! `get_settings` reports what runs, not what the config asks for: the tools the agent was given after its
//! policy, the sandbox each execution tool applies on this host, and only channels and services that run.

use super::Env;
use minibot_agent::{ToolContext, ToolPolicy};
use serde_json::{Value, json};

async fn settings(env: &Env) -> Value {
    env.ok("get_settings", json!({})).await
}

fn tool_names(report: &Value) -> Vec<String> {
    report["tools"].as_object().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn lists_the_tools_the_agent_has_after_its_policy() {
    let env = Env::new("");
    let before = tool_names(&settings(&env).await);
    assert!(before.contains(&"bash".to_string()) && before.contains(&"read_file".to_string()), "{before:?}");

    // What the orchestrator does with `[orchestration.main_agent] tools_deny`: filter, then record the result.
    let policy = ToolPolicy::from_lists(&[], &["bash".to_string(), "python_*".to_string()]).unwrap();
    let filtered = env.tools.filtered(&policy);
    env.services.running.set_tools(filtered.names(), Vec::new());
    let report = filtered.get("get_settings").unwrap().call_json(json!({}), &ToolContext::default()).await.unwrap();
    let mut after = tool_names(&report);
    let mut expected = filtered.names();
    after.sort();
    expected.sort();
    assert_eq!(after, expected);
    for gone in ["bash", "python_execute", "python_environment_info"] {
        assert!(!after.contains(&gone.to_string()), "{gone} is still reported: {after:?}");
    }
    assert_eq!(report["file_storage"]["mode"], "confined");
    assert_eq!(report["tools"]["grep"]["max_matches"], 200);
}

#[tokio::test]
async fn a_worker_reports_its_own_tool_set() {
    let env = Env::new("[tools.http_client]\nenabled = true\n");
    let worker = minibot_tools::worker_generic_tools(&env.services);
    let report = worker.get("get_settings").unwrap().call_json(json!({}), &ToolContext::default()).await.unwrap();
    let names = tool_names(&report);
    assert!(names.contains(&"http_request".to_string()), "{names:?}");
    assert!(!names.contains(&"chat_history_trim".to_string()), "workers have no chat history tools: {names:?}");
    assert_eq!(report["channels"], json!([]), "a worker serves no channel");
}

#[tokio::test]
async fn the_sandbox_reported_is_the_one_a_run_gets() {
    let env = Env::new(
        "[tools.python_exec]\nsandbox_mode = \"jail\"\n\
         [tools.bash]\nenabled = true\nsandbox_mode = \"rlimit\"\n[tools.bash.rlimit]\nenabled = true\n",
    );
    let report = settings(&env).await;
    let python = &report["tools"]["python_execute"];
    assert_eq!(python["sandbox_mode"], "jail", "{python}");
    let why = python["sandbox_unavailable"].as_str().unwrap();
    assert!(why.contains("[tools.python_exec.jail] enabled = false"), "{python}");
    let bash = &report["tools"]["bash"];
    assert_eq!(bash["sandbox_mode"], "rlimit", "{bash}");
    assert!(bash.get("sandbox_unavailable").is_none(), "{bash}");

    // The same run through python_execute does not run, and says why.
    let (code, message) = env.err("python_execute", json!({ "code": "print(1)" })).await;
    assert_eq!(code, "sandbox_unavailable");
    assert!(message.contains(why), "{message}");
}

#[tokio::test]
async fn services_that_do_not_run_are_not_reported() {
    // MiniBot's defaults turn the scheduler and Telegram on; neither runs here.
    let env =
        Env::new("[channels.telegram]\nenabled = false\nbot_token = \"1:x\"\n[scheduler.prompts]\nenabled = false\n");
    let report = settings(&env).await;
    for key in ["scheduler", "vault", "mcp"] {
        assert!(report.get(key).is_none(), "{key} reported: {report}");
    }
    assert_eq!(report["channels"], json!([]));
    let empty = settings(&Env::new("")).await;
    assert!(empty.get("scheduler").is_none(), "{empty}");
    assert!(!empty.to_string().contains("telegram"), "{empty}");

    env.services.running.set_channels(vec!["console".into()]);
    assert_eq!(settings(&env).await["channels"], json!(["console"]));
}

#[tokio::test]
async fn mcp_servers_are_the_ones_whose_tools_the_agent_has() {
    let env = Env::new(
        "[tools.mcp]\nenabled = true\n[[tools.mcp.servers]]\nname = \"up\"\ncommand = \"x\"\n\
         [[tools.mcp.servers]]\nname = \"down\"\ncommand = \"y\"\n",
    );
    assert!(settings(&env).await.get("mcp").is_none(), "no MCP tools registered yet");
    let mut names = env.tools.names();
    names.push("mcp_up__echo".into());
    env.services.running.set_tools(names, vec!["up".into()]);
    let report = settings(&env).await;
    assert_eq!(report["mcp"]["servers"], json!(["up"]));
    assert_eq!(report["tools"]["mcp_up__echo"], json!({}));
}

#[tokio::test]
async fn inside_a_run_the_run_s_own_tools_are_reported() {
    let env = Env::new("");
    let agent_tools: std::sync::Arc<[String]> = vec!["get_settings".to_string(), "grep".to_string()].into();
    let ctx = ToolContext { agent_tools: Some(agent_tools), ..Default::default() };
    let report = env.call_in("get_settings", json!({}), &ctx).await.unwrap();
    assert_eq!(tool_names(&report), ["get_settings", "grep"]);
    assert!(report.get("file_storage").is_none(), "no file tool in this run: {report}");
}
