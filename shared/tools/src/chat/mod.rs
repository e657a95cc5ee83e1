//! Tools over the current conversation's stored history.

mod chat_history_info;
mod chat_history_trim;

pub use chat_history_info::ChatHistoryInfo;
pub use chat_history_trim::ChatHistoryTrim;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    if let Some(store) = &services.store {
        registry.register(dyn_tool(ChatHistoryInfo::new(store.clone())));
        registry.register(dyn_tool(ChatHistoryTrim::new(store.clone())));
    }
}

fn store_error(error: minibot_store::StoreError) -> minibot_agent::ToolError {
    minibot_agent::ToolError::respond("chat_history:store_failed", format!("the history store failed: {error}"))
}
