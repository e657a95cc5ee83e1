//! `graph_link`: records a live relation, or replaces the attrs of the live one with the same triple.

use super::{IDS, attrs, graph_property, nullable, required, schema, scope, scoped};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_graph::GraphStore;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GraphLink { store: Arc<GraphStore> });

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
    #[serde(default)]
    attrs: Option<Value>,
}

impl Tool for GraphLink {
    type Args = Args;

    fn name(&self) -> &str {
        "graph_link"
    }

    fn description(&self) -> String {
        format!(
            "Record a relationship in the relation graph: source -rel-> target, e.g. person:alex works_on \
             project:website. Requires source, rel (a lowercase verb phrase read from source to target) and \
             target; attrs is an optional JSON object string of extra edge fields. Linking the same triple again \
             updates its attrs instead of adding a duplicate. Search first and reuse existing ids. Store only \
             relationships here; notes and facts about one entity belong in memory. {IDS}"
        )
    }

    fn parameters(&self) -> Value {
        schema(json!({
            "graph": graph_property(),
            "source": nullable("string", "Edge origin, e.g. \"person:alex\"."),
            "rel": nullable("string", "Relation read from source to target, e.g. \"works_on\"."),
            "target": nullable("string", "Edge destination, e.g. \"project:website\"."),
            "attrs": nullable("string", "Optional JSON object with extra edge fields, e.g. '{\"since\": \"2024\"}'."),
        }))
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let scoped = scoped(args.graph.as_deref(), ctx)?;
        let (source, rel, target) =
            (required(&args.source, "source")?, required(&args.rel, "rel")?, required(&args.target, "target")?);
        let attrs = attrs(args.attrs)?;
        let linked = self.store.link(scope(&scoped), source, rel, target, attrs).await.map_err(super::graph_error)?;
        super::answer(&linked)
    }
}
