//! MCP end to end: the real `minibot` binary with `@modelcontextprotocol/server-everything` over stdio.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, stderr, stdout};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The MCP peer `@modelcontextprotocol/server-everything` (installed by scripts/setup-mcp-peers.sh).
pub(crate) fn everything_js() -> String {
    let dir = std::env::var_os("MINIBOT_MCP_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/minibot-rs/mcp-peers"));
    let path = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.is_file(), "server-everything missing at {}: run scripts/setup-mcp-peers.sh", path.display());
    path.display().to_string()
}

fn mcp_config() -> String {
    format!(
        "[tools.mcp]\nenabled = true\ntimeout_seconds = 20\n[[tools.mcp.servers]]\nname = \"everything\"\n\
         command = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
        everything_js()
    )
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_model_calls_an_mcp_tool_and_the_user_sees_its_result() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "echo through mcp",
        vec![
            Reply::tool("mcp_everything__echo", json!({ "message": "hello from mcp" })),
            Reply::text("The server said hello."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), &mcp_config());
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "echo through mcp"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The server said hello.\n");
    let requests = llm.requests();
    let offered = tool_names(&requests[0]);
    assert!(offered.contains(&"mcp_everything__echo".to_string()), "{offered:?}");
    let echo = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp_everything__echo")
        .unwrap();
    assert!(echo["function"]["description"].as_str().unwrap().starts_with("[everything]"));
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("MCP server `everything` instructions"), "server instructions in the prompt");
    let result = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    let result: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["ok"], true);
    assert_eq!(result["server"], "everything");
    assert!(result["result"].as_str().unwrap().contains("hello from mcp"), "{result}");
}

#[tokio::test]
async fn a_specialist_gets_its_own_mcp_servers_in_the_worker() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "ask the echo agent",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "echo something", "agent_name": "echoer" })),
                Reply::text("Asked the echo agent."),
            ],
        ),
        Script::new(
            "echo something",
            vec![
                Reply::tool("mcp_everything__echo", json!({ "message": "from the specialist" })),
                Reply::text("Echoed."),
            ],
        ),
    ])
    .await;
    // The main agent does not see the server's tools (exclusive_mcp); the specialist does.
    let extra = format!(
        "{}[orchestration]\ntool_ownership_mode = \"exclusive_mcp\"\n[tasks]\nlocal_workers = 1\n",
        mcp_config()
    );
    let home = Home::new(&llm.base_url(), &extra);
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(
        home.path().join("agents/echoer.md"),
        "---\nname: echoer\ndescription: Echoes things\ntools_allow:\n  - current_datetime\nmcp_servers:\n  - everything\n---\nYou echo what you are asked to.\n",
    )
    .unwrap();
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "ask the echo agent"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Asked the echo agent.\nEchoed.\n");
    let requests = llm.requests();
    let main = tool_names(&requests[0]);
    assert!(!main.iter().any(|n| n.starts_with("mcp_everything__")), "hidden from the main agent: {main:?}");
    assert!(requests[0]["messages"][0]["content"].as_str().unwrap().contains("- echoer: Echoes things"));
    let worker = requests
        .iter()
        .find(|r| r["messages"].as_array().unwrap().iter().any(|m| m["content"] == "echo something"))
        .unwrap();
    let worker_tools = tool_names(worker);
    assert!(worker_tools.contains(&"mcp_everything__echo".to_string()), "{worker_tools:?}");
    assert!(worker_tools.contains(&"current_datetime".to_string()));
    assert!(!worker_tools.contains(&"calculate_expression".to_string()), "tools_allow limits built-in tools");
    assert!(!worker_tools.contains(&"spawn_task".to_string()));
    let worker_result = requests
        .iter()
        .filter_map(|r| r["messages"].as_array())
        .flat_map(|m| m.iter())
        .find(|m| m["role"] == "tool" && m["content"].as_str().unwrap_or_default().contains("from the specialist"));
    assert!(worker_result.is_some(), "the specialist's MCP call ran");
}

