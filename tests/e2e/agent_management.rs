//! Agent management over a real RabbitMQ broker: a `minibot-worker` started before a specialist exists runs the
//! specialist the main agent then creates, runs its new definition after an update, and a deleted one can no
//! longer be given tasks. The worker never reads a file for it: each task carries the definition.

use crate::rabbitmq::Broker;
use minibot_e2e::{Home, Reply, Script, ScriptedLlm, binary, requests_for, stderr, stdout};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};

const CEILING: &str = "[orchestration.agent_management]\nreload = true\nwrite = true\n\
                       tools_allow = [\"current_datetime\", \"calculate_expression\"]\n";

fn definition(prompt: &str) -> String {
    format!("---\nname: note_keeper\ndescription: keeps notes\ntools_allow:\n  - current_datetime\n---\n{prompt}\n")
}

struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The system prompt of the model request whose last user message is `text`.
fn system_prompt_for(llm: &ScriptedLlm, text: &str) -> String {
    let requests = llm.requests();
    let request = requests
        .iter()
        .find(|r| {
            let messages = r["messages"].as_array().cloned().unwrap_or_default();
            messages.iter().rev().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()) == Some(text)
        })
        .unwrap_or_else(|| panic!("no request for {text:?}"));
    request["messages"][0]["content"].as_str().unwrap_or_default().to_string()
}

/// The tool results of the turn that began with `text`, in order (its last request holds them all, after the
/// turn's user message; the chat's earlier turns come before it).
fn tool_results(llm: &ScriptedLlm, text: &str) -> Vec<Value> {
    let turn: Vec<Vec<Value>> = llm
        .requests()
        .iter()
        .filter_map(|r| r["messages"].as_array().cloned())
        .filter_map(|messages| {
            let start = messages.iter().rposition(|m| m["role"] == "user")?;
            (messages[start]["content"] == text).then(|| messages[start..].to_vec())
        })
        .collect();
    let last = turn.into_iter().max_by_key(Vec::len).unwrap_or_else(|| panic!("no request for {text:?}"));
    last.iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap_or_else(|_| m["content"].clone()))
        .collect()
}

