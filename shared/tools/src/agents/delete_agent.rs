use super::{AgentService, answer};
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(
    /// `delete_agent`: removes a model-authored specialist (never an owner-written one).
    DeleteAgent { service: Arc<dyn AgentService> }
);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    name: String,
}

impl Tool for DeleteAgent {
    type Args = Args;

    fn name(&self) -> &str {
        "delete_agent"
    }

    fn description(&self) -> String {
        "Delete a specialist created with create_agent. Owner-written specialists cannot be deleted.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "name": { "type": "string", "description": "The agent's exact name." } },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let name = args.name.trim();
        Ok(answer("delete", Some(name), self.service.delete(name).await))
    }
}
