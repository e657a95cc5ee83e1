//! Search over managed files: `grep`, built on ripgrep's searcher, matcher and directory walker crates.

mod grep;

pub use grep::{Grep, GrepMatch, GrepOptions, GrepOutcome, search};

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};
use std::sync::Arc;

/// Adds `grep` when `[tools.grep]` and `[tools.file_storage]` are both on.
pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    let Some(root) = &services.files else { return };
    if services.config.tools.grep.enabled {
        registry.register(dyn_tool(Grep::new(Arc::clone(root), &services.config.tools.grep)));
    }
}
