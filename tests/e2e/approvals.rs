//! Tool approvals with the real binary: `[tools.approval] require_approval` gates `bash`; a `--once` run denies
//! it unless `--approve` allows it, and the interactive console (under a pseudo-terminal, through `script`) asks
//! and runs it only on `y`. Every test checks the effect itself: the file the command would create.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, Terminal, run, stderr, stdout, tool_result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

// The marker lies outside any folder a `contain` command may write; these tests are about approvals (the
// sandbox has its own tests), so bash runs in MiniBot's basic mode here.
const GATED: &str =
    "[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n[tools.approval]\nrequire_approval = [\"bash\"]\n";

/// A model that asks for `touch <marker>` through bash, then answers `answer`.
async fn model(message: &str, marker: &Path, answer: &str) -> ScriptedLlm {
    let command = json!({ "command": format!("touch {}", marker.display()) });
    ScriptedLlm::start(vec![Script::new(message, vec![Reply::tool("bash", command), Reply::text(answer)])]).await
}

#[tokio::test]
async fn once_denies_a_gated_call_and_tells_the_model_why() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let llm = model("make the marker", &marker, "bash was not approved").await;
    let home = Home::new(&llm.base_url(), GATED);
    let output = run(home.minibot(&["console", "--once", "make the marker"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "bash was not approved\n");
    assert!(!marker.exists(), "the denied command ran");
    assert!(stderr(&output).contains("bash denied"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("running bash"), "{}", stderr(&output));
    let result = tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with("The user did not approve bash: the console --once run cannot ask"), "{error}");
    assert!(error.contains("--approve bash"), "{error}");
    assert!(error.ends_with("Do not retry it unless the user asks again."), "{error}");
}

#[tokio::test]
async fn once_with_approve_runs_the_matching_call() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let llm = model("make the marker", &marker, "done").await;
    let home = Home::new(&llm.base_url(), GATED);
    let output = run(home.minibot(&["console", "--once", "make the marker", "--approve", "ba*"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "done\n");
    assert!(marker.exists(), "the approved command did not run; stderr: {}", stderr(&output));
    assert!(stderr(&output).contains("bash approved by --approve"), "{}", stderr(&output));
    assert_eq!(tool_result(&llm)["ok"], true);
}

#[tokio::test]
async fn a_bad_approve_pattern_is_refused() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), GATED);
    let output = run(home.minibot(&["console", "--once", "hi", "--approve", "[bash"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--approve: invalid tool pattern `[bash`"), "{}", stderr(&output));
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn a_bad_require_approval_pattern_stops_start_up() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "[tools.approval]\nrequire_approval = [\"bash\", \"[x\"]\n");
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output).trim_end(),
        "minibot: tools.approval.require_approval: invalid tool pattern `[x`: unclosed character class; missing ']'"
    );
    assert!(llm.requests().is_empty());
}

/// Asks for the marker in the console, answers the question with `keys`, and returns once `reply` is shown.
async fn repl_answering(keys: &str, reply: &str) -> (ScriptedLlm, PathBuf, tempfile::TempDir, String) {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let llm = model("make the marker", &marker, "all done").await;
    let home = Home::new(&llm.base_url(), GATED);
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("make the marker");
    let screen = terminal.wait_for("Approve bash? [y/N]").await;
    assert!(screen.contains(&format!("- command: touch {}", marker.display())), "{screen}");
    assert!(!marker.exists(), "the command ran before the user answered");
    terminal.type_keys(keys);
    let screen = terminal.wait_for(reply).await;
    terminal.exit().await;
    (llm, marker, scratch, screen)
}

#[tokio::test]
async fn the_console_runs_a_gated_call_when_the_user_says_yes() {
    let (llm, marker, _scratch, screen) = repl_answering("y\r", "all done").await;
    assert!(marker.exists(), "the approved command did not run; screen:\n{screen}");
    assert_eq!(tool_result(&llm)["ok"], true);
}

#[tokio::test]
async fn the_console_denies_a_gated_call_when_the_user_says_no() {
    let (llm, marker, _scratch, screen) = repl_answering("n\r", "all done").await;
    assert!(!marker.exists(), "the denied command ran; screen:\n{screen}");
    let result = tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    assert_eq!(result["error"], "The user did not approve bash. Do not retry it unless the user asks again.");
}

#[tokio::test]
async fn ctrl_c_at_the_question_denies_it_and_stops_the_turn() {
    let (llm, marker, _scratch, screen) = repl_answering("\u{3}", "Stopped.").await;
    assert!(!marker.exists(), "the command ran after Ctrl-C; screen:\n{screen}");
    assert!(llm.requests().len() <= 2, "the turn went on after it was stopped");
}