#[actix::test]
async fn a_server_down_at_start_up_gets_its_tools_once_it_comes_up() {
    use minibot_orchestrator::tasks::WorkerStart;
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("server-may-start");
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"k\"\n[tools.mcp]\nenabled = true\ntimeout_seconds = 10\n\
             [[tools.mcp.servers]]\nname = \"late\"\ncommand = \"sh\"\n\
             args = [\"-c\", \"test -f {} && exec node {} stdio\"]\n",
            flag.display(),
            everything_js()
        ),
    )
    .unwrap();
    let config = minibot_config::Config::load(Some(&path)).unwrap();
    let booted = minibot_orchestrator::boot::start(config, None, WorkerStart::AtOnce).await.unwrap();
    let rt = booted.runtime;
    assert!(!rt.tools().names().iter().any(|n| n.starts_with("mcp_late__")), "no tools while the server is down");
    std::fs::write(&flag, "").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    while !rt.tools().names().iter().any(|n| n == "mcp_late__echo") {
        assert!(std::time::Instant::now() < deadline, "the supervisor brought the server's tools in");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The tool results the model received, in order.
fn tool_results(llm: &ScriptedLlm) -> Vec<Value> {
    let requests = llm.requests();
    let last = requests.last().expect("a request");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect()
}

#[tokio::test]
async fn a_long_mcp_result_is_spilled_whole_to_a_managed_file() {
    let long = format!("{}END", "z".repeat(9_000));
    let llm = ScriptedLlm::start(vec![Script::new(
        "long echo",
        vec![
            Reply::tool("mcp_everything__echo", json!({ "message": long })),
            Reply::tool("mcp_everything__echo", json!({ "message": "m".repeat(3_000) })),
            Reply::text("Done."),
        ],
    )])
    .await;
    // Spill threshold: the larger of spill_after_chars (2 000) and the server's inline_result_chars (5 000).
    let extra = format!(
        "{}inline_result_chars = 5000\n[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n\
         [tools.tool_output_spill]\nspill_after_chars = 2000\n",
        mcp_config()
    );
    let home = Home::new(&llm.base_url(), &extra);
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "long echo"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let results = tool_results(&llm);
    assert_eq!(results.len(), 2, "{results:?}");

    let spilled = &results[0];
    assert_eq!(spilled["output_storage"], "managed_file", "{spilled}");
    assert_eq!(spilled["tool"], "mcp_everything__echo");
    assert!(spilled["output_notice"].as_str().unwrap().contains("read_file"), "{spilled}");
    let path = spilled["output_file_absolute_path"].as_str().unwrap();
    assert!(path.starts_with(&home.path().join("files").canonicalize().unwrap().display().to_string()), "{path}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(saved["server"], "everything");
    assert!(saved["result"].as_str().unwrap().contains(&long), "the file holds the whole result, not a cut one");

    // Between spill_after_chars and inline_result_chars: under the threshold, so it arrives whole.
    let whole = &results[1];
    assert!(whole.get("output_storage").is_none(), "{whole}");
    assert!(whole["result"].as_str().unwrap().contains(&"m".repeat(3_000)), "{whole}");
}

#[tokio::test]
async fn without_spill_a_long_mcp_result_is_cut_to_inline_result_chars() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "long echo",
        vec![Reply::tool("mcp_everything__echo", json!({ "message": "z".repeat(9_000) })), Reply::text("Done.")],
    )])
    .await;
    // No file storage: nothing to spill to.
    let extra = format!("{}inline_result_chars = 500\n", mcp_config());
    let home = Home::new(&llm.base_url(), &extra);
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "long echo"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let results = tool_results(&llm);
    let cut = &results[0];
    assert_eq!(cut["output_truncated"], true, "{cut}");
    assert_eq!(cut["ok"], true, "{cut}");
    assert!(cut["output_preview"].as_str().unwrap().chars().count() <= 500, "{cut}");
    assert!(cut.to_string().len() < 2_000, "nothing past the limit reaches the model: {cut}");
}

