#![allow(clippy::expect_used, clippy::unwrap_used)]

//! `MINIBOT__SECTION__KEY` environment overrides on top of a real config file (or none), as the binaries load
//! them: precedence, how text becomes numbers, lists and tables, and errors that name the variable and the key.

use minibot_config::{Config, ConfigError, TaskBackend, Unlock, Vars};
use minibot_vault::{NoPrompt, Secrets};
use std::path::Path;

/// A folder holding `config.toml` with `text`.
fn folder(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), text).unwrap();
    dir
}

/// Loads as `minibot` does from `dir` as its working directory, with `vars` as its whole environment.
fn load(dir: &Path, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: Vars = vars.iter().copied().collect();
    // A folder's config.toml needs the user's trust (see tests/places.rs); named, it is the user's choice.
    let file = dir.join("config.toml");
    Config::load_from(file.exists().then_some(file.as_path()), dir, &vars, Unlock::Password(&NoPrompt))
}

/// The message of a load that must fail; configuration errors are one line.
fn failure(dir: &Path, vars: &[(&str, &str)]) -> String {
    let message = load(dir, vars).expect_err("the load must fail").to_string();
    assert_eq!(message.lines().count(), 1, "{message}");
    message
}

const FILE: &str = "[channels.telegram]\nenabled = true\nbot_token = \"111:from-file\"\nmode = \"long_polling\"\n\
                    allowed_chat_ids = [7]\n[tasks]\nbackend = \"sqlite\"\nlocal_workers = 1\n";

#[test]
fn an_override_wins_over_the_file_and_the_rest_of_the_file_stays() {
    let dir = folder(FILE);
    let config = load(
        dir.path(),
        &[
            ("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN", "123:abc"),
            ("MINIBOT__TASKS__BACKEND", "rabbitmq"),
            ("MINIBOT__RABBITMQ__BROKER_URL", "amqp://user:pw@broker:5672/%2f"),
        ],
    )
    .unwrap();
    assert_eq!(config.channels.telegram.bot_token, "123:abc");
    assert_eq!(config.tasks.backend, TaskBackend::Rabbitmq);
    assert_eq!(config.rabbitmq.broker_url, "amqp://user:pw@broker:5672/%2f");
    assert_eq!(config.channels.telegram.allowed_chat_ids, [7], "keys nobody overrode come from the file");
    assert_eq!(config.tasks.local_workers, 1);
    assert_eq!(config.source.as_deref(), Some(dir.path().join("config.toml").as_path()));
    // An empty value is a value: it blanks the file's token (what the compose setup does for its workers).
    let config = load(dir.path(), &[("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN", "")]).unwrap();
    assert_eq!(config.channels.telegram.bot_token, "");
}

#[test]
fn text_becomes_numbers_booleans_lists_and_tables_where_keys_want_them() {
    let dir = folder(FILE);
    let config = load(
        dir.path(),
        &[
            ("MINIBOT__HTTP__PORT", "9090"),
            ("minibot__llm__prompt_cache_enabled", "false"),
            ("MINIBOT__LLM__TEMPERATURE", "0.25"),
            ("MINIBOT__TASKS__WORKER_MAX_STEPS", "40"),
            ("MINIBOT__WORKER__LABELS", "[\"gpu\",\"browser\"]"),
            ("MINIBOT__CHANNELS__TELEGRAM__ALLOWED_CHAT_IDS", "[1, 2]"),
            ("MINIBOT__LLM__EXTRA_HEADERS", "{ \"X-Title\" = \"minibot\" }"),
        ],
    )
    .unwrap();
    assert_eq!(config.http.port, 9090);
    assert!(!config.llm.prompt_cache_enabled);
    assert_eq!(config.llm.temperature, Some(0.25));
    assert_eq!(config.tasks.worker_max_steps.max(), Some(40));
    assert_eq!(config.worker.labels, ["gpu", "browser"]);
    assert_eq!(config.channels.telegram.allowed_chat_ids, [1, 2], "a list replaces the file's list");
    assert_eq!(config.llm.extra_headers.get("X-Title").map(String::as_str), Some("minibot"));
}

#[test]
fn a_numeric_or_boolean_looking_value_stays_text_in_a_text_key() {
    let dir = folder(FILE);
    let config =
        load(dir.path(), &[("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN", "123456"), ("MINIBOT__LLM__MODEL", "true")])
            .unwrap();
    assert_eq!(config.channels.telegram.bot_token, "123456");
    assert_eq!(config.llm.model, "true");
}

