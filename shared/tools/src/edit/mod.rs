//! Editing tools: `apply_patch` (the parser and engine live in the `minibot-apply-patch` crate).

mod apply_patch;

pub use apply_patch::ApplyPatch;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    if !services.config.tools.apply_patch.enabled {
        return;
    }
    match ApplyPatch::new(&services.config) {
        Ok(tool) => registry.register(dyn_tool(tool)),
        Err(err) => {
            tracing::warn!(error = %err, "apply_patch disabled: workspace_root is unusable")
        }
    }
}
