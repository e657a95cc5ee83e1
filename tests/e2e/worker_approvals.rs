//! Approvals asked from a background worker, with the real binaries: a specialist's `bash` call matches
//! `require_approval`, its worker sends the question to the assistant, and the console that started the task
//! answers it (`--once` through `--approve`, the interactive console by asking). Each test checks the effect
//! itself: the file the specialist's command would create.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, Terminal, run, stderr, stdout};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

// The markers lie outside any folder a `contain` command may write: bash runs in basic mode here.
const CONFIG: &str = "[tasks]\nlocal_workers = 1\nprogress_interval_seconds = 0\n[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n\
[tools.approval]\nrequire_approval = [\"bash\"]\n";
const TOUCHER: &str = "---\nname: toucher\ndescription: Creates marker files.\ntools_allow:\n  - bash\n---\n\
You create the files you are asked to create.\n";

/// The main agent hands "touch the marker" to the `toucher` specialist, which runs `touch <marker>` through bash
/// and answers `touched` (or `not touched` when its call was refused).
async fn setup(marker: &Path) -> (ScriptedLlm, Home) {
    let command = json!({ "command": format!("touch {}", marker.display()) });
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "have the toucher make the marker",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "touch the marker", "agent_name": "toucher" })),
                Reply::text("Started."),
            ],
        ),
        Script::new("touch the marker", vec![Reply::tool("bash", command), Reply::text("touched")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), CONFIG);
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(home.path().join("agents/toucher.md"), TOUCHER).unwrap();
    (llm, home)
}

/// The bash result the specialist's model read.
fn specialist_bash_result(llm: &ScriptedLlm) -> Value {
    let request = llm
        .requests()
        .into_iter()
        .find(|r| {
            let messages = r["messages"].as_array().unwrap();
            messages.iter().any(|m| m["role"] == "user" && m["content"] == "touch the marker")
                && messages.iter().any(|m| m["role"] == "tool")
        })
        .expect("the specialist's model was asked again after its call");
    let tool = request["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn once_with_approve_lets_a_specialists_call_run_in_its_worker() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let (llm, home) = setup(&marker).await;
    let output =
        run(home.minibot(&["console", "--once", "have the toucher make the marker", "--approve", "bash"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\ntouched\n");
    assert!(marker.exists(), "the approved command did not run; stderr: {}", stderr(&output));
    assert!(stderr(&output).contains("bash approved by --approve"), "{}", stderr(&output));
    assert_eq!(specialist_bash_result(&llm)["ok"], true);
}

#[tokio::test]
async fn once_without_approve_denies_a_specialists_call_and_its_model_reads_why() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let (llm, home) = setup(&marker).await;
    let output = run(home.minibot(&["console", "--once", "have the toucher make the marker"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(!marker.exists(), "the denied command ran");
    let result = specialist_bash_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("the console --once run cannot ask; pass --approve bash"), "{error}");
}

#[tokio::test]
async fn the_console_is_asked_about_a_specialists_call_and_its_yes_reaches_the_worker() {
    let scratch = tempfile::tempdir().unwrap();
    let marker: PathBuf = scratch.path().join("marker");
    let (llm, home) = setup(&marker).await;
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("have the toucher make the marker");
    let screen = terminal.wait_for("Approve bash? [y/N]").await;
    assert!(screen.contains(&format!("- command: touch {}", marker.display())), "{screen}");
    assert!(!marker.exists(), "the command ran before the user answered");
    terminal.type_line("y");
    let screen = terminal.wait_for("touched").await;
    assert!(marker.exists(), "the approved command did not run; screen:\n{screen}");
    assert_eq!(specialist_bash_result(&llm)["ok"], true);
    terminal.type_line("/exit");
}

#[tokio::test]
async fn the_safety_classifier_guards_the_main_agent_and_the_workers() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let unsafe_verdict = Reply::text(r#"{"verdict": "unsafe", "reason": "the e2e test distrusts it"}"#);
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "guard everything",
            vec![
                Reply::tool("calculate_expression", json!({ "expression": "6*7" })),
                Reply::tool("spawn_task", json!({ "prompt": "touch the marker", "agent_name": "toucher" })),
                Reply::text("Started."),
            ],
        ),
        Script::new(
            "touch the marker",
            vec![
                Reply::tool("bash", json!({ "command": format!("touch {}", marker.display()) })),
                Reply::text("touched"),
            ],
        ),
        Script::containing("Tool call to check.\nTool: calculate_expression", vec![unsafe_verdict.clone()]),
        Script::containing("Tool call to check.\nTool: bash", vec![unsafe_verdict]),
    ])
    .await;
    let config = "[tasks]\nlocal_workers = 1\nprogress_interval_seconds = 0\n[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n\
                  [tools.safety_classifier]\nenabled = true\nmodel = \"classifier-model\"\n\
                  check_input = [\"calculate_expression\", \"bash\"]\n";
    let home = Home::new(&llm.base_url(), config);
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(home.path().join("agents/toucher.md"), TOUCHER).unwrap();
    let output = run(home.minibot(&["console", "--once", "guard everything", "--approve", "bash"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\ntouched\n");
    // The worker's flagged bash call went to the console, which approved it by pattern.
    assert!(marker.exists(), "the approved command did not run; stderr: {}", stderr(&output));
    assert_eq!(specialist_bash_result(&llm)["ok"], true);
    // The main agent's flagged call was refused: nobody could approve it in a --once run.
    let main = llm
        .requests()
        .into_iter()
        .find(|r| {
            let messages = r["messages"].as_array().unwrap();
            messages.iter().any(|m| m["content"] == "guard everything") && messages.iter().any(|m| m["role"] == "tool")
        })
        .unwrap();
    let tool = main["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    let result: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    let classified = llm.requests().iter().filter(|r| r["model"] == "classifier-model").count();
    assert_eq!(classified, 2, "one check per flagged call");
}
