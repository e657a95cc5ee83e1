//! `graph_unlink`: closes a live relation that is no longer true; the edge stays as history.

use super::{IDS, graph_property, nullable, required, schema, scope, scoped};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_graph::GraphStore;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GraphUnlink { store: Arc<GraphStore> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    graph: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    rel: Option<String>,
    #[serde(default)]
    target: Option<String>,
}

impl Tool for GraphUnlink {
    type Args = Args;

    fn name(&self) -> &str {
        "graph_unlink"
    }

    fn description(&self) -> String {
        format!(
            "Close a relationship in the relation graph that is no longer true. Requires source, rel and target. \
             The edge is kept as history with valid_to set, not deleted; closed edges are past relationships. \
             When a relationship changes, unlink the old edge and link the new one in the same turn. {IDS}"
        )
    }

    fn parameters(&self) -> Value {
        schema(json!({
            "graph": graph_property(),
            "source": nullable("string", "Edge origin, e.g. \"person:alex\"."),
            "rel": nullable("string", "Relation to close, e.g. \"works_on\"."),
            "target": nullable("string", "Edge destination, e.g. \"project:website\"."),
        }))
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let scoped = scoped(args.graph.as_deref(), ctx)?;
        let (source, rel, target) =
            (required(&args.source, "source")?, required(&args.rel, "rel")?, required(&args.target, "target")?);
        let unlinked = self.store.unlink(scope(&scoped), source, rel, target).await.map_err(super::graph_error)?;
        super::answer(&unlinked)
    }
}
