//! `graph_path`: the shortest connection between two nodes, following edges either way.

use super::{IDS, count, graph_property, nullable, nullable_count, required, schema, scope, scoped};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_graph::GraphStore;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GraphPath { store: Arc<GraphStore> });

const MAX_DEPTH: usize = 8;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    graph: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    max_depth: Option<i64>,
}

impl Tool for GraphPath {
    type Args = Args;

    fn name(&self) -> &str {
        "graph_path"
    }

    fn description(&self) -> String {
        format!(
            "Find the shortest connection between two nodes of the relation graph. Requires source and target; \
             max_depth (default 4, at most {MAX_DEPTH}) is the longest path accepted. Edges are followed in either \
             direction: each hop says whether it was walked forward (source to target) or backward. Returns \
             found=false with a reason when the nodes are unknown, unconnected or too far apart. {IDS}"
        )
    }

    fn parameters(&self) -> Value {
        schema(json!({
            "graph": graph_property(),
            "source": nullable("string", "Start node, e.g. \"person:alex\"."),
            "target": nullable("string", "End node, e.g. \"tech:python\"."),
            "max_depth": nullable_count("Longest path accepted, in hops. Defaults to 4; at most 8."),
        }))
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let scoped = scoped(args.graph.as_deref(), ctx)?;
        let (source, target) = (required(&args.source, "source")?, required(&args.target, "target")?);
        let max_depth = count(args.max_depth, "max_depth", 4, MAX_DEPTH)?;
        let path = self.store.path(scope(&scoped), source, target, max_depth).await.map_err(super::graph_error)?;
        super::answer(&path)
    }
}
