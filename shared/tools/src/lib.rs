//! Built-in tools, one file per tool, grouped in folders by family (`utility/`, `chat/`, `runtime/`, …). Each
//! family has a `register` function that adds the tools its config section enables; [`main_agent_tools`]
//! assembles the main agent's set from them.

pub mod chat;
pub mod edit;
pub mod exec;
pub mod files;
pub mod http;
pub mod runtime;
pub mod search;
mod services;
pub mod utility;

pub use services::ToolServices;

use minibot_agent::ToolRegistry;

/// Every built-in tool the config enables for the main agent, `pre_response` first.
pub fn main_agent_tools(services: &ToolServices) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    runtime::register(&mut registry, services);
    chat::register(&mut registry, services);
    utility::register(&mut registry, services);
    files::register(&mut registry, services);
    exec::register(&mut registry, services, true);
    edit::register(&mut registry, services);
    search::register(&mut registry, services);
    http::register(&mut registry, services);
    registry
}
