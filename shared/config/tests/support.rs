#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Features this version does not have: a file that turns one on (or tunes it) stops start-up with one line per
//! key; the same section disabled or at its defaults loads quietly. Files are real files read by `Config::load`.

use minibot_config::{Config, ConfigError, Unsupported};
use std::path::PathBuf;

struct File {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn write(text: &str) -> File {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    File { _dir: dir, path }
}

fn load(text: &str) -> (File, Result<Config, ConfigError>) {
    let file = write(text);
    let result = Config::load(Some(&file.path));
    (file, result)
}

/// The refused keys, after checking that the error prints one line per key naming the file.
fn refused(text: &str) -> Vec<String> {
    let (file, result) = load(text);
    let err = result.expect_err(&format!("should be refused:\n{text}"));
    let ConfigError::Unsupported(findings) = &err else { panic!("expected unsupported keys, got: {err}") };
    let printed = err.to_string();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), findings.len(), "one line per key: {printed}");
    for (line, finding) in lines.iter().zip(findings) {
        assert!(line.starts_with(&format!("{}: ", file.path.display())), "names the file: {line}");
        assert!(line.contains("not supported by this version yet"), "{line}");
        let leaf = finding.key.rsplit('.').next().unwrap();
        let leaf = leaf.split('[').next().unwrap();
        assert!(line.contains(leaf), "names the key {}: {line}", finding.key);
    }
    findings.iter().map(|f| f.key.clone()).collect()
}

fn loads(text: &str) -> Config {
    let (_file, result) = load(text);
    match result {
        Ok(config) => config,
        Err(err) => panic!("should load:\n{text}\nerror: {err}"),
    }
}

#[test]
fn minibot_example_loads_with_what_it_turns_on() {
    let text = include_str!("fixtures/minibot-0.36-config.example.toml");
    let config = loads(text);
    assert_eq!(config.tools.skills.enabled, Some(true));
    // MiniBot writes empty strings for unset paths; they mean "not set", not "the config folder".
    assert_eq!(config.tools.python_exec.python_path, None);
    assert_eq!(config.tools.python_exec.artifacts_jail_shared_dir, None);
    assert_eq!(config.memory.max_history_messages, Some(200));
}

#[test]
fn empty_config_and_the_shipped_configs_load() {
    loads("");
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/config.example.toml"))
        .unwrap()
        .replace("${OPENAI_API_KEY}", "");
    loads(&example);
    let compose = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config.compose.toml"))
        .unwrap()
        .replace("${OPENAI_API_KEY}", "")
        .replace("${TELEGRAM_BOT_TOKEN}", "")
        .replace("${RABBITMQ_DEFAULT_USER}", "guest")
        .replace("${RABBITMQ_DEFAULT_PASS}", "guest");
    loads(&compose);
}

