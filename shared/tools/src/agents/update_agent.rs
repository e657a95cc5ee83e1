use super::{AgentService, DefinitionArgs, answer, definition_parameters};
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde_json::Value;
use std::sync::Arc;

tool_struct!(
    /// `update_agent`: replaces a model-authored specialist's definition, within the owner's ceiling.
    UpdateAgent { service: Arc<dyn AgentService> }
);

impl Tool for UpdateAgent {
    type Args = DefinitionArgs;

    fn name(&self) -> &str {
        "update_agent"
    }

    fn description(&self) -> String {
        "Replace the whole definition file of a specialist created with create_agent (owner-written specialists \
         cannot be changed). The same rules as create_agent apply. Tasks started from now on use the new \
         definition."
            .into()
    }

    fn parameters(&self) -> Value {
        definition_parameters()
    }

    async fn call(&self, args: DefinitionArgs, _ctx: &ToolContext) -> ToolResult {
        let name = args.name.trim();
        Ok(answer("update", Some(name), self.service.update(name, &args.definition).await))
    }
}
