#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Reading config files as a user writes them: MiniBot's own files, mistakes, and `${VAR}` references.

use minibot_config::{Config, ConfigError, Limit, TaskBackend};

fn env(name: &str) -> Option<String> {
    match name {
        "OPENAI_KEY" => Some("sk-test".into()),
        "PORT" => Some("9090".into()),
        "TOKEN" => Some("12345".into()),
        _ => None,
    }
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "config.toml", "/srv/minibot", &env)
}

#[test]
fn empty_file_gives_minibot_defaults() {
    let config = load("").expect("defaults");
    assert_eq!(config.llm.model, "gpt-4o-mini");
    assert_eq!(config.llm.max_tool_iterations, 15);
    assert_eq!(config.tasks.worker_max_steps, Limit::Unlimited);
    assert_eq!(config.tasks.backend, TaskBackend::Sqlite);
    assert!(config.tools.python_exec.enabled);
    assert_eq!(config.tools.file_storage.max_write_bytes.bytes(), 64_000);
}

#[test]
fn unknown_key_is_named_with_its_section() {
    let err = load("[llm]\nmodel = \"x\"\ntemprature = 0.3\n").expect_err("unknown key");
    let text = err.to_string();
    assert!(text.contains("temprature"), "{text}");
    assert!(text.contains("llm"), "{text}");
}

#[test]
fn unknown_nested_key_names_the_nested_section() {
    let err = load("[tools.bash]\nenabled = true\ntimeout = 3\n").expect_err("unknown key");
    let text = err.to_string();
    assert!(text.contains("tools.bash") && text.contains("timeout"), "{text}");
}

#[test]
fn unknown_key_gets_its_line_and_the_closest_known_name() {
    let err = load("# mine\n[llm]\nmodel = \"x\"\nmodle = \"y\"\n").expect_err("unknown key");
    assert!(matches!(err, ConfigError::InvalidKey { line: Some(4), .. }), "{err:?}");
    assert_eq!(err.to_string(), "config.toml, line 4: `llm.modle`: unknown key; did you mean `model`?");
    let err = load("[[tools.mcp.servers]]\nname = \"a\"\ncomand = \"x\"\n").expect_err("unknown key");
    assert_eq!(
        err.to_string(),
        "config.toml, line 3: `tools.mcp.servers[0].comand`: unknown key; did you mean `command`?"
    );
}

#[test]
fn a_key_in_the_wrong_section_is_pointed_to_its_section() {
    let err = load("[llm]\nmodel = \"x\"\nbot_token = \"1:x\"\n").expect_err("misplaced key");
    assert_eq!(
        err.to_string(),
        "config.toml, line 3: `llm.bot_token`: unknown key; `bot_token` belongs in [channels.telegram]"
    );
    let err = load("bot_token = \"1:x\"\n[llm]\nmodel = \"x\"\n").expect_err("key above every header");
    assert_eq!(
        err.to_string(),
        "config.toml, line 1: `bot_token`: unknown key; it belongs in [channels.telegram]: move it below the \
         [channels.telegram] header"
    );
}

#[test]
fn a_well_known_section_at_the_top_level_points_to_where_it_lives() {
    let err = load("[llm]\nmodel = \"x\"\n\n[telegram]\nbot_token = \"1:x\"\n").expect_err("misplaced section");
    assert!(matches!(err, ConfigError::UnknownSection { ref section, line: Some(4), .. } if section == "telegram"));
    assert_eq!(err.to_string(), "config.toml, line 4: unknown section [telegram]; did you mean [channels.telegram]?");
    let err = load("[mcp]\nservers = []\n").expect_err("misplaced section");
    assert!(err.to_string().ends_with("unknown section [mcp]; did you mean [tools.mcp]?"), "{err}");
}

#[test]
fn a_missing_explicit_file_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let err = Config::load(Some(&path)).expect_err("missing file");
    // The way `minibot` prints it: the message, then each cause.
    let mut shown = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(inner) = cause {
        shown.push_str(&format!(": {inner}"));
        cause = inner.source();
    }
    assert_eq!(shown.matches("No such file or directory").count(), 1, "{shown}");
    assert!(shown.starts_with(&format!("cannot read config file {}: ", path.display())), "{shown}");
}

#[test]
fn unknown_section_is_named() {
    let err = load("[lmm]\nmodel = \"x\"\n").expect_err("unknown section");
    assert!(matches!(err, ConfigError::UnknownSection { ref section, .. } if section == "lmm"), "{err}");
}

#[test]
fn unset_variable_names_variable_and_key() {
    let err = load("[llm]\napi_key = \"${MISSING_KEY}\"\n").expect_err("unset");
    let text = err.to_string();
    assert!(text.contains("MISSING_KEY") && text.contains("llm.api_key"), "{text}");
}

#[test]
fn malformed_toml_points_at_the_line() {
    let err = load("[llm]\nmodel = \"gpt\n").expect_err("syntax");
    let text = err.to_string();
    assert!(matches!(err, ConfigError::Syntax { .. }), "{text}");
    assert!(text.contains("line 2"), "{text}");
}