/// (what turns it on, the key named, the same section disabled or at defaults)
const SECTIONS: &[(&str, &str, &str)] = &[
    (
        "[scheduler.prompts]\necho = true\n",
        "scheduler.prompts.echo",
        "[scheduler.prompts]\nenabled = true\npoll_interval_seconds = 30\nbatch_size = 5\n",
    ),
    (
        "[decision]\nenabled = true\napi_key = \"k\"\n",
        "decision.enabled",
        "[decision]\nenabled = false\napi_key = \"k\"\n",
    ),
    (
        "[tools.kv_memory]\necho = true\n",
        "tools.kv_memory.echo",
        "[tools.kv_memory]\nenabled = true\nmax_limit = 5\npool_size = 2\n",
    ),
    ("[tools.rag]\nenabled = true\n", "tools.rag.enabled", "[tools.rag]\nenabled = false\nsearch_limit = 9\n"),
    (
        "[tools.audio_transcription]\nenabled = true\n",
        "tools.audio_transcription.enabled",
        "[tools.audio_transcription]\nenabled = false\nmodel = \"large\"\n",
    ),
    (
        "[tools.browser]\noutput_dir = \"./shots\"\n",
        "tools.browser.output_dir",
        "[tools.browser]\noutput_dir = \"./data/files/browser\"\n",
    ),
    (
        "[orchestration.main_agent]\nname = \"jarvis\"\n",
        "orchestration.main_agent.name",
        "[orchestration.main_agent]\nname = \"minibot\"\n",
    ),
    ("[llm]\nstrip_logs = true\n", "llm.strip_logs", "[llm]\nstrip_logs = false\n"),
    (
        "[llm]\nprovider = \"mine\"\n[providers.mine]\napi_format = \"chatgpt_codex\"\n",
        "llm.provider",
        "[llm]\nprovider = \"mine\"\n[providers.mine]\napi_format = \"openai\"\n[providers.chatgpt_codex]\napi_key = \"k\"\n",
    ),
    (
        "[llm]\nprovider = \"chatgpt_codex\"\n",
        "llm.provider",
        "[codex]\nversion = \"1.0\"\n[providers.chatgpt_codex]\nauth_path = \"x\"\n",
    ),
    (
        "[orchestration]\nmain_tool_use_guardrail = \"llm_classifier\"\nmain_tool_use_guardrail_provider = \"chatgpt_codex\"\n",
        "orchestration.main_tool_use_guardrail_provider",
        "[orchestration]\nmain_tool_use_guardrail = \"disabled\"\nmain_tool_use_guardrail_provider = \"chatgpt_codex\"\n",
    ),
    (
        "[tools.safety_classifier]\nenabled = true\nprovider = \"chatgpt_codex\"\nmodel = \"m\"\n",
        "tools.safety_classifier.provider",
        "[tools.safety_classifier]\nenabled = false\nprovider = \"chatgpt_codex\"\n",
    ),
    (
        "[tools.python_exec]\nbackend = \"docker\"\n",
        "tools.python_exec.backend",
        "[tools.python_exec]\nbackend = \"host\"\n",
    ),
    (
        "[logging]\nlogfmt_enabled = false\n",
        "logging.logfmt_enabled",
        "[logging]\nstructured = false\nlogfmt_enabled = true\n",
    ),
    ("[logging]\nkv_separator = \":\"\n", "logging.kv_separator", "[logging]\nkv_separator = \"=\"\n"),
    ("[logging]\nrecord_separator = \"|\"\n", "logging.record_separator", "[logging]\nrecord_separator = \" \"\n"),
    ("[tasks]\nhistory = true\n", "tasks.history", "[tasks]\nhistory = false\n"),
    (
        "[tasks.sqlite]\necho = true\n",
        "tasks.sqlite.echo",
        "[tasks.sqlite]\necho = false\npoll_interval_seconds = 1\nbatch_size = 8\npool_size = 2\n",
    ),
    (
        "[tasks]\nbackend = \"rabbitmq\"\nmax_concurrent_workers = 8\n",
        "tasks.max_concurrent_workers",
        "[tasks]\nbackend = \"rabbitmq\"\nmax_concurrent_workers = 4\n",
    ),
    (
        "[tasks]\nlocal_workers = 0\nmax_concurrent_workers = 1\n",
        "tasks.max_concurrent_workers",
        "[tasks]\nmax_concurrent_workers = 1\n",
    ),
    (
        "[extensions]\nmodules = [\"minibot.extensions.tools.graph\"]\n\
         [extensions.config.\"minibot.extensions.tools.graph\"]\necho = true\n",
        "extensions.config.\"minibot.extensions.tools.graph\".echo",
        "[extensions]\nmodules = []\nconfig = { \"minibot.extensions.tools.graph\" = { echo = true } }\n",
    ),
];

#[test]
fn each_unbuilt_feature_is_refused_when_on_and_quiet_when_off() {
    for (on, key, off) in SECTIONS {
        assert_eq!(refused(on), [*key], "refused keys of:\n{on}");
        loads(off);
    }
}

