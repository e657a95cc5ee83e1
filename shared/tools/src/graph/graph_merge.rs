//! `graph_merge`: folds a duplicate node into its canonical id.

use super::{IDS, graph_property, nullable, required, schema, scope, scoped};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_graph::GraphStore;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GraphMerge { store: Arc<GraphStore> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    graph: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    target: Option<String>,
}

impl Tool for GraphMerge {
    type Args = Args;

    fn name(&self) -> &str {
        "graph_merge"
    }

    fn description(&self) -> String {
        format!(
            "Fix a duplicate node id in the relation graph. Requires source, the wrong id, and target, the \
             canonical id to keep. Every edge mentioning the wrong id is rewritten to the right one. When both ids \
             have the same live relation, the existing canonical edge wins and the duplicate is discarded; closed \
             historical edges are only re-keyed. Use it as soon as graph_search shows two ids for one thing. {IDS}"
        )
    }

    fn parameters(&self) -> Value {
        schema(json!({
            "graph": graph_property(),
            "source": nullable("string", "The duplicate id to remove, e.g. \"person:alexander\"."),
            "target": nullable("string", "The canonical id to keep, e.g. \"person:alex\"."),
        }))
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let scoped = scoped(args.graph.as_deref(), ctx)?;
        let (source, target) = (required(&args.source, "source")?, required(&args.target, "target")?);
        let merged = self.store.merge(scope(&scoped), source, target).await.map_err(super::graph_error)?;
        super::answer(&merged)
    }
}