#[tokio::test]
async fn stop_at_the_question_denies_it_and_stops_the_turn() {
    let (_llm, marker, _scratch, screen) = repl_answering("/stop\r", "Stopped.").await;
    assert!(!marker.exists(), "the command ran after /stop; screen:\n{screen}");
}

#[tokio::test]
async fn an_unanswered_question_times_out_and_is_withdrawn() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let llm = model("make the marker", &marker, "all done").await;
    let home = Home::new(&llm.base_url(), &format!("{GATED}timeout_seconds = 1\n"));
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("make the marker");
    terminal.wait_for("Approve bash? [y/N]").await;
    terminal.wait_for("(no longer waiting for approval of bash)").await;
    let screen = terminal.wait_for("all done").await;
    terminal.exit().await;
    assert!(!marker.exists(), "the command ran without an answer; screen:\n{screen}");
    let result = tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    assert!(result["error"].as_str().unwrap().contains("nobody answered the approval request within 1 s"), "{result}");
}

// A managed folder may not hold the config (start-up refuses it), so the file tools reach it from outside.
const SELF_EDIT: &str = "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\nallow_outside_root = true\n\
                         [tools.apply_patch]\nenabled = true\n[vault]\npath = \"vault.yml\"\n";
const PATCH: &str = "*** Begin Patch\n*** Update File: config.toml\n@@\n [llm]\n+# edited by the model\n*** End Patch";

#[tokio::test]
async fn file_tools_cannot_change_the_config_or_the_vault_without_approval() {
    let writes = [
        ("apply_patch", json!({ "patch_text": PATCH })),
        ("write_file", json!({ "path": "link.toml", "content": "[llm]\n", "overwrite": true })),
        ("move_file", json!({ "source_path": "../config.toml", "destination_path": "moved.toml" })),
        ("write_file", json!({ "path": "../vault.yml", "content": "stolen", "overwrite": true })),
        ("delete_file", json!({ "path": "../vault.yml" })),
        ("write_file", json!({ "path": "notes.txt", "content": "fine" })),
    ];
    let mut replies: Vec<Reply> = writes.iter().map(|(tool, args)| Reply::tool(tool, args.clone())).collect();
    replies.push(Reply::text("tried"));
    let llm = ScriptedLlm::start(vec![Script::new("edit yourself", replies)]).await;
    let home = Home::new(&llm.base_url(), SELF_EDIT);
    let config = std::fs::read_to_string(home.config()).unwrap();
    std::fs::create_dir_all(home.path().join("files")).unwrap();
    std::os::unix::fs::symlink(home.config(), home.path().join("files/link.toml")).unwrap();
    std::fs::write(home.path().join("vault.yml"), "sealed").unwrap();

    let output = run(home.minibot(&["console", "--once", "edit yourself"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "tried\n");
    assert_eq!(std::fs::read_to_string(home.config()).unwrap(), config, "the config file changed");
    assert!(home.path().join("files/link.toml").is_symlink());
    assert!(!home.path().join("files/moved.toml").exists());
    assert_eq!(std::fs::read_to_string(home.path().join("vault.yml")).unwrap(), "sealed");
    assert_eq!(
        std::fs::read_to_string(home.path().join("files/notes.txt")).unwrap(),
        "fine",
        "other files are writable"
    );

    let requests = llm.requests();
    assert_eq!(requests.len(), writes.len() + 1);
    let (protected, unprotected) = writes.split_at(writes.len() - 1);
    for (request, (tool, _)) in requests[1..].iter().zip(protected) {
        let result = last_tool_result(request);
        assert_eq!(result["error_code"], "tool_approval:denied", "{tool}: {result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains("is the assistant's"), "{tool}: {error}");
        assert!(error.contains(&format!("pass --approve {tool} to allow it")), "{tool}: {error}");
    }
    assert_eq!(unprotected[0].0, "write_file");
    assert_eq!(last_tool_result(requests.last().unwrap())["ok"], true);
}

pub(crate) fn last_tool_result(request: &Value) -> Value {
    let message = request["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").unwrap();
    serde_json::from_str(message["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn an_approved_patch_may_change_the_config() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "edit yourself",
        vec![Reply::tool("apply_patch", json!({ "patch_text": PATCH })), Reply::text("edited")],
    )])
    .await;
    let home = Home::new(&llm.base_url(), SELF_EDIT);
    let output = run(home.minibot(&["console", "--once", "edit yourself", "--approve", "apply_patch"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let config = std::fs::read_to_string(home.config()).unwrap();
    assert!(config.starts_with("[llm]\n# edited by the model\n"), "{config}");
}
