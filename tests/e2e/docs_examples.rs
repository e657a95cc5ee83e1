//! The user manual stays true: every shell command shown in a code block of `README.md` or `docs/*.md` is either
//! run here with the real binaries (against the scripted model) or listed with the reason it cannot run here,
//! and every ```toml block loads as a config. A new example fails `every_example_is_run_or_skipped_for_a_reason`
//! until it is added to `EXAMPLES`. Commands run as written, through `bash -c`, from a fresh folder whose `HOME`
//! and `XDG_*` folders are temp folders, with the built `minibot` first on `PATH`; `cargo run --release -p
//! minibot --` stands for that binary, since a release build cannot run inside the test suite.

mod configs;
mod manual;

use manual::{Example, block_after, documented, examples};
use minibot_e2e::{Reply, Script, ScriptedLlm, binary, run, stderr, stdout};
use serde_json::json;
use std::path::Path;
use std::process::Command;

enum Plan {
    /// Run by the named test of this file.
    Run(&'static str),
    /// A usage line (`[OPTION]`, `A|B`): every option it names must be one the program's `--help` lists.
    Synopsis,
    /// Cannot run here, for this reason.
    Skip(&'static str),
}
use Plan::{Run, Skip, Synopsis};

const INTERACTIVE: &str = "an interactive terminal session: tests/e2e/console.rs drives the console on a pty";
const DOCKER: &str = "needs Docker and the image; tests/deploy.rs checks the compose file and the Dockerfile";
const SYSTEM: &str = "installs system-wide with sudo and systemd; tests/deploy.rs checks the unit files";
const BROKER_ADMIN: &str = "administers a RabbitMQ server's accounts (rabbitmqctl as the broker's admin)";
const INSTALL: &str = "scripts/test runs it before the suite (with --debug, into <target>/install), and \
                       tests/e2e/install.rs runs what it installed";
const DEPLOY_ENV: &str = "writes deploy/*.env into the checkout, for Docker Compose";
const WORKER_HOST: &str = "a worker host's /etc/minibot config and its broker; tests/e2e/rabbitmq.rs runs \
                           minibot-worker --config against a real broker";

const EXAMPLES: &[(&str, Plan)] = &[
    // Quick start (README.md, docs/README.md).
    ("OPENAI_API_KEY=sk-... cargo run --release -p minibot -- console", Skip(INTERACTIVE)),
    ("export OPENAI_API_KEY=sk-...", Run("one_question_runs_without_a_config_file")),
    (
        r#"cargo run --release -p minibot -- console --once "what is 12345*6789""#,
        Run("one_question_runs_without_a_config_file"),
    ),
    (r#"minibot console --once "what is 12345*6789""#, Run("one_question_runs_without_a_config_file")),
    ("scripts/test", Skip("the test suite itself")),
    ("cargo install --locked --path orchestrator", Skip(INSTALL)),
    ("cargo install --locked --path worker", Skip(INSTALL)),
    ("docker build -f deploy/Dockerfile -t minibot .", Skip(DOCKER)),
    ("minibot [--config PATH] [--verbose] [run]", Synopsis),
    (
        "minibot [--config PATH] [--verbose] console [--once TEXT|-] [--plain] [--chat-id N] [--user-id N] \
         [--timeout-seconds S] [--approve PATTERN]...",
        Synopsis,
    ),
    ("minibot [--config PATH] [--verbose] worker", Synopsis),
    ("minibot-worker [--config PATH] [--verbose]", Synopsis),
    ("minibot --version | --help", Synopsis),
    ("minibot [--config PATH] vault init|edit|list|set|rm|generate …", Synopsis),
    ("minibot [--config PATH] queue workers|migrate", Synopsis),
    ("minibot [--config PATH] init [--yes] [--skip-check] …", Synopsis),
    ("minibot [--config PATH] doctor", Synopsis),
    // The console (channels.md, console.md, approvals.md).
    ("minibot console", Skip(INTERACTIVE)),
    (r#"minibot console --once "question""#, Run("once_prints_the_answer_on_stdout")),
    (r#"minibot console --once "what can you do?""#, Run("once_prints_the_answer_on_stdout")),
    (
        "minibot console [--once TEXT|-] [--plain] [--chat-id N] [--user-id N] [--timeout-seconds S] \
         [--approve PATTERN]...",
        Synopsis,
    ),
    (r"printf 'hello\nwhat did I just say?\n/exit\n' | minibot console --plain", Run("plain_answers_piped_lines")),
    ("git diff | minibot console --once -", Run("once_reads_the_message_from_stdin")),
    (r#"minibot console --once "research the answer""#, Run("once_waits_for_the_background_task")),
    (
        r#"minibot console --once "clean the build folder" --approve bash --approve 'mcp_github__*'"#,
        Run("approve_lets_the_named_tool_run"),
    ),
    // Getting started (getting-started.md) and doctor (doctor.md).
    ("minibot init", Skip("the wizard asks on a terminal; tests/e2e/init.rs answers it on a pty")),
    (
        "minibot init --yes --provider openai --model gpt-4o-mini --api-key-env OPENAI_API_KEY --no-telegram",
        Skip("checks the key with api.openai.com; tests/e2e/init.rs runs init --yes against the scripted model"),
    ),
    (
        "minibot init --yes --provider local --base-url http://127.0.0.1:11434/v1 --model llama3.2",
        Skip(
            "checks an Ollama server on 127.0.0.1:11434; tests/e2e/init.rs runs init --yes against the scripted model",
        ),
    ),
    ("minibot doctor", Run("doctor_sums_up_and_exits_by_what_is_broken")),
    ("minibot --config /srv/minibot/config.toml doctor", Skip("the reader's /srv/minibot; `minibot doctor` runs here")),
    // The daemon (daemon.md).
    ("minibot [--config PATH] [--verbose]", Synopsis),
    ("minibot [--config PATH] [--verbose] run", Synopsis),
    ("sudo useradd --system --home-dir /var/lib/minibot --shell /usr/sbin/nologin minibot", Skip(SYSTEM)),
    ("sudo install -d -m 0700 -o minibot -g minibot /var/lib/minibot /etc/minibot/logs", Skip(SYSTEM)),
    ("sudo install -m 0755 target/release/minibot target/release/minibot-worker /usr/local/bin/", Skip(SYSTEM)),
    ("sudo cp -r agents /etc/minibot/agents", Skip(SYSTEM)),
    ("sudo install -m 0640 -g minibot config.toml /etc/minibot/config.toml", Skip(SYSTEM)),
    ("sudo install -m 0600 /dev/null /etc/minibot/env", Skip(SYSTEM)),
    ("sudo install -m 0644 deploy/minibot.service deploy/minibot-worker@.service /etc/systemd/system/", Skip(SYSTEM)),
    ("sudo systemctl daemon-reload", Skip(SYSTEM)),
    ("sudo systemctl enable --now minibot", Skip(SYSTEM)),
    ("sudo systemctl enable --now minibot-worker@1 minibot-worker@2", Skip(SYSTEM)),
    ("sudo systemctl enable --now minibot-worker@1 minibot-worker@2 minibot-worker@3", Skip(SYSTEM)),
    // Deployment (deploy.md, tasks.md).
    ("cp deploy/minibot.env.example deploy/minibot.env", Skip(DEPLOY_ENV)),
    ("cp deploy/rabbitmq.env.example deploy/rabbitmq.env", Skip(DEPLOY_ENV)),
    ("chmod 600 deploy/*.env", Skip(DEPLOY_ENV)),
    ("docker compose up -d --scale worker=4", Skip(DOCKER)),
    ("docker compose up -d --scale worker=4 rabbitmq worker", Skip(DOCKER)),
    ("docker compose run --rm orchestrator console", Skip(DOCKER)),
    ("docker compose up -d --scale worker=8 worker", Skip(DOCKER)),
    ("docker compose logs -f orchestrator worker", Skip(DOCKER)),
    ("docker compose run --rm orchestrator queue workers", Skip(DOCKER)),
    ("docker compose run --rm --no-deps --entrypoint minibot-sandbox worker --probe", Skip(DOCKER)),
    ("docker compose up -d --no-deps --scale worker=4 worker", Skip(DOCKER)),
    ("minibot vault generate MESSAGE_KEY --print", Run("vault_generate_prints_and_stores_a_key")),
    ("rabbitmqctl add_vhost minibot", Skip(BROKER_ADMIN)),
    ("rabbitmqctl add_user minibot-orchestrator 'a-long-random-password'", Skip(BROKER_ADMIN)),
    ("rabbitmqctl set_permissions -p minibot minibot-orchestrator '.*' '.*' '.*'", Skip(BROKER_ADMIN)),
    ("rabbitmqctl add_user worker-box2 'another-long-random-password'", Skip(BROKER_ADMIN)),
    (
        r"rabbitmqctl set_permissions -p minibot worker-box2 '^(minibot|minibot\.agent\..+|minibot\.dead|amq\.gen-.+|minibot\.tasks|minibot\.tasks\.(control|workers|events))$' '^(minibot\.tasks\.events|minibot\.tasks\.workers|amq\.gen-.+)$' '^(minibot|minibot\.agent\..+|amq\.gen-.+|minibot\.tasks\.control)$'",
        Skip(BROKER_ADMIN),
    ),
    ("minibot-worker --config /etc/minibot/config.toml", Skip(WORKER_HOST)),
    ("MINIBOT_WORKER_ID=box2-1 minibot-worker --config /etc/minibot/config.toml --verbose", Skip(WORKER_HOST)),
    // The vault (secrets.md).
    ("minibot [--config PATH] vault init [PATH] [--password-file FILE]", Synopsis),
    ("minibot [--config PATH] vault edit [PATH] [--password-file FILE]", Synopsis),
    ("minibot [--config PATH] vault list [PATH] [--password-file FILE]", Synopsis),
    ("minibot [--config PATH] vault set NAME [PATH] [--password-file FILE]", Synopsis),
    ("minibot [--config PATH] vault rm NAME [PATH] [--password-file FILE]", Synopsis),
    ("minibot [--config PATH] vault generate NAME [PATH] [--password-file FILE] [--print]", Synopsis),
];

fn plan(command: &str) -> Option<&'static Plan> {
    EXAMPLES.iter().find(|(c, _)| *c == command).map(|(_, p)| p)
}

#[test]
fn every_example_is_run_or_skipped_for_a_reason() {
    let found = examples();
    let unlisted: Vec<String> =
        found.iter().filter(|e| plan(&e.command).is_none()).map(|e| format!("{}: {}", e.place, e.command)).collect();
    assert!(
        unlisted.is_empty(),
        "shell examples in the manual that this test neither runs nor skips (add each to EXAMPLES in \
         tests/e2e/docs_examples.rs):\n{}",
        unlisted.join("\n")
    );
    let stale: Vec<&str> =
        EXAMPLES.iter().map(|(c, _)| *c).filter(|c| !found.iter().any(|e| e.command == *c)).collect();
    assert!(stale.is_empty(), "EXAMPLES lists commands the manual no longer shows: {stale:#?}");
    let source = std::fs::read_to_string(manual::repo_root().join("tests/e2e/docs_examples.rs")).unwrap();
    for (command, plan) in EXAMPLES {
        match plan {
            Skip(reason) => assert!(!reason.trim().is_empty(), "{command} is skipped without a reason"),
            Run(test) => assert!(source.contains(&format!("async fn {test}()")), "no test {test} runs {command}"),
            Synopsis => {}
        }
    }
}

#[tokio::test]
async fn synopsis_lines_name_only_options_the_programs_have() {
    for (line, _) in EXAMPLES.iter().filter(|(_, p)| matches!(p, Synopsis)) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let program = words[0];
        // Subcommands are the plain lower-case words outside brackets; `[run]` and `a|b` name ones that must exist.
        let mut depth = 0usize;
        let mut path = Vec::new();
        let mut listed = Vec::new();
        for word in &words[1..] {
            let bare = word.trim_matches(|c| c == '[' || c == ']' || c == '.');
            let names: Vec<&str> = bare.split('|').collect();
            if names.iter().all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase())) {
                if depth == 0 && !word.starts_with('[') && names.len() == 1 {
                    path.push(bare);
                } else {
                    listed.extend(names);
                }
            }
            depth += word.matches('[').count();
            depth = depth.saturating_sub(word.matches(']').count());
        }
        let mut help = Command::new(binary(program));
        help.args(&path).arg("--help").env("HOME", std::env::temp_dir());
        let output = run(help).await;
        assert!(output.status.success(), "{program} {path:?} --help: {}", stderr(&output));
        let text = stdout(&output);
        for flag in words.iter().filter_map(|w| w.trim_start_matches('[').split(['|', ']']).next()) {
            if flag.starts_with("--") {
                assert!(
                    names_option(&text, flag),
                    "`{line}` names {flag}, which `{program} {path:?} --help` lacks:\n{text}"
                );
            }
        }
        for sub in listed {
            let shown = text.lines().any(|l| l.split_whitespace().next() == Some(sub));
            assert!(shown, "`{line}` names the subcommand {sub}, which `{program} {path:?} --help` lacks:\n{text}");
        }
    }
}

/// Whether a `--help` text lists `flag` itself, not only a longer option that starts with it.
fn names_option(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let next = help[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// A fresh folder to run manual examples in, with the scripted model behind `[llm] base_url`.
struct Desk {
    dir: tempfile::TempDir,
    base_url: String,
}

impl Desk {
    fn new(llm: &ScriptedLlm) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Self { dir, base_url: llm.base_url() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `config.toml` here and trusts it, as its author would (`minibot trust`).
    async fn config(&self, text: &str) {
        std::fs::write(self.path().join("config.toml"), text).unwrap();
        let output = run(self.shell("minibot trust")).await;
        assert!(output.status.success(), "trust: {}", stderr(&output));
    }

    /// `text` as a shell would run it here. Nothing of the caller's environment leaks in: no key, no config, no
    /// real home folder.
    fn shell(&self, text: &str) -> Command {
        let text = text.replace("cargo run --release -p minibot --", "minibot");
        let bin = binary("minibot").parent().unwrap().to_path_buf();
        let home = self.path().join("home");
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(text)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()))
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("LANG", "C.UTF-8")
            .env("MINIBOT__LLM__BASE_URL", &self.base_url);
        command
    }
}

/// Every line a `$ ` transcript shows after `example` is in the run's stdout or stderr (8-digit task ids differ).
fn shows_transcript(example: &Example, output: &std::process::Output) {
    let printed = ids_masked(&format!("{}{}", stdout(output), stderr(output)));
    for line in &example.output {
        assert!(printed.contains(&ids_masked(line)), "{} shows {line:?}; the run printed:\n{printed}", example.place);
    }
}

fn ids_masked(text: &str) -> String {
    let mut out = String::new();
    for (i, piece) in text.split("task ").enumerate() {
        if i > 0 {
            out.push_str("task ");
        }
        match piece.get(..8).filter(|id| id.chars().all(|c| c.is_ascii_hexdigit())) {
            Some(_) => {
                out.push_str("########");
                out.push_str(&piece[8..]);
            }
            None => out.push_str(piece),
        }
    }
    out
}

#[tokio::test]
async fn one_question_runs_without_a_config_file() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "what is 12345*6789",
        vec![
            Reply::tool("calculate_expression", json!({ "expression": "12345*6789" })),
            Reply::text("12345*6789 = 83810205"),
        ],
    )])
    .await;
    let export = documented("export OPENAI_API_KEY=sk-...");
    let cargo_run = documented(r#"cargo run --release -p minibot -- console --once "what is 12345*6789""#);
    let desk = Desk::new(&llm);
    let output = run(desk.shell(&format!("{}\n{}", export[0].command, cargo_run[0].command))).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "12345*6789 = 83810205\n");
    // The calculation is the program's, not the script's.
    let last = llm.requests().pop().unwrap().to_string();
    assert!(last.contains("83810205"), "{last}");
    // No config file: the defaults keep their state in the data folder, not in the current one (README.md,
    // docs/README.md).
    let data = desk.path().join("home/.local/share/minibot");
    assert!(data.join("minibot.db").is_file(), "conversations in ~/.local/share/minibot/minibot.db");
    assert!(data.join("logs/minibot.log").is_file(), "the log in ~/.local/share/minibot/logs/minibot.log");
    let here: Vec<String> =
        std::fs::read_dir(desk.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into()).collect();
    assert_eq!(here, ["home"], "nothing is written to the folder the run started from");

    for example in documented(r#"minibot console --once "what is 12345*6789""#) {
        let output = run(desk.shell(&example.command)).await;
        assert!(output.status.success(), "stderr: {}", stderr(&output));
        shows_transcript(&example, &output);
    }
}

