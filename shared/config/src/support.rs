//! What this version implements of MiniBot's `config.toml`, in one table ([`FEATURES`]), and the check that
//! refuses a file asking for something that is not built.
//!
//! The rule: a section that is absent, disabled or left at its defaults loads quietly, so MiniBot files keep
//! working. A file that would change behaviour through a feature this version lacks (`enabled = true`, or a
//! value other than the default of a key nothing reads) stops start-up with one line per key, all of them at
//! once. Building a feature means flipping its entry's `implemented` to `true`; nothing else reads the flags.
//!
//! Keys accepted on purpose although nothing reads them, because no setting of them changes what a user sees:
//! `[memory] backend` and `[logging] structured` (MiniBot ignores them too), `[tools.file_storage]`
//! `save_incoming_uploads` and `uploads_subdir` (MiniBot never read them), `[tasks.sqlite]`
//! `poll_interval_seconds`, `batch_size` and `pool_size` (tuning of MiniBot's poll loop; this queue hands a task
//! to a free worker within 50 ms, never later than MiniBot would), `[extensions] config` (only read by extension
//! modules, refused on their own). Keys that only matter while another feature runs are listed with that
//! feature and are quiet while it is off.

use crate::providers::ApiFormat;
use crate::{AgentDefinition, Config, ConfigError, ConfigFile, Result};
use toml::{Table, Value};

/// One MiniBot feature and whether this version has it.
pub struct Feature {
    /// The subject of the refusal, with its verb: "scheduled prompts are".
    pub what: &'static str,
    pub implemented: bool,
    /// What turns it on or changes its behaviour.
    pub gate: Gate,
}

