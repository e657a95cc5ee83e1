use super::{AgentService, answer};
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(
    /// `reload_agents`: the owner edited definition files by hand; read them again without a restart.
    ReloadAgents { service: Arc<dyn AgentService> }
);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

impl Tool for ReloadAgents {
    type Args = Args;

    fn name(&self) -> &str {
        "reload_agents"
    }

    fn description(&self) -> String {
        "Re-read the specialist agent definition files and report which names were added, removed or updated. \
         If a file does not load, the previous roster stays and the error says why."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {}, "required": [], "additionalProperties": false })
    }

    async fn call(&self, _args: Args, _ctx: &ToolContext) -> ToolResult {
        Ok(answer("reload", None, self.service.reload().await))
    }
}