#[tokio::test]
async fn once_prints_the_answer_on_stdout() {
    let llm = ScriptedLlm::start(vec![
        Script::new("question", vec![Reply::text("the answer")]),
        Script::new("what can you do?", vec![Reply::text("Answer questions and run tools.")]),
    ])
    .await;
    let desk = Desk::new(&llm);
    let examples = [
        (r#"minibot console --once "question""#, "the answer\n"),
        (r#"minibot console --once "what can you do?""#, "Answer questions and run tools.\n"),
    ];
    for (command, answer) in examples {
        for example in documented(command) {
            let output = run(desk.shell(&example.command)).await;
            assert!(output.status.success(), "stderr: {}", stderr(&output));
            assert_eq!(stdout(&output), answer, "{}", example.place);
        }
    }
}

#[tokio::test]
async fn plain_answers_piped_lines() {
    let llm = ScriptedLlm::start(vec![
        Script::new("hello", vec![Reply::text("Hello there.")]),
        Script::new("what did I just say?", vec![Reply::text("You said hello.")]),
    ])
    .await;
    let desk = Desk::new(&llm);
    let example = &documented(r"printf 'hello\nwhat did I just say?\n/exit\n' | minibot console --plain")[0];
    let output = run(desk.shell(&example.command)).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Hello there.\nYou said hello.\n", "stderr: {}", stderr(&output));
    // The second line is answered in the same conversation, after the first.
    let second = llm.requests().pop().unwrap().to_string();
    assert!(second.contains("Hello there."), "{second}");
}

#[tokio::test]
async fn once_reads_the_message_from_stdin() {
    let llm = ScriptedLlm::start(vec![Script::containing(
        "diff --git a/notes.txt b/notes.txt",
        vec![Reply::text("You changed one line of notes.txt.")],
    )])
    .await;
    let desk = Desk::new(&llm);
    let setup = "git init -q . && printf 'one\\n' > notes.txt && git add notes.txt \
                 && git -c user.name=t -c user.email=t@example.invalid commit -qm first && printf 'two\\n' > notes.txt";
    let output = run(desk.shell(setup)).await;
    assert!(output.status.success(), "git: {}", stderr(&output));
    let example = &documented("git diff | minibot console --once -")[0];
    let output = run(desk.shell(&example.command)).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "You changed one line of notes.txt.\n");
    let request = llm.requests().pop().unwrap().to_string();
    assert!(request.contains("-one") && request.contains("+two"), "the whole diff is the message: {request}");
}

#[tokio::test]
async fn once_waits_for_the_background_task() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "research the answer",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "find the answer to everything" })),
                Reply::text("I started a background task."),
            ],
        ),
        Script::new(
            "find the answer to everything",
            vec![Reply::tool("calculate_expression", json!({ "expression": "6*7" })), Reply::text("The answer is 42.")],
        )
        .delay(std::time::Duration::from_millis(300)),
    ])
    .await;
    let desk = Desk::new(&llm);
    let example = &documented(r#"minibot console --once "research the answer""#)[0];
    // Progress every 10 ms rather than 3 s, so the short task shows its step.
    let text = format!("export MINIBOT__TASKS__PROGRESS_INTERVAL_SECONDS=0.01\n{}", example.command);
    let output = run(desk.shell(&text)).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "I started a background task.\nThe answer is 42.\n");
    shows_transcript(example, &output);
}