/// How a file asks for a feature.
pub enum Gate {
    /// Built, or only takes effect through another entry.
    Nothing,
    /// `[section] enabled`. With `default_on`, MiniBot runs the feature when `enabled` is not written (the field
    /// is an `Option<bool>` here): a written `enabled = true` is refused, and so is any other key of the section
    /// that differs from its default while `enabled` is not written.
    Switch { section: &'static str, default_on: bool },
    /// Keys nothing reads: refused when they differ from the default.
    Keys { section: &'static str, keys: &'static [&'static str] },
    /// Selecting this API format: `[llm] provider`, the guardrail's or the safety classifier's provider, or a
    /// specialist's `model_provider`. Only the keys of `[llm.xai]`, the Responses state and cache keys, `auth_path`
    /// and `[codex]` matter to the formats that are not built, so they are quiet until one is selected.
    ApiFormat(ApiFormat),
    /// Anything the variants above cannot say.
    Custom(fn(&Settings<'_>) -> Vec<Hit>),
}

/// [llm.openrouter] models, reasoning_enabled, plugins, provider.*, and the `openrouter_*` keys of specialist
/// files: refused only while an OpenRouter provider is configured (MiniBot ignores them otherwise). Named, because
/// [`check_agents`] consults it too.
const OPENROUTER_ROUTING: Feature =
    Feature { what: "OpenRouter routing options are", implemented: true, gate: Gate::Custom(openrouter_options) };

/// Every MiniBot section, in the order of MiniBot's schema. Sections that are fully built are listed too, so
/// this is the one place that says what exists.
pub const FEATURES: &[Feature] = &[
    // [channels.telegram]: `enabled` defaults to true, but the bot starts only with a token (as in MiniBot), in
    // the daemon. Long polling and webhook mode both work (MiniBot accepts `webhook` and long-polls anyway).
    Feature { what: "the Telegram channel is", implemented: true, gate: Gate::Custom(telegram) },
    // [runtime]: log_level, agent_timeout_seconds, owner_id. `environment` only matters to the web server.
    Feature { what: "[runtime]", implemented: true, gate: Gate::Nothing },
    // [llm]: provider, api_key, base_url, model, temperature, max_new_tokens, reasoning_effort,
    // max_tool_iterations, request/connect timeouts, retries, prompts, extra_headers, openrouter attribution.
    Feature { what: "[llm]", implemented: true, gate: Gate::Nothing },
    Feature {
        what: "this [llm] option is",
        implemented: false,
        gate: Gate::Keys { section: "llm", keys: &["strip_logs"] },
    },
    // [providers.<name>]: api_key, base_url, headers, api_format, models (`auth_path`: chatgpt_codex only).
    Feature { what: "[providers]", implemented: true, gate: Gate::Nothing },
    OPENROUTER_ROUTING,
    Feature { what: "the `openai` API format is", implemented: true, gate: Gate::ApiFormat(ApiFormat::OpenAi) },
    Feature { what: "the `openrouter` API format is", implemented: true, gate: Gate::ApiFormat(ApiFormat::OpenRouter) },
    Feature {
        what: "the `openai_responses` API format is",
        implemented: true,
        gate: Gate::ApiFormat(ApiFormat::OpenAiResponses),
    },
    Feature { what: "the `claude` API format is", implemented: true, gate: Gate::ApiFormat(ApiFormat::Claude) },
    Feature { what: "the `google` API format is", implemented: true, gate: Gate::ApiFormat(ApiFormat::Google) },
    // Also [codex] version and every auth_path.
    Feature {
        what: "the `chatgpt_codex` API format is",
        implemented: false,
        gate: Gate::ApiFormat(ApiFormat::ChatgptCodex),
    },
    // [orchestration]: directory, tool_ownership_mode, shared_mcp_servers, main_tool_use_guardrail (+ provider,
    // model, reasoning_effort), [orchestration.main_agent] tools_allow/tools_deny, [orchestration.specialists].
    Feature { what: "[orchestration]", implemented: true, gate: Gate::Nothing },
    Feature {
        what: "naming the main agent is",
        implemented: false,
        gate: Gate::Keys { section: "orchestration.main_agent", keys: &["name"] },
    },
    // [orchestration.agent_management]: reload (reload_agents), write (create_agent, update_agent, delete_agent),
    // directory, and the ceiling of managed definitions (tools_allow, mcp_servers, providers).
    Feature {
        what: "agent management (reload_agents, create_agent, update_agent) is",
        implemented: true,
        gate: Gate::Keys { section: "orchestration.agent_management", keys: &["reload", "write"] },
    },
    Feature {
        what: "the turn decision observer is",
        implemented: false,
        gate: Gate::Switch { section: "decision", default_on: false },
    },
    // [memory]: sqlite_url, max_history_messages.
    Feature { what: "[memory]", implemented: true, gate: Gate::Nothing },
    // [memory] max_history_tokens, context_ratio_before_compact, notify_compaction_updates: compaction.
    Feature {
        what: "history compaction is",
        implemented: true,
        gate: Gate::Keys {
            section: "memory",
            keys: &["max_history_tokens", "context_ratio_before_compact", "notify_compaction_updates"],
        },
    },
    Feature { what: "[tools.approval]", implemented: true, gate: Gate::Nothing },
    // [tools.kv_memory]: enabled, sqlite_url, pool_size, default_limit, max_limit (crate minibot-kv-memory).
    Feature {
        what: "the key/value memory tools are",
        implemented: true,
        gate: Gate::Switch { section: "tools.kv_memory", default_on: false },
    },
    Feature {
        what: "SQL statement logging of the key/value memory is",
        implemented: false,
        gate: Gate::Keys { section: "tools.kv_memory", keys: &["echo"] },
    },
    // [tools.http_client], [tools.time], [tools.wait], [tools.calculator], [tools.bash], [tools.tool_output_spill],
    // [tools.apply_patch], [tools.file_storage], [tools.grep], [tools.mcp] (with auth_secret).
    Feature { what: "[tools.*]", implemented: true, gate: Gate::Nothing },
    Feature {
        what: "a Python backend other than `host` is",
        implemented: false,
        gate: Gate::Keys { section: "tools.python_exec", keys: &["backend"] },
    },
    Feature {
        what: "the browser output folder is",
        implemented: false,
        gate: Gate::Keys { section: "tools.browser", keys: &["output_dir"] },
    },
    Feature {
        what: "audio transcription is",
        implemented: false,
        gate: Gate::Switch { section: "tools.audio_transcription", default_on: false },
    },
    // [tools.skills]: enabled (on unless `false`), paths, preload_catalog, native, native_disabled, write_path,
    // install (install_skill).
    Feature {
        what: "skills (list_skills, activate_skill) are",
        implemented: true,
        gate: Gate::Switch { section: "tools.skills", default_on: true },
    },
    Feature { what: "RAG is", implemented: false, gate: Gate::Switch { section: "tools.rag", default_on: false } },
    // [tools.codemode]: enabled, timeout_seconds, max_timeout_seconds, max_tool_calls, max_memory_mb,
    // max_output_chars, exclude (crate minibot-codemode).
    Feature {
        what: "codemode (run_tools_script) is",
        implemented: true,
        gate: Gate::Switch { section: "tools.codemode", default_on: false },
    },
    Feature { what: "[tools.safety_classifier]", implemented: true, gate: Gate::Nothing },
    // [scheduler.prompts]: enabled (on unless `false`), sqlite_url, poll_interval_seconds (how often jobs another
    // process wrote are looked for; firing itself is timed to each job), lease_timeout_seconds (how long a fire may
    // stay undelivered before another process delivers it), batch_size, max_attempts,
    // min_recurrence_interval_seconds, pool_size.
    Feature {
        what: "scheduled prompts are",
        implemented: true,
        gate: Gate::Switch { section: "scheduler.prompts", default_on: true },
    },
    Feature {
        what: "SQL statement logging is",
        implemented: false,
        gate: Gate::Keys { section: "scheduler.prompts", keys: &["echo"] },
    },
    // [logging] log_level, and this version's max_file_bytes and backup_count (log rotation). `structured` is
    // accepted: MiniBot ignores it too.
    Feature {
        what: "this log format option is",
        implemented: false,
        gate: Gate::Keys { section: "logging", keys: &["logfmt_enabled", "kv_separator", "record_separator"] },
    },
    // [tasks]: enabled, backend, worker_timeout_seconds, worker_max_steps, worker_max_tool_calls, delegation_mode,
    // local_workers, progress_interval_seconds, max_concurrent_workers (caps the local workers); [tasks.sqlite]
    // sqlite_url, lease_timeout_seconds, max_attempts, done_retention_seconds; [rabbitmq].
    Feature { what: "[tasks]", implemented: true, gate: Gate::Nothing },
    Feature {
        what: "a cap on tasks run by workers this process does not start is",
        implemented: false,
        gate: Gate::Custom(concurrency_without_local_workers),
    },
    Feature {
        what: "worker conversation history is",
        implemented: false,
        gate: Gate::Keys { section: "tasks", keys: &["history"] },
    },
    // [tasks] worker_extensions: "codemode" is built; the others are refused here.
    Feature {
        what: "worker extensions other than \"codemode\" are",
        implemented: false,
        gate: Gate::Custom(unbuilt_worker_extensions),
    },
    Feature {
        what: "SQL statement logging is",
        implemented: false,
        gate: Gate::Keys { section: "tasks.sqlite", keys: &["echo"] },
    },
    Feature { what: "[vault]", implemented: true, gate: Gate::Switch { section: "vault", default_on: false } },
    // Also [runtime] environment and the chat upload limits.
    Feature { what: "the HTTP server and web UI are", implemented: true, gate: Gate::Nothing },
    // [extensions] modules naming minibot.extensions.tools.graph, with its config `sqlite_url` (other keys are
    // refused in `validate`).
    Feature { what: "the relation graph extension is", implemented: true, gate: Gate::Nothing },
    Feature {
        what: "SQL statement logging of the relation graph is",
        implemented: false,
        gate: Gate::Custom(graph_echo),
    },
];

/// One key of a file that asks for something this version does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The config file or specialist file.
    pub file: String,
    /// The dotted key (`scheduler.prompts.enabled`), or the frontmatter key of a specialist file.
    pub key: String,
    /// How the file sets it: `[scheduler.prompts] enabled = true`.
    pub setting: String,
    /// `scheduled prompts are not supported by this version yet`.
    pub message: String,
    /// How to make the file load: `set enabled = false or remove the section`.
    pub remedy: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}; {}", self.file, self.setting, self.message, self.remedy)
    }
}

/// What a custom gate found: the dotted key, how it is set, and how to undo it.
pub struct Hit {
    pub key: String,
    pub setting: String,
    pub remedy: String,
}

/// The typed config with its effective and default values as trees, for comparing key by key.
pub struct Settings<'a> {
    pub config: &'a ConfigFile,
    effective: Table,
    defaults: Table,
}

impl Settings<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        lookup(&self.effective, key)
    }

    fn differs(&self, key: &str) -> bool {
        lookup(&self.effective, key) != lookup(&self.defaults, key)
    }

    /// Every leaf under `section` whose value differs from the default, as dotted keys.
    fn changed_under(&self, section: &str, skip: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        let (Some(Value::Table(effective)), defaults) = (self.get(section), lookup(&self.defaults, section)) else {
            return out;
        };
        let empty = Table::new();
        let defaults = match defaults {
            Some(Value::Table(t)) => t,
            _ => &empty,
        };
        for (key, value) in effective {
            if skip.contains(&key.as_str()) {
                continue;
            }
            let path = format!("{section}.{key}");
            match (value, defaults.get(key)) {
                (Value::Table(_), Some(Value::Table(_))) => out.extend(self.changed_under(&path, &[])),
                (value, default) if Some(value) != default => out.push(path),
                _ => {}
            }
        }
        out
    }

    /// `[section] key = value`, hiding values of keys that may hold credentials.
    fn setting(&self, key: &str) -> String {
        let (section, leaf) = key.rsplit_once('.').unwrap_or(("", key));
        let shown = if is_secret(leaf) {
            "\"…\"".to_string()
        } else {
            self.get(key).map_or_else(|| "(not set)".to_string(), show)
        };
        format!("[{section}] {leaf} = {shown}")
    }
}