#[tokio::test]
async fn a_specialists_long_mcp_result_is_spilled_too() {
    let long = format!("{}END", "s".repeat(9_000));
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "ask the echo agent",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "echo a lot", "agent_name": "echoer" })),
                Reply::text("Asked."),
            ],
        ),
        Script::new(
            "echo a lot",
            vec![Reply::tool("mcp_everything__echo", json!({ "message": long })), Reply::text("Echoed.")],
        ),
    ])
    .await;
    let extra = format!(
        "{}inline_result_chars = 5000\n[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n\
         [tasks]\nlocal_workers = 1\n",
        mcp_config()
    );
    let home = Home::new(&llm.base_url(), &extra);
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(
        home.path().join("agents/echoer.md"),
        "---\nname: echoer\ndescription: Echoes things\ntools_allow:\n  - read_file\nmcp_servers:\n  - everything\n---\nYou echo what you are asked to.\n",
    )
    .unwrap();
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "ask the echo agent"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = llm.requests();
    let result = requests
        .iter()
        .filter_map(|r| r["messages"].as_array())
        .flat_map(|m| m.iter())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| serde_json::from_str::<Value>(m["content"].as_str().unwrap_or_default()).ok())
        .find(|r| r["server"] == "everything" || r["tool"] == "mcp_everything__echo")
        .unwrap_or_else(|| panic!("no MCP result in {requests:#?}"));
    assert_eq!(result["output_storage"], "managed_file", "{result}");
    assert!(result["output_notice"].as_str().unwrap().contains("read_file"), "{result}");
    let saved = std::fs::read_to_string(result["output_file_absolute_path"].as_str().unwrap()).unwrap();
    assert!(saved.contains(&long), "the file holds the whole result");
}

/// Red-team reports (#22, F4, B4): a stdio server with no `env` inherited the assistant's provider keys, the
/// vault password and any variable the config reads (`${TELEGRAM_BOT_TOKEN}`). It still inherits the rest.
#[tokio::test]
async fn a_stdio_server_does_not_inherit_the_assistants_own_secrets() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let seen = tempfile::tempdir().unwrap();
    let dump = seen.path().join("env.txt");
    let extra = format!(
        "[tools.mcp]\nenabled = true\ntimeout_seconds = 20\n[[tools.mcp.servers]]\nname = \"everything\"\n\
         command = \"sh\"\nargs = [\"-c\", \"env > '{}'; exec node '{}' stdio\"]\n",
        dump.display(),
        everything_js()
    );
    let home = Home::new(&llm.base_url(), &extra);
    let mut command = home.minibot(&["console", "--once", "hi"]);
    command
        .env("OPENAI_API_KEY", "sk-inherited-openai-key")
        .env("ANTHROPIC_API_KEY", "sk-ant-inherited")
        .env("MINIBOT_VAULT_PASSWORD", "vault-password-inherited")
        .env("MINIBOT__LLM__TEMPERATURE", "0.5")
        .env("TELEGRAM_BOT_TOKEN", "123:telegram-secret")
        .env("RABBITMQ_DEFAULT_PASS", "broker-secret")
        .env("APP_DATABASE_URL", "postgres://app:p4ss-word@db/app")
        .env("MY_SERVER_SETTING", "kept");
    let output = minibot_e2e::run(command).await;
    assert_eq!(stdout(&output), "hello\n", "{}", stderr(&output));
    let env = std::fs::read_to_string(&dump).unwrap();
    let secrets = [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "MINIBOT_VAULT_PASSWORD",
        "MINIBOT__LLM__TEMPERATURE",
        "TELEGRAM_BOT_TOKEN",
        "RABBITMQ_DEFAULT_PASS",
        "APP_DATABASE_URL",
    ];
    for secret in secrets {
        assert!(!env.contains(secret), "{secret} reached the server");
    }
    assert!(env.contains("MY_SERVER_SETTING=kept"), "{env}");
}
