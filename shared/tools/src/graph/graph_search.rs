//! `graph_search`: edges whose source, relation or target contains a text fragment.

use super::{IDS, count, graph_property, nullable, nullable_count, required, schema, scope, scoped};
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_graph::GraphStore;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(GraphSearch { store: Arc<GraphStore> });

const MAX_LIMIT: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    graph: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    history: Option<bool>,
}

impl Tool for GraphSearch {
    type Args = Args;

    fn name(&self) -> &str {
        "graph_search"
    }

    fn description(&self) -> String {
        format!(
            "Find edges of the relation graph whose source, rel or target contains a text fragment, newest first. \
             Requires query (normalised like an id, so \"Alex\" finds person:alex and \"person:\" finds every \
             person); limit defaults to 25 (at most {MAX_LIMIT}); history=true includes closed edges. Use it \
             before adding or traversing an entity whose canonical id is unknown. {IDS}"
        )
    }

    fn parameters(&self) -> Value {
        schema(json!({
            "graph": graph_property(),
            "query": nullable("string", "Text fragment matched against source, rel and target."),
            "limit": nullable_count("Most edges returned. Defaults to 25; at most 200."),
            "history": nullable("boolean", "When true, also return closed edges. Defaults to false."),
        }))
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let scoped = scoped(args.graph.as_deref(), ctx)?;
        let query = required(&args.query, "query")?;
        let limit = count(args.limit, "limit", 25, MAX_LIMIT)?;
        let found = self
            .store
            .search(scope(&scoped), query, limit, args.history.unwrap_or(false))
            .await
            .map_err(super::graph_error)?;
        super::answer(&found)
    }
}
