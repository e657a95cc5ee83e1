//! Tools about the running instance and the reply itself.

mod get_settings;
mod list_secrets;
mod pre_response;

pub use get_settings::{GetSettings, Running, RunningFacts};
pub use list_secrets::ListSecrets;
pub use pre_response::PreResponse;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    registry.register(dyn_tool(PreResponse::new(services.files.clone())));
    registry.register(dyn_tool(GetSettings::new(services.config.clone(), services.running.clone())));
    // The vault is unlocked at start-up whenever it is on, so on means there are names to list.
    if services.config.vault.enabled {
        registry.register(dyn_tool(ListSecrets::new(services.config.clone())));
    }
}
