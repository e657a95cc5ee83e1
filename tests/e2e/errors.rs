//! Errors that say why, and where state lives, through the real binary: a start that cannot work names every
//! reason in one run and leaves nothing behind; without a config file the history is kept in the platform data
//! folder whatever folder the program starts in; a failed turn points at the log, which says what failed.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, binary, run, stderr, stdout};
use std::path::Path;
use std::process::{Command, Stdio};

/// `minibot <args>` with `home` as the home folder, started in `cwd`, with no config file named anywhere.
fn minibot_at(home: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(binary("minibot"));
    command
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("MINIBOT_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn no_key_and_no_channel_are_reported_in_one_run_and_nothing_is_written() {
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let output = run(minibot_at(home.path(), cwd.path(), &[])).await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("minibot: no API key for provider `openai`"), "{err}");
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    assert!(err.contains("minibot: defaults (no config file): no channel is enabled"), "{err}");
    assert!(err.contains("`minibot init`"), "{err}");
    assert!(entries(cwd.path()).is_empty(), "the working folder stays untouched: {:?}", entries(cwd.path()));
    assert!(entries(home.path()).is_empty(), "no folder made for a run that did not start: {:?}", entries(home.path()));
}

#[tokio::test]
async fn without_a_config_file_the_history_follows_the_user_not_the_folder() {
    let llm = ScriptedLlm::start(vec![
        Script::new("remember the word kiwi", vec![Reply::text("noted")]),
        Script::new("which word?", vec![Reply::text("kiwi")]),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // No file: the provider comes from overrides alone.
    let mut command = minibot_at(home.path(), first.path(), &["console", "--once", "remember the word kiwi"]);
    command
        .env("MINIBOT__LLM__BASE_URL", llm.base_url())
        .env("MINIBOT__LLM__API_KEY", "sk-e2e")
        .env("MINIBOT__LLM__MODEL", "e2e-model");
    let output = run(command).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "noted\n");
    let data = home.path().join(".local/share/minibot");
    assert!(data.join("minibot.db").is_file(), "{:?}", entries(&data));
    assert!(data.join("logs/minibot.log").is_file(), "{:?}", entries(&data));
    assert!(entries(first.path()).is_empty(), "nothing in the working folder: {:?}", entries(first.path()));

    // `minibot init` writes the platform config file; a run from another folder finds it and the history.
    let config_dir = home.path().join(".config/minibot");
    std::fs::create_dir_all(&config_dir).unwrap();
    let text = format!("[llm]\nbase_url = \"{}\"\napi_key = \"sk-e2e\"\nmodel = \"e2e-model\"\n", llm.base_url());
    std::fs::write(config_dir.join("config.toml"), text).unwrap();
    let output = run(minibot_at(home.path(), second.path(), &["console", "--once", "which word?"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "kiwi\n");
    let last = llm.requests().pop().unwrap();
    let said: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(said, ["remember the word kiwi", "which word?"], "the second run continued the first's chat");
    assert!(entries(second.path()).is_empty(), "{:?}", entries(second.path()));
    assert_eq!(entries(&config_dir), ["config.toml"], "state stays out of the config folder");
    assert!(!stderr(&output).contains("found in this folder"), "{}", stderr(&output));

    // Red-team report (#22, finding 3): a folder's own config.toml (a cloned project's) wins, and the run says
    // so, since the user has a config of their own.
    let project = tempfile::tempdir().unwrap();
    let text = format!("[llm]\nbase_url = \"{}\"\napi_key = \"sk-e2e\"\nmodel = \"e2e-model\"\n", llm.base_url());
    std::fs::write(project.path().join("config.toml"), text).unwrap();
    // Red-team report (#22, F1/F2): such a file can start programs and send the user's keys to its server, so it
    // is used only once the user has trusted it, and again after each change.
    let output = run(minibot_at(home.path(), project.path(), &["console", "--once", "whose config?"])).await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("is not trusted yet"), "{}", stderr(&output));
    assert!(llm.requests().iter().all(|r| !r.to_string().contains("whose config?")), "nothing was sent");
    let trusted = run(minibot_at(home.path(), project.path(), &["trust"])).await;
    assert!(stdout(&trusted).starts_with("Trusted "), "{}{}", stdout(&trusted), stderr(&trusted));
    llm.add_script(Script::new("whose config?", vec![Reply::text("the project's")]));
    let output = run(minibot_at(home.path(), project.path(), &["console", "--once", "whose config?"])).await;
    assert_eq!(stdout(&output), "the project's\n", "{}", stderr(&output));
    let notice = format!("found in this folder), not your own {}", config_dir.join("config.toml").display());
    assert!(stderr(&output).contains(&notice), "{}", stderr(&output));
}

#[tokio::test]
async fn a_failed_turn_points_at_the_log_and_the_log_names_the_url_and_the_cause() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let home = Home::new(&format!("http://127.0.0.1:{port}/v1"), "retry_attempts = 0\n");
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let log = home.path().join("logs/minibot.log");
    let shown = format!("{}{}", stdout(&output), stderr(&output));
    let reason = format!("the model provider cannot be reached at http://127.0.0.1:{port}.");
    assert!(shown.contains(&reason), "{shown}");
    assert!(shown.contains(&format!("Details in {}.", log.display())), "{shown}");
    let logged = std::fs::read_to_string(&log).unwrap();
    let line = logged.lines().find(|l| l.contains("turn failed")).unwrap_or_else(|| panic!("{logged}"));
    assert!(line.contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")), "{line}");
    assert!(line.contains("connection refused"), "{line}");
}

#[tokio::test]
async fn the_daemon_says_where_its_state_lives_when_it_starts() {
    use std::io::{BufRead, BufReader};
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = minibot_test_support::FakeTelegram::start().await;
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config_dir = home.path().join(".config/minibot");
    std::fs::create_dir_all(&config_dir).unwrap();
    let text = format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"sk-e2e\"\n[channels.telegram]\nbot_token = \"{}\"\napi_base_url = \
         \"{}\"\npoll_timeout_seconds = 1\n[tasks]\nlocal_workers = 0\n",
        llm.base_url(),
        minibot_test_support::FakeTelegram::TOKEN,
        fake.base_url()
    );
    std::fs::write(config_dir.join("config.toml"), text).unwrap();
    let mut command = minibot_at(home.path(), cwd.path(), &[]);
    command.stderr(Stdio::piped()).stdout(Stdio::null());
    let mut child = command.spawn().unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let wanted = "minibot: config ~/.config/minibot/config.toml; data ~/.local/share/minibot; logs \
                  ~/.local/share/minibot/logs";
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let running = |got: &[String]| got.iter().any(|l| l.starts_with("minibot: running; Telegram bot"));
    while !(got.iter().any(|l: &String| l == wanted) && running(&got)) && std::time::Instant::now() < deadline {
        // The fake servers run on this test's runtime: wait without blocking it.
        match seen.try_recv() {
            Ok(line) => got.push(line),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let status = child.wait().unwrap();
    assert!(got.iter().any(|l| l == wanted), "{got:#?}");
    assert!(got.iter().any(|l| l.starts_with("minibot: running; Telegram bot")), "{got:#?}");
    assert!(status.success(), "{status:?} {got:#?}");
    assert!(home.path().join(".local/share/minibot/minibot.db").is_file());
    assert!(entries(cwd.path()).is_empty(), "{:?}", entries(cwd.path()));
}

#[tokio::test]
async fn a_missing_config_file_is_reported_once() {
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let output = run(minibot_at(home.path(), cwd.path(), &["--config", "nope.toml", "console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr(&output), "minibot: cannot read config file nope.toml: No such file or directory (os error 2)\n");
}
