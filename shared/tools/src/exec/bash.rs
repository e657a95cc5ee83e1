use super::clamp_timeout;
use super::runner;
use super::sandbox::{self, Launch, SandboxScope, SandboxSettings};
use crate::files::{ManagedRoot, sha8, write_spill};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::BashSection;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Bash {
    config: BashSection,
    sandbox: SandboxSettings,
    scope: SandboxScope,
    /// Where long output is saved; `None` keeps it inline.
    spill_root: Option<Arc<ManagedRoot>>,
}

impl Bash {
    pub fn new(config: &BashSection, scope: SandboxScope, spill_root: Option<Arc<ManagedRoot>>) -> Self {
        let sandbox = sandbox::bash_settings(config);
        let spill_root = spill_root.filter(|_| config.spill_to_managed_file);
        Self { config: config.clone(), sandbox, scope, spill_root }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    command: String,
    #[serde(default)]
    timeout_seconds: Option<f64>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
}

impl Tool for Bash {
    type Args = Args;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> String {
        format!(
            "Run a shell command with /bin/bash -c. stdin is empty; output is capped at {} bytes; the command \
             and anything it started are killed after timeout_seconds (default {}, max {}).",
            self.config.max_output_bytes.bytes(),
            self.config.default_timeout_seconds,
            self.config.max_timeout_seconds
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": { "type": "string" },
                "timeout_seconds": { "type": ["number", "null"], "exclusiveMinimum": 0 },
                "cwd": { "type": ["string", "null"], "description": "Working folder (must exist); `~` is expanded." },
                "env": { "type": ["object", "null"], "additionalProperties": { "type": "string" },
                         "description": "Extra environment variables." }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        if args.command.trim().is_empty() {
            return Err(ToolError::invalid_arguments("command must not be empty"));
        }
        if args.command.contains('\0') {
            return Err(ToolError::invalid_arguments("command contains a NUL byte"));
        }
        let timeout =
            clamp_timeout(args.timeout_seconds, self.config.default_timeout_seconds, self.config.max_timeout_seconds)?;
        let applied = sandbox::plan(&self.sandbox, &self.scope)
            .await
            .map_err(|e| ToolError::respond("sandbox_unavailable", e.to_string()))?;
        // A contained command cannot write the process's own folder; it starts where it can (the managed root).
        let contained_home = applied.contain.as_ref().and(self.scope.read_write.first());
        let cwd = resolve_cwd(args.cwd.as_deref(), contained_home)?;
        let extra: Vec<(String, String)> = args.env.unwrap_or_default().into_iter().collect();
        if extra.iter().any(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0')) {
            return Err(ToolError::invalid_arguments("env names must be non-empty without `=` or NUL"));
        }
        let flag = if self.config.pass_parent_env { "-lc" } else { "-c" };
        let temp = sandbox::private_temp(&applied, "bash-")
            .map_err(|e| ToolError::respond("process_start_failed", format!("cannot make a temp folder: {e}")))?;
        let env = runner::build_env(self.config.pass_parent_env, &self.config.env_allowlist, &extra);
        let command = Launch {
            program: "/bin/bash".into(),
            args: vec![flag.into(), args.command.clone()],
            env,
            cwd: cwd.clone(),
            stdin: None,
            report_tag: None,
        };
        let output =
            applied.run(command, temp.path(), &[], timeout, self.config.max_output_bytes.bytes() as usize).await?;
        drop(temp);
        if let Some(error) = sandbox::setup_failure(&applied, &output) {
            return Err(error);
        }

        let mut out = Map::new();
        out.insert("ok".into(), json!(output.success()));
        applied.report_limit(&output, &mut out);
        out.insert("exit_code".into(), json!(output.exit_code));
        if let Some(signal) = output.signal {
            out.insert("signal".into(), json!(signal));
        }
        let combined = output.stdout.len() + output.stderr.len();
        let spilled = match &self.spill_root {
            Some(root) if combined as u64 > self.config.spill_after_chars => {
                let text = format!("{}{}", output.stdout, output.stderr);
                let name = format!("bash-{}-", sha8(text.as_bytes()));
                write_spill(root, &self.config.spill_subdir, &name, ".txt", text.as_bytes())
                    .ok()
                    .map(|path| (path, text))
            }
            _ => None,
        };
        match spilled {
            Some((path, text)) => {
                let preview: String = text.chars().take(self.config.spill_preview_chars as usize).collect();
                out.insert("stdout_storage".into(), json!("managed_file"));
                out.insert("stdout_file_path".into(), json!(path.display()));
                out.insert("stdout_file_absolute_path".into(), json!(path.absolute.display().to_string()));
                out.insert("stdout_bytes_written".into(), json!(text.len()));
                out.insert("stdout_preview".into(), json!(preview));
                out.insert(
                    "stdout_notice".into(),
                    json!(format!(
                        "Output was {} bytes, more than {}; stdout and stderr were saved to stdout_file_path. Read \
                         it with code_read, grep or read_file.",
                        text.len(),
                        self.config.spill_after_chars
                    )),
                );
            }
            None => {
                out.insert("stdout".into(), json!(output.stdout));
                out.insert("stderr".into(), json!(output.stderr));
            }
        }
        out.insert("timed_out".into(), json!(output.timed_out));
        out.insert("truncated".into(), json!(output.truncated));
        out.insert("duration_ms".into(), json!(output.duration.as_millis() as u64));
        out.insert("cwd".into(), json!(cwd.display().to_string()));
        out.insert("command".into(), json!(args.command));
        applied.describe(&mut out);
        Ok(Value::Object(out))
    }
}

/// The folder the model named, else `home` (the managed root of a contained call), else the process's own.
fn resolve_cwd(written: Option<&str>, home: Option<&PathBuf>) -> Result<PathBuf, ToolError> {
    let Some(written) = written.filter(|w| !w.trim().is_empty()) else {
        if let Some(home) = home.filter(|h| h.is_dir()) {
            return Ok(home.clone());
        }
        return std::env::current_dir()
            .map_err(|e| ToolError::respond("invalid_cwd", format!("cannot read the current folder: {e}")));
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = match (written.strip_prefix("~/"), written == "~", home) {
        (Some(rest), _, Some(home)) => home.join(rest),
        (None, true, Some(home)) => home,
        _ => PathBuf::from(written),
    };
    if !path.is_dir() {
        return Err(ToolError::respond("invalid_cwd", format!("cwd {written} does not exist or is not a folder")));
    }
    Ok(path)
}