#[tokio::test]
async fn approve_lets_the_named_tool_run() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "clean the build folder",
        vec![Reply::tool("bash", json!({ "command": "rm -rf build" })), Reply::text("The build folder is gone.")],
    )])
    .await;
    let desk = Desk::new(&llm);
    desk.config("[tools.bash]\nenabled = true\n\n[tools.approval]\nrequire_approval = [\"bash\", \"mcp_github__*\"]\n")
        .await;
    let example =
        &documented(r#"minibot console --once "clean the build folder" --approve bash --approve 'mcp_github__*'"#)[0];
    let output = run(desk.shell(&example.command)).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The build folder is gone.\n");
    assert!(stderr(&output).contains("· bash approved by --approve"), "{}", stderr(&output));
    let result = minibot_e2e::tool_result(&llm);
    assert_eq!(result["exit_code"], 0, "bash ran: {result}");
}

#[tokio::test]
async fn vault_generate_prints_and_stores_a_key() {
    let llm = ScriptedLlm::start(vec![]).await;
    let desk = Desk::new(&llm);
    desk.config("[vault]\nenabled = true\npassword_file = \"vault.pass\"\n").await;
    std::fs::write(desk.path().join("vault.pass"), "correct horse battery staple\n").unwrap();
    let output = run(desk.shell("minibot vault init")).await;
    assert!(output.status.success(), "init: {}", stderr(&output));

    let example = &documented("minibot vault generate MESSAGE_KEY --print")[0];
    let output = run(desk.shell(&example.command)).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let key = stdout(&output);
    let key = key.trim_end();
    assert!(key.len() == 64 && key.chars().all(|c| c.is_ascii_hexdigit()), "64 hex digits: {key:?}");
    let output = run(desk.shell("minibot vault list")).await;
    assert_eq!(stdout(&output), "MESSAGE_KEY\n", "stderr: {}", stderr(&output));
    // The same command again never overwrites it.
    let output = run(desk.shell(&example.command)).await;
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));
}