#[test]
fn keys_written_in_upper_case_or_with_dots_in_the_file_survive() {
    let dir = folder(
        "[llm]\nprovider = \"MyProxy\"\nextra_headers = { \"X-Title\" = \"t\" }\n\
         [providers.MyProxy]\napi_format = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         headers = { \"X-Api.Version\" = \"2\" }\n\
         [tools.mcp]\n[[tools.mcp.servers]]\nname = \"web\"\ncommand = \"srv\"\nenv = { API_KEY = \"x\", Mixed_Case = \"m\" }\n\
         [[tools.mcp.servers]]\nname = \"remote\"\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
         headers = { \"X-Title\" = \"y\" }\n",
    );
    let config =
        load(dir.path(), &[("MINIBOT__LLM__MODEL", "m"), ("MINIBOT__TOOLS__MCP__TIMEOUT_SECONDS", "3")]).unwrap();
    assert_eq!(config.llm.provider, "MyProxy");
    assert_eq!(config.llm.extra_headers.keys().collect::<Vec<_>>(), ["X-Title"]);
    let proxy = &config.providers["MyProxy"];
    assert_eq!(proxy.headers.keys().collect::<Vec<_>>(), ["X-Api.Version"]);
    let servers = &config.tools.mcp.servers;
    assert_eq!(servers[0].env.keys().collect::<Vec<_>>(), ["API_KEY", "Mixed_Case"]);
    assert_eq!(servers[1].headers.keys().collect::<Vec<_>>(), ["X-Title"]);
    assert_eq!(config.tools.mcp.timeout_seconds, 3.0);
    assert_eq!(config.llm.model, "m");
}

#[test]
fn a_list_of_tables_is_replaced_whole() {
    let dir = folder(
        "[tools.mcp]\n[[tools.mcp.servers]]\nname = \"a\"\ncommand = \"a-mcp\"\n[[tools.mcp.servers]]\nname = \"b\"\ncommand = \"b-mcp\"\n",
    );
    let vars =
        [("MINIBOT__TOOLS__MCP__SERVERS", "[{ name = \"web\", command = \"web-mcp\", env = { API_KEY = \"k\" } }]")];
    let config = load(dir.path(), &vars).unwrap();
    let servers = &config.tools.mcp.servers;
    assert_eq!(servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["web"]);
    assert_eq!(servers[0].env.get("API_KEY").map(String::as_str), Some("k"), "keys inside the value keep their case");
}

#[test]
fn variables_with_one_underscore_after_minibot_are_not_overrides() {
    let dir = folder(FILE);
    let vars = [("MINIBOT_WORKER_ID", "w-1"), ("MINIBOT_PARENT_PID", "1"), ("MINIBOT_TASKS__BACKEND", "rabbitmq")];
    let config = load(dir.path(), &vars).unwrap();
    assert_eq!(config.tasks.backend, TaskBackend::Sqlite);
}

#[test]
fn an_unknown_key_names_the_variable_and_the_key() {
    let dir = folder(FILE);
    let message = failure(dir.path(), &[("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKN", "1:x")]);
    assert_eq!(
        message,
        "environment variable MINIBOT__CHANNELS__TELEGRAM__BOT_TOKN (`channels.telegram.bot_tokn`): unknown key; \
         did you mean `bot_token`?"
    );
    // A key below a plain value turns it into a table: still that variable's doing.
    let message = failure(dir.path(), &[("MINIBOT__LLM__MODEL__NAME", "x")]);
    assert!(
        message.starts_with("environment variable MINIBOT__LLM__MODEL__NAME (`llm.model`): invalid type"),
        "{message}"
    );
}

#[test]
fn an_unknown_section_or_a_malformed_name_is_refused_by_name() {
    let dir = folder(FILE);
    let message = failure(dir.path(), &[("MINIBOT__NOPE__X", "1")]);
    assert_eq!(message, "environment variable MINIBOT__NOPE__X (`nope.x`): unknown section [nope]");
    let message = failure(dir.path(), &[("MINIBOT__TASKS____BACKEND", "sqlite")]);
    assert!(
        message.starts_with("environment variable MINIBOT__TASKS____BACKEND") && message.contains("not a key path")
    );
}

#[test]
fn a_bad_type_names_the_variable_and_the_key() {
    let dir = folder(FILE);
    let message = failure(dir.path(), &[("MINIBOT__TASKS__LOCAL_WORKERS", "many")]);
    assert_eq!(
        message,
        "environment variable MINIBOT__TASKS__LOCAL_WORKERS (`tasks.local_workers`): invalid type: string \"many\", expected u32"
    );
    let message = failure(dir.path(), &[("MINIBOT__CHANNELS__TELEGRAM__ALLOWED_CHAT_IDS", "[1, two]")]);
    assert!(
        message.starts_with(
            "environment variable MINIBOT__CHANNELS__TELEGRAM__ALLOWED_CHAT_IDS (`channels.telegram.allowed_chat_ids`): starts with `[` but is not a TOML array"
        ),
        "{message}"
    );
    let message = failure(dir.path(), &[("MINIBOT__CHANNELS__TELEGRAM__ALLOWED_CHAT_IDS", "[\"1\"]")]);
    assert!(message.contains("(`channels.telegram.allowed_chat_ids[0]`): invalid type: string \"1\""), "{message}");
}

#[test]
fn rules_across_keys_and_missing_features_name_the_variable() {
    let dir = folder(FILE);
    let message = failure(dir.path(), &[("MINIBOT__TASKS__MAX_CONCURRENT_WORKERS", "0")]);
    assert_eq!(
        message,
        "environment variable MINIBOT__TASKS__MAX_CONCURRENT_WORKERS (`tasks.max_concurrent_workers`): must be at least 1"
    );
    let message = failure(dir.path(), &[("MINIBOT__TOOLS__RAG__ENABLED", "true")]);
    assert!(message.starts_with("environment variable MINIBOT__TOOLS__RAG__ENABLED: "), "{message}");
    let message = failure(dir.path(), &[("MINIBOT__SCHEDULER__PROMPTS__BATCH_SIZE", "0")]);
    assert_eq!(
        message,
        "environment variable MINIBOT__SCHEDULER__PROMPTS__BATCH_SIZE (`scheduler.prompts.batch_size`): must be 1 or more"
    );
}

#[test]
fn the_files_own_mistakes_are_still_reported_against_the_file() {
    let dir = folder("[llm]\ntemprature = 0.3\n");
    let message = failure(dir.path(), &[("MINIBOT__LLM__MODEL", "m")]);
    let file = dir.path().join("config.toml");
    assert_eq!(
        message,
        format!("{}, line 2: `llm.temprature`: unknown key; did you mean `temperature`?", file.display())
    );
    assert!(!message.contains("MINIBOT__"), "{message}");
}

#[test]
fn an_override_may_reference_variables() {
    let dir = folder(FILE);
    let vars = [
        ("MINIBOT__LLM__API_KEY", "${OPENAI_KEY}"),
        ("MINIBOT__HTTP__PORT", "${PORT}"),
        ("MINIBOT__LLM__SYSTEM_PROMPT", "${PROMPT}"),
        ("OPENAI_KEY", "sk-env"),
        ("PORT", "8181"),
        ("PROMPT", "[terse] answer briefly"),
    ];
    let config = load(dir.path(), &vars).unwrap();
    assert_eq!(config.llm.api_key, "sk-env");
    assert_eq!(config.http.port, 8181);
    assert_eq!(config.llm.system_prompt.as_deref(), Some("[terse] answer briefly"), "text via ${{VAR}} is not TOML");
    let message = failure(dir.path(), &[("MINIBOT__LLM__API_KEY", "${NOT_SET_ANYWHERE}")]);
    assert!(
        message.starts_with("environment variable MINIBOT__LLM__API_KEY (`llm.api_key`): environment variable NOT_SET_ANYWHERE is not set"),
        "{message}"
    );
}

const PASSWORD: &str = "correct horse";

/// A config folder with `text` as config.toml and `secrets.vault.yml` holding two secrets.
fn vault_folder(text: &str) -> tempfile::TempDir {
    let dir = folder(text);
    let secrets: std::collections::BTreeMap<String, String> = [("OPENAI_KEY", "sk-from-vault"), ("http.port", "9191")]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    minibot_vault::write(&dir.path().join("secrets.vault.yml"), PASSWORD, &Secrets::new(secrets)).unwrap();
    dir
}

#[test]
fn an_override_may_reference_vault_secrets() {
    let dir = vault_folder("[vault]\nenabled = true\n");
    let vars = [
        ("MINIBOT_VAULT_PASSWORD", PASSWORD),
        ("MINIBOT__LLM__API_KEY", "${secret:OPENAI_KEY}"),
        ("MINIBOT__HTTP__PORT", "${secret:http.port}"),
    ];
    let config = load(dir.path(), &vars).unwrap();
    assert_eq!(config.llm.api_key, "sk-from-vault");
    assert_eq!(config.http.port, 9191);

    let vars = [("MINIBOT_VAULT_PASSWORD", PASSWORD), ("MINIBOT__LLM__API_KEY", "${secret:NOT_THERE}")];
    let message = failure(dir.path(), &vars);
    let vault = dir.path().join("secrets.vault.yml");
    assert_eq!(
        message,
        format!(
            "environment variable MINIBOT__LLM__API_KEY (`llm.api_key`): secret NOT_THERE is not in the vault {}",
            vault.display()
        )
    );
}

#[test]
fn an_override_can_switch_the_vault_on() {
    let dir = vault_folder("");
    let vars = [("MINIBOT__VAULT__ENABLED", "true"), ("MINIBOT__LLM__API_KEY", "${secret:OPENAI_KEY}")];
    let message = failure(dir.path(), &vars);
    assert!(message.starts_with("environment variable MINIBOT__LLM__API_KEY (`llm.api_key`): "), "{message}");
    assert!(message.contains("MINIBOT_VAULT_PASSWORD"), "no password source named: {message}");
    let with_password = [vars[0], vars[1], ("MINIBOT_VAULT_PASSWORD", PASSWORD)];
    assert_eq!(load(dir.path(), &with_password).unwrap().llm.api_key, "sk-from-vault");
}

#[test]
fn overrides_apply_without_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = load(dir.path(), &[]).unwrap();
    assert_eq!(config.source, None);
    assert_eq!(config.tasks.backend, TaskBackend::Sqlite);

    let config = load(dir.path(), &[("MINIBOT__TASKS__BACKEND", "rabbitmq"), ("MINIBOT__HTTP__PORT", "81")]).unwrap();
    assert_eq!(config.source, None);
    assert_eq!(config.base_dir, dir.path());
    assert_eq!(config.tasks.backend, TaskBackend::Rabbitmq);
    assert_eq!(config.http.port, 81);
    assert_eq!(config.llm.model, "gpt-4o-mini", "the rest are defaults");

    let message = failure(dir.path(), &[("MINIBOT__HTTP__PORT", "eighty")]);
    assert!(message.starts_with("environment variable MINIBOT__HTTP__PORT (`http.port`): invalid type"), "{message}");
}