/// Every key of the file that asks for a feature this version does not implement, in table order.
pub(crate) fn findings(config: &Config, origin: &str) -> Result<Vec<Unsupported>> {
    // Sections are plain data; only a number beyond TOML's range (a byte size of exabytes) fails to serialize.
    let tree = |file: &ConfigFile| match Value::try_from(file) {
        Ok(Value::Table(table)) => Ok(table),
        Ok(_) => Ok(Table::new()),
        Err(e) => Err(ConfigError::Invalid { file: origin.into(), message: format!("a value is out of range: {e}") }),
    };
    let (effective, defaults) = (tree(config)?, tree(&ConfigFile::default())?);
    let settings = Settings { config, effective, defaults };
    let mut out = Vec::new();
    for feature in FEATURES.iter().filter(|f| !f.implemented) {
        let message = format!("{} not supported by this version yet", feature.what);
        let hits = match &feature.gate {
            Gate::Nothing => Vec::new(),
            Gate::Switch { section, default_on } => switch_hits(&settings, section, *default_on),
            Gate::Keys { section, keys } => keys
                .iter()
                .map(|key| format!("{section}.{key}"))
                .filter(|key| settings.differs(key))
                .map(|key| Hit {
                    setting: settings.setting(&key),
                    remedy: match lookup(&settings.defaults, &key) {
                        Some(default) => format!("remove it or write the default, {}", show(default)),
                        None => "remove it".to_string(),
                    },
                    key,
                })
                .collect(),
            Gate::ApiFormat(format) => format_hits(&settings, *format),
            Gate::Custom(check) => check(&settings),
        };
        out.extend(hits.into_iter().map(|hit| Unsupported {
            file: origin.to_string(),
            key: hit.key,
            setting: hit.setting,
            message: message.clone(),
            remedy: hit.remedy,
        }));
    }
    Ok(out)
}

