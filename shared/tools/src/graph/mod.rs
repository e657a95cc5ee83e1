//! The relation graph tools (`graph_link`, `graph_unlink`, `graph_merge`, `graph_neighbors`, `graph_path`,
//! `graph_search`), on when `[extensions] modules` lists `minibot.extensions.tools.graph`. One tool per
//! operation, so `graph_*` covers them in tool patterns. Every parameter is listed as required and nullable,
//! as MiniBot's schemas do; the store ([`minibot_graph`]) does the work.

mod graph_link;
mod graph_merge;
mod graph_neighbors;
mod graph_path;
mod graph_search;
mod graph_unlink;

pub use graph_link::GraphLink;
pub use graph_merge::GraphMerge;
pub use graph_neighbors::GraphNeighbors;
pub use graph_path::GraphPath;
pub use graph_search::GraphSearch;
pub use graph_unlink::GraphUnlink;

use crate::ToolServices;
use minibot_agent::{ToolContext, ToolError, ToolRegistry, ToolResult, dyn_tool};
use minibot_graph::{GraphError, GraphStore, Scope};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Registers the six tools when the extension is on. The database opens on the first call.
pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    let config = &services.config;
    let Some(url) = config.extensions.graph_sqlite_url() else {
        return;
    };
    // The URL was checked at load; a URL that names no file cannot get here.
    let Some(path) = minibot_config::sqlite_path_from_url(&url) else {
        return;
    };
    let store = Arc::new(GraphStore::new(config.resolve_path(&path)));
    let closing = Arc::clone(&store);
    services.closers.add(move || {
        let store = Arc::clone(&closing);
        Box::pin(async move { store.close().await })
    });
    registry.register(dyn_tool(GraphLink::new(store.clone())));
    registry.register(dyn_tool(GraphUnlink::new(store.clone())));
    registry.register(dyn_tool(GraphMerge::new(store.clone())));
    registry.register(dyn_tool(GraphNeighbors::new(store.clone())));
    registry.register(dyn_tool(GraphPath::new(store.clone())));
    registry.register(dyn_tool(GraphSearch::new(store)));
}

/// The namespace and owner of a call: the graph is the caller's own, never one named in the arguments.
fn scoped<'a>(graph: Option<&str>, ctx: &'a ToolContext) -> Result<(String, &'a str), ToolError> {
    if ctx.owner_id.is_empty() {
        return Err(ToolError::respond(
            "graph:owner_required",
            "the relation graph needs an owner; this call has none",
        ));
    }
    let namespace = minibot_graph::ids::namespace(graph).map_err(graph_error)?;
    Ok((namespace, ctx.owner_id.as_str()))
}

fn scope<'a>(scoped: &'a (String, &'a str)) -> Scope<'a> {
    Scope { graph: &scoped.0, owner_id: scoped.1 }
}

/// Bad ids are the model's to fix (`invalid_arguments`); a database that fails is reported as such.
fn graph_error(error: GraphError) -> ToolError {
    match error {
        GraphError::Invalid(message) => ToolError::invalid_arguments(message),
        other => ToolError::respond("graph:store_failed", format!("the relation graph store failed: {other}")),
    }
}

/// A required text argument: present and not blank.
fn required<'a>(value: &'a Option<String>, name: &str) -> Result<&'a str, ToolError> {
    value
        .as_deref()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| ToolError::invalid_arguments(format!("{name} is required and must be a non-empty string")))
}

/// A count with MiniBot's rules: `default` when absent, at least 1, anything above `max` treated as `max`.
fn count(value: Option<i64>, name: &str, default: usize, max: usize) -> Result<usize, ToolError> {
    match value {
        None => Ok(default),
        Some(n) if n < 1 => Err(ToolError::invalid_arguments(format!("{name} must be at least 1, got {n}"))),
        Some(n) => Ok(usize::try_from(n).map_or(max, |n| n.min(max))),
    }
}

/// `attrs`: a JSON object, written as a string (MiniBot's form) or, leniently, as the object itself.
/// The most an edge's `attrs` may hold: facts about a relation, not documents (every neighbour query returns them).
const MAX_ATTRS_BYTES: usize = 8_192;

fn attrs(value: Option<Value>) -> Result<Option<Map<String, Value>>, ToolError> {
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
        Some(Value::String(text)) => serde_json::from_str::<Value>(&text)
            .map_err(|e| ToolError::invalid_arguments(format!("attrs must be valid JSON: {e}")))?,
        Some(other) => other,
    };
    match parsed {
        Value::Object(map) if serde_json::to_string(&map).map_or(0, |text| text.len()) > MAX_ATTRS_BYTES => {
            Err(ToolError::invalid_arguments(format!("attrs is larger than {MAX_ATTRS_BYTES} bytes as JSON")))
        }
        Value::Object(map) => Ok(Some(map)),
        other => Err(ToolError::invalid_arguments(format!(
            "attrs must be a JSON object such as {{\"since\": \"2024\"}}, got {}",
            kind(&other)
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn answer(result: &impl Serialize) -> ToolResult {
    serde_json::to_value(result).map_err(|e| ToolError::Fatal(format!("cannot encode a graph answer: {e}")))
}

fn nullable(kind: &str, description: &str) -> Value {
    json!({ "type": [kind, "null"], "description": description })
}

fn nullable_count(description: &str) -> Value {
    json!({ "type": ["integer", "null"], "minimum": 1, "description": description })
}

fn graph_property() -> Value {
    nullable(
        "string",
        "Graph namespace. Defaults to \"memory\". Use another only for a clearly separate domain, never to split \
         one user's graph.",
    )
}

/// MiniBot's strict object: every property listed as required (optional ones are nullable), nothing else.
fn schema(properties: Value) -> Value {
    let required: Vec<&String> = properties.as_object().map(|p| p.keys().collect()).unwrap_or_default();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

const IDS: &str = "Node ids are typed \"type:id\" strings such as person:alex or tech:vue, normalised when written \
                   (lowercase ASCII, underscores between words); the optional graph parameter selects a namespace \
                   and defaults to \"memory\".";
