//! A read-only report of what this instance runs. It is assembled from the config field by field, never by
//! dumping sections, so keys, tokens and credential URLs cannot leak into it.

use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

pub struct GetSettings {
    config: Arc<Config>,
}

impl GetSettings {
    pub fn new(config: Arc<Config>) -> Self {
        Self { config }
    }

    fn report(&self) -> Value {
        let c = &self.config;
        let mut channels = vec!["console"];
        if c.channels.telegram.enabled && !c.channels.telegram.bot_token.is_empty() {
            channels.push("telegram");
        }
        if c.http.enabled {
            channels.push("web");
        }
        let mut tools = Map::new();
        let t = &c.tools;
        if t.time.enabled {
            tools.insert("current_datetime".into(), json!({ "default_format": t.time.default_format }));
        }
        if t.calculator.enabled {
            tools.insert(
                "calculate_expression".into(),
                json!({
                "default_scale": t.calculator.default_scale,
                "max_expression_length": t.calculator.max_expression_length }),
            );
        }
        if t.wait.enabled {
            tools.insert("wait".into(), json!({ "max_milliseconds": t.wait.max_milliseconds }));
        }
        if t.python_exec.enabled {
            tools.insert(
                "python_execute".into(),
                json!({
                "sandbox_mode": t.python_exec.sandbox_mode.as_str(),
                "default_timeout_seconds": t.python_exec.default_timeout_seconds,
                "max_timeout_seconds": t.python_exec.max_timeout_seconds }),
            );
        }
        if t.bash.enabled {
            tools.insert(
                "bash".into(),
                json!({
                "sandbox_mode": t.bash.sandbox_mode.as_str(),
                "default_timeout_seconds": t.bash.default_timeout_seconds,
                "max_timeout_seconds": t.bash.max_timeout_seconds,
                "env_allowlist": t.bash.env_allowlist }),
            );
        }
        if t.file_storage.enabled {
            tools.insert(
                "file_storage".into(),
                json!({
                "root_dir": c.resolve_path(&t.file_storage.root_dir),
                "mode": if t.file_storage.allow_outside_root { "yolo" } else { "confined" },
                "max_write_bytes": t.file_storage.max_write_bytes.bytes() }),
            );
        }
        if t.grep.enabled {
            tools.insert("grep".into(), json!({ "max_matches": t.grep.max_matches }));
        }
        if t.http_client.enabled {
            tools.insert("http_request".into(), json!({ "timeout_seconds": t.http_client.timeout_seconds }));
        }
        if t.apply_patch.enabled {
            tools.insert(
                "apply_patch".into(),
                json!({ "workspace_root": c.resolve_path(&t.apply_patch.workspace_root) }),
            );
        }
        if t.mcp.enabled {
            let names: Vec<&str> = t.mcp.servers.iter().map(|s| s.name.as_str()).collect();
            tools.insert("mcp".into(), json!({ "servers": names }));
        }
        let mut report = json!({
            "ok": true,
            "version": env!("CARGO_PKG_VERSION"),
            "config_path": c.source.as_ref().map(|p| p.display().to_string()),
            "cwd": std::env::current_dir().ok().map(|p| p.display().to_string()),
            "channels": channels,
            "llm": { "provider": c.llm.provider, "model": c.llm.model, "prompts_dir": c.resolve_path(&c.llm.prompts_dir) },
            "memory": {
                "backend": c.memory.backend,
                "max_history_messages": c.memory.max_history_messages,
                "max_history_tokens": c.memory.max_history_tokens,
            },
            "tools": tools,
            "agents": {
                "directory": c.resolve_path(&c.orchestration.directory),
                "specialists_enabled": c.specialists_enabled(),
            },
        });
        if c.tasks.enabled {
            report["tasks"] = json!({ "backend": c.tasks.backend.as_str() });
        }
        if c.scheduler.prompts.enabled {
            report["scheduler"] = json!({ "poll_interval_seconds": c.scheduler.prompts.poll_interval_seconds });
        }
        if c.vault.enabled {
            report["vault"] = json!({ "enabled": true });
        }
        report
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
        "Report what this assistant instance runs: version, config path, channels, model, enabled tools and \
         their settings, agents and tasks. Never includes keys or tokens."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {}, "required": [], "additionalProperties": false })
    }

    async fn call(&self, _args: Args, _ctx: &ToolContext) -> ToolResult {
        Ok(self.report())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_reports_secrets() {
        let config = Config::from_toml(
            "[llm]\napi_key = \"sk-secret-123\"\nbase_url = \"https://user:pw@proxy.example/v1\"\n\
             [channels.telegram]\nbot_token = \"123:tg-secret\"\n[http]\nauth_token = \"web-secret\"\n",
            "t.toml",
            "/tmp",
            &|_| None,
        )
        .expect("config");
        let tool = GetSettings::new(Arc::new(config));
        let text = tool.call(Args {}, &ToolContext::default()).await.expect("report").to_string();
        for secret in ["sk-secret-123", "pw@proxy", "tg-secret", "web-secret"] {
            assert!(!text.contains(secret), "leaked {secret}: {text}");
        }
        assert!(text.contains("telegram"));
    }
}
