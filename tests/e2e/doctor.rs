//! `minibot doctor` end to end: the real binary against the scripted LLM, the fake Bot API, a real MCP server
//! over stdio and closed ports, with HOME and the XDG folders in a temp folder. A healthy setup passes with
//! exit 0; each broken one shows its ✗ line with the fix and exits non-zero, and no secret is printed.

use minibot_e2e::{Home, ScriptedLlm, stderr, stdout};
use minibot_test_support::FakeTelegram;
use std::process::Output;

/// What `Home::new` configures as the key; the scripted LLM is told to want it (or another) per test.
const KEY: &str = "sk-e2e";

/// A minimal MCP server (JSON-RPC over stdio): `initialize`, then two tools on `tools/list`.
const MCP_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    method = request.get("method")
    if method == "initialize":
        result = {"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "doctor-test", "version": "1"}}
    elif method == "tools/list":
        schema = {"type": "object", "properties": {}}
        result = {"tools": [{"name": "ping", "description": "Answers pong", "inputSchema": schema},
                            {"name": "time", "description": "Tells the time", "inputSchema": schema}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
"#;

/// Command tools need a sandbox mode every host has, so the host's kernel cannot decide these tests.
const BASIC_SANDBOX: &str = "[tools.bash]\nsandbox_mode = \"basic\"\n[tools.python_exec]\nsandbox_mode = \"basic\"\n";

fn telegram_config(telegram: &FakeTelegram, token: &str) -> String {
    format!(
        "[channels.telegram]\nenabled = true\nbot_token = \"{token}\"\napi_base_url = \"{}\"\n",
        telegram.base_url()
    )
}

fn mcp_config(home: &Home) -> String {
    let script = home.path().join("mcp_server.py");
    std::fs::write(&script, MCP_SERVER).unwrap();
    format!(
        "[tools.mcp]\nenabled = true\ntimeout_seconds = 10\n[[tools.mcp.servers]]\nname = \"clock\"\n\
         command = \"python3\"\nargs = [\"-u\", \"{}\"]\n",
        script.display()
    )
}

/// A port nothing listens on: bound, then let go.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `minibot doctor --config <home>` with HOME and the XDG folders inside the temp folder.
async fn doctor(home: &Home) -> Output {
    doctor_with(home, None).await
}

/// [`doctor`] with `MINIBOT_VAULT_PASSWORD` set.
async fn doctor_with(home: &Home, vault_password: Option<&str>) -> Output {
    let mut command = home.minibot(&["doctor"]);
    let fake_home = home.path().join("home");
    std::fs::create_dir_all(&fake_home).unwrap();
    command.env("HOME", &fake_home);
    for (variable, folder) in
        [("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state")]
    {
        command.env(variable, fake_home.join(folder));
    }
    command.env("XDG_CACHE_HOME", fake_home.join(".cache"));
    match vault_password {
        Some(password) => command.env("MINIBOT_VAULT_PASSWORD", password),
        None => command.env_remove("MINIBOT_VAULT_PASSWORD"),
    };
    minibot_e2e::run(command).await
}

/// The report line about `topic` that starts with `mark` (several `mcp` lines may exist).
fn line<'a>(report: &'a str, mark: char, topic: &str) -> Option<&'a str> {
    report.lines().find(|l| l.starts_with(mark) && l[mark.len_utf8()..].trim_start().starts_with(topic))
}

fn failing<'a>(output: &'a Output, topic: &str) -> &'a str {
    let report = std::str::from_utf8(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "a broken {topic} fails the run:\n{report}\n{}", stderr(output));
    line(report, '✗', topic).unwrap_or_else(|| panic!("no ✗ {topic} line in:\n{report}"))
}