/// Refuses specialists that select an API format this version cannot call, or that set OpenRouter routing
/// options for an OpenRouter model while those are not built. `agents` come from [`crate::load_agents`]; the
/// orchestrator checks them at start-up and a worker before each task.
pub fn check_agents(config: &Config, agents: &[AgentDefinition]) -> Result<()> {
    let mut out = Vec::new();
    for agent in agents {
        let file = agent.path.display().to_string();
        if let Some(provider) = agent.model_provider.as_deref().filter(|p| !p.is_empty())
            && let Some(format) = config.api_format_of(provider)
            && let Some(feature) = format_feature(format).filter(|f| !f.implemented)
        {
            out.push(Unsupported {
                file: file.clone(),
                key: "model_provider".into(),
                setting: format!("model_provider: {provider}"),
                message: format!("{} not supported by this version yet", feature.what),
                remedy: format!("use a provider whose api_format is {}", callable_formats().join(" or ")),
            });
        }
        let routing = &OPENROUTER_ROUTING;
        let provider = agent.model_provider.as_deref().filter(|p| !p.is_empty()).unwrap_or(&config.llm.provider);
        if !routing.implemented && config.api_format_of(provider) == Some(ApiFormat::OpenRouter) {
            let mut keys: Vec<String> =
                agent.openrouter_provider.keys().map(|k| format!("openrouter_provider_{k}")).collect();
            if agent.openrouter_reasoning_enabled.is_some() {
                keys.insert(0, "openrouter_reasoning_enabled".into());
            }
            for key in keys {
                out.push(Unsupported {
                    file: file.clone(),
                    setting: format!("{key}: …"),
                    key,
                    message: format!("{} not supported by this version yet", routing.what),
                    remedy: "remove the key".into(),
                });
            }
        }
    }
    if out.is_empty() { Ok(()) } else { Err(ConfigError::Unsupported(out)) }
}

