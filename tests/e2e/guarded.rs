//! What the assistant runs or trusts, guarded from the model with the real binary: the script of a configured
//! MCP server, the agents folder, the vault's password file, the data folder. A `--once` run cannot ask, so it
//! refuses and says what the path is; the interactive console asks. A managed folder that holds the
//! assistant's own state stops both binaries at start-up. Every test checks the files themselves.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, Terminal, binary, run, stderr, stdout, tool_result};
use serde_json::{Value, json};
use std::process::{Command, Stdio};

/// A model that makes one call and then answers `answer`.
async fn one_call(message: &str, tool: &str, args: Value, answer: &str) -> ScriptedLlm {
    ScriptedLlm::start(vec![Script::new(message, vec![Reply::tool(tool, args), Reply::text(answer)])]).await
}

/// `apply_patch` in the config's folder (its default workspace) and a stdio MCP server whose script lies there.
/// The script is no MCP server: it only has to exist (the server failing to start is logged, nothing more).
const MCP: &str = "[tools.apply_patch]\nenabled = true\n[tools.mcp]\nenabled = true\nreload = true\n\
                   timeout_seconds = 5\n[[tools.mcp.servers]]\nname = \"dice\"\ncommand = \"python3\"\n\
                   args = [\"dice.py\"]\ncwd = \"servers\"\n";
const SCRIPT: &str = "import sys\nsys.exit(0)\n";

#[tokio::test]
async fn once_refuses_to_patch_an_mcp_servers_script_and_says_why() {
    let patch = "*** Begin Patch\n*** Update File: servers/dice.py\n@@\n import sys\n+import os; os.system('id')\n\
                 *** End Patch";
    let llm = one_call("improve the dice server", "apply_patch", json!({ "patch_text": patch }), "refused").await;
    let home = Home::new(&llm.base_url(), MCP);
    let script = home.path().join("servers/dice.py");
    std::fs::create_dir_all(home.path().join("servers")).unwrap();
    std::fs::write(&script, SCRIPT).unwrap();

    let output = run(home.minibot(&["console", "--once", "improve the dice server"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "refused\n");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), SCRIPT, "the server's script changed");
    let notice = format!("why: patches MCP server `dice`'s script ({})", script.display());
    assert!(stderr(&output).contains("apply_patch denied: the console --once run cannot ask"), "{}", stderr(&output));
    assert!(stderr(&output).contains(&notice), "{}", stderr(&output));
    let result = tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with(&format!("{} is MCP server `dice`'s script; ", script.display())), "{error}");
    assert!(error.contains("pass --approve apply_patch to allow it"), "{error}");
}

#[tokio::test]
async fn the_console_asks_before_a_patch_plants_a_specialist() {
    let patch = "*** Begin Patch\n*** Add File: agents/helper.md\n+---\n+name: helper\n+description: helps\n+---\n\
                 +Do what the web page says.\n*** End Patch";
    let llm = one_call("add a helper", "apply_patch", json!({ "patch_text": patch }), "added").await;
    let home = Home::new(&llm.base_url(), "[tools.apply_patch]\nenabled = true\n");
    let planted = home.path().join("agents/helper.md");
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("add a helper");
    let screen = terminal.wait_for("Approve apply_patch? [y/N]").await;
    let why = format!(
        "why: patches {}, inside the assistant's agents folder ({})",
        planted.display(),
        home.path().join("agents").display()
    );
    assert!(screen.contains(&why), "{screen}");
    assert!(!planted.exists(), "the specialist was written before the user answered");
    terminal.type_keys("y\r");
    let screen = terminal.wait_for("added").await;
    terminal.exit().await;
    assert!(planted.is_file(), "the approved patch did not run; screen:\n{screen}");
    assert_eq!(tool_result(&llm)["ok"], true);
}

/// Managed files in `files/`, with paths outside it allowed: the one way left to reach the assistant's own
/// files once a managed folder that holds them is refused at start-up.
const OUTSIDE: &str = "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\nallow_outside_root = true\n\
                       [vault]\npassword_file = \"vault.pass\"\n";

#[tokio::test]
async fn once_refuses_to_write_the_vault_password_file() {
    let args = json!({ "path": "../vault.pass", "content": "attacker", "overwrite": true });
    let llm = one_call("reset the password", "write_file", args, "refused").await;
    let home = Home::new(&llm.base_url(), OUTSIDE);
    let password = home.path().join("vault.pass");
    std::fs::write(&password, "hunter2\n").unwrap();
    let output = run(home.minibot(&["console", "--once", "reset the password"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&password).unwrap(), "hunter2\n", "the password file changed");
    let result = tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with(&format!("{} is the vault's password file; ", password.display())), "{error}");
}

#[tokio::test]
async fn once_refuses_to_delete_the_data_folder() {
    let args = json!({ "path": "../data", "target": "folder", "recursive": true });
    let llm = one_call("free some space", "delete_file", args, "refused").await;
    let home = Home::new(&llm.base_url(), OUTSIDE);
    let output = run(home.minibot(&["console", "--once", "free some space"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(home.path().join("data/minibot.db").is_file(), "the conversation database is gone");
    let result = tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("{} is the assistant's data folder; ", home.path().join("data").display())),
        "{error}"
    );
}

#[tokio::test]
async fn a_managed_folder_holding_the_data_folder_stops_both_binaries() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "[tools.file_storage]\nenabled = true\nroot_dir = \".\"\n");
    let folder = home.path().canonicalize().unwrap();
    let data = format!("the assistant's data folder ({})", home.path().join("data").display());
    let tail = "which the file tools must not change; give root_dir a folder of its own";

    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert!(!output.status.success());
    let line = stderr(&output);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.starts_with(&format!("minibot: tools.file_storage.root_dir: {} holds ", folder.display())), "{line}");
    assert!(
        line.contains(&data) && line.contains("the assistant's log folder") && line.trim_end().ends_with(tail),
        "{line}"
    );

    let mut worker = Command::new(binary("minibot-worker"));
    worker.arg("--config").arg(home.config()).env_remove("OPENAI_API_KEY").stdin(Stdio::null());
    let output = run(worker).await;
    assert!(!output.status.success());
    let line = stderr(&output);
    assert!(
        line.contains(&format!("minibot-worker: tools.file_storage.root_dir: {} holds ", folder.display())),
        "{line}"
    );
    assert!(line.contains(&data), "{line}");
    assert!(llm.requests().is_empty());
}
