//! Rules that span keys or sections, checked after the typed read.

use crate::schema::{API_FORMATS, TaskBackend};
use crate::{Config, ConfigError, Result};

/// Tool names MiniBot removed; a list that names one is a leftover that would silently match nothing.
const REMOVED_TOOL_NAMES: &[(&str, &str)] = &[
    ("filesystem", "list_files, read_file, write_file, move_file, delete_file, …"),
    ("memory", "memory_* (memory_create, memory_search, …)"),
    ("graph", "graph_* (graph_link, graph_neighbors, …)"),
    ("schedule", "schedule_prompt, list_scheduled_prompts, cancel_scheduled_prompt, delete_scheduled_prompt"),
];

const KNOWN_EXTENSION_MODULES: &[&str] = &["minibot.extensions.tools.graph"];

pub(crate) fn check(config: &Config, origin: &str) -> Result<()> {
    let invalid = |key: &str, message: String| ConfigError::InvalidKey {
        file: origin.into(),
        key: key.into(),
        message,
        line: None,
    };
    // First, so a file that asks for something unbuilt hears that, not what else that feature would need.
    let unsupported = crate::support::findings(config, origin)?;
    if !unsupported.is_empty() {
        return Err(ConfigError::Unsupported(unsupported));
    }

    for (name, provider) in &config.providers {
        match provider.api_format.as_deref() {
            Some(format) if !API_FORMATS.contains(&format) => {
                return Err(invalid(
                    &format!("providers.{name}.api_format"),
                    format!("unknown API format `{format}`; expected one of {}", API_FORMATS.join(", ")),
                ));
            }
            None if !API_FORMATS.contains(&name.as_str()) => {
                return Err(invalid(
                    &format!("providers.{name}"),
                    format!("set `api_format` (one of {}) for this provider", API_FORMATS.join(", ")),
                ));
            }
            _ => {}
        }
    }
    let provider = &config.llm.provider;
    if !API_FORMATS.contains(&provider.as_str()) && !config.providers.contains_key(provider) {
        return Err(invalid(
            "llm.provider",
            format!(
                "unknown provider `{provider}`; use one of {} or add a [providers.{provider}] section",
                API_FORMATS.join(", ")
            ),
        ));
    }

    for (key, mode) in [
        ("llm.main_responses_state_mode", &config.llm.main_responses_state_mode),
        ("llm.agent_responses_state_mode", &config.llm.agent_responses_state_mode),
        ("llm.responses_state_mode", &config.llm.responses_state_mode),
    ] {
        if !crate::schema::RESPONSES_STATE_MODES.contains(&mode.as_str()) {
            return Err(invalid(
                key,
                format!("unknown mode `{mode}`; expected one of {}", crate::schema::RESPONSES_STATE_MODES.join(", ")),
            ));
        }
    }
    check_telegram(config, &invalid)?;
    check_worker(config, &invalid)?;

    let main = &config.orchestration.main_agent;
    if !main.tools_allow.is_empty() && !main.tools_deny.is_empty() {
        return Err(invalid("orchestration.main_agent", "set either tools_allow or tools_deny, not both".into()));
    }
    let tool_lists = [
        ("orchestration.main_agent.tools_allow", &main.tools_allow),
        ("orchestration.main_agent.tools_deny", &main.tools_deny),
        ("tools.approval.require_approval", &config.tools.approval.require_approval),
        ("tools.safety_classifier.check_input", &config.tools.safety_classifier.check_input),
        ("tools.safety_classifier.check_output", &config.tools.safety_classifier.check_output),
    ];
    for (key, list) in tool_lists {
        for (index, item) in list.iter().enumerate() {
            if let Some((old, new)) = REMOVED_TOOL_NAMES.iter().find(|(old, _)| item.trim() == *old) {
                return Err(invalid(
                    &format!("{key}[{index}]"),
                    format!("the tool name `{old}` was removed; use {new}"),
                ));
            }
        }
    }

    let tasks = &config.tasks;
    if tasks.enabled
        && tasks.backend == TaskBackend::Sqlite
        && tasks.sqlite.lease_timeout_seconds <= tasks.worker_timeout_seconds
    {
        return Err(invalid(
            "tasks.sqlite.lease_timeout_seconds",
            format!(
                "must be greater than tasks.worker_timeout_seconds ({}), or a running task's lease expires and \
                 a second worker starts it again",
                tasks.worker_timeout_seconds
            ),
        ));
    }
    if tasks.max_concurrent_workers == 0 {
        return Err(invalid("tasks.max_concurrent_workers", "must be at least 1".into()));
    }
    let idle_default = crate::schema::TasksSection::default().local_worker_idle_seconds;
    if tasks.enabled && tasks.local_worker_idle_seconds != idle_default {
        let without = match (tasks.backend, tasks.local_workers) {
            (TaskBackend::Rabbitmq, _) => Some("with backend = \"rabbitmq\" workers are started separately"),
            (TaskBackend::Sqlite, 0) => Some("local_workers = 0 starts none"),
            (TaskBackend::Sqlite, _) => None,
        };
        if let Some(why) = without {
            return Err(invalid(
                "tasks.local_worker_idle_seconds",
                format!("applies only to local workers, and {why}; remove the key"),
            ));
        }
    }
    if tasks.history && tasks.backend != TaskBackend::Sqlite {
        return Err(invalid("tasks.history", "requires tasks.backend = \"sqlite\"".into()));
    }
    if config.orchestration.specialists.enabled == Some(true) && !tasks.enabled {
        return Err(invalid(
            "orchestration.specialists.enabled",
            "specialists run as tasks; enable [tasks] or remove this key".into(),
        ));
    }
    let management = &config.orchestration.agent_management;
    if (management.reload || management.write) && !config.specialists_enabled() {
        return Err(invalid(
            "orchestration.agent_management",
            "reload and write require specialists to be enabled".into(),
        ));
    }
    for (index, extension) in tasks.worker_extensions.iter().enumerate() {
        let enabled = match extension.as_str() {
            "kv_memory" => config.tools.kv_memory.enabled,
            "rag" => config.tools.rag.enabled,
            "codemode" => config.tools.codemode.enabled,
            other => {
                return Err(invalid(
                    &format!("tasks.worker_extensions[{index}]"),
                    format!("unknown worker extension `{other}`; expected kv_memory, rag or codemode"),
                ));
            }
        };
        if !enabled {
            return Err(invalid(
                &format!("tasks.worker_extensions[{index}]"),
                format!("`{extension}` requires [tools.{extension}] enabled = true"),
            ));
        }
        if tasks.worker_extensions[..index].contains(extension) {
            return Err(invalid(&format!("tasks.worker_extensions[{index}]"), format!("`{extension}` listed twice")));
        }
    }

    if config.tools.grep.enabled && !config.tools.file_storage.enabled {
        return Err(invalid("tools.grep.enabled", "requires [tools.file_storage] enabled = true".into()));
    }
    if config.tools.audio_transcription.enabled && !config.tools.file_storage.enabled {
        return Err(invalid(
            "tools.audio_transcription.enabled",
            "requires [tools.file_storage] enabled = true".into(),
        ));
    }
    let codemode = &config.tools.codemode;
    if codemode.timeout_seconds > codemode.max_timeout_seconds {
        return Err(invalid("tools.codemode.timeout_seconds", "must not exceed max_timeout_seconds".into()));
    }
    let rag = &config.tools.rag;
    if rag.chunk_overlap_tokens >= rag.chunk_size_tokens {
        return Err(invalid("tools.rag.chunk_overlap_tokens", "must be smaller than chunk_size_tokens".into()));
    }
    for (index, server) in config.tools.mcp.servers.iter().enumerate() {
        if server.name.trim().is_empty() {
            return Err(invalid(&format!("tools.mcp.servers[{index}].name"), "every MCP server needs a name".into()));
        }
    }

    let guardrail = config.orchestration.main_tool_use_guardrail.as_str();
    if !matches!(guardrail, "disabled" | "llm_classifier") {
        return Err(invalid(
            "orchestration.main_tool_use_guardrail",
            format!("`{guardrail}` is not one of disabled, llm_classifier"),
        ));
    }

    let http = &config.http;
    if http.enabled && http.basic_auth_user.is_empty() != http.basic_auth_password.is_empty() {
        let (set, unset) = if http.basic_auth_user.is_empty() {
            ("basic_auth_password", "http.basic_auth_user")
        } else {
            ("basic_auth_user", "http.basic_auth_password")
        };
        return Err(invalid(unset, format!("is empty while {set} is set; Basic auth needs both")));
    }
    let host = http.host.trim().trim_start_matches('[').trim_end_matches(']');
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let has_auth =
        !http.auth_token.is_empty() || (!http.basic_auth_user.is_empty() && !http.basic_auth_password.is_empty());
    let is_ip = host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok();
    if http.enabled && !is_ip {
        return Err(invalid(
            "http.host",
            format!(
                "`{}` is not an IP address; use 127.0.0.1 (this machine only) or the address of the interface to \
                 listen on",
                http.host
            ),
        ));
    }
    if http.enabled && !loopback && !has_auth {
        return Err(invalid(
            "http.host",
            format!(
                "`{}` is reachable from other machines and [http] sets no credentials; set http.auth_token (or \
                 basic_auth_user and basic_auth_password), or listen on 127.0.0.1",
                http.host
            ),
        ));
    }
    if config.memory.sqlite_url.is_empty() || crate::sqlite_path_from_url(&config.memory.sqlite_url).is_none() {
        return Err(invalid("memory.sqlite_url", "must be a SQLite URL such as sqlite:///./data/minibot.db".into()));
    }
    check_scheduler(config, &invalid)?;
    let http_timeout = config.tools.http_client.timeout_seconds;
    if config.tools.http_client.enabled && !(http_timeout.is_finite() && http_timeout > 0.0 && http_timeout <= 3600.0) {
        return Err(invalid(
            "tools.http_client.timeout_seconds",
            "must be a number of seconds above 0, at most 3600".into(),
        ));
    }
    if config.tools.kv_memory.enabled && !(1..=MAX_POOL_SIZE).contains(&u64::from(config.tools.kv_memory.pool_size)) {
        return Err(invalid("tools.kv_memory.pool_size", format!("must be between 1 and {MAX_POOL_SIZE}")));
    }
    for (index, module) in config.extensions.modules.iter().enumerate() {
        if !KNOWN_EXTENSION_MODULES.contains(&module.as_str()) {
            return Err(invalid(
                &format!("extensions.modules[{index}]"),
                format!("`{module}` is a Python extension module; minibot-rs cannot load Python code"),
            ));
        }
    }
    check_graph_extension(config, &invalid)
}

