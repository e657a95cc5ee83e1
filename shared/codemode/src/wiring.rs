//! Putting `run_tools_script` into an agent's tools. With it, the tools a script can call are no longer offered
//! as direct calls: every use of them goes through a script (reference 3.15). The tools scripts never call stay
//! direct.

use crate::catalog::{Catalog, TOOL_NAME};
use crate::tool::RunToolsScript;
use minibot_agent::{Patterns, ToolRegistry, dyn_tool};
use minibot_config::CodemodeSection;

/// A bad `exclude` pattern, named by its key.
#[derive(Debug, thiserror::Error)]
#[error("tools.codemode.exclude: {0}")]
pub struct ExcludeError(String);

/// `tools` with `run_tools_script` over them: the tools a script may call are replaced by it, the others stay.
/// Unchanged when no tool is left for a script to call.
pub fn with_codemode(tools: &ToolRegistry, section: &CodemodeSection) -> Result<ToolRegistry, ExcludeError> {
    let exclude = Patterns::new(&section.exclude).map_err(|e| ExcludeError(e.to_string()))?;
    let catalog = Catalog::build(tools, &exclude);
    if catalog.is_empty() {
        return Ok(tools.clone());
    }
    let callable = catalog.names();
    let mut out = ToolRegistry::new();
    for name in tools.names() {
        if callable.contains(&name) || name == TOOL_NAME {
            continue;
        }
        if let Some(tool) = tools.get(&name) {
            out.register(std::sync::Arc::clone(tool));
        }
    }
    out.register(dyn_tool(RunToolsScript::new(section, catalog)));
    Ok(out)
}
