use super::python_execute::PythonRuntime;
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs under the same interpreter, flags and sandbox as `python_execute`, so what it reports is what code
/// will see.
const PROBE: &str = r#"
import json, platform, sys
info = {"runtime_executable": sys.executable, "python_version": platform.python_version(),
        "implementation": platform.python_implementation()}
if sys.argv[1] == "1":
    from importlib import metadata
    seen = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    info["packages"] = [seen[k] for k in sorted(seen)]
print(json.dumps(info))
"#;

pub struct PythonEnvironmentInfo {
    runtime: Arc<PythonRuntime>,
}

impl PythonEnvironmentInfo {
    pub fn new(runtime: Arc<PythonRuntime>) -> Self {
        Self { runtime }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    include_packages: Option<bool>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    name_prefix: Option<String>,
}

impl Tool for PythonEnvironmentInfo {
    type Args = Args;

    fn name(&self) -> &str {
        "python_environment_info"
    }

    fn description(&self) -> String {
        "Report the Python used by python_execute: version, implementation and installed packages.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "include_packages": { "type": ["boolean", "null"] },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT },
                "name_prefix": { "type": ["string", "null"], "description": "Only packages whose name starts with this (case-insensitive)." }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let include = args.include_packages.unwrap_or(true);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
        let argv = vec!["-c".to_string(), PROBE.to_string(), if include { "1" } else { "0" }.to_string()];
        let (output, applied, ()) = self.runtime.run(argv, None, PROBE_TIMEOUT, None, |_| ()).await?;
        if !output.success() {
            return Err(ToolError::respond(
                "python_unavailable",
                format!(
                    "the probe failed (exit {:?}, timed out {}): {}",
                    output.exit_code,
                    output.timed_out,
                    output.stderr.trim()
                ),
            ));
        }
        let info: Value = serde_json::from_str(output.stdout.trim()).map_err(|e| {
            ToolError::respond("python_unavailable", format!("the probe printed something unexpected: {e}"))
        })?;
        let prefix = args.name_prefix.clone().unwrap_or_default().to_lowercase();
        let all: Vec<String> = info["packages"]
            .as_array()
            .map(|list| list.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let matching: Vec<String> = all.into_iter().filter(|p| p.to_lowercase().starts_with(&prefix)).collect();
        let count = matching.len();
        let packages: Vec<String> = matching.into_iter().take(limit).collect();
        let mut out = serde_json::Map::new();
        out.insert("ok".into(), json!(true));
        out.insert("runtime_executable".into(), info["runtime_executable"].clone());
        out.insert("python_version".into(), info["python_version"].clone());
        out.insert("implementation".into(), info["implementation"].clone());
        out.insert("include_packages".into(), json!(include));
        out.insert("name_prefix".into(), json!(args.name_prefix));
        out.insert("limit".into(), json!(limit));
        out.insert("package_count".into(), json!(if include { count } else { 0 }));
        out.insert("truncated_packages".into(), json!(include && count > limit));
        out.insert("packages".into(), json!(packages));
        out.insert("duration_ms".into(), json!(output.duration.as_millis() as u64));
        applied.describe(&mut out);
        out.insert("python_executable".into(), json!(self.runtime.python));
        Ok(Value::Object(out))
    }
}