/// The most connections a database pool may hold: SQLite has one writer, so more only cost memory (a pool of
/// 4 billion is an allocation that aborts the process).
const MAX_POOL_SIZE: u64 = 64;

/// `[scheduler.prompts]`, while it is on: a SQLite URL, and counts and durations of at least 1 (0 would make a
/// scheduler that never fires, never retries or busy-loops) and at most a sane bound.
fn check_scheduler(config: &Config, invalid: &dyn Fn(&str, String) -> ConfigError) -> Result<()> {
    let section = &config.scheduler.prompts;
    if section.enabled == Some(false) {
        return Ok(());
    }
    if crate::sqlite_path_from_url(&section.sqlite_url).is_none() {
        return Err(invalid(
            "scheduler.prompts.sqlite_url",
            "must be a SQLite URL such as sqlite:///./data/scheduled_prompts.db".into(),
        ));
    }
    let counts = [
        ("poll_interval_seconds", section.poll_interval_seconds),
        ("lease_timeout_seconds", section.lease_timeout_seconds),
        ("batch_size", u64::from(section.batch_size)),
        ("max_attempts", u64::from(section.max_attempts)),
        ("min_recurrence_interval_seconds", section.min_recurrence_interval_seconds),
        ("pool_size", u64::from(section.pool_size)),
    ];
    for (key, value) in counts {
        if value == 0 {
            return Err(invalid(&format!("scheduler.prompts.{key}"), "must be 1 or more".into()));
        }
    }
    // Upper bounds a typo could pass: a day between looks, a week of lease, ten years of interval.
    let bounds = [
        ("poll_interval_seconds", section.poll_interval_seconds, 86_400),
        ("lease_timeout_seconds", section.lease_timeout_seconds, 604_800),
        ("min_recurrence_interval_seconds", section.min_recurrence_interval_seconds, 315_360_000),
        ("pool_size", u64::from(section.pool_size), MAX_POOL_SIZE),
    ];
    for (key, value, most) in bounds {
        if value > most {
            return Err(invalid(&format!("scheduler.prompts.{key}"), format!("must be at most {most}")));
        }
    }
    Ok(())
}

