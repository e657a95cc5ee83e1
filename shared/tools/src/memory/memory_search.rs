//! `memory_search`: full-text search over titles and data, best match first, with filters and paging.

use super::Memory;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

tool_struct!(MemorySearch { memory: Arc<Memory> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    query: Option<Value>,
    #[serde(default)]
    category: Option<Value>,
    #[serde(default)]
    source: Option<Value>,
    #[serde(default)]
    updated_after: Option<Value>,
    #[serde(default)]
    updated_before: Option<Value>,
    #[serde(default)]
    limit: Option<Value>,
    #[serde(default)]
    offset: Option<Value>,
}

impl Tool for MemorySearch {
    type Args = Args;

    fn name(&self) -> &str {
        "memory_search"
    }

    fn description(&self) -> String {
        "Search the user's long-term memory entries by words in their title and data (any case, accents \
         ignored, word prefixes match), best match first: entries with all the words, else with any of them, else \
         containing the text. Without `query`, lists the newest entries. Filter by category, source and an \
         inclusive updated_at range; page with limit and offset. `total` counts every match."
            .into()
    }

    fn parameters(&self) -> Value {
        let mut properties = Map::new();
        properties.insert("query".into(), super::nullable_string("Text to match against titles and data."));
        super::filter_properties(&mut properties);
        super::pagination(&mut properties);
        super::strict_object(properties)
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let owner = super::owner(ctx)?;
        let query = super::text(&args.query, "query")?;
        let filter = super::filter(&args.category, &args.source, &args.updated_after, &args.updated_before)?;
        let limit = super::integer(&args.limit, "limit")?;
        let offset = super::integer(&args.offset, "offset")?;
        let memory = self.memory.store().await?;
        let page = memory.search(owner, query.as_deref(), &filter, limit, offset).await.map_err(super::store_error)?;
        let entries: Vec<Value> = page.entries.iter().map(|e| Value::Object(super::entry_payload(e))).collect();
        Ok(json!({
            "owner_id": owner,
            "total": page.total,
            "limit": page.limit,
            "offset": page.offset,
            "entries": entries,
        }))
    }
}
