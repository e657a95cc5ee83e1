use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout, tool_result};
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
    // The tool calls of the first run come back too (full tool history), then its answer.
    assert_eq!(assistants.len(), 2);
    assert_eq!(assistants[0]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(assistants[1]["content"], "12345*6789 = 83810205");
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

/// Runs `command` with `input` on its stdin (a pipe, closed after it), killing it after two minutes.
async fn run_with_input(mut command: std::process::Command, input: &str) -> std::process::Output {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        stdin.write_all(input.as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    });
    match tokio::time::timeout(Duration::from_secs(120), output).await {
        Ok(output) => output.unwrap(),
        Err(_) => {
            minibot_e2e::kill_hard(pid);
            panic!("the console did not finish within 120 s");
        }
    }
}

/// The status line's marks: what a terminal shows while a turn runs, never on a pipe.
const STATUS_MARKS: [&str; 3] = ["thinking ·", "· step ", "⠋"];

/// docs/console.md's example: each piped line gets its own answer, every answer is printed before the console
/// exits, and the next run finds nothing left to resume (the stores closed only after the turns finished).
#[tokio::test]
async fn piped_plain_input_gets_every_answer_and_leaves_nothing_pending() {
    let llm = ScriptedLlm::start(vec![
        Script::new("hello", vec![Reply::text("Hi there.")]).delay(Duration::from_millis(800)),
        Script::new("what did I just say?", vec![Reply::text("You said hello.")]).delay(Duration::from_millis(800)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let output = run_with_input(home.minibot(&["console", "--plain"]), "hello\nwhat did I just say?\n/exit\n").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Hi there.\nYou said hello.\n", "stderr: {}", stderr(&output));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "one turn per line");
    assert_eq!(user_messages(&requests[0]), ["hello"]);
    assert_eq!(
        user_messages(&requests[1]),
        ["hello", "what did I just say?"],
        "the second line saw the first answered"
    );
    // The banner goes to stderr when stdout is not a terminal; no status line on a pipe.
    assert!(stderr(&output).contains("e2e-model (provider openai)"), "{}", stderr(&output));
    for mark in STATUS_MARKS {
        assert!(!stderr(&output).contains(mark), "{mark:?} on a pipe: {}", stderr(&output));
    }

    let again = run_with_input(home.minibot(&["console", "--plain"]), "").await;
    assert!(again.status.success(), "stderr: {}", stderr(&again));
    assert_eq!(stdout(&again), "");
    assert!(!stderr(&again).contains("resuming"), "{}", stderr(&again));
    assert!(!stderr(&again).contains("store failed"), "{}", stderr(&again));
    assert_eq!(llm.requests().len(), 2, "nothing was answered again");
}

/// Without `--plain` and without `/exit`: stdin that is not a terminal is read the same way, and the end of
/// input waits for the last answer.
#[tokio::test]
async fn the_end_of_piped_input_waits_for_the_last_answer() {
    let llm = ScriptedLlm::start(vec![
        Script::new("one", vec![Reply::text("first answer")]),
        Script::new("two", vec![Reply::text("second answer")]).delay(Duration::from_secs(2)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let output = run_with_input(home.minibot(&["console"]), "one\ntwo\n").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "first answer\nsecond answer\n", "stderr: {}", stderr(&output));
    let again = run_with_input(home.minibot(&["console", "--plain"]), "").await;
    assert!(!stderr(&again).contains("resuming"), "{}", stderr(&again));
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn help_and_unknown_commands_never_reach_the_model() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "");
    let output = run_with_input(home.minibot(&["console", "--plain"]), "/help\n/frobnicate now\n").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "", "command replies stay off a piped stdout");
    let shown = stderr(&output);
    for command in ["/new", "/model", "/tasks", "/stop", "/exit"] {
        assert!(shown.contains(&format!("\n  {command} ")), "/help lists {command}: {shown}");
    }
    assert!(shown.contains("Unknown command /frobnicate. Commands: /help /new /model /tasks /stop /exit"), "{shown}");
    assert!(llm.requests().is_empty(), "the model got a request: {:?}", llm.requests());
}

#[tokio::test]
async fn new_starts_a_conversation_without_the_old_history_and_keeps_it() {
    let llm = ScriptedLlm::start(vec![
        Script::new("first", vec![Reply::text("one")]),
        Script::new("second", vec![Reply::text("two")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let output = run_with_input(home.minibot(&["console", "--plain"]), "first\n/new\nsecond\n").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "one\ntwo\n");
    assert!(stderr(&output).contains("New conversation started. The previous one (2 messages)"), "{}", stderr(&output));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(user_messages(&requests[1]), ["second"], "the old history went to the model");

    let url = format!("sqlite://{}", home.path().join("data/minibot.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT session_id, content FROM messages ORDER BY id").fetch_all(&pool).await.unwrap();
    pool.close().await;
    let kept: Vec<&str> = rows.iter().filter(|(s, _)| s.starts_with("console:1@")).map(|(_, c)| c.as_str()).collect();
    assert_eq!(kept, ["first", "one"], "the old conversation stays in the history: {rows:?}");
    let live: Vec<&str> = rows.iter().filter(|(s, _)| s == "console:1").map(|(_, c)| c.as_str()).collect();
    assert_eq!(live, ["second", "two"]);
}

#[tokio::test]
async fn model_shows_and_switches_the_model_of_the_chat() {
    let llm = ScriptedLlm::start(vec![
        Script::new("which model?", vec![Reply::text("this one")]),
        Script::new("and now?", vec![Reply::text("that one")]),
        Script::new("back?", vec![Reply::text("back")]),
        Script::new("any model?", vec![Reply::text("any")]),
    ])
    .await;
    let backup = format!(
        "[providers.backup]\napi_format = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-backup\"\nmodels = \
         [\"backup-model\"]\n",
        llm.base_url()
    );
    let home = Home::new(&llm.base_url(), &backup);
    let input = "/model\nwhich model?\n/model backup-model\nand now?\n/model openai\nback?\n/model backup any-model\n\
                 any model?\n/model nonsense\n";
    let output = run_with_input(home.minibot(&["console", "--plain"]), input).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "this one\nthat one\nback\nany\n");
    let shown = stderr(&output);
    assert!(
        shown.contains("Model: e2e-model (provider openai)\nSwitch with /model NAME: backup-model (backup)"),
        "{shown}"
    );
    assert!(shown.contains("Model for this chat until you quit: backup-model (provider backup)."), "{shown}");
    assert!(
        shown.contains(
            "`nonsense` is not a configured model or provider. Choose one of: e2e-model (openai), backup-model (backup)"
        ),
        "{shown}"
    );
    let requests = llm.requests();
    let models: Vec<&str> = requests.iter().map(|r| r["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["e2e-model", "backup-model", "e2e-model", "any-model"], "commands are not sent");
    let authorizations = llm.authorizations();
    assert_eq!(authorizations, ["Bearer sk-e2e", "Bearer sk-backup", "Bearer sk-e2e", "Bearer sk-backup"]);
}

#[tokio::test]
async fn the_interactive_console_starts_with_a_banner() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "");
    let terminal = minibot_e2e::Terminal::start(&home);
    let screen = terminal.wait_for("you> ").await;
    let screen = terminal_text(&screen);
    assert!(screen.contains(&format!("minibot {} · console chat 1", env!("CARGO_PKG_VERSION"))), "{screen}");
    assert!(screen.contains("model   e2e-model (provider openai)"), "{screen}");
    assert!(screen.contains(&format!("config  {}", home.config().display())), "{screen}");
    assert!(screen.contains(&format!("data    {}", home.path().join("data").display())), "{screen}");
    assert!(screen.contains("/exit or Ctrl-D quits"), "{screen}");
    terminal.exit().await;
}

/// A slow answer: the terminal shows what the turn does (step, tool) until the answer replaces it, and `/exit`
/// typed meanwhile waits for that answer.
#[tokio::test]
async fn a_status_line_shows_the_running_turn_and_exit_waits_for_its_answer() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "take your time",
            vec![Reply::tool("current_datetime", serde_json::json!({})), Reply::text("done at last")],
        )
        .delay(Duration::from_secs(2)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let mut terminal = minibot_e2e::Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("take your time");
    let screen = terminal.wait_for("thinking · step 1").await;
    assert!(!screen.contains("done at last"), "the status came after the answer: {screen}");
    let screen = terminal.wait_for("running current_datetime · step 1").await;
    assert!(!screen.contains("done at last"), "{screen}");
    terminal.wait_for("thinking · step 2").await;
    let screen = terminal.exit().await;
    assert!(screen.contains("done at last"), "/exit did not wait for the answer: {screen}");
    assert_eq!(llm.requests().len(), 2);
}

/// The screen without the colour codes the console adds to its own lines.
fn terminal_text(screen: &str) -> String {
    screen.replace("\x1b[2m", "").replace("\x1b[0m", "").replace('\r', "")
}

#[tokio::test]
async fn a_task_result_says_which_task_it_answers() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "look into it",
            vec![Reply::tool("spawn_task", serde_json::json!({ "prompt": "the slow part" })), Reply::text("Started.")],
        ),
        Script::new("the slow part", vec![Reply::text("slow part done")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "[tasks]\nlocal_workers = 1\n");
    let output = run(home.minibot(&["console", "--once", "look into it"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\nslow part done\n");
    let url = format!("sqlite://{}", home.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let (id, agent): (String, Option<String>) =
        sqlx::query_as("SELECT id, agent_name FROM tasks").fetch_one(&pool).await.unwrap();
    pool.close().await;
    let label = format!("⋯ result of task {} ({}):\n", &id[..8], agent.as_deref().unwrap_or("worker"));
    assert!(stderr(&output).contains(&label), "{label:?} not in: {}", stderr(&output));
}

#[tokio::test]
async fn tasks_lists_the_background_tasks_still_running() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "start the long job",
            vec![
                Reply::tool("spawn_task", serde_json::json!({ "prompt": "the long job itself" })),
                Reply::text("Started."),
            ],
        ),
        Script::new("the long job itself", vec![Reply::text("long job done")]).delay(Duration::from_secs(20)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "[tasks]\nlocal_workers = 1\n");
    let output = run_with_input(home.minibot(&["console", "--plain"]), "/tasks\nstart the long job\n/tasks\n").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\n");
    let shown = stderr(&output);
    let none = shown.find("No background tasks are running.").unwrap_or_else(|| panic!("{shown}"));
    let listed = shown.find("Background tasks (1):\n  ").unwrap_or_else(|| panic!("{shown}"));
    assert!(none < listed, "{shown}");
    let after = &shown[listed..];
    assert!(after.contains("(worker) ") && after.contains(": the long job itself"), "{shown}");
    assert_eq!(llm.requests().iter().filter(|r| r.to_string().contains("/tasks")).count(), 0);
}

/// `--timeout-seconds` passes while the model still thinks: the turn is stopped and stored before the stores
/// close, so the next run resumes nothing and meets no closed store.
#[tokio::test]
async fn a_once_run_that_times_out_stops_its_turn() {
    let llm = ScriptedLlm::start(vec![
        Script::new("too slow", vec![Reply::text("late")]).delay(Duration::from_secs(4)),
        Script::new("next one", vec![Reply::text("on time")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let output = run(home.minibot(&["console", "--once", "too slow", "--timeout-seconds", "1"])).await;
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));
    assert!(
        stderr(&output).contains("no answer within the time limit (--timeout-seconds); the turn was stopped"),
        "{}",
        stderr(&output)
    );
    let next = run(home.minibot(&["console", "--once", "next one"])).await;
    assert!(next.status.success(), "stderr: {}", stderr(&next));
    assert_eq!(stdout(&next), "on time\n");
    assert!(!stderr(&next).contains("interrupted by a restart"), "{}", stderr(&next));
    let last = llm.requests().pop().unwrap();
    assert_eq!(user_messages(&last), ["too slow", "next one"]);
    let assistants: Vec<&Value> =
        last["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(assistants[0]["content"], "[Stopped by the user before finishing.]");
}

/// Without a config file the banner says so, and names the data folder the platform gives (here under a
/// temporary HOME).
#[tokio::test]
async fn the_banner_says_when_there_is_no_config_file() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(minibot_e2e::binary("minibot"));
    command
        .args(["console", "--plain"])
        .current_dir(cwd.path())
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("MINIBOT_CONFIG")
        .env_remove("RUST_LOG")
        .env("OPENAI_API_KEY", "sk-e2e")
        .env("OPENAI_BASE_URL", llm.base_url());
    let output = run_with_input(command, "").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "");
    let shown = stderr(&output);
    assert!(shown.contains("model   gpt-4o-mini (provider openai)"), "{shown}");
    assert!(shown.contains("config  no config file (defaults; `minibot init` writes "), "{shown}");
    let data = home.path().join(".local/share/minibot");
    assert!(shown.contains(&format!("data    {}\n", data.display())), "{shown}");
    assert!(data.join("minibot.db").exists(), "the banner names the folder the data is in");
}

/// With stdout on a terminal but no line editor (`--once`, piped lines), the status is a spinner on stderr that
/// the answer clears.
#[tokio::test]
async fn once_and_piped_lines_show_a_spinner_when_stdout_is_a_terminal() {
    let llm = ScriptedLlm::start(vec![Script::new("slow one", vec![Reply::text("slow answer")])]).await;
    llm.set_default_delay(Duration::from_millis(1500));
    let home = Home::new(&llm.base_url(), "");
    let minibot = minibot_e2e::binary("minibot");
    let config = home.config();
    for shell in [
        format!("{} console --once 'slow one' --config {}", minibot.display(), config.display()),
        format!("printf 'slow one\\n' | {} console --config {}", minibot.display(), config.display()),
    ] {
        let output = run_with_input(minibot_e2e::in_a_terminal(&shell), "").await;
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        let screen = stdout(&output);
        let status = screen.find("thinking · step 1").unwrap_or_else(|| panic!("{shell}: no status: {screen:?}"));
        let answer = screen.find("slow answer").unwrap_or_else(|| panic!("{shell}: no answer: {screen:?}"));
        assert!(status < answer, "{shell}: {screen:?}");
        assert!(screen[..answer].ends_with("\r\x1b[2K"), "{shell}: the spinner was not cleared: {screen:?}");
    }
}

const GATED_BASH: &str =
    "[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n[tools.approval]\nrequire_approval = [\"bash\"]\n";

/// Piped lines wait for the answer before them, but an approval question takes the next line as its reply (no
/// deadlock); with no line left, the question is denied and the answer still comes before the exit.
#[tokio::test]
async fn piped_input_answers_approval_questions_and_denies_them_at_the_end() {
    for (input, approved) in [("make the marker\ny\nthanks\n", true), ("make the marker\n", false)] {
        let scratch = tempfile::tempdir().unwrap();
        let marker = scratch.path().join("marker");
        let command = serde_json::json!({ "command": format!("touch {}", marker.display()) });
        let llm = ScriptedLlm::start(vec![
            Script::new("make the marker", vec![Reply::tool("bash", command), Reply::text("all done")]),
            Script::new("thanks", vec![Reply::text("welcome")]),
        ])
        .await;
        let home = Home::new(&llm.base_url(), GATED_BASH);
        let output = run_with_input(home.minibot(&["console", "--plain"]), input).await;
        assert!(output.status.success(), "stderr: {}", stderr(&output));
        assert_eq!(marker.exists(), approved, "{input:?}: {}", stderr(&output));
        let shown = stderr(&output);
        if approved {
            assert_eq!(
                stdout(&output),
                "Approval needed: bash\n  - command: touch {}\nApprove bash? [y/N]\nall done\nwelcome\n"
                    .replace("{}", &marker.display().to_string())
            );
            assert!(shown.contains("  · bash approved"), "{shown}");
        } else {
            assert!(stdout(&output).ends_with("Approve bash? [y/N]\nall done\n"), "{}", stdout(&output));
            assert!(shown.contains("(no more input: denied 1 open approval question(s))"), "{shown}");
            assert_eq!(tool_result(&llm)["error_code"], "tool_approval:denied");
        }
    }
}

/// Piped lines are on no screen: each is shown after the prompt before what answers it, so answers of several
/// lines stay apart. Piped stdout still holds the answers alone (the line goes with the banner, to stderr), and a
/// terminal, where the answers stream, shows the same exchange as stdout and stderr of a pipe together.
#[tokio::test]
async fn piped_lines_are_shown_before_their_answers_and_a_terminal_shows_the_same() {
    let llm = ScriptedLlm::start(vec![
        Script::new("one", vec![Reply::text("First line.\nSecond line.")]),
        Script::new("two", vec![Reply::text("Third line.\nFourth line.")]),
    ])
    .await;
    llm.set_stream_gap(Duration::from_millis(150));
    let home = Home::new(&llm.base_url(), "");
    let output = run_with_input(home.minibot(&["console", "--plain"]), "one\ntwo\n").await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "First line.\nSecond line.\nThird line.\nFourth line.\n");
    let shown = stderr(&output);
    let one = shown.find("\nyou> one\n").unwrap_or_else(|| panic!("{shown}"));
    let two = shown.find("\nyou> two\n").unwrap_or_else(|| panic!("{shown}"));
    assert!(one < two, "{shown}");

    let shell = |end: &str| {
        format!(
            "printf 'one\\ntwo\\n' | {} console --plain --config {}{end}",
            minibot_e2e::binary("minibot").display(),
            home.config().display()
        )
    };
    let mut piped = std::process::Command::new("sh");
    piped.args(["-c", &shell(" 2>&1")]).env_remove("OPENAI_API_KEY").env_remove("MINIBOT_CONFIG");
    let piped = run_with_input(piped, "").await;
    let piped = stdout(&piped);
    let from = piped.find("you> one").unwrap_or_else(|| panic!("{piped}"));
    let expected = "you> one\nFirst line.\nSecond line.\nyou> two\nThird line.\nFourth line.\n";
    assert_eq!(&piped[from..], expected);

    let mut terminal = std::process::Command::new("script");
    terminal
        .args(["-qfec", &shell(""), "/dev/null"])
        .current_dir(std::env::temp_dir())
        .env("TERM", "xterm")
        .env_remove("OPENAI_API_KEY")
        .env_remove("MINIBOT_CONFIG")
        .env_remove("RUST_LOG");
    let output = run_with_input(terminal, "").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let screen = stdout(&output);
    assert!(screen.contains("First l"), "the answer did not stream: {screen:?}");
    let mut rows = crate::streaming::render(&screen, 80);
    while rows.last().is_some_and(String::is_empty) {
        rows.pop();
    }
    let first = rows.iter().position(|row| row == "you> one").unwrap_or_else(|| panic!("{rows:#?}"));
    assert_eq!(rows[first..].join("\n") + "\n", expected, "{screen:?}");
}