#[tokio::test]
async fn minibots_example_config_stops_start_up_as_the_manual_shows() {
    let llm = ScriptedLlm::start(vec![]).await;
    let desk = Desk::new(&llm);
    std::fs::create_dir_all(desk.path().join("srv")).unwrap();
    let config = desk.path().join("srv/config.toml");
    let shown_as = |printed: String| printed.replace(&config.display().to_string(), "/srv/minibot/config.toml");
    // A feature not built yet: one line naming the file and the key.
    std::fs::write(&config, "[tools.rag]\nenabled = true\n").unwrap();
    let output = run(desk.shell(&format!("minibot --config {} console --once hi", config.display()))).await;
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));
    let shown = block_after("docs/configuration.md", "A config that turns on RAG").text();
    assert_eq!(shown_as(stderr(&output)), shown, "docs/configuration.md shows what a refused feature prints");
    // MiniBot's example config: nothing refused; only the API key it leaves out stops it.
    let fixture = manual::repo_root().join("shared/config/tests/fixtures/minibot-0.36-config.example.toml");
    std::fs::copy(fixture, &config).unwrap();
    let output = run(desk.shell(&format!("minibot --config {} console --once hi", config.display()))).await;
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));
    let shown = block_after("docs/configuration.md", "It stops only at the").text();
    assert_eq!(shown_as(stderr(&output)), shown, "docs/configuration.md shows what MiniBot's example config prints");
}

