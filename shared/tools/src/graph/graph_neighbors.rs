//! `graph_neighbors`: the relation graph around one node, breadth first.

use super::{IDS, count, graph_property, nullable, nullable_count, required, schema, scope, scoped};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_graph::{Direction, GraphStore, NeighborQuery};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GraphNeighbors { store: Arc<GraphStore> });

const MAX_DEPTH: usize = 5;
const MAX_LIMIT: usize = 200;
const MAX_NODES: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    graph: Option<String>,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    direction: Option<String>,
    #[serde(default)]
    depth: Option<i64>,
    #[serde(default)]
    rel: Option<String>,
    #[serde(default)]
    history: Option<bool>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    max_nodes: Option<i64>,
}

impl Tool for GraphNeighbors {
    type Args = Args;

    fn name(&self) -> &str {
        "graph_neighbors"
    }

    fn description(&self) -> String {
        format!(
            "Expand the relation graph around one node. Requires node. Optional direction (\"out\", \"in\", \
             \"both\"; \"in\" walks edges backwards to find what points at the node), depth (hops, default 1, at \
             most {MAX_DEPTH}), rel (only follow this relation), history (also closed edges), limit (edges and \
             history, default 50), max_nodes (default 100). Returns the nodes nearest first, the live edges among \
             them, and truncated=true when max_nodes cut the list. Query the graph before answering a question \
             about how things connect. Edges with valid_to are no longer true: report them as past. {IDS}"
        )
    }

    fn parameters(&self) -> Value {
        schema(json!({
            "graph": graph_property(),
            "node": nullable("string", "Entry-point node, e.g. \"project:website\"."),
            "direction": {
                "anyOf": [{ "type": "string", "enum": ["out", "in", "both"] }, { "type": "null" }],
                "description": "Traversal direction. \"in\" walks edges backwards. Defaults to \"out\".",
            },
            "depth": nullable_count("Hops to expand. Defaults to 1; at most 5."),
            "rel": nullable("string", "Only follow edges of this relation."),
            "history": nullable("boolean", "When true, also return closed edges. Defaults to false."),
            "limit": nullable_count("Most edges (and history edges) returned. Defaults to 50; at most 200."),
            "max_nodes": nullable_count("Most nodes returned. Defaults to 100; at most 200."),
        }))
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let scoped = scoped(args.graph.as_deref(), ctx)?;
        let direction = match args.direction.as_deref().filter(|d| !d.trim().is_empty()) {
            None => Direction::Out,
            Some(written) => Direction::parse(written).ok_or_else(|| {
                ToolError::invalid_arguments(format!("direction must be one of: out, in, both (got {written:?})"))
            })?,
        };
        let query = NeighborQuery {
            node: required(&args.node, "node")?.to_string(),
            direction,
            depth: count(args.depth, "depth", 1, MAX_DEPTH)?,
            rel: args.rel.filter(|r| !r.trim().is_empty()),
            history: args.history.unwrap_or(false),
            limit: count(args.limit, "limit", 50, MAX_LIMIT)?,
            max_nodes: count(args.max_nodes, "max_nodes", 100, MAX_NODES)?,
        };
        let around = self.store.neighbors(scope(&scoped), &query).await.map_err(super::graph_error)?;
        super::answer(&around)
    }
}
