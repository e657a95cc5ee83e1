//! `minibot init` end to end: the wizard on a real pseudo-terminal and the `--yes` flags, against the scripted
//! model server (which checks the key and lists its models) and the fake Bot API; then the written config
//! answers a `console --once` question. Every run has its own HOME and XDG folders.

use minibot_e2e::{Reply, Script, ScriptedLlm, binary, run, stderr, stdout};
use minibot_test_support::FakeTelegram;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &str = "sk-init-e2e-7c1f9a2b4d";
const QUESTION: &str = "What is the capital of France?";

/// A user's machine with nothing set up: an empty home, XDG folders in it, and a working folder.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["home", "config", "data", "work"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        Self { dir }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Where `minibot init` writes without --config: the XDG config folder.
    fn user_config(&self) -> PathBuf {
        self.path("config/minibot/config.toml")
    }

    fn env(&self, command: &mut Command) {
        command
            .current_dir(self.path("work"))
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("XDG_DATA_HOME", self.path("data"))
            .env_remove("MINIBOT_CONFIG")
            .env_remove("MINIBOT_VAULT_PASSWORD")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("RUST_LOG");
    }

    fn minibot(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary("minibot"));
        command.args(args).stdin(Stdio::null());
        self.env(&mut command);
        command
    }

    /// `minibot --config <config> console --once QUESTION`, its answer on stdout.
    async fn ask(&self, config: &Path) -> String {
        let output = run(self.minibot(&["--config", config.to_str().unwrap(), "console", "--once", QUESTION])).await;
        assert!(output.status.success(), "console --once failed: {}", stderr(&output));
        stdout(&output)
    }
}

/// A model server that accepts only [`KEY`], lists `e2e-model`, and knows the answer to [`QUESTION`].
async fn model_server() -> ScriptedLlm {
    let llm = ScriptedLlm::start(vec![Script::new(QUESTION, vec![Reply::text("Paris.")])]).await;
    llm.set_models(&["e2e-model", "e2e-model-2"]);
    llm.require_key(KEY);
    llm
}

/// `minibot init …` on a pseudo-terminal (`script` makes it), answered as a person would: each answer is
/// typed only once its question is on the screen.
struct Wizard {
    child: Child,
    screen: Arc<Mutex<String>>,
    /// How much of the screen earlier `expect`s consumed.
    seen: usize,
}

impl Wizard {
    fn start(machine: &Machine, args: &[&str]) -> Self {
        let command = format!("{} init {}", binary("minibot").display(), args.join(" "));
        let mut script = Command::new("script");
        script.args(["-qfec", &command, "/dev/null"]).env("TERM", "xterm");
        machine.env(&mut script);
        let mut child = script.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let screen = minibot_e2e::capture_screen(&mut child);
        Self { child, screen, seen: 0 }
    }

    /// Waits until `text` shows after what was already seen; returns the screen up to it.
    async fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen.lock().unwrap().clone();
            if let Some(at) = screen[self.seen..].find(text) {
                let end = self.seen + at + text.len();
                let shown = screen[self.seen..end].to_string();
                self.seen = end;
                return shown;
            }
            assert!(Instant::now() < deadline, "the wizard never showed {text:?}; it shows:\n{}", &screen[self.seen..]);
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    async fn answer(&mut self, question: &str, answer: &str) -> String {
        let shown = self.expect(question).await;
        // The question is printed before the terminal is switched to reading (and, for hidden answers, before
        // echo goes off, which discards what was typed ahead): give it that moment.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{answer}\r").as_bytes()).unwrap();
        stdin.flush().unwrap();
        shown
    }

    async fn exit_code(mut self) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "the wizard did not exit:\n{}", self.screen.lock().unwrap());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }
}

impl Drop for Wizard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn the_wizard_sets_up_a_working_assistant_and_lets_a_wrong_key_be_fixed() {
    let llm = model_server().await;
    let telegram = FakeTelegram::start().await;
    let machine = Machine::new();
    let mut wizard = Wizard::start(&machine, &["--telegram-api-base", &telegram.base_url()]);

