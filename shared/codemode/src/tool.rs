//! `run_tools_script`: the tool the model calls with a script.

use crate::catalog::Catalog;
use crate::clock::ScriptClock;
use crate::host::{self, Host};
use crate::protocol::{Ending, FailureCode, Setup, ToolInfo, millis};
use minibot_agent::{NestedCalls, Tool, ToolContext, ToolError, ToolResult};
use minibot_config::CodemodeSection;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// `run_tools_script` over the tools in its catalog.
pub struct RunToolsScript {
    catalog: Arc<Catalog>,
    /// The catalog as each script's process receives it.
    infos: Vec<ToolInfo>,
    settings: Settings,
    description: String,
}

/// `[tools.codemode]` as a script uses it.
#[derive(Debug, Clone)]
struct Settings {
    timeout: Duration,
    max_timeout: Duration,
    max_tool_calls: u32,
    max_memory: usize,
    max_output_chars: usize,
}

impl RunToolsScript {
    pub fn new(section: &CodemodeSection, catalog: Catalog) -> Self {
        let max_timeout = Duration::from_secs(section.max_timeout_seconds.max(1));
        let settings = Settings {
            timeout: Duration::from_secs(section.timeout_seconds.max(1)).min(max_timeout),
            max_timeout,
            max_tool_calls: section.max_tool_calls,
            max_memory: usize::try_from(section.max_memory_mb).unwrap_or(usize::MAX).saturating_mul(1024 * 1024),
            max_output_chars: usize::try_from(section.max_output_chars).unwrap_or(usize::MAX).max(1),
        };
        let description = describe(&catalog, &settings);
        Self { infos: catalog.infos(), catalog: Arc::new(catalog), settings, description }
    }

    /// The names of the tools its scripts can call.
    pub fn callable(&self) -> Vec<String> {
        self.catalog.names()
    }
}

fn describe(catalog: &Catalog, settings: &Settings) -> String {
    format!(
        "Run a short Python script that calls your other tools and returns only what matters: nested results \
         stay out of your context. Call tools as `await tools.<name>(keyword=value)` (keyword arguments only); \
         independent calls run at the same time with `asyncio.gather(...)`. A tool that fails raises ValueError \
         (rejected arguments), PermissionError (not approved) or RuntimeError; MCP tools return a dict with \
         `ok` and `result` instead of raising. `print` what you want to read and end on an expression (or a \
         top-level `return`) for the value. Helpers: `list_tools(query)`, `describe_tool(name)`, \
         `text(value, limit=2000, unit=\"chars\"|\"lines\"|\"bytes\")`. Only a subset of Python: no files, \
         network, environment or third-party imports (json, re, math, datetime, asyncio are there). Limits: {} \
         s by default (timeout_seconds up to {} s), {} tool calls, {} MiB, {} characters of output and of \
         result.\nTools:\n{}",
        settings.timeout.as_secs(),
        settings.max_timeout.as_secs(),
        settings.max_tool_calls,
        settings.max_memory / (1024 * 1024),
        settings.max_output_chars,
        catalog.listing()
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    code: String,
    #[serde(default)]
    timeout_seconds: Option<f64>,
}

impl Tool for RunToolsScript {
    type Args = Args;

    fn name(&self) -> &str {
        crate::catalog::TOOL_NAME
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "code": { "type": "string", "description": "The Python script." },
                "timeout_seconds": {
                    "type": ["number", "null"],
                    "description": "Time limit for the whole script, tool calls included; null keeps the default."
                }
            },
            "required": ["code"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        if args.code.trim().is_empty() {
            return Err(ToolError::invalid_arguments("code is empty"));
        }
        let timeout = match args.timeout_seconds {
            Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
                Duration::from_secs_f64(seconds.min(self.settings.max_timeout.as_secs_f64()))
            }
            _ => self.settings.timeout,
        };
        let clock = ScriptClock::start(timeout);
        let ending = self.run(args.code, ctx, &clock).await;
        answer(ending)
    }
}

impl RunToolsScript {
    async fn run(&self, code: String, ctx: &ToolContext, clock: &Arc<ScriptClock>) -> Ending {
        let Some(program) = crate::locate::helper() else {
            tracing::warn!("codemode: no program to run scripts in (call minibot_codemode::serve_if_asked in main)");
            return Ending::failed(FailureCode::Sandbox, "there is no program to run the script in".into());
        };
        let setup = Setup {
            code,
            budget_ms: millis(clock.budget()),
            remaining_ms: millis(clock.remaining()),
            max_tool_calls: self.settings.max_tool_calls,
            max_memory: self.settings.max_memory,
            max_output_chars: self.settings.max_output_chars,
            tools: self.infos.clone(),
        };
        // Outside an agent run (a direct call) there is no gate and nobody watches the events.
        let nested =
            ctx.nested.clone().unwrap_or_else(|| NestedCalls::new(None, tokio::sync::mpsc::unbounded_channel().0));
        let context = ToolContext {
            approver: ctx.approver.clone().map(|approver| clock.pausing(approver)),
            nested: None,
            ..ctx.clone()
        };
        let host = Host { catalog: Arc::clone(&self.catalog), clock: Arc::clone(clock), nested, context };
        host::run(host, &program, &setup).await
    }
}

/// The tool's result for how the script ended (its output and value already cut in the script's process).
fn answer(ending: Ending) -> ToolResult {
    let failure = match ending.result {
        Ok(result) => return Ok(json!({ "ok": true, "output": ending.output, "result": result })),
        Err(failure) => failure,
    };
    if failure.code == FailureCode::Denied {
        return Err(ToolError::respond(minibot_agent::APPROVAL_DENIED_CODE, failure.error));
    }
    let mut out = json!({
        "ok": false,
        "error_code": failure.code.as_str(),
        "error": failure.error,
        "output": ending.output,
    });
    if !ending.tool_errors.is_empty() {
        out["tool_errors"] =
            ending.tool_errors.iter().map(|(tool, code)| json!({ "tool": tool, "error_code": code })).collect();
    }
    if ending.tool_errors_omitted > 0 {
        out["tool_errors_omitted"] = json!(ending.tool_errors_omitted);
    }
    if failure.code == FailureCode::Script
        && let Some(name) = ending.unknown.first()
    {
        out["hint"] = json!(format!(
            "`{name}` is not a tool this script can call: tools are called as `await tools.<name>(...)` and \
             list_tools() lists them"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interpreter_that_stopped_without_an_end_is_a_sandbox_failure() {
        let out = answer(Ending::failed(FailureCode::Sandbox, "stopped".into())).unwrap();
        assert_eq!(out["ok"], false);
        assert_eq!(out["error_code"], "codemode:sandbox_failed");
    }
}