#[tokio::test]
async fn a_healthy_setup_passes_every_check() {
    let llm = ScriptedLlm::start(vec![]).await;
    llm.set_models(&["gpt-4o", "e2e-model"]);
    llm.require_key(KEY);
    let telegram = FakeTelegram::start().await;
    let home = Home::new(&llm.base_url(), "");
    let extra = format!("{}{}{BASIC_SANDBOX}", telegram_config(&telegram, FakeTelegram::TOKEN), mcp_config(&home));
    let config = std::fs::read_to_string(home.config()).unwrap() + &extra;
    std::fs::write(home.config(), config).unwrap();

    let output = doctor(&home).await;
    let report = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "report:\n{report}\nstderr: {}", stderr(&output));
    assert!(!report.contains('✗'), "{report}");
    let config_line = line(&report, '✓', "config").unwrap();
    assert!(config_line.contains(&home.config().display().to_string()), "{config_line}");
    let data = line(&report, '✓', "data").unwrap();
    assert!(data.contains(&home.path().join("data").display().to_string()), "{data}");
    assert!(line(&report, '✓', "logs").unwrap().contains(&home.path().join("logs").display().to_string()));
    let provider = line(&report, '✓', "provider").unwrap();
    assert!(provider.contains("model `e2e-model`") && provider.contains("llm.api_key"), "{provider}");
    let bot = line(&report, '✓', "telegram").unwrap();
    assert!(bot.contains("@minibot_test_bot") && bot.contains("424242"), "{bot}");
    assert!(line(&report, '✓', "commands").unwrap().contains("tools.python_exec: basic"), "{report}");
    assert!(line(&report, '✓', "tasks").unwrap().contains("SQLite queue"), "{report}");
    let mcp = line(&report, '✓', "mcp").unwrap();
    assert!(mcp.contains("`clock`: 2 tool(s)"), "{mcp}");
    assert!(line(&report, '✓', "disk").unwrap().contains("free"), "{report}");
    assert!(!report.contains(FakeTelegram::TOKEN) && !report.contains("TEST-TOKEN"), "no token shown: {report}");
    assert!(!report.contains(KEY), "no key shown: {report}");
    // One listing proved the key and the model: nothing was spent on a completion.
    assert!(llm.requests().is_empty(), "{:?}", llm.requests());
}

#[tokio::test]
async fn a_server_without_a_model_list_is_checked_with_a_one_token_completion() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), BASIC_SANDBOX);
    let output = doctor(&home).await;
    let report = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(line(&report, '✓', "provider").unwrap().contains("model `scripted`"), "{report}");
    let requests = llm.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["max_tokens"], 1);
    assert_eq!(requests[0]["model"], "e2e-model");
}

#[tokio::test]
async fn a_wrong_api_key_is_named_with_the_providers_words() {
    let llm = ScriptedLlm::start(vec![]).await;
    llm.set_models(&["e2e-model"]);
    llm.require_key("sk-the-right-one");
    let home = Home::new(&llm.base_url(), BASIC_SANDBOX);
    let output = doctor(&home).await;
    let provider = failing(&output, "provider");
    assert!(provider.contains("refused the API key (HTTP 401)"), "{provider}");
    assert!(provider.contains("Incorrect API key provided"), "the provider's own text: {provider}");
    assert!(provider.contains("fix: put a valid key in `llm.api_key`"), "{provider}");
}

#[tokio::test]
async fn an_unknown_model_lists_the_ones_the_provider_has() {
    let llm = ScriptedLlm::start(vec![]).await;
    llm.set_models(&["whisper-1", "e2e-model-large", "gpt-4o"]);
    let home = Home::new(&llm.base_url(), BASIC_SANDBOX);
    let output = doctor(&home).await;
    let provider = failing(&output, "provider");
    assert!(provider.contains("has no model `e2e-model`"), "{provider}");
    assert!(provider.contains("it offers e2e-model-large, "), "nearest first: {provider}");
    assert!(provider.contains("fix: set `llm.model` to one it offers, such as `e2e-model-large`"), "{provider}");
}

#[tokio::test]
async fn an_unreachable_provider_names_the_url_and_the_key_to_change() {
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let home = Home::new(&url, BASIC_SANDBOX);
    let output = doctor(&home).await;
    let provider = failing(&output, "provider");
    assert!(provider.contains(&format!("cannot connect to {url}/models: connection refused")), "{provider}");
    assert!(provider.contains("fix: start the server, or set `llm.base_url`"), "{provider}");
}

#[tokio::test]
async fn a_bad_telegram_token_fails_without_showing_it() {
    let llm = ScriptedLlm::start(vec![]).await;
    let telegram = FakeTelegram::start().await;
    let token = "987654:NOT-THE-RIGHT-TOKEN";
    let home = Home::new(&llm.base_url(), &(telegram_config(&telegram, token) + BASIC_SANDBOX));
    let output = doctor(&home).await;
    let bot = failing(&output, "telegram");
    assert!(bot.contains("refused the bot token (HTTP 401): Unauthorized"), "{bot}");
    assert!(bot.contains("fix: put the token @BotFather gave you in `channels.telegram.bot_token`"), "{bot}");
    let everything = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!everything.contains(token) && !everything.contains("NOT-THE-RIGHT"), "{everything}");
    assert!(line(&stdout(&output), '✓', "provider").is_some(), "the other checks still pass");
}

