//! `memory_update`: changes an entry's data, category, metadata, source or expiry (its title stays). New
//! metadata replaces the old, with the category put back.

use super::Memory;
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_kv_memory::Changes;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

tool_struct!(MemoryUpdate { memory: Arc<Memory> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    entry_id: Option<Value>,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    category: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    source: Option<Value>,
    #[serde(default)]
    expires_at: Option<Value>,
}

impl Tool for MemoryUpdate {
    type Args = Args;

    fn name(&self) -> &str {
        "memory_update"
    }

    fn description(&self) -> String {
        "Change an existing memory entry, found by its `entry_id` (from memory_search or memory_list_titles). Give \
         at least one of data, category, metadata, source or expires_at; the others stay as they are. `metadata` \
         (a JSON object as text, without `category`) replaces the stored metadata. The title cannot change."
            .into()
    }

    fn parameters(&self) -> Value {
        let mut properties = Map::new();
        properties.insert(
            "entry_id".into(),
            super::nullable_string("Id of the entry to update, from memory_search or memory_list_titles."),
        );
        properties.insert("data".into(), super::nullable_string("New entry content."));
        properties.insert("category".into(), super::nullable_category());
        properties
            .insert("metadata".into(), super::nullable_string("Optional JSON object with extra structured context."));
        properties.insert("source".into(), super::nullable_string("Optional source of the fact."));
        properties.insert("expires_at".into(), super::nullable_string("Optional ISO datetime expiry."));
        super::strict_object(properties)
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let owner = super::owner(ctx)?;
        let entry_id = super::entry_id(&args.entry_id, "memory_update")?;
        let changes = Changes {
            data: super::text(&args.data, "data")?,
            metadata: super::metadata(&args.metadata)?,
            category: super::category(&args.category)?,
            source: super::text(&args.source, "source")?,
            expires_at: super::expiry(&args.expires_at)?,
        };
        if changes.data.is_none()
            && changes.metadata.is_none()
            && changes.category.is_none()
            && changes.source.is_none()
            && changes.expires_at.is_none()
        {
            return Err(super::input_error(
                "nothing_to_update",
                "update requires at least one of data, category, metadata, source or expires_at.",
            ));
        }
        let memory = self.memory.store().await?;
        Ok(match memory.update(owner, &entry_id, changes).await.map_err(super::store_error)? {
            Some(entry) => {
                let mut out = Map::new();
                out.insert("updated".into(), Value::Bool(true));
                out.extend(super::entry_payload(&entry));
                Value::Object(out)
            }
            None => json!({
                "ok": false,
                "error": "Entry not found",
                "error_code": "memory:update:not_found",
                "entry_id": entry_id,
            }),
        })
    }
}
