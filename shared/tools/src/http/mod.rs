//! Network: `http_request`.

mod destination;
mod entities;
pub mod html;
mod http_request;

pub use http_request::HttpRequest;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    let section = &services.config.tools.http_client;
    if !section.enabled {
        return;
    }
    match HttpRequest::new(section, services.files.clone()) {
        Ok(tool) => registry.register(dyn_tool(tool)),
        Err(err) => {
            tracing::warn!(error = %err, "http_request disabled: cannot build the HTTP client")
        }
    }
}
