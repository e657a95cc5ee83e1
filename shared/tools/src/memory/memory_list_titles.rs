//! `memory_list_titles`: a light index of the owner's entries (id, title, category, updated_at, source), newest
//! update first, with filters and paging.

use super::Memory;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

tool_struct!(MemoryListTitles { memory: Arc<Memory> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
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

impl Tool for MemoryListTitles {
    type Args = Args;

    fn name(&self) -> &str {
        "memory_list_titles"
    }

    fn description(&self) -> String {
        "List the titles of the user's long-term memory entries, newest update first, with their id, category, \
         updated_at and source; read one with memory_get. Filter by category, source and an inclusive updated_at \
         range; page with limit and offset."
            .into()
    }

    fn parameters(&self) -> Value {
        let mut properties = Map::new();
        super::filter_properties(&mut properties);
        super::pagination(&mut properties);
        super::strict_object(properties)
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let owner = super::owner(ctx)?;
        let filter = super::filter(&args.category, &args.source, &args.updated_after, &args.updated_before)?;
        let limit = super::integer(&args.limit, "limit")?;
        let offset = super::integer(&args.offset, "offset")?;
        let memory = self.memory.store().await?;
        let page = memory.list(owner, &filter, limit, offset).await.map_err(super::store_error)?;
        let titles: Vec<Value> = page
            .entries
            .iter()
            .map(|e| {
                json!({
                    "id": e.id,
                    "title": e.title,
                    "category": e.category(),
                    "updated_at": e.updated_at,
                    "source": e.source,
                })
            })
            .collect();
        let mut out = json!({
            "owner_id": owner,
            "total": page.total,
            "limit": page.limit,
            "offset": page.offset,
            "titles": titles,
        });
        if page.entries.is_empty() {
            out["hint"] = json!("No memory entries found. Do not retry with identical parameters.");
        }
        Ok(out)
    }
}