#[test]
fn codemode_is_built_for_the_main_agent_and_for_workers() {
    let config = loads(
        "[tools.codemode]\nenabled = true\ntimeout_seconds = 60\nmax_tool_calls = 9\nexclude = [\"mcp_mail__*\"]\n\
         [tasks]\nworker_extensions = [\"codemode\"]\n",
    );
    assert!(config.tools.codemode.enabled);
    assert_eq!(config.tasks.worker_extensions, ["codemode"]);
    // The other worker extensions are not built: refused with one line that says what to write instead.
    let text = "[tools.codemode]\nenabled = true\n[tools.rag]\nenabled = false\n[tasks]\n\
                worker_extensions = [\"codemode\", \"kv_memory\"]\n[tools.kv_memory]\nenabled = true\n";
    assert_eq!(refused(text), ["tasks.worker_extensions"]);
    let (_file, result) = load(text);
    let error = result.err().unwrap().to_string();
    assert!(error.contains("worker extensions other than \"codemode\" are not supported"), "{error}");
    assert!(error.contains("list only \"codemode\""), "{error}");
}

#[test]
fn agent_management_is_built() {
    let config = loads(
        "[orchestration.agent_management]\nreload = true\nwrite = true\ndirectory = \"./managed\"\n\
         tools_allow = [\"file*\"]\nmcp_servers = [\"web\"]\nproviders = [\"openai\"]\n",
    );
    let management = &config.orchestration.agent_management;
    assert!(management.reload && management.write);
    assert!(minibot_config::managed_agents::directory(&config).ends_with("managed"));
    // It needs specialists, which need tasks.
    let (_file, result) = load("[tasks]\nenabled = false\n[orchestration.agent_management]\nreload = true\n");
    assert!(result.err().unwrap().to_string().contains("orchestration.agent_management"));
}

#[test]
fn every_finding_is_reported_at_once() {
    let keys = refused(
        "[tools.kv_memory]\nenabled = true\n[tasks]\nworker_extensions = [\"kv_memory\"]\n\
         [logging]\nkv_separator = \":\"\nrecord_separator = \";\"\n",
    );
    assert_eq!(keys, ["logging.kv_separator", "logging.record_separator", "tasks.worker_extensions"]);
}

#[test]
fn a_variable_that_turns_a_feature_on_is_refused_too() {
    let file = write("[tools.rag]\nenabled = \"${MINIBOT_TEST_RAG_ON}\"\n");
    let text = std::fs::read_to_string(&file.path).unwrap();
    let err = Config::from_toml(&text, "config.toml", "/srv", &|name| {
        (name == "MINIBOT_TEST_RAG_ON").then(|| "true".to_string())
    })
    .expect_err("refused");
    assert_eq!(err.to_string().lines().count(), 1);
    assert!(err.to_string().starts_with("config.toml: [tools.rag] enabled = true:"), "{err}");
}

#[test]
fn skills_are_built() {
    let config = loads(
        "[tools.skills]\nenabled = true\npaths = [\"./skills\", \"~/.claude/skills\"]\npreload_catalog = false\n\
         native = false\nnative_disabled = [\"create-skill\"]\nwrite_path = \"./data/skills\"\ninstall = true\n",
    );
    let skills = &config.tools.skills;
    assert_eq!((skills.enabled, skills.install, skills.preload_catalog), (Some(true), true, false));
    assert_eq!(skills.paths, ["./skills", "~/.claude/skills"]);
    loads("[tools.skills]\nenabled = false\npaths = [\"./skills\"]\n");
}

#[test]
fn a_telegram_token_is_never_printed() {
    let config = loads("[channels.telegram]\nbot_token = \"123:very-secret\"\n");
    assert_eq!(config.channels.telegram.bot_token, "123:very-secret");
    let (_file, result) = load("[channels.telegram]\nbot_token = \"123:very-secret\"\nmode = \"pigeon\"\n");
    let text = result.err().unwrap().to_string();
    assert!(!text.contains("very-secret"), "{text}");
    assert!(text.contains("channels.telegram.mode"), "{text}");
}