    let intro = wizard.expect("Provider [1]: ").await;
    assert!(intro.contains(&machine.user_config().display().to_string()), "names the file it writes: {intro}");
    wizard.answer("", "openai-compatible").await;
    wizard.answer("Base URL of its OpenAI-style API: ", &llm.base_url()).await;
    wizard.answer("Model: ", "e2e-model").await;
    wizard
        .answer("API key (hidden; Enter for none: a server on this machine needs none): ", "sk-typo-0000000000")
        .await;
    // The provider's own refusal, word for word, then a way to fix it.
    let refusal = wizard.answer("What now? [1]: ", "key").await;
    assert!(refusal.contains("refused the API key (HTTP 401)"), "{refusal}");
    assert!(refusal.contains("Incorrect API key provided: sk-****0000"), "{refusal}");
    wizard.answer("API key (hidden; Enter for none: a server on this machine needs none): ", KEY).await;
    let ok = wizard.expect("Step 2/4").await;
    assert!(ok.contains("OK: the provider knows the model as e2e-model."), "{ok}");
    assert!(!wizard.screen().contains(KEY), "a hidden answer is not echoed");

    wizard.answer("Connect a Telegram bot (make one with @BotFather in Telegram first)? (y/N): ", "y").await;
    wizard.answer("Bot token from @BotFather (hidden; looks like 123456789:AAE…): ", FakeTelegram::TOKEN).await;
    let checked = wizard.answer("Your Telegram user id (several: separate with commas): ", "12345, 67890").await;
    assert!(checked.contains("OK: the token belongs to @minibot_test_bot."), "{checked}");
    wizard.answer("Where do background tasks run? [1]: ", "").await;
    wizard.answer("How many tasks may run at once (worker processes; 0: none) [2]: ", "1").await;
    wizard.answer("Add an MCP server: its name (Enter when done): ", "").await;
    wizard.answer("Vault password (Enter to generate one): ", "").await;
    wizard.answer(&format!("Write {}? (Y/n): ", machine.user_config().display()), "").await;
    let done = wizard.expect("minibot doctor").await;
    assert!(done.contains(&format!("Wrote {}", machine.user_config().display())), "{done}");
    assert_eq!(wizard.exit_code().await, 0);

    let config = machine.user_config();
    let text = read(&config);
    assert_eq!(mode(&config), 0o600, "config.toml is readable by its owner only");
    assert!(!text.contains(KEY) && !text.contains(FakeTelegram::TOKEN), "no secret in the file:\n{text}");
    assert!(text.contains("api_key = \"${secret:COMPATIBLE_API_KEY}\""), "{text}");
    assert!(text.contains("bot_token = \"${secret:TELEGRAM_BOT_TOKEN}\""), "{text}");
    assert!(text.contains("allowed_user_ids = [12345, 67890]"), "{text}");
    assert!(text.contains("local_workers = 1"), "{text}");
    assert!(text.contains("# The main agent's provider and model."), "the file explains itself:\n{text}");
    let password_file = config.with_file_name("vault.password");
    assert_eq!(mode(&password_file), 0o600);
    assert_eq!(mode(&config.with_file_name("secrets.vault.yml")), 0o600);

    // The vault holds what was typed: `minibot vault list` with the written config opens it unattended.
    let listed = run(machine.minibot(&["--config", config.to_str().unwrap(), "vault", "list"])).await;
    assert_eq!(stdout(&listed), "COMPATIBLE_API_KEY\nTELEGRAM_BOT_TOKEN\n", "{}", stderr(&listed));

    // The written config answers, with the key from the vault.
    assert_eq!(machine.ask(&config).await, "Paris.\n");
    assert_eq!(llm.authorizations().last().unwrap(), &format!("Bearer {KEY}"));

