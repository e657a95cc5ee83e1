//! Host execution: `bash`, `python_execute` and `python_environment_info`, all on the same process runner
//! (`runner.rs`) and sandbox planner (`sandbox.rs`).

mod artifacts;
mod bash;
pub mod limits;
mod python_environment_info;
mod python_execute;
pub mod runner;
pub mod sandbox;

pub use bash::Bash;
pub use python_environment_info::PythonEnvironmentInfo;
pub use python_execute::PythonExecute;

use crate::ToolServices;
use minibot_agent::{ToolError, ToolRegistry, dyn_tool};
use std::time::Duration;

/// Adds the host-execution tools the config enables. `spill` is off for workers, which keep bash output
/// inline (MiniBot: no spill storage in workers).
pub fn register(registry: &mut ToolRegistry, services: &ToolServices, spill: bool) {
    let tools = &services.config.tools;
    if !tools.python_exec.enabled && !tools.bash.enabled {
        return;
    }
    let scope = sandbox::SandboxScope::from_config(&services.config, services.files.as_deref());
    if tools.python_exec.enabled {
        let python = PythonExecute::new(&services.config, scope.clone(), services.files.clone());
        registry.register(dyn_tool(PythonEnvironmentInfo::new(python.runtime())));
        registry.register(dyn_tool(python));
    }
    if tools.bash.enabled {
        let files = if spill { services.files.clone() } else { None };
        registry.register(dyn_tool(Bash::new(&tools.bash, scope, files)));
    }
}

/// The timeout the caller asked for, clamped to `(0, max]`; `default` when absent.
pub(crate) fn clamp_timeout(requested: Option<f64>, default: u64, max: u64) -> Result<Duration, ToolError> {
    let seconds = requested.unwrap_or(default as f64);
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(ToolError::invalid_arguments("timeout_seconds must be a positive number"));
    }
    Ok(Duration::from_secs_f64(seconds.min(max as f64)))
}

pub(crate) fn run_error(err: runner::RunError) -> ToolError {
    ToolError::respond("process_start_failed", err.to_string())
}