#[tokio::test]
async fn a_config_with_an_unknown_key_is_the_first_failure_and_the_rest_still_runs() {
    let home = Home::new("http://127.0.0.1:9/v1", "modle = \"gpt-4o\"\n");
    let output = doctor(&home).await;
    let report = stdout(&output);
    let config = failing(&output, "config");
    assert!(report.lines().next().unwrap().starts_with("✗ config"), "{report}");
    assert!(config.contains("modle"), "the key is named: {config}");
    assert!(config.contains("fix: correct or remove `llm.modle`"), "{config}");
    assert!(line(&report, '-', "provider").unwrap().contains("the config did not load"), "{report}");
    assert!(report.lines().any(|l| l.contains(" sandbox ")), "the host is still checked: {report}");
    assert!(line(&report, '✓', "disk").is_some(), "{report}");
}

#[tokio::test]
async fn an_unreachable_broker_fails_and_hides_its_password() {
    let llm = ScriptedLlm::start(vec![]).await;
    let broker = format!("amqp://minibot:hunter2-secret@127.0.0.1:{}/%2f", closed_port());
    let extra = format!(
        "[tasks]\nbackend = \"rabbitmq\"\n[rabbitmq]\nbroker_url = \"{broker}\"\n\
         message_key = \"test-message-key-0123456789abcdef0123456789\"\n{BASIC_SANDBOX}"
    );
    let home = Home::new(&llm.base_url(), &extra);
    let output = doctor(&home).await;
    let line = failing(&output, "broker");
    assert!(line.contains("cannot reach RabbitMQ at amqp://minibot:***@127.0.0.1"), "{line}");
    assert!(line.contains("fix: start RabbitMQ, or set `rabbitmq.broker_url`"), "{line}");
    assert!(!stdout(&output).contains("hunter2"), "{}", stdout(&output));
}

#[tokio::test]
async fn an_mcp_server_that_does_not_start_is_named_with_its_command() {
    let llm = ScriptedLlm::start(vec![]).await;
    let extra = format!(
        "[tools.mcp]\nenabled = true\ntimeout_seconds = 5\n[[tools.mcp.servers]]\nname = \"notes\"\n\
         command = \"/nonexistent/notes-mcp\"\n{BASIC_SANDBOX}"
    );
    let home = Home::new(&llm.base_url(), &extra);
    let output = doctor(&home).await;
    let mcp = failing(&output, "mcp");
    assert!(mcp.contains("`notes`"), "{mcp}");
    assert!(mcp.contains("fix: check its command `/nonexistent/notes-mcp`"), "{mcp}");
}

#[tokio::test]
async fn a_vault_that_does_not_open_is_its_own_failure_and_its_secrets_stay_hidden() {
    let llm = ScriptedLlm::start(vec![]).await;
    let secret_key = "sk-from-the-vault-0123456789";
    llm.set_models(&["e2e-model"]);
    llm.require_key(secret_key);
    let home = Home::new(&llm.base_url(), &format!("[vault]\nenabled = true\n{BASIC_SANDBOX}"));
    let config = std::fs::read_to_string(home.config()).unwrap().replace("\"sk-e2e\"", "\"${secret:OPENAI}\"");
    std::fs::write(home.config(), config).unwrap();
    for args in [&["vault", "init"][..], &["vault", "set", "OPENAI"][..]] {
        let mut command = home.minibot(args);
        command.env("MINIBOT_VAULT_PASSWORD", "the-vault-password");
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = command.spawn().unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), secret_key.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "minibot {args:?}");
    }

    let output = doctor_with(&home, Some("not-the-password")).await;
    let report = stdout(&output);
    let vault = failing(&output, "vault");
    assert!(vault.contains("wrong vault password"), "{vault}");
    assert!(vault.contains("fix: use the password the vault was made with"), "{vault}");
    assert!(line(&report, '✓', "config").unwrap().contains("its vault did not open"), "{report}");
    assert!(line(&report, '-', "provider").unwrap().contains("the vault did not open"), "{report}");

    let output = doctor_with(&home, Some("the-vault-password")).await;
    let report = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(line(&report, '✓', "vault").unwrap().contains("unlocked, 1 secret(s)"), "{report}");
    assert!(line(&report, '✓', "provider").is_some(), "the key from the vault is accepted: {report}");
    assert!(!report.contains(secret_key) && !report.contains("the-vault-password"), "{report}");

    // Red-team report (#22, finding 2): a secret inside a URL doctor shows (an MCP server's) is masked too.
    let mut config = std::fs::read_to_string(home.config()).unwrap();
    config.push_str(&format!(
        "[tools.mcp]\nenabled = true\ntimeout_seconds = 5\n[[tools.mcp.servers]]\nname = \"remote\"\n\
         transport = \"http\"\nurl = \"http://127.0.0.1:{}/mcp?token=${{secret:OPENAI}}\"\n",
        closed_port()
    ));
    std::fs::write(home.config(), config).unwrap();
    let output = doctor_with(&home, Some("the-vault-password")).await;
    let mcp = failing(&output, "mcp");
    assert!(mcp.contains("token=***"), "{mcp}");
    assert!(!stdout(&output).contains(secret_key), "{}", stdout(&output));
}

