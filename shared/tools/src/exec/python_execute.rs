use super::artifacts::ArtifactPlan;
use super::clamp_timeout;
use super::runner;
use super::sandbox::{self, Launch, SandboxScope, SandboxSettings, find_program};
use crate::files::ManagedRoot;
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::{Config, PythonExecSection, SandboxMode};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How `python_execute` and `python_environment_info` start Python.
#[derive(Debug, Clone)]
pub struct PythonRuntime {
    pub config: PythonExecSection,
    pub sandbox: SandboxSettings,
    pub scope: SandboxScope,
    /// The interpreter: `python_path`, else `<venv_path>/bin/python`, else `python3` on PATH.
    pub python: String,
    /// Resolved `artifacts_jail_shared_dir`.
    pub jail_shared_dir: Option<PathBuf>,
}

impl PythonRuntime {
    fn new(config: &Config, scope: SandboxScope) -> Self {
        let section = config.tools.python_exec.clone();
        let python = match (&section.python_path, &section.venv_path) {
            (Some(path), _) => config.resolve_path(path).display().to_string(),
            (None, Some(venv)) => config.resolve_path(venv).join("bin").join("python").display().to_string(),
            (None, None) => find_program("python3").map_or_else(|| "python3".into(), |p| p.display().to_string()),
        };
        let jail_shared_dir = section.artifacts_jail_shared_dir.as_deref().map(|d| config.resolve_path(d));
        let sandbox = sandbox::python_settings(&section);
        Self { config: section, sandbox, scope, python, jail_shared_dir }
    }

    /// Runs `python -u -B -I <args>` in a fresh temp folder (inside `parent` when given); `inspect` sees the
    /// folder, through a handle taken before the code ran, before it is deleted.
    pub(crate) async fn run<T>(
        &self,
        args: Vec<String>,
        stdin: Option<Vec<u8>>,
        timeout: std::time::Duration,
        parent: Option<&Path>,
        inspect: impl FnOnce(&cap_std::fs::Dir) -> T,
    ) -> Result<(runner::RunOutput, sandbox::AppliedSandbox, T), ToolError> {
        let applied = sandbox::plan(&self.sandbox, &self.scope)
            .await
            .map_err(|e| ToolError::respond("sandbox_unavailable", e.to_string()))?;
        let cannot =
            |e: std::io::Error| ToolError::respond("python_exec_failed", format!("cannot create a run folder: {e}"));
        let dir = match parent {
            Some(parent) => {
                let mut builder = tempfile::Builder::new();
                builder.prefix("minibot_pyexec_");
                std::fs::create_dir_all(parent).and_then(|()| builder.tempdir_in(parent)).map(sandbox::Scratch::from)
            }
            None => sandbox::private_temp(&applied, "minibot_pyexec_"),
        }
        .map_err(cannot)?;
        let run_handle =
            cap_std::fs::Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).map_err(cannot)?;
        let temp = sandbox::private_temp(&applied, "python-tmp-").map_err(cannot)?;
        let mut argv = vec!["-u".to_string(), "-B".into(), "-I".into()];
        argv.extend(args);
        let extra = vec![("PYTHONUNBUFFERED".to_string(), "1".to_string())];
        let command = Launch {
            program: self.python.clone(),
            args: argv,
            env: runner::build_env(self.config.pass_parent_env, &self.config.env_allowlist, &extra),
            cwd: dir.path().to_path_buf(),
            stdin,
            report_tag: None,
        };
        let output = applied
            .run(command, temp.path(), &[dir.path()], timeout, self.config.max_output_bytes.bytes() as usize)
            .await?;
        drop(temp);
        if let Some(error) = sandbox::setup_failure(&applied, &output) {
            return Err(error);
        }
        let seen = inspect(&run_handle);
        Ok((output, applied, seen))
    }
}

pub struct PythonExecute {
    runtime: Arc<PythonRuntime>,
    files: Option<Arc<ManagedRoot>>,
}

impl PythonExecute {
    /// `scope`: what a contained call may write and may not read ([`SandboxScope::from_config`]).
    pub fn new(config: &Config, scope: SandboxScope, files: Option<Arc<ManagedRoot>>) -> Self {
        Self { runtime: Arc::new(PythonRuntime::new(config, scope)), files }
    }