/// `[extensions.config."minibot.extensions.tools.graph"]`, read only while the extension is on (as in MiniBot):
/// `sqlite_url` a SQLite URL, `echo` a boolean (`true` is refused as not built, in `support`), nothing else.
fn check_graph_extension(config: &Config, invalid: &dyn Fn(&str, String) -> ConfigError) -> Result<()> {
    use crate::schema::{GRAPH_EXTENSION, GRAPH_EXTENSION_KEYS};
    let extensions = &config.extensions;
    let Some(settings) = extensions.config.get(GRAPH_EXTENSION).filter(|_| extensions.graph_enabled()) else {
        return Ok(());
    };
    let section = format!("extensions.config.\"{GRAPH_EXTENSION}\"");
    let Some(table) = settings.as_table() else {
        return Err(invalid(&section, "must be a table of settings (sqlite_url, echo)".into()));
    };
    for (key, value) in table {
        let path = format!("{section}.{key}");
        match key.as_str() {
            "sqlite_url" => match value.as_str() {
                Some(url) if !url.is_empty() && crate::sqlite_path_from_url(url).is_some() => {}
                _ => return Err(invalid(&path, "must be a SQLite URL such as sqlite:///./data/graph.db".into())),
            },
            "echo" if value.as_bool().is_none() => return Err(invalid(&path, "must be true or false".into())),
            "echo" => {}
            _ => {
                return Err(invalid(
                    &path,
                    format!("unknown key `{key}`; the relation graph reads {}", GRAPH_EXTENSION_KEYS.join(" and ")),
                ));
            }
        }
    }
    Ok(())
}

