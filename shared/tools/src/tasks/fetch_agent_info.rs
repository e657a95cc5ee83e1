use super::{TaskService, available_providers};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

pub struct FetchAgentInfo {
    service: Arc<dyn TaskService>,
    /// Says which providers this build can call with the credentials it has; the service's answer is
    /// overridden with that, so the model is never offered a provider a task would then fail on.
    config: Arc<Config>,
}

impl FetchAgentInfo {
    pub fn new(service: Arc<dyn TaskService>, config: Arc<Config>) -> Self {
        Self { service, config }
    }
}

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
        let mut info = self.service.agent_info(args.agent_name.trim()).await?;
        if let Some(object) = info.as_object_mut() {
            object.insert("available_providers".into(), available_providers(&self.config));
        }
        Ok(info)
    }
}
