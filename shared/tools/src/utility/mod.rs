//! Small stateless tools: time, arithmetic, waiting.

mod calculate_expression;
mod current_datetime;
mod wait;

pub use calculate_expression::{CalculateExpression, evaluate};
pub use current_datetime::CurrentDatetime;
pub use wait::Wait;

use crate::ToolServices;
use minibot_agent::{ToolRegistry, dyn_tool};

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    let tools = &services.config.tools;
    if tools.time.enabled {
        registry.register(dyn_tool(CurrentDatetime::new(&tools.time)));
    }
    if tools.calculator.enabled {
        registry.register(dyn_tool(CalculateExpression::new(&tools.calculator)));
    }
    if tools.wait.enabled {
        registry.register(dyn_tool(Wait::new(&tools.wait)));
    }
}