#[tokio::test]
async fn a_daemon_without_a_channel_says_what_to_do_as_the_manual_shows() {
    let llm = ScriptedLlm::start(vec![]).await;
    let desk = Desk::new(&llm);
    std::fs::create_dir_all(desk.path().join("etc/minibot")).unwrap();
    let config = desk.path().join("etc/minibot/config.toml");
    std::fs::write(&config, "").unwrap();
    let output = run(desk.shell(&format!("minibot --config {}", config.display()))).await;
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));
    let printed = stderr(&output).replace(&config.display().to_string(), "/etc/minibot/config.toml");
    let shown = block_after("docs/daemon.md", "With no channel, the daemon stops at once").text();
    assert_eq!(printed.trim(), shown.trim(), "docs/daemon.md shows what a daemon without a channel prints");
}

#[tokio::test]
async fn doctor_sums_up_and_exits_by_what_is_broken() {
    let llm = ScriptedLlm::start(vec![]).await;
    let desk = Desk::new(&llm);
    for example in documented("minibot doctor") {
        let output = run(desk.shell(&example.command)).await;
        let printed = stdout(&output);
        let last = printed.lines().last().unwrap_or_default().to_string();
        // docs/doctor.md: a last line that sums up; exit 0 unless a line is broken (✗), then 1.
        let sums_up = last == "all good" || last.starts_with("nothing broken;") || last.contains("problem(s) to fix");
        assert!(sums_up, "{}: the last line sums up: {printed}\nstderr: {}", example.place, stderr(&output));
        let broken = printed.lines().any(|l| l.trim_start().starts_with('✗'));
        assert_eq!(output.status.code(), Some(if broken { 1 } else { 0 }), "{printed}\nstderr: {}", stderr(&output));
    }
}
