//! A read-only report of what this instance really runs: the tools the agent was given (after its policy, without
//! the ones that failed to register), the sandbox each execution tool would apply on this host, and the channels
//! this process serves. It never reports a section merely because the config enables it, and it is assembled
//! field by field, never by dumping sections, so keys, tokens and credential URLs cannot leak into it.

use crate::exec::sandbox::{self, SandboxScope, SandboxSettings};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::{Arc, RwLock};

/// What this process runs, kept up to date by the code that assembles the agent's tools (and, for channels,
/// the code that starts them). A fresh one knows no tools and no channels.
#[derive(Debug, Default)]
pub struct Running(RwLock<RunningFacts>);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunningFacts {
    /// The agent's tool names after its policy, MCP tools included.
    pub tools: Vec<String>,
    /// MCP servers that contribute at least one of those tools.
    pub mcp_servers: Vec<String>,
    /// Channels this process serves.
    pub channels: Vec<String>,
    /// Tools reached only through `run_tools_script` (codemode replaces them as direct tools).
    pub script_tools: Vec<String>,
}

impl Running {
    pub fn set_tools(&self, tools: Vec<String>, mcp_servers: Vec<String>) {
        let mut facts = self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        facts.tools = tools;
        facts.mcp_servers = mcp_servers;
    }

