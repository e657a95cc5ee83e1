//! Lazy mode: two bindings per server, so the model's initial tool list stays small.

use crate::result::{call_error, call_result, error_result};
use crate::schema::{drop_nulls, normalize_input_schema};
use crate::server::McpServer;
use crate::untrusted::fence_instructions;
use futures_util::future::BoxFuture;
use minibot_agent::{DynTool, ToolContext, ToolResult};
use minibot_llm::ToolSpec;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Describes the server for both bindings, embedding its instructions when they are known.
fn server_blurb(server: &McpServer) -> String {
    match server.instructions() {
        Some(instructions) => fence_instructions(server.name(), &instructions),
        None if server.mode() == minibot_config::schema::McpMode::Lazy => {
            format!("Configured MCP server `{}` (its metadata is not available yet).", server.name())
        }
        None => String::new(),
    }
}

/// `<prefix>_<server>__list_tools`: the remote catalog with full schemas. Always asks the server.
pub struct LazyListTool {
    server: Arc<McpServer>,
    name: String,
    description: String,
}

impl LazyListTool {
    pub fn new(prefix: &str, server: Arc<McpServer>) -> Self {
        let name = crate::binding_name(prefix, server.name(), "list_tools");
        let description = format!(
            "[{}] List the tools of MCP server `{}` with their descriptions and complete input schemas. Call this \
             before `{}` to pick a tool and its arguments.\n\n{}",
            server.name(),
            server.name(),
            crate::binding_name(prefix, server.name(), "call_tool"),
            server_blurb(&server)
        );
        Self { server, name, description: description.trim_end().to_string() }
    }
}

impl DynTool for LazyListTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: std::sync::Arc::new(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn spill_after_chars(&self) -> Option<usize> {
        Some(self.server.inline_result_chars())
    }

    fn call_json<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let server = self.server.name();
            Ok(match self.server.list_tools().await {
                Ok(tools) => {
                    let tools: Vec<Value> = tools
                        .iter()
                        .map(|t| {
                            json!({
                                "name": t.name,
                                "description": t.description,
                                "input_schema": normalize_input_schema(&t.input_schema),
                            })
                        })
                        .collect();
                    json!({"ok": true, "server": server, "tools": tools})
                }
                Err(err) => error_result(server, "mcp_catalog_unavailable", &err.to_string(), None),
            })
        })
    }
}

/// `<prefix>_<server>__call_tool(tool_name, arguments)`: calls one remote tool after checking it against the
/// filters and the (cached) catalog.
pub struct LazyCallTool {
    server: Arc<McpServer>,
    name: String,
    description: String,
}

impl LazyCallTool {
    pub fn new(prefix: &str, server: Arc<McpServer>) -> Self {
        let name = crate::binding_name(prefix, server.name(), "call_tool");
        let description = format!(
            "[{}] Call a tool of MCP server `{}` by its remote name with its arguments object. Use `{}` first to \
             learn the names and input schemas.\n\n{}",
            server.name(),
            server.name(),
            crate::binding_name(prefix, server.name(), "list_tools"),
            server_blurb(&server)
        );
        Self { server, name, description: description.trim_end().to_string() }
    }
}

impl DynTool for LazyCallTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: std::sync::Arc::new(json!({
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string", "description": "Remote tool name, as listed by list_tools."},
                    "arguments": {
                        "type": "object",
                        "description": "Arguments matching the remote tool's input schema.",
                        "additionalProperties": true
                    }
                },
                "required": ["tool_name", "arguments"],
                "additionalProperties": false
            })),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn spill_after_chars(&self) -> Option<usize> {
        Some(self.server.inline_result_chars())
    }

    fn call_json<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move { Ok(self.call(args).await) })
    }
}

impl LazyCallTool {
    async fn call(&self, args: Value) -> Value {
        let server = self.server.name();
        let tool = match args.get("tool_name").and_then(Value::as_str).map(str::trim) {
            Some(tool) if !tool.is_empty() => tool.to_string(),
            _ => {
                return error_result(server, "invalid_tool_name", "`tool_name` must be a non-empty string", None);
            }
        };
        let arguments = match args.get("arguments").cloned().map(drop_nulls) {
            Some(Value::Object(map)) => map,
            // Models often omit the object for tools without parameters.
            None | Some(Value::Null) => Map::new(),
            Some(other) => {
                let error =
                    format!("`arguments` must be an object, got {}", minibot_agent::excerpt(&other.to_string()));
                return error_result(server, "invalid_arguments", &error, Some(&tool));
            }
        };
        if !self.server.allows(&tool) {
            let error = format!("tool `{}` is disabled for MCP server `{server}`", minibot_agent::excerpt(&tool));
            return error_result(server, "mcp_tool_not_available", &error, Some(&tool));
        }
        match self.server.catalog().await {
            Ok(catalog) if catalog.iter().any(|t| t.name == tool) => {}
            Ok(catalog) => {
                let names: Vec<&str> = catalog.iter().map(|t| t.name.as_str()).collect();
                let error = format!(
                    "MCP server `{server}` has no tool `{}`; available: {}",
                    minibot_agent::excerpt(&tool),
                    names.join(", ")
                );
                return error_result(server, "mcp_tool_not_available", &error, Some(&tool));
            }
            Err(err) => {
                return error_result(server, "mcp_catalog_unavailable", &err.to_string(), Some(&tool));
            }
        }
        match self.server.call_tool(&tool, arguments).await {
            Ok(output) => call_result(server, &tool, output),
            Err(err) => call_error(server, &tool, &err),
        }
    }
}