#[tokio::test]
async fn a_running_worker_runs_specialists_created_updated_and_deleted_after_it_started() {
    let broker = Broker::new().await;
    let first = definition("You are the NOTE KEEPER, first edition.");
    let second = definition("You are the NOTE KEEPER, second edition.");
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "make and ask the note keeper",
            vec![
                Reply::tool("create_agent", json!({ "name": "note_keeper", "definition": first })),
                Reply::tool("delegate", json!({ "prompt": "write note one", "agent_name": "note_keeper" })),
                Reply::text("Asked."),
            ],
        ),
        Script::new("write note one", vec![Reply::text("note one written")]),
        Script::containing("note one written", vec![Reply::text("The keeper wrote note one.")]),
        Script::new(
            "change and ask the note keeper",
            vec![
                Reply::tool("update_agent", json!({ "name": "note_keeper", "definition": second })),
                Reply::tool("spawn_task", json!({ "prompt": "write note two", "agent_name": "note_keeper" })),
                Reply::text("Asked again."),
            ],
        ),
        Script::new("write note two", vec![Reply::text("note two written")]),
        Script::new(
            "delete and ask the note keeper",
            vec![
                Reply::tool("delete_agent", json!({ "name": "note_keeper" })),
                Reply::tool("spawn_task", json!({ "prompt": "write note three", "agent_name": "note_keeper" })),
                Reply::text("It is gone."),
            ],
        ),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &format!("{}{CEILING}", broker.config));
    // The worker starts before the specialist exists, with no agents folder at all.
    let _worker = Worker(
        Command::new(binary("minibot-worker"))
            .arg("--config")
            .arg(home.config())
            .env("MINIBOT_WORKER_ID", "e2e-managed-worker")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    let output = minibot_e2e::run(home.minibot(&["console", "--once", "make and ask the note keeper"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Asked.\nThe keeper wrote note one.\n", "stderr: {}", stderr(&output));
    let created = &tool_results(&llm, "make and ask the note keeper")[0];
    assert_eq!(created["ok"], true, "{created}");
    assert_eq!((created["action"].clone(), created["added"].clone()), (json!("create"), json!(["note_keeper"])));
    let file = home.path().join("data/agents/note_keeper.md");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
    // The worker ran the definition it was sent.
    let worker_prompt = system_prompt_for(&llm, "write note one");
    assert!(worker_prompt.starts_with("You are the NOTE KEEPER, first edition."), "{worker_prompt}");
    // The first turn's prompt had no such specialist; the turn that read the result lists it.
    assert!(!system_prompt_for(&llm, "make and ask the note keeper").contains("note_keeper"));
    let requests = llm.requests();
    let continuation = requests
        .iter()
        .find(|r| r.to_string().contains("note one written") && r["messages"][0]["role"] == "system")
        .expect("the delegated result came back as a turn");
    let prompt = continuation["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("- note_keeper: keeps notes"), "the next turn's roster: {prompt}");
    // fetch_agent_info is offered once there is a specialist to read about.
    let tool_names = |request: &Value| -> Vec<String> {
        let tools = request["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|t| t["function"]["name"].as_str().map(String::from)).collect()
    };
    assert!(!tool_names(&requests[0]).contains(&"fetch_agent_info".to_string()), "{:?}", tool_names(&requests[0]));
    assert!(tool_names(&requests[0]).contains(&"create_agent".to_string()));
    assert!(tool_names(continuation).contains(&"fetch_agent_info".to_string()));

    let output = minibot_e2e::run(home.minibot(&["console", "--once", "change and ask the note keeper"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Asked again.\nnote two written\n", "stderr: {}", stderr(&output));
    let updated = &tool_results(&llm, "change and ask the note keeper")[0];
    assert_eq!((updated["ok"].clone(), updated["updated"].clone()), (json!(true), json!(["note_keeper"])), "{updated}");
    let worker_prompt = system_prompt_for(&llm, "write note two");
    assert!(worker_prompt.starts_with("You are the NOTE KEEPER, second edition."), "{worker_prompt}");

    let output = minibot_e2e::run(home.minibot(&["console", "--once", "delete and ask the note keeper"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "It is gone.\n");
    let results = tool_results(&llm, "delete and ask the note keeper");
    assert_eq!((results[0]["ok"].clone(), results[0]["removed"].clone()), (json!(true), json!(["note_keeper"])));
    let refusal = results[1].to_string();
    assert!(
        refusal.contains("task:unknown_agent") && refusal.contains("no specialist named `note_keeper`"),
        "{refusal}"
    );
    assert!(!file.exists());
    assert_eq!(requests_for(&llm, "write note three"), 0, "no worker ran it");
    broker.remove().await;
}

/// Refusals leave the disk and the roster as they were: a definition past the ceiling is not written, the owner's
/// files are neither changed nor deleted, and a reload that meets a broken file keeps the previous roster.
#[tokio::test]
async fn refusals_and_a_failed_reload_change_nothing() {
    let wild = "---\nname: wild_one\ndescription: too much\ntools_allow:\n  - bash\n---\nYou do anything.\n";
    let calls = [
        Reply::tool("create_agent", json!({ "name": "wild_one", "definition": wild })),
        Reply::tool("delete_agent", json!({ "name": "researcher" })),
        Reply::tool("update_agent", json!({ "name": "ghost", "definition": definition("x") })),
        Reply::tool("reload_agents", json!({})),
        Reply::tool("reload_agents", json!({})),
        Reply::text("Done."),
    ];
    let script = Script::new("manage the agents", calls.to_vec()).delay(std::time::Duration::from_millis(500));
    let llm = ScriptedLlm::start(vec![script]).await;
    let home = Home::new(&llm.base_url(), CEILING);
    let owner = home.path().join("agents");
    std::fs::create_dir_all(&owner).unwrap();
    let researcher = "---\nname: researcher\ndescription: finds things\n---\nYou research.\n";
    std::fs::write(owner.join("researcher.md"), researcher).unwrap();

    let mut command = home.minibot(&["console", "--once", "manage the agents"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let waiter = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    // The owner adds a file once the turn runs (the first reload picks it up), and breaks another one after
    // that reload, before the second.
    wait_for_requests(&llm, 1).await;
    std::fs::write(owner.join("helper.md"), "---\nname: helper\ndescription: helps\n---\nYou help.\n").unwrap();
    wait_for_requests(&llm, 5).await;
    std::fs::write(owner.join("broken.md"), "---\nname: broken\ncolour: blue\n---\nx\n").unwrap();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), waiter).await.unwrap().unwrap();
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Done.\n");

    let results = tool_results(&llm, "manage the agents");
    assert_eq!(results.len(), 5, "{results:#?}");
    let field = |i: usize, key: &str| results[i][key].as_str().unwrap_or_default().to_string();
    assert_eq!((results[0]["ok"].clone(), field(0, "error_code")), (json!(false), "agent_management:ceiling".into()));
    assert!(field(0, "error").contains("tool `bash` is not allowed"), "{}", results[0]);
    assert!(!home.path().join("data/agents/wild_one.md").exists(), "nothing written past the ceiling");
    assert_eq!(field(1, "error_code"), "agent_management:unknown_agent");
    assert!(field(1, "error").contains("owner-authored"), "{}", results[1]);
    assert_eq!(std::fs::read_to_string(owner.join("researcher.md")).unwrap(), researcher);
    assert!(field(2, "error").contains("no managed agent named `ghost`"), "{}", results[2]);
    assert_eq!(results[3]["ok"], true, "{}", results[3]);
    assert_eq!(
        (results[3]["added"].clone(), results[3]["names"].clone()),
        (json!(["helper"]), json!(["helper", "researcher"]))
    );
    assert_eq!(
        (results[4]["ok"].clone(), field(4, "error_code")),
        (json!(false), "agent_management:reload_failed".into())
    );
    assert!(
        field(4, "error").contains("broken.md") && field(4, "error").contains("previous roster stays"),
        "{}",
        results[4]
    );
    assert_eq!(results[4]["names"], json!(["helper", "researcher"]), "the previous roster");
}

async fn wait_for_requests(llm: &ScriptedLlm, count: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while llm.requests().len() < count {
        assert!(std::time::Instant::now() < deadline, "the model got {} requests, not {count}", llm.requests().len());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