    // The wizard again: every question offers what the file says, Enter keeps it (the key and the token too),
    // and only the one answer that differs changes the file.
    let before = read(&config);
    let mut wizard = Wizard::start(&machine, &[]);
    assert!(wizard.expect("Provider [4]: ").await.contains("changing"));
    wizard.answer("", "").await;
    wizard.answer(&format!("Base URL of its OpenAI-style API [{}]: ", llm.base_url()), "").await;
    wizard.answer("Model [e2e-model]: ", "e2e-model-2").await;
    wizard.answer("API key (hidden; Enter keeps the current one): ", "").await;
    let checked = wizard.answer("Give it a new token? (y/N): ", "").await;
    assert!(checked.contains("OK: the provider knows the model as e2e-model-2."), "{checked}");
    wizard.answer("Your Telegram user id (several: separate with commas) [12345, 67890]: ", "").await;
    wizard.answer("Where do background tasks run? [1]: ", "").await;
    wizard.answer("How many tasks may run at once (worker processes; 0: none) [1]: ", "").await;
    wizard.answer("Add an MCP server: its name (Enter when done): ", "").await;
    wizard.answer(&format!("Write {}? (Y/n): ", machine.user_config().display()), "y").await;
    wizard.expect("minibot doctor").await;
    assert_eq!(wizard.exit_code().await, 0);
    assert_eq!(read(&config), before.replace("model = \"e2e-model\"", "model = \"e2e-model-2\""));
    assert_eq!(machine.ask(&config).await, "Paris.\n");
    assert_eq!(llm.requests().last().unwrap()["model"], "e2e-model-2");
    assert_eq!(llm.authorizations().last().unwrap(), &format!("Bearer {KEY}"));
}

#[tokio::test]
async fn yes_sets_up_everything_from_flags_without_a_question() {
    let llm = model_server().await;
    let telegram = FakeTelegram::start().await;
    let machine = Machine::new();
    let config = machine.path("work/assistant/config.toml");
    let mcp = format!("--mcp=everything=node {} stdio", crate::mcp::everything_js());
    let mut command = machine.minibot(&[
        "init",
        "--yes",
        "--config",
        config.to_str().unwrap(),
        "--provider",
        "openai-compatible",
        "--base-url",
        &llm.base_url(),
        "--model",
        "e2e-model",
        "--api-key-env",
        "E2E_INIT_KEY",
        "--telegram-token",
        FakeTelegram::TOKEN,
        "--telegram-api-base",
        &telegram.base_url(),
        "--telegram-user",
        "4242",
        "--tasks-backend",
        "sqlite",
        "--workers",
        "6",
        &mcp,
    ]);
    command.env("E2E_INIT_KEY", KEY);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stdout(&output).starts_with(&format!("Wrote {}", config.display())), "{}", stdout(&output));
    // Not a file `minibot` finds by itself: the next commands say which.
    assert!(stdout(&output).contains(&format!("minibot --config {} console", config.display())), "{}", stdout(&output));
    assert_eq!(mode(config.parent().unwrap()), 0o700, "the folder it made is private");
    assert!(stderr(&output).contains("OK: the token belongs to @minibot_test_bot."), "{}", stderr(&output));
    assert!(telegram.calls_of("getMe").iter().all(|c| c.ok()) && !telegram.calls_of("getMe").is_empty());

    let text = read(&config);
    assert_eq!(mode(&config), 0o600);
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("allowed_user_ids = [4242]"), "{text}");
    // Six at once needs the cap raised too, or `local_workers = 6` would quietly mean 4.
    assert!(text.contains("local_workers = 6") && text.contains("max_concurrent_workers = 6"), "{text}");
    assert!(text.contains("name = \"everything\"") && text.contains("command = \"node\""), "{text}");
    // A new config comes with the bundled specialists next to it, so the installed program has them anywhere.
    let agents = config.parent().unwrap().join("agents");
    for name in ["researcher.md", "coder.md"] {
        assert!(agents.join(name).is_file(), "{name} is installed: {}", stdout(&output));
        assert_eq!(mode(&agents.join(name)), 0o600, "{name} is private");
    }
    assert_eq!(mode(&agents), 0o700, "the agents folder is private");
    assert!(stdout(&output).contains("Added the bundled specialists (researcher, coder)"), "{}", stdout(&output));

    assert_eq!(machine.ask(&config).await, "Paris.\n");
    let request = llm.requests().into_iter().rev().find(|r| r["messages"].to_string().contains(QUESTION)).unwrap();
    let tools = request["tools"].to_string();
    assert!(tools.contains("mcp_everything__echo"), "the MCP server's tools reach the model: {tools}");
}

