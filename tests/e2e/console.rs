use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn once_answers_with_two_tool_calls() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "what is 12345*6789?",
        vec![
            Reply::tools_raw(&[("calculate_expression", r#"{"expression":"12345*6789"}"#), ("current_datetime", "{}")]),
            Reply::text("12345*6789 = 83810205"),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let output = run(home.minibot(&["console", "--once", "what is 12345*6789?"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "12345*6789 = 83810205\n");
    assert!(stderr(&output).contains("running calculate_expression"), "{}", stderr(&output));

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first["model"], "e2e-model");
    let messages = first["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(messages[0]["content"].as_str().unwrap().contains("Minibot"));
    assert_eq!(user_messages(first), ["what is 12345*6789?"], "the user message is sent once");
    let tools: Vec<&str> =
        first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"calculate_expression") && tools.contains(&"current_datetime"), "{tools:?}");
    let calculator =
        first["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == "calculate_expression").unwrap();
    assert_eq!(calculator["function"]["parameters"]["required"][0], "expression");
    let results: Vec<&Value> =
        requests[1]["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 2);
    assert!(results[0]["content"].as_str().unwrap().contains("83810205"));
    assert!(results[1]["content"].as_str().unwrap().contains("timestamp"));

    // The next run in the same chat sees the earlier exchange once.
    llm.add_script(Script::new("and divided by 5?", vec![Reply::text("16762041")]));
    let output = run(home.minibot(&["console", "--once", "and divided by 5?"])).await;
    assert_eq!(stdout(&output), "16762041\n");
    let last = llm.requests().pop().unwrap();
    assert_eq!(user_messages(&last), ["what is 12345*6789?", "and divided by 5?"]);
    let assistants: Vec<&Value> =
        last["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(assistants.len(), 1);
    assert_eq!(assistants[0]["content"], "12345*6789 = 83810205");
}

#[tokio::test]
async fn once_reads_the_message_from_stdin() {
    let llm = ScriptedLlm::start(vec![Script::new("from a pipe", vec![Reply::text("piped ok")])]).await;
    let home = Home::new(&llm.base_url(), "");
    let mut command = home.minibot(&["console", "--once", "-"]);
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"from a pipe\n").unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(stdout(&output), "piped ok\n", "stderr: {}", stderr(&output));
}

#[tokio::test]
async fn a_turn_killed_mid_flight_is_answered_after_restart() {
    let llm = ScriptedLlm::start(vec![
        Script::new("survive a crash", vec![Reply::text("answered after the crash")]),
        Script::new("hello again", vec![Reply::text("hi")]),
    ])
    .await;
    llm.set_default_delay(Duration::from_secs(30));
    let home = Home::new(&llm.base_url(), "");
    let mut command = home.minibot(&["console", "--once", "survive a crash"]);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    for _ in 0..100 {
        if !llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(llm.requests().len(), 1, "the first run reached the model");
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    let _ = child.wait();
    llm.set_default_delay(Duration::ZERO);

    let output = run(home.minibot(&["console", "--once", "hello again"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "hi\n");
    assert!(stderr(&output).contains("answered after the crash"), "{}", stderr(&output));
}

#[tokio::test]
async fn once_without_a_task_forks_no_worker() {
    let llm = ScriptedLlm::start(vec![Script::new("just answer", vec![Reply::text("answered")])]).await;
    // Tasks are on with two local workers, as by default.
    let home = Home::new(&llm.base_url(), "[tasks]\nlocal_workers = 2\n");
    let output = run(home.minibot(&["console", "--once", "just answer"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "answered\n");
    let log = std::fs::read_to_string(home.path().join("logs/minibot.log")).unwrap();
    assert!(log.contains("turn finished"), "the log is written: {log}");
    assert!(!log.contains("local worker started"), "a one-shot run without a task started workers: {log}");
}

/// Red-team report `repro_terminal_escape.sh`: the reply went to the terminal raw, so the model could write the
/// clipboard (OSC 52), clear the screen, retitle the window or send an 8-bit CSI. It prints as text without the
/// control characters.
const HOSTILE_REPLY: &str = "hello \x1b]52;c;cm0gLXJmIH4K\x07 \x1b[2J \u{9b}31m \x1b]0;PWNED\x07 \x1bP$q\x1b\\ end";
const SHOWN_REPLY: &str = "hello ]52;c;cm0gLXJmIH4K [2J 31m ]0;PWNED P$q\\ end";

#[tokio::test]
async fn once_prints_the_reply_without_terminal_control_characters() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text(HOSTILE_REPLY)])]).await;
    let home = Home::new(&llm.base_url(), "");
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), format!("{SHOWN_REPLY}\n"));
}

#[tokio::test]
async fn the_interactive_console_prints_the_reply_without_terminal_control_characters() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text(HOSTILE_REPLY)])]).await;
    let home = Home::new(&llm.base_url(), "");
    let mut terminal = minibot_e2e::Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("hi");
    let screen = terminal.wait_for(" end").await;
    terminal.exit().await;
    assert!(screen.contains(SHOWN_REPLY), "{screen:?}");
    for sequence in ["\x1b]52", "\x1b]0;", "\x1b[2J", "\u{9b}", "\x1bP"] {
        assert!(!screen.contains(sequence), "{sequence:?} reached the terminal: {screen:?}");
    }
}
