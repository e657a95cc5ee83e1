//! Tools about the running instance and the reply itself.

mod get_settings;
mod pre_response;

pub use get_settings::GetSettings;
pub use pre_response::PreResponse;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    registry.register(dyn_tool(PreResponse));
    registry.register(dyn_tool(GetSettings::new(services.config.clone())));
}