#[tokio::test]
async fn with_rabbitmq_it_connects_and_lists_the_workers_it_hears() {
    let broker = crate::rabbitmq::Broker::new().await;
    let llm = ScriptedLlm::start(vec![]).await;
    let extra = format!("{}[worker]\nheartbeat_seconds = 1\n{BASIC_SANDBOX}", broker.config);
    let home = Home::new(&llm.base_url(), &extra);

    let output = doctor(&home).await;
    let report = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "no worker is a warning, not a failure: {report}");
    assert!(line(&report, '✓', "broker").unwrap().contains("connected"), "{report}");
    let none = line(&report, '!', "workers").unwrap();
    assert!(none.contains("none sent a heartbeat within 1.5 s") && none.contains("fix: start `minibot-worker`"));

    let worker = std::process::Command::new(minibot_e2e::binary("minibot-worker"))
        .arg("--config")
        .arg(home.config())
        .env("MINIBOT_WORKER_ID", "doctor-worker-1")
        .env("HOME", home.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _worker = KillOnDrop(worker);
    let started = std::time::Instant::now();
    let heard = loop {
        let report = stdout(&doctor(&home).await);
        if let Some(workers) = line(&report, '✓', "workers") {
            break workers.to_string();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the worker is never heard: {report}");
    };
    broker.remove().await;
    assert!(heard.contains("1 alive: doctor-worker-1 on "), "{heard}");
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn on_a_fresh_machine_it_points_to_init() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let cwd = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let mut command = std::process::Command::new(minibot_e2e::binary("minibot"));
    command.arg("doctor").current_dir(&cwd).env("HOME", &home).stdin(std::process::Stdio::null());
    for variable in ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "MINIBOT_CONFIG", "OPENAI_API_KEY", "MINIBOT_VAULT_PASSWORD"] {
        command.env_remove(variable);
    }
    let output = minibot_e2e::run(command).await;
    let report = stdout(&output);
    let config = line(&report, '!', "config").unwrap_or_else(|| panic!("{report}"));
    let platform_file = home.join(".config/minibot/config.toml");
    assert!(config.contains(&format!("fix: run `minibot init` (it writes {})", platform_file.display())), "{config}");
    let data = line(&report, '✓', "data").unwrap();
    assert!(data.contains(&home.join(".local/share/minibot").display().to_string()), "{data}");
    let provider = failing(&output, "provider");
    assert!(provider.contains("no API key for provider `openai`"), "{provider}");
    assert!(provider.contains("OPENAI_API_KEY"), "{provider}");
    assert!(!home.join(".config/minibot").exists() && !home.join(".local").exists(), "doctor makes no folder");
}

#[tokio::test]
async fn a_sandbox_mode_that_cannot_run_names_the_section_to_change() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "[tools.python_exec]\nsandbox_mode = \"jail\"\n");
    let output = doctor(&home).await;
    let commands = failing(&output, "commands");
    assert!(commands.contains("[tools.python_exec] sandbox_mode = \"jail\" cannot run here"), "{commands}");
    assert!(commands.contains("fix: set [tools.python_exec] sandbox_mode to a mode this host has"), "{commands}");
}

#[tokio::test]
async fn a_database_folder_that_cannot_be_made_is_named_with_its_key() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "[scheduler.prompts]\nsqlite_url = \"sqlite:///./a-file/jobs/sp.db\"\n");
    // A file where the database's folder would go.
    std::fs::write(home.path().join("a-file"), "not a folder").unwrap();
    let output = doctor(&home).await;
    let failed = failing(&output, "database");
    assert!(failed.contains("scheduler.prompts.sqlite_url: ") && failed.contains("cannot be made"), "{failed}");
}