#[test]
fn references_expand_and_fill_numeric_keys() {
    let config = load(
        "[llm]\napi_key = \"${OPENAI_KEY}\"\nsystem_prompt = \"costs $${PRICE}\"\n\
         [http]\nport = \"${PORT}\"\n[channels.telegram]\nenabled = false\nbot_token = \"${TOKEN}\"\n",
    )
    .expect("loads");
    assert_eq!(config.llm.api_key, "sk-test");
    assert_eq!(config.llm.system_prompt.as_deref(), Some("costs ${PRICE}"));
    assert_eq!(config.http.port, 9090);
    // A numeric-looking value in a text key stays text.
    assert_eq!(config.channels.telegram.bot_token, "12345");
}

#[test]
fn provider_section_replaces_llm_credentials() {
    let config = load(
        "[llm]\nprovider = \"local\"\napi_key = \"ignored\"\nmodel = \"qwen\"\n\
         [providers.local]\napi_format = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1/\"\n",
    )
    .expect("loads");
    let endpoint = config.main_llm();
    assert_eq!(endpoint.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(endpoint.api_key, "");
    assert!(endpoint.require_key("config.toml").is_ok(), "loopback needs no key");
}

#[test]
fn provider_without_api_format_is_rejected() {
    let err = load("[providers.myproxy]\napi_key = \"k\"\n").expect_err("needs api_format");
    assert!(err.to_string().contains("providers.myproxy"), "{err}");
}

#[test]
fn lease_must_outlive_worker_timeout() {
    let err = load("[tasks]\nworker_timeout_seconds = 3000\n").expect_err("lease");
    assert!(err.to_string().contains("tasks.sqlite.lease_timeout_seconds"), "{err}");
}

#[test]
fn local_worker_idle_seconds_needs_local_workers() {
    assert_eq!(load("").expect("defaults").tasks.local_worker_idle_seconds, 300);
    assert_eq!(load("[tasks]\nlocal_worker_idle_seconds = 0\n").expect("never").tasks.local_worker_idle_seconds, 0);
    for (text, why) in [
        ("[tasks]\nbackend = \"rabbitmq\"\nlocal_worker_idle_seconds = 60\n", "rabbitmq"),
        ("[tasks]\nlocal_workers = 0\nlocal_worker_idle_seconds = 60\n", "local_workers = 0"),
    ] {
        let err = load(text).expect_err("no local workers to stop");
        let message = err.to_string();
        assert!(message.contains("tasks.local_worker_idle_seconds") && message.contains(why), "{message}");
    }
    let err = load("[tasks]\nlocal_worker_idle_seconds = -1\n").expect_err("negative");
    assert!(err.to_string().contains("local_worker_idle_seconds"), "{err}");
}

#[test]
fn removed_tool_names_are_rejected() {
    let err = load("[orchestration.main_agent]\ntools_deny = [\"memory\"]\n").expect_err("removed");
    assert!(err.to_string().contains("tools_deny[0]"), "{err}");
}

#[test]
fn byte_sizes_accept_units() {
    let config = load("[tools.file_storage]\nmax_write_bytes = \"1MiB\"\n").expect("loads");
    assert_eq!(config.tools.file_storage.max_write_bytes.bytes(), 1_048_576);
    let err = load("[tools.file_storage]\nmax_write_bytes = 0\n").expect_err("zero");
    assert!(err.to_string().contains("tools.file_storage.max_write_bytes"), "{err}");
}

#[test]
fn log_rotation_keys_have_defaults_and_accept_units() {
    let config = load("").expect("defaults");
    assert_eq!(config.logging.max_file_bytes.bytes(), 10 * 1024 * 1024);
    assert_eq!(config.logging.backup_count, 5);
    let config = load("[logging]\nmax_file_bytes = \"1MiB\"\nbackup_count = 0\n").expect("loads");
    assert_eq!(config.logging.max_file_bytes.bytes(), 1_048_576);
    assert_eq!(config.logging.backup_count, 0);
    let err = load("[logging]\nmax_file_bytes = 0\n").expect_err("zero");
    assert!(err.to_string().contains("logging.max_file_bytes"), "{err}");
}

#[test]
fn relative_paths_resolve_against_the_config_folder() {
    let config = load("").expect("loads");
    assert_eq!(config.resolve_path("./data/files"), std::path::Path::new("/srv/minibot/./data/files"));
    assert_eq!(config.resolve_path("/abs"), std::path::Path::new("/abs"));
}

#[test]
fn example_config_loads() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/config.example.toml"))
        .expect("example config is shipped");
    let config = Config::from_toml(&text, "config.example.toml", "/srv", &|_| Some("x".into()));
    assert!(config.is_ok(), "{:?}", config.err());
}

#[test]
fn shipped_specialists_load() {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../agents"));
    let agents = minibot_config::load_agents(dir).expect("shipped agents parse");
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["coder", "researcher"]);
    assert!(agents.iter().all(|a| !a.tools_allow.is_empty() && !a.system_prompt.is_empty()));
}