#[tokio::test]
async fn a_wrong_key_is_refused_in_the_providers_words_and_nothing_is_written() {
    let llm = model_server().await;
    let machine = Machine::new();
    let config = machine.path("work/config.toml");
    let mut command = machine.minibot(&[
        "init",
        "--yes",
        "--provider",
        "openai-compatible",
        "--base-url",
        &llm.base_url(),
        "--model",
        "e2e-model",
        "--api-key-stdin",
        "--no-telegram",
    ]);
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"sk-wrong-key-99999999\n").unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    assert_eq!(output.status.code(), Some(1), "stderr: {}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains(&format!("{}/models refused the API key (HTTP 401)", llm.base_url())), "{err}");
    assert!(err.contains("Incorrect API key provided: sk-****9999"), "{err}");
    assert!(err.contains("Nothing was written"), "{err}");
    assert!(!err.contains("sk-wrong-key-99999999"), "the key itself is never shown: {err}");
    assert!(!config.exists() && !machine.user_config().exists(), "no config written");
    assert!(!machine.path("work/secrets.vault.yml").exists() && !machine.path("config/minibot").exists());

    // A model the server does not have is named, with what it does have.
    let mut command = machine.minibot(&[
        "init",
        "--yes",
        "--provider",
        "openai-compatible",
        "--base-url",
        &llm.base_url(),
        "--model",
        "e2e-modle",
        "--api-key-env",
        "E2E_INIT_KEY",
    ]);
    command.env("E2E_INIT_KEY", KEY);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("has no model `e2e-modle`; it offers e2e-model"), "{}", stderr(&output));

    // Ctrl-D at a question stops the wizard; nothing is written.
    let mut wizard = Wizard::start(&machine, &[]);
    wizard.expect("Provider [1]: ").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    wizard.child.stdin.as_mut().unwrap().write_all(b"\x04").unwrap();
    wizard.child.stdin.as_mut().unwrap().flush().unwrap();
    wizard.expect("stopped at the question \"Provider\"; nothing was written").await;
    assert_eq!(wizard.exit_code().await, 2);
    assert!(!machine.user_config().exists());

    // A bad flag is named, and exits 2.
    let output = run(machine.minibot(&["init", "--yes", "--workers", "lots", "--skip-check"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--workers: `lots` is not a number of workers from 0 to 32"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn a_second_run_changes_only_what_it_is_told_and_keeps_the_users_comments() {
    let llm = model_server().await;
    let machine = Machine::new();
    let config = machine.path("work/config.toml");
    let original = format!(
        "# My assistant. Ask Alice before changing the model.\n\
         [llm]\n\
         base_url = \"{}\"\n\
         api_key = \"{KEY}\"\n\
         model = \"e2e-model\"   # the cheap one\n\
         retry_delay_seconds = 0.01\n\
         \n\
         [memory]\n\
         max_history_messages = 40   # keep it short\n",
        llm.base_url()
    );
    std::fs::write(&config, &original).unwrap();
    // No --config: ./config.toml of the working folder is the file to edit, once the user has trusted it (a
    // cloned project's file would be read for defaults and handed the key).
    let refused = run(machine.minibot(&["init", "--yes", "--model", "e2e-model-2", "--no-telegram"])).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("is not trusted yet"), "{}", stderr(&refused));
    assert_eq!(read(&config), original, "nothing was written");
    assert!(run(machine.minibot(&["trust"])).await.status.success());
    let output = run(machine.minibot(&["init", "--yes", "--model", "e2e-model-2", "--no-telegram"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stderr(&output).contains("OK: the provider knows the model as e2e-model-2."), "{}", stderr(&output));
    assert!(stderr(&output).contains("the API key is written in the file itself"), "{}", stderr(&output));
    let edited = read(&config);
    let expected = original.replace("model = \"e2e-model\"   #", "model = \"e2e-model-2\"   #");
    assert_eq!(edited, expected, "only the model changed; the comments stay");
    assert_eq!(mode(&config), 0o600);

    assert!(machine.ask(&config).await.contains("Paris."));
    assert_eq!(llm.requests().last().unwrap()["model"], "e2e-model-2");

    // Run again with the same answers: nothing to change, the file is left alone.
    let before = read(&config);
    let output = run(machine.minibot(&["init", "--yes", "--model", "e2e-model-2", "--no-telegram"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stderr(&output).contains("Nothing to change"), "{}", stderr(&output));
    assert_eq!(read(&config), before);

    // A key given again moves out of the file into a new vault, where the file kept it ([llm]).
    let mut command = machine.minibot(&["init", "--yes", "--api-key-env", "E2E_INIT_KEY", "--no-telegram"]);
    command.env("E2E_INIT_KEY", KEY);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let moved = read(&config);
    assert!(!moved.contains(KEY), "{moved}");
    assert!(moved.contains("api_key = \"${secret:OPENAI_API_KEY}\""), "{moved}");
    assert!(
        moved.starts_with(&before.replace(&format!("api_key = \"{KEY}\""), "api_key = \"${secret:OPENAI_API_KEY}\""))
    );
    assert!(moved.contains("[vault]\nenabled = true\npassword_file = \"vault.password\""), "{moved}");
    assert_eq!(mode(&machine.path("work/vault.password")), 0o600);
    assert!(machine.ask(&config).await.contains("Paris."));
    assert_eq!(llm.authorizations().last().unwrap(), &format!("Bearer {KEY}"));
}

#[tokio::test]
async fn rabbitmq_gets_a_generated_message_key_in_the_vault_and_no_local_workers() {
    let machine = Machine::new();
    // A folder that does not exist yet: with a given password the vault is the first file written in it.
    let config = machine.path("work/new-bot/config.toml");
    let local =
        ["init", "--yes", "--provider", "local", "--skip-check", "--no-telegram", "--tasks-backend", "rabbitmq"];

    let mut args = local.to_vec();
    args.extend(["--workers", "2"]);
    let output = run(machine.minibot(&args)).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--workers: with the rabbitmq backend minibot starts no worker processes"));
    assert!(!config.exists() && !machine.user_config().exists());

    let mut args = local.to_vec();
    args.extend(["--config", config.to_str().unwrap(), "--broker-url", "amqp://guest:guest@127.0.0.1:5672/"]);
    // With MINIBOT_VAULT_PASSWORD set, the new vault takes it and no password file is written.
    let mut command = machine.minibot(&args);
    command.env("MINIBOT_VAULT_PASSWORD", "e2e vault password");
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = read(&config);
    assert!(text.contains("backend = \"rabbitmq\"") && !text.contains("local_workers ="), "{text}");
    assert!(text.contains("broker_url = \"amqp://guest:guest@127.0.0.1:5672/\""), "{text}");
    assert!(text.contains("message_key = \"${secret:RABBITMQ_MESSAGE_KEY}\""), "{text}");
    assert!(text.contains("base_url = \"http://127.0.0.1:11434/v1\"") && !text.contains("api_key"), "{text}");
    assert!(!text.contains("password_file =") && !machine.path("work/new-bot/vault.password").exists(), "{text}");
    let mut list = machine.minibot(&["--config", config.to_str().unwrap(), "vault", "list"]);
    list.env("MINIBOT_VAULT_PASSWORD", "e2e vault password");
    let listed = run(list).await;
    assert_eq!(stdout(&listed), "RABBITMQ_MESSAGE_KEY\n", "{}", stderr(&listed));
}