fn check_worker(config: &Config, invalid: &dyn Fn(&str, String) -> ConfigError) -> Result<()> {
    if let Some(bad) = config.worker.labels.iter().find(|label| !crate::agents::valid_label(label)) {
        return Err(invalid("worker.labels", format!("label `{bad}` must be letters, digits, `-`, `_` or `.`")));
    }
    if !(1..=3600).contains(&config.worker.heartbeat_seconds) {
        return Err(invalid("worker.heartbeat_seconds", "must be between 1 and 3600".into()));
    }
    let ca = config.rabbitmq.tls_ca_file.as_deref().filter(|f| !f.trim().is_empty());
    if let Some(file) = ca
        && !config.rabbitmq.broker_url.starts_with("amqps://")
    {
        return Err(invalid(
            "rabbitmq.tls_ca_file",
            format!("`{file}` is set but broker_url does not start with amqps://, so it would never be used"),
        ));
    }
    Ok(())
}

fn check_telegram(config: &Config, invalid: &dyn Fn(&str, String) -> ConfigError) -> Result<()> {
    let telegram = &config.channels.telegram;
    if !telegram.enabled || telegram.bot_token.trim().is_empty() {
        return Ok(());
    }
    match telegram.mode.as_str() {
        "long_polling" => {}
        "webhook" => {
            let url = telegram.webhook_url.as_deref().unwrap_or("").trim();
            if !url.starts_with("https://") && !url.starts_with("http://") {
                return Err(invalid(
                    "channels.telegram.webhook_url",
                    "webhook mode needs the public https:// address Telegram posts updates to".into(),
                ));
            }
            if telegram.webhook_listen.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    "channels.telegram.webhook_listen",
                    format!("`{}` is not an address and port such as 0.0.0.0:8443", telegram.webhook_listen),
                ));
            }
        }
        other => {
            return Err(invalid(
                "channels.telegram.mode",
                format!("unknown mode `{other}`; expected long_polling or webhook"),
            ));
        }
    }
    let base = telegram.api_base_url.trim();
    if !base.starts_with("https://") && !base.starts_with("http://") {
        return Err(invalid(
            "channels.telegram.api_base_url",
            format!("`{base}` is not an http(s) URL such as https://api.telegram.org"),
        ));
    }
    Ok(())
}
