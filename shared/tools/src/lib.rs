//! Built-in tools, one file per tool, grouped in folders by family (`utility/`, `chat/`, `runtime/`, `files/`,
//! `search/`, `exec/`, `edit/`, `http/`, `graph/`, `docs/`). Each family has a `register` function that adds the
//! tools its config section enables; [`main_agent_tools`] and [`worker_generic_tools`] assemble the two standard sets from them.

/// Declares a tool that holds one shared dependency, with its `new` constructor:
/// `tool_struct!(ReadFile { root: Arc<ManagedRoot> });` gives `pub struct ReadFile { root: .. }` and
/// `ReadFile::new(root)`. Tools with more state write theirs out.
macro_rules! tool_struct {
    ($(#[$meta:meta])* $name:ident { $field:ident: $ty:ty }) => {
        $(#[$meta])*
        pub struct $name {
            $field: $ty,
        }

        impl $name {
            pub fn new($field: $ty) -> Self {
                Self { $field }
            }
        }
    };
}

pub mod agents;
pub mod chat;
pub mod docs;
pub mod edit;
pub mod exec;
pub mod files;
pub mod graph;
pub mod http;
pub mod memory;
pub mod runtime;
pub mod scheduler;
pub mod search;
mod services;
pub mod skills;
pub mod tasks;
pub mod utility;

pub use services::{Closers, ToolServices};

use minibot_agent::{ToolRegistry, dyn_tool, wrap_with_spill};

/// Every built-in tool the config enables for the main agent, `pre_response` first, with long results
/// spilled to managed files (`[tools.tool_output_spill]`).
pub fn main_agent_tools(services: &ToolServices) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    runtime::register(&mut registry, services);
    chat::register(&mut registry, services);
    utility::register(&mut registry, services);
    files::register(&mut registry, services, true);
    search::register(&mut registry, services);
    exec::register(&mut registry, services, true);
    edit::register(&mut registry, services);
    http::register(&mut registry, services);
    memory::register(&mut registry, services);
    scheduler::register(&mut registry, services);
    graph::register(&mut registry, services);
    docs::register(&mut registry, services);
    skills::register(&mut registry, services, true);
    services.running.set_tools(registry.names(), Vec::new());
    with_spill(&registry, services)
}

/// The tool set of a generic task worker (a task without a named agent), MiniBot's list minus the tool that
/// does not exist yet (`transcribe_audio`): HTTP, managed files, grep, host execution, `apply_patch`,
/// `get_settings`, the utility tools and `list_skills` / `activate_skill` (never `install_skill`). Left out on
/// purpose:
/// - `send_file` and `self_insert_artifact`: a worker has no channel and no main-agent context to act on
///   their directives, so offering them would only produce results that claim a delivery that never happens;
/// - chat history tools and `pre_response`: a worker has no conversation;
/// - bash output spill (`[tools.bash] spill_to_managed_file`), as in MiniBot. The generic output spill still
///   applies.
pub fn worker_generic_tools(services: &ToolServices) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let tools = &services.config.tools;
    if tools.http_client.enabled {
        http::register(&mut registry, services);
    }
    files::register(&mut registry, services, false);
    search::register(&mut registry, services);
    exec::register(&mut registry, services, false);
    edit::register(&mut registry, services);
    registry.register(dyn_tool(runtime::GetSettings::new(
        std::sync::Arc::clone(&services.config),
        std::sync::Arc::clone(&services.running),
    )));
    utility::register(&mut registry, services);
    skills::register(&mut registry, services, false);
    services.running.set_tools(registry.names(), Vec::new());
    with_spill(&registry, services)
}

fn with_spill(registry: &ToolRegistry, services: &ToolServices) -> ToolRegistry {
    wrap_with_spill(registry, &services.config.tools.tool_output_spill, services.spill_store().as_ref())
}

/// Every built-in tool a specialist may be granted in a worker (its `tools_allow` / `tools_deny` filter this):
/// the generic worker set plus `pre_response`.
pub fn worker_tools(services: &ToolServices) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(dyn_tool(runtime::PreResponse::new(services.files.clone())));
    let generic = worker_generic_tools(services);
    for name in generic.names() {
        if let Some(tool) = generic.get(&name) {
            registry.register(std::sync::Arc::clone(tool));
        }
    }
    registry
}