    pub fn runtime(&self) -> Arc<PythonRuntime> {
        Arc::clone(&self.runtime)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    code: String,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<f64>,
    #[serde(default)]
    save_artifacts: Option<bool>,
    #[serde(default)]
    artifact_globs: Option<Vec<String>>,
    #[serde(default)]
    artifact_subdir: Option<String>,
    #[serde(default)]
    max_artifacts: Option<i64>,
}

impl Tool for PythonExecute {
    type Args = Args;

    fn name(&self) -> &str {
        "python_execute"
    }

    fn description(&self) -> String {
        let c = &self.runtime.config;
        format!(
            "Run Python code on the host (isolated interpreter, fresh temporary working folder, sandbox mode {}). \
             Print results to stdout. Timeout default {} s, max {} s; output capped at {} bytes. With \
             save_artifacts=true, files the code writes in its working folder matching artifact_globs are copied \
             to managed files.",
            c.sandbox_mode.as_str(),
            c.default_timeout_seconds,
            c.max_timeout_seconds,
            c.max_output_bytes.bytes()
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "code": { "type": "string" },
                "stdin": { "type": ["string", "null"] },
                "timeout_seconds": { "type": ["number", "null"], "exclusiveMinimum": 0 },
                "save_artifacts": { "type": ["boolean", "null"] },
                "artifact_globs": { "type": ["array", "null"], "items": { "type": "string" } },
                "artifact_subdir": { "type": ["string", "null"] },
                "max_artifacts": { "type": ["integer", "null"], "minimum": 1 }
            },
            "required": ["code"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let c = &self.runtime.config;
        if args.code.trim().is_empty() {
            return Err(ToolError::invalid_arguments("code must not be empty"));
        }
        if args.code.len() as u64 > c.max_code_bytes.bytes() {
            return Err(ToolError::respond(
                "code_too_large",
                format!("code is {} bytes; the limit is {}", args.code.len(), c.max_code_bytes.bytes()),
            ));
        }
        if args.code.contains('\0') {
            return Err(ToolError::invalid_arguments("code contains a NUL byte"));
        }
        let timeout = clamp_timeout(args.timeout_seconds, c.default_timeout_seconds, c.max_timeout_seconds)?;
        let plan = if args.save_artifacts.unwrap_or(false) {
            Some(ArtifactPlan::new(
                c,
                self.files.as_deref(),
                args.artifact_globs.as_deref(),
                args.artifact_subdir.as_deref(),
                args.max_artifacts,
            )?)
        } else {
            None
        };
        let jailed = c.sandbox_mode == SandboxMode::Jail;
        let parent = if plan.is_some() && jailed {
            match (&self.runtime.jail_shared_dir, c.artifacts_allow_in_jail) {
                (Some(dir), true) => Some(dir.clone()),
                _ => {
                    return Err(ToolError::respond(
                        "artifacts_not_supported_in_jail",
                        "artifacts cannot be exported from the jail unless artifacts_allow_in_jail is on and \
                         artifacts_jail_shared_dir is set",
                    ));
                }
            }
        } else {
            None
        };
        let stdin = args.stdin.map(String::into_bytes);
        let args_v = vec!["-c".to_string(), args.code];
        let (output, applied, artifacts) = self
            .runtime
            .run(args_v, stdin, timeout, parent.as_deref(), |run| plan.as_ref().map(|plan| plan.export(c, run)))
            .await?;
        let mut out = Map::new();
        out.insert("ok".into(), json!(output.success()));
        applied.report_limit(&output, &mut out);
        out.insert("exit_code".into(), json!(output.exit_code));
        out.insert("stdout".into(), json!(output.stdout));
        out.insert("stderr".into(), json!(output.stderr));
        out.insert("timed_out".into(), json!(output.timed_out));
        out.insert("truncated".into(), json!(output.truncated));
        applied.describe(&mut out);
        let (saved, skipped) = artifacts.unwrap_or_default();
        out.insert("artifacts_saved".into(), Value::Array(saved));
        out.insert("artifacts_skipped".into(), Value::Array(skipped));
        out.insert("duration_ms".into(), json!(output.duration.as_millis() as u64));
        out.insert("python_executable".into(), json!(self.runtime.python));
        Ok(Value::Object(out))
    }
}