#[test]
fn webhook_mode_needs_its_url_and_a_listen_address() {
    let (_file, result) = load("[channels.telegram]\nbot_token = \"1:x\"\nmode = \"webhook\"\n");
    assert!(result.err().unwrap().to_string().contains("channels.telegram.webhook_url"));
    let (_file, result) = load(
        "[channels.telegram]\nbot_token = \"1:x\"\nmode = \"webhook\"\nwebhook_url = \"https://b.example/tg\"\n\
         webhook_listen = \"nowhere\"\n",
    );
    assert!(result.err().unwrap().to_string().contains("channels.telegram.webhook_listen"));
    let (_file, result) = load("[channels.telegram]\nbot_token = \"1:x\"\napi_base_url = \"api.telegram.org\"\n");
    assert!(result.err().unwrap().to_string().contains("channels.telegram.api_base_url"));
    loads("[channels.telegram]\nbot_token = \"1:x\"\nmode = \"webhook\"\nwebhook_url = \"https://b.example/tg\"\n");
}

#[test]
fn max_concurrent_workers_caps_the_local_workers() {
    assert_eq!(loads("").tasks.local_worker_count(), 2);
    assert_eq!(loads("[tasks]\nlocal_workers = 6\n").tasks.local_worker_count(), 4);
    assert_eq!(loads("[tasks]\nlocal_workers = 6\nmax_concurrent_workers = 3\n").tasks.local_worker_count(), 3);
    let (_file, zero) = load("[tasks]\nmax_concurrent_workers = 0\n");
    assert!(zero.err().unwrap().to_string().contains("tasks.max_concurrent_workers"));
}

fn agent(dir: &std::path::Path, name: &str, frontmatter: &str) {
    let text = format!("---\nname: {name}\ndescription: test agent\n{frontmatter}---\nYou help.\n");
    std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
}

#[test]
fn specialists_that_need_unbuilt_providers_are_refused_with_their_file() {
    let config =
        loads("[providers.router]\napi_format = \"openrouter\"\n[providers.codex]\napi_format = \"chatgpt_codex\"\n");
    let dir = tempfile::tempdir().unwrap();
    agent(dir.path(), "plain", "model_provider: openai\n");
    // OpenRouter's routing keys are built: they apply to the specialist's requests.
    agent(dir.path(), "routed", "model_provider: router\nopenrouter_provider_order: x\n");
    agent(dir.path(), "writer", "model_provider: codex\n");
    // OpenRouter options on a non-OpenRouter model do nothing, in MiniBot too.
    agent(dir.path(), "quiet", "openrouter_reasoning_enabled: true\n");
    let agents = minibot_config::load_agents(dir.path()).unwrap();
    let err = minibot_config::check_agents(&config, &agents).expect_err("refused");
    let ConfigError::Unsupported(findings) = &err else { panic!("{err}") };
    let found: Vec<(String, &str)> = findings
        .iter()
        .map(|f: &Unsupported| (f.file.rsplit('/').next().unwrap().to_string(), f.key.as_str()))
        .collect();
    assert_eq!(found, [("writer.md".to_string(), "model_provider")]);
    assert!(err.to_string().contains("writer.md: model_provider: codex: the `chatgpt_codex` API format"), "{err}");
    let fine: Vec<_> = agents.into_iter().filter(|a| a.name != "writer").collect();
    minibot_config::check_agents(&config, &fine).expect("built providers pass");
}