/// Whether this build can call an API format (its entry in [`FEATURES`]).
pub(crate) fn format_callable(format: ApiFormat) -> bool {
    format_feature(format).is_some_and(|f| f.implemented)
}

/// The API formats this build can call, for messages.
pub fn callable_formats() -> Vec<&'static str> {
    FEATURES
        .iter()
        .filter_map(|f| match f.gate {
            Gate::ApiFormat(format) if f.implemented => Some(format.as_str()),
            _ => None,
        })
        .collect()
}

fn format_feature(format: ApiFormat) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| matches!(f.gate, Gate::ApiFormat(g) if g == format))
}

fn switch_hits(settings: &Settings<'_>, section: &str, default_on: bool) -> Vec<Hit> {
    let enabled = format!("{section}.enabled");
    match settings.get(&enabled) {
        Some(Value::Boolean(true)) => vec![Hit {
            setting: format!("[{section}] enabled = true"),
            key: enabled,
            remedy: "set enabled = false or remove the section".into(),
        }],
        None if default_on => settings
            .changed_under(section, &["enabled"])
            .into_iter()
            .map(|key| Hit {
                setting: settings.setting(&key),
                remedy: format!(
                    "MiniBot turns it on when enabled is not written: set enabled = false or remove `{}`",
                    key.rsplit('.').next().unwrap_or(&key)
                ),
                key,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn format_hits(settings: &Settings<'_>, format: ApiFormat) -> Vec<Hit> {
    let c = settings.config;
    let mut selections: Vec<(&str, &str)> = vec![("llm.provider", c.llm.provider.as_str())];
    let orchestration = &c.orchestration;
    if orchestration.main_tool_use_guardrail == "llm_classifier"
        && let Some(provider) = orchestration.main_tool_use_guardrail_provider.as_deref()
    {
        selections.push(("orchestration.main_tool_use_guardrail_provider", provider));
    }
    let classifier = &c.tools.safety_classifier;
    if classifier.enabled
        && let Some(provider) = classifier.provider.as_deref()
    {
        selections.push(("tools.safety_classifier.provider", provider));
    }
    selections
        .into_iter()
        .filter(|(_, name)| !name.is_empty() && c.api_format_of(name) == Some(format))
        .map(|(key, name)| {
            let via = if name == format.as_str() { String::new() } else { format!(" ([providers.{name}])") };
            Hit {
                setting: format!("{}{via}", settings.setting(key)),
                key: key.to_string(),
                remedy: format!(
                    "use a provider whose api_format is {} (any OpenAI-compatible endpoint works with \"openai\")",
                    callable_formats().join(" or ")
                ),
            }
        })
        .collect()
}

fn telegram(settings: &Settings<'_>) -> Vec<Hit> {
    let telegram = &settings.config.channels.telegram;
    if !telegram.enabled || telegram.bot_token.trim().is_empty() {
        return Vec::new();
    }
    vec![Hit {
        key: "channels.telegram.enabled".into(),
        setting: "[channels.telegram] enabled = true with a bot_token (enabled defaults to true)".into(),
        remedy: "set enabled = false or remove bot_token".into(),
    }]
}

/// `[tasks] worker_extensions` naming an extension other than `codemode` (`kv_memory`, `rag`).
fn unbuilt_worker_extensions(settings: &Settings<'_>) -> Vec<Hit> {
    let key = "tasks.worker_extensions";
    let extensions = &settings.config.tasks.worker_extensions;
    if extensions.iter().all(|extension| extension == "codemode") {
        return Vec::new();
    }
    vec![Hit {
        key: key.into(),
        setting: settings.setting(key),
        remedy: "list only \"codemode\" (kv_memory and rag are not built for workers) or remove the key".into(),
    }]
}

fn openrouter_options(settings: &Settings<'_>) -> Vec<Hit> {
    let c = settings.config;
    let mut names = std::iter::once(c.llm.provider.as_str()).chain(c.providers.keys().map(String::as_str));
    if !names.any(|name| c.api_format_of(name) == Some(ApiFormat::OpenRouter)) {
        return Vec::new();
    }
    settings
        .changed_under("llm.openrouter", &["attribution_enabled"])
        .into_iter()
        .map(|key| Hit { setting: settings.setting(&key), remedy: "remove it".into(), key })
        .collect()
}

fn concurrency_without_local_workers(settings: &Settings<'_>) -> Vec<Hit> {
    let tasks = &settings.config.tasks;
    let key = "tasks.max_concurrent_workers";
    let no_local_workers = tasks.backend == crate::TaskBackend::Rabbitmq || tasks.local_workers == 0;
    if !tasks.enabled || !no_local_workers || !settings.differs(key) {
        return Vec::new();
    }
    vec![Hit {
        key: key.into(),
        setting: settings.setting(key),
        remedy: "it caps only the local workers ([tasks] local_workers, SQLite backend); every minibot-worker runs \
                 one task at a time, so start as many as may run at once and remove the key"
            .into(),
    }]
}

/// `echo = true` in the graph extension's config, read only while the extension is on (as MiniBot does).
fn graph_echo(settings: &Settings<'_>) -> Vec<Hit> {
    let extensions = &settings.config.extensions;
    let echo = extensions.config.get(crate::schema::GRAPH_EXTENSION).and_then(|c| c.get("echo"));
    if !extensions.graph_enabled() || echo.and_then(Value::as_bool) != Some(true) {
        return Vec::new();
    }
    let section = format!("extensions.config.\"{}\"", crate::schema::GRAPH_EXTENSION);
    vec![Hit {
        key: format!("{section}.echo"),
        setting: format!("[{section}] echo = true"),
        remedy: "set echo = false or remove it".into(),
    }]
}

fn is_secret(key: &str) -> bool {
    ["token", "api_key", "password", "secret"].iter().any(|word| key.contains(word))
}

fn lookup<'t>(table: &'t Table, key: &str) -> Option<&'t Value> {
    let mut parts = key.split('.');
    let mut current = table.get(parts.next()?)?;
    for part in parts {
        current = current.as_table()?.get(part)?;
    }
    Some(current)
}

/// A value as TOML would write it, cut short when long.
fn show(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("{s:?}"),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Table(table) => {
            format!("{{ {} }}", table.iter().map(|(k, v)| format!("{k} = {}", show(v))).collect::<Vec<_>>().join(", "))
        }
    };
    if text.chars().count() > 80 { format!("{}…", text.chars().take(79).collect::<String>()) } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_entry_is_in_the_table() {
        assert!(FEATURES.iter().any(|f| f.what == OPENROUTER_ROUTING.what));
    }

    #[test]
    fn every_api_format_has_exactly_one_entry() {
        for name in crate::API_FORMATS {
            let format = ApiFormat::parse(name).expect("known format");
            let entries = FEATURES.iter().filter(|f| matches!(f.gate, Gate::ApiFormat(g) if g == format)).count();
            assert_eq!(entries, 1, "{name}");
        }
    }

    #[test]
    fn every_key_in_the_table_exists_in_the_schema() {
        // A misspelt key would never differ from its (missing) default and so never be refused.
        let all = Value::try_from(ConfigFile::default()).expect("defaults serialize");
        let Value::Table(all) = all else { panic!("table") };
        for feature in FEATURES {
            let (section, keys): (&str, &[&str]) = match &feature.gate {
                Gate::Keys { section, keys } => (section, keys),
                Gate::Switch { section, default_on: false } => (section, &["enabled"]),
                Gate::Switch { section, default_on: true } => (section, &[]),
                _ => continue,
            };
            assert!(matches!(lookup(&all, section), Some(Value::Table(_))), "section {section}");
            for key in keys {
                let optional = section == "memory" && *key == "max_history_tokens";
                assert!(optional || lookup(&all, &format!("{section}.{key}")).is_some(), "{section}.{key}");
            }
        }
    }
}
