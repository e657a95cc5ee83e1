//! `read_docs`: this version's user manual, compiled in (see `build.rs`), for the main agent.

mod read_docs;

pub use read_docs::ReadDocs;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

/// The bundled skill that MiniBot ties `read_docs` to; listing it in `[tools.skills] native_disabled` (or
/// turning `native` off) removes the tool.
pub const DOCS_SKILL: &str = "minibot-docs";

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    let skills = &services.config.tools.skills;
    if skills.native && !skills.native_disabled.iter().any(|name| name == DOCS_SKILL) {
        registry.register(dyn_tool(ReadDocs::bundled()));
    }
}
