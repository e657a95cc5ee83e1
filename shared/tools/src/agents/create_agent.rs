use super::{AgentService, DefinitionArgs, answer, definition_parameters};
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde_json::Value;
use std::sync::Arc;

tool_struct!(
    /// `create_agent`: a new model-authored specialist, within the owner's ceiling.
    CreateAgent { service: Arc<dyn AgentService> }
);

impl Tool for CreateAgent {
    type Args = DefinitionArgs;

    fn name(&self) -> &str {
        "create_agent"
    }

    fn description(&self) -> String {
        "Create a new specialist agent from a full definition file (frontmatter between `---` lines, then its \
         system prompt). It may list only exact tool names the owner's ceiling allows in tools_allow (no \
         tools_deny, no patterns), MCP servers in mcp_servers, and an allowed model_provider. Refused when the \
         name exists; use update_agent to change one. The new agent can take tasks at once."
            .into()
    }

    fn parameters(&self) -> Value {
        definition_parameters()
    }

    async fn call(&self, args: DefinitionArgs, _ctx: &ToolContext) -> ToolResult {
        let name = args.name.trim();
        Ok(answer("create", Some(name), self.service.create(name, &args.definition).await))
    }
}
