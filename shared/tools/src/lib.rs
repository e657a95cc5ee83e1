//! Built-in tools, one file per tool, grouped in folders by family (`utility/`, `chat/`, `runtime/`, …). Each
//! family has a `register` function that adds the tools its config section enables; [`main_agent_tools`]
//! assembles the main agent's set from them.

pub mod chat;
pub mod runtime;
mod services;
pub mod tasks;
pub mod utility;

pub use services::ToolServices;

use minibot_agent::ToolRegistry;

/// Every built-in tool the config enables for the main agent, `pre_response` first.
pub fn main_agent_tools(services: &ToolServices) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    runtime::register(&mut registry, services);
    chat::register(&mut registry, services);
    utility::register(&mut registry, services);
    registry
}

/// Every built-in tool a task worker may be granted; specialists filter it by their own policy. Tools that
/// need a conversation (chat history) are absent.
pub fn worker_tools(services: &ToolServices) -> ToolRegistry {
    let services = ToolServices { store: None, ..services.clone() };
    main_agent_tools(&services)
}