    pub fn set_script_tools(&self, tools: Vec<String>) {
        self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner()).script_tools = tools;
    }

    pub fn set_channels(&self, channels: Vec<String>) {
        self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner()).channels = channels;
    }

    pub fn snapshot(&self) -> RunningFacts {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// The managed-file tools; any of them present means `[tools.file_storage]` runs.
const FILE_TOOLS: &[&str] = &[
    "list_files",
    "glob_files",
    "file_info",
    "read_file",
    "write_file",
    "move_file",
    "delete_file",
    "send_file",
    "code_read",
    "self_insert_artifact",
];

pub struct GetSettings {
    config: Arc<Config>,
    running: Arc<Running>,
}

impl GetSettings {
    pub fn new(config: Arc<Config>, running: Arc<Running>) -> Self {
        Self { config, running }
    }

    async fn report(&self, ctx: &ToolContext) -> Value {
        let c = &self.config;
        let mut facts = self.running.snapshot();
        // The agent loop knows exactly which tools this run has; the recorded set serves calls outside a run.
        if let Some(names) = &ctx.agent_tools {
            facts.tools = names.to_vec();
        }
        let mut tools = Map::new();
        for name in &facts.tools {
            tools.insert(name.clone(), self.details(name).await);
        }
        let mut script_tools = Map::new();
        for name in &facts.script_tools {
            script_tools.insert(name.clone(), self.details(name).await);
        }
        let mut report = json!({
            "ok": true,
            "version": env!("CARGO_PKG_VERSION"),
            "config_path": c.source.as_ref().map(|p| p.display().to_string()),
            "cwd": std::env::current_dir().ok().map(|p| p.display().to_string()),
            "channels": facts.channels,
            "llm": {
                "provider": c.llm.provider,
                "api_format": c.api_format_of(&c.llm.provider).map(|f| f.as_str()),
                "model": c.llm.model,
                "prompts_dir": c.resolve_path(&c.llm.prompts_dir),
                "base_url": without_credentials(&c.redactor().redact(&c.main_llm().base_url)),
                "temperature": c.llm.temperature,
                "max_new_tokens": c.llm.max_new_tokens,
                "reasoning_effort": c.llm.reasoning_effort,
                "retry_attempts": c.llm.retry_attempts,
                "retry_delay_seconds": c.llm.retry_delay_seconds,
                "http2": c.llm.http2,
                "request_timeout_seconds": c.llm.request_timeout_seconds,
                "sock_read_timeout_seconds": c.llm.sock_read_timeout_seconds,
                "main_responses_state_mode": c.llm.main_responses_state_mode,
                "agent_responses_state_mode": c.llm.agent_responses_state_mode,
                "prompt_cache_enabled": c.llm.prompt_cache_enabled,
                "model_limits": minibot_llm::model_limits(
                    c.api_format_of(&c.llm.provider).unwrap_or(minibot_config::ApiFormat::OpenAi),
                    &c.llm.model
                ).map(|l| json!({ "context_tokens": l.context_tokens, "max_output_tokens": l.max_output_tokens })),
            },
            // SQLite is the only conversation store; `[memory] backend` is informational, as in MiniBot.
            "memory": {
                "backend": "sqlite",
                "max_history_messages": c.memory.max_history_messages,
                "max_history_tokens": c.memory.max_history_tokens,
                "context_ratio_before_compact": c.memory.context_ratio_before_compact,
                "notify_compaction_updates": c.memory.notify_compaction_updates,
                // What compaction uses: the configured size, else the model table's context × the ratio.
                "compaction_threshold_tokens": minibot_llm::ContextBudget::for_model(
                    minibot_llm::model_limits(
                        c.api_format_of(&c.llm.provider).unwrap_or(minibot_config::ApiFormat::OpenAi),
                        &c.llm.model
                    ),
                    c.memory.max_history_tokens,
                    c.memory.context_ratio_before_compact,
                    c.llm.max_new_tokens,
                ).map(|b| b.threshold_tokens),
            },
            "tools": tools,
            "agents": {
                "directory": c.resolve_path(&c.orchestration.directory),
                "specialists_enabled": c.specialists_enabled(),
            },
        });
        if !script_tools.is_empty() {
            report["script_tools"] = Value::Object(script_tools);
        }
        let all_tools: Vec<&String> = facts.tools.iter().chain(&facts.script_tools).collect();
        let t = &c.tools;
        if all_tools.iter().any(|name| FILE_TOOLS.contains(&name.as_str())) {
            report["file_storage"] = json!({
                "root_dir": c.resolve_path(&t.file_storage.root_dir),
                "mode": if t.file_storage.allow_outside_root { "yolo" } else { "confined" },
                "max_write_bytes": t.file_storage.max_write_bytes.bytes(),
            });
        }
        if all_tools.iter().any(|name| name.starts_with("memory_")) {
            let kv = &t.kv_memory;
            report["kv_memory"] = json!({
                "database": minibot_config::sqlite_path_from_url(&kv.sqlite_url).map(|p| c.resolve_path(&p)),
                "default_limit": kv.default_limit,
                "max_limit": kv.max_limit,
            });
        }
        if !facts.mcp_servers.is_empty() {
            report["mcp"] = json!({ "servers": facts.mcp_servers });
        }
        if c.tasks.enabled {
            report["tasks"] = json!({ "backend": c.tasks.backend.as_str() });
        }
        if all_tools.iter().any(|name| *name == "schedule_prompt") {
            let s = &c.scheduler.prompts;
            report["scheduler"] = json!({
                "database": minibot_config::sqlite_path_from_url(&s.sqlite_url).map(|p| c.resolve_path(&p)),
                "min_recurrence_interval_seconds": s.min_recurrence_interval_seconds,
                "max_attempts": s.max_attempts,
                "cron_time_zones": "IANA, UTC by default",
            });
        }
        // The vault is unlocked at start-up whenever it is on; a vault that cannot be opened stops start-up.
        if c.vault.enabled {
            report["vault"] = json!({ "enabled": true });
        }
        report
    }

    /// The sandbox a run gets on this host now, or why it cannot run.
    async fn sandbox_report(&self, settings: &SandboxSettings) -> Map<String, Value> {
        let mut out = Map::new();
        match sandbox::plan(settings, &SandboxScope::from_config(&self.config, None)).await {
            Ok(applied) => applied.describe(&mut out),
            Err(unavailable) => {
                out.insert("sandbox_mode".into(), settings.mode.as_str().into());
                out.insert("sandbox_unavailable".into(), unavailable.reason.into());
            }
        }
        out
    }

    /// The settings that shape one tool's behaviour; `{}` for tools without any.
    async fn details(&self, name: &str) -> Value {
        let t = &self.config.tools;
        match name {
            "current_datetime" => json!({ "default_format": t.time.default_format }),
            "calculate_expression" => json!({
                "default_scale": t.calculator.default_scale,
                "max_expression_length": t.calculator.max_expression_length,
            }),
            "wait" => json!({ "max_milliseconds": t.wait.max_milliseconds }),
            "python_execute" => {
                let p = &t.python_exec;
                let mut out = self.sandbox_report(&sandbox::python_settings(p)).await;
                out.insert("default_timeout_seconds".into(), p.default_timeout_seconds.into());
                out.insert("max_timeout_seconds".into(), p.max_timeout_seconds.into());
                Value::Object(out)
            }
            "bash" => {
                let b = &t.bash;
                let mut out = self.sandbox_report(&sandbox::bash_settings(b)).await;
                out.insert("default_timeout_seconds".into(), b.default_timeout_seconds.into());
                out.insert("max_timeout_seconds".into(), b.max_timeout_seconds.into());
                out.insert("env_allowlist".into(), json!(b.env_allowlist));
                Value::Object(out)
            }
            "http_request" => json!({ "timeout_seconds": t.http_client.timeout_seconds }),
            "grep" => json!({ "max_matches": t.grep.max_matches }),
            "apply_patch" => json!({ "workspace_root": self.config.resolve_path(&t.apply_patch.workspace_root) }),
            "list_skills" | "activate_skill" => json!({
                "write_path": self.config.resolve_path(&t.skills.write_path),
                "paths": t.skills.paths.iter().map(|p| self.config.resolve_path(p)).collect::<Vec<_>>(),
                "bundled_skills": t.skills.native,
                "bundled_disabled": t.skills.native_disabled,
                "catalog_in_prompt": t.skills.preload_catalog,
            }),
            "install_skill" => json!({
                "write_path": self.config.resolve_path(&t.skills.write_path),
                "lock_file": self.config.resolve_path(&t.skills.write_path).join("skills-lock.json"),
                "requires_expected_hash": true,
            }),
            "run_tools_script" => {
                let m = &t.codemode;
                json!({
                    "timeout_seconds": m.timeout_seconds,
                    "max_timeout_seconds": m.max_timeout_seconds,
                    "max_tool_calls": m.max_tool_calls,
                    "max_memory_mb": m.max_memory_mb,
                    "max_output_chars": m.max_output_chars,
                    "exclude": m.exclude,
                })
            }
            "reload_agents" | "create_agent" | "update_agent" | "delete_agent" => {
                let m = &self.config.orchestration.agent_management;
                json!({
                    "directory": self.config.resolve_path(&m.directory),
                    "tools_allow": m.tools_allow,
                    "mcp_servers": m.mcp_servers,
                    "providers": m.providers,
                })
            }
            _ => json!({}),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

impl Tool for GetSettings {
    type Args = Args;

    fn name(&self) -> &str {
        "get_settings"
    }

    fn description(&self) -> String {
        "Report what this assistant instance runs: version, config path, channels, model, the tools you have and \
         their settings (the sandbox each execution tool applies on this host), agents and tasks. Never includes \
         keys or tokens."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {}, "required": [], "additionalProperties": false })
    }

    async fn call(&self, _args: Args, ctx: &ToolContext) -> ToolResult {
        Ok(self.report(ctx).await)
    }
}

/// A URL without the `user:password@` part a proxy address may carry, and without its query (`?key=`).
fn without_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            if path.is_empty() { format!("{scheme}://{host}") } else { format!("{scheme}://{host}/{path}") }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_reports_secrets() {
        let config = Config::from_toml(
            "[llm]\napi_key = \"sk-secret-123\"\nbase_url = \"https://user:pw@proxy.example/v1\"\n\
             [channels.telegram]\nenabled = false\nbot_token = \"123:tg-secret\"\n[http]\nauth_token = \"web-secret\"\n",
            "t.toml",
            "/tmp",
            &|_| None,
        )
        .expect("config");
        let running = Arc::new(Running::default());
        running.set_tools(vec!["get_settings".into(), "bash".into()], vec![]);
        let tool = GetSettings::new(Arc::new(config), running);
        let text = tool.call(Args {}, &ToolContext::default()).await.expect("report").to_string();
        for secret in ["sk-secret-123", "pw@proxy", "tg-secret", "web-secret"] {
            assert!(!text.contains(secret), "leaked {secret}: {text}");
        }
        assert!(!text.contains("telegram") && !text.contains("\"web\""), "{text}");
    }
}
