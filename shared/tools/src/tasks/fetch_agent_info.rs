use super::TaskService;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(FetchAgentInfo { service: Arc<dyn TaskService> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    agent_name: String,
}

impl Tool for FetchAgentInfo {
    type Args = Args;

    fn name(&self) -> &str {
        "fetch_agent_info"
    }

    fn description(&self) -> String {
        "Read a specialist's definition (description, system prompt, model defaults) and the providers a \
         delegation may override to."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "agent_name": { "type": "string" } },
            "required": ["agent_name"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        self.service.agent_info(args.agent_name.trim()).await
    }
}
