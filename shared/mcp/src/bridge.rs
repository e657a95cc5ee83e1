//! Bridge mode: one binding per remote tool.

use crate::result::{call_error, call_result, error_result};
use crate::schema::{drop_nulls, normalize_input_schema};
use crate::server::{McpServer, RemoteTool};
use futures_util::future::BoxFuture;
use minibot_agent::{DynTool, ToolContext, ToolResult};
use minibot_llm::ToolSpec;
use serde_json::{Map, Value};
use std::sync::Arc;

/// A remote tool exposed as `<prefix>_<server>__<remote>`.
pub struct BridgeTool {
    server: Arc<McpServer>,
    remote: String,
    name: String,
    description: String,
    parameters: std::sync::Arc<Value>,
}

impl BridgeTool {
    pub fn new(prefix: &str, server: Arc<McpServer>, remote: &RemoteTool) -> Self {
        let name = crate::binding_name(prefix, server.name(), &remote.name);
        let description = format!("[{}] {}", server.name(), remote.description.trim()).trim_end().to_string();
        let parameters = std::sync::Arc::new(normalize_input_schema(&remote.input_schema));
        Self { server, remote: remote.name.clone(), name, description, parameters }
    }

    /// The remote tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

impl DynTool for BridgeTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: self.name.clone(), description: self.description.clone(), parameters: self.parameters.clone() }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn spill_after_chars(&self) -> Option<usize> {
        Some(self.server.inline_result_chars())
    }

    fn call_json<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let server = self.server.name();
            let arguments = match drop_nulls(args) {
                Value::Object(map) => map,
                Value::Null => Map::new(),
                other => {
                    let error =
                        format!("arguments must be an object, got {}", minibot_agent::excerpt(&other.to_string()));
                    return Ok(error_result(server, "invalid_arguments", &error, Some(&self.remote)));
                }
            };
            Ok(match self.server.call_tool(&self.remote, arguments).await {
                Ok(output) => call_result(server, &self.remote, output),
                Err(err) => call_error(server, &self.remote, &err),
            })
        })
    }
}