#[test]
fn missing_key_names_the_section_that_counts() {
    if std::env::var_os("OPENAI_API_KEY").is_some() {
        return; // the variable would supply the key
    }
    let file = write(
        "[llm]\nprovider = \"local\"\napi_key = \"sk-in-llm\"\n\
         [providers.local]\napi_format = \"openai\"\nbase_url = \"https://llm.example/v1\"\n",
    );
    let config =
        Config::from_toml(&std::fs::read_to_string(&file.path).unwrap(), "config.toml", "/srv", &|_| None).unwrap();
    let err = config.main_llm().require_key("/srv/config.toml").expect_err("no key");
    let text = err.to_string();
    assert!(text.contains("`providers.local.api_key`") && text.contains("[providers.local]"), "{text}");
    assert!(text.contains("/srv/config.toml") && text.contains("OPENAI_API_KEY"), "{text}");
    assert!(text.contains("[llm] api_key is not used for this provider"), "{text}");

    let plain = Config::from_toml("[llm]\nmodel = \"m\"\n", "config.toml", "/srv", &|_| None).unwrap();
    let text = plain.main_llm().require_key(&plain.origin()).expect_err("no key").to_string();
    assert!(text.contains("`llm.api_key` (api_key in the [llm] section)"), "{text}");
    assert!(text.contains("none was found"), "{text}");
}

#[test]
fn providers_offered_to_tasks_are_only_those_this_build_can_call() {
    let config = Config::from_toml(
        "[llm]\napi_key = \"k\"\n[providers.local]\napi_format = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
         [providers.anthropic]\napi_format = \"claude\"\napi_key = \"k\"\n\
         [providers.codex]\napi_format = \"chatgpt_codex\"\napi_key = \"k\"\n\
         [providers.nokey]\napi_format = \"openai\"\nbase_url = \"https://remote.example/v1\"\n",
        "config.toml",
        "/srv",
        &|_| None,
    )
    .unwrap();
    let names: Vec<String> = config.available_providers().into_iter().map(|p| p.name).collect();
    if std::env::var("OPENAI_API_KEY").is_err() {
        assert_eq!(names, ["openai", "anthropic", "local"]);
    }
    assert!(!names.contains(&"codex".to_string()));
    let why = config.provider_for_task("codex").expect_err("not callable").to_string();
    assert!(why.contains("`chatgpt_codex` API format") && why.contains("cannot call"), "{why}");
    assert!(config.llm_for(Some("codex"), None, None).is_err());
    assert!(config.provider_for_task("nowhere").is_err());
}

#[test]
fn the_relation_graph_extension_loads_and_checks_its_keys() {
    const ON: &str = "[extensions]\nmodules = [\"minibot.extensions.tools.graph\"]\n";
    assert_eq!(loads(ON).extensions.graph_sqlite_url().as_deref(), Some("sqlite+aiosqlite:///./data/graph.db"));
    let custom = loads(&format!(
        "{ON}[extensions.config.\"minibot.extensions.tools.graph\"]\nsqlite_url = \"sqlite:///./g.db\"\necho = false\n"
    ));
    assert_eq!(custom.extensions.graph_sqlite_url().as_deref(), Some("sqlite:///./g.db"));
    assert_eq!(loads("").extensions.graph_sqlite_url(), None);

    let (_file, result) =
        load(&format!("{ON}[extensions.config.\"minibot.extensions.tools.graph\"]\nsqlite_path = \"x\"\n"));
    let text = result.expect_err("unknown key").to_string();
    assert!(text.contains("extensions.config.\"minibot.extensions.tools.graph\".sqlite_path"), "{text}");
    assert!(text.contains("unknown key `sqlite_path`"), "{text}");
    let (_file, result) =
        load(&format!("{ON}[extensions.config.\"minibot.extensions.tools.graph\"]\nsqlite_url = \"postgres://db\"\n"));
    assert!(result.expect_err("not SQLite").to_string().contains("must be a SQLite URL"));
    // Settings of a module that is off are not read, as in MiniBot.
    loads("[extensions.config.\"minibot.extensions.tools.graph\"]\nanything = 1\n");
}