#[test]
fn the_file_named_by_minibot_config_gets_the_overrides_too() {
    let dir = folder(FILE);
    let elsewhere = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let vars = [("MINIBOT_CONFIG", path.to_str().unwrap()), ("MINIBOT__TASKS__LOCAL_WORKERS", "3")];
    let config = load(elsewhere.path(), &vars).unwrap();
    assert_eq!(config.source.as_deref(), Some(path.as_path()));
    assert_eq!(config.tasks.local_workers, 3);
    assert_eq!(config.channels.telegram.bot_token, "111:from-file");
}

/// `Config::load` reads the real process environment: a child process (this test binary, running the ignored
/// test below) gets the variables, as a worker started by the orchestrator inherits them.
#[test]
fn load_reads_overrides_from_the_process_environment() {
    let dir = folder(FILE);
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_loads_with_the_process_environment", "--ignored", "--nocapture"])
        .env("MINIBOT_CONFIG", dir.path().join("config.toml"))
        .env("MINIBOT__TASKS__LOCAL_WORKERS", "5")
        .env("minibot__channels__telegram__bot_token", "999:child")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("local_workers=5 bot_token=999:child"), "{stdout}");
}

#[test]
#[ignore = "the child half of load_reads_overrides_from_the_process_environment"]
fn child_loads_with_the_process_environment() {
    let config = Config::load_with(None, Unlock::Password(&NoPrompt)).unwrap();
    println!("local_workers={} bot_token={}", config.tasks.local_workers, config.channels.telegram.bot_token);
}
