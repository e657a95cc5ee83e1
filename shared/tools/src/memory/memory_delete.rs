//! `memory_delete`: removes one entry by id.

use super::Memory;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

tool_struct!(MemoryDelete { memory: Arc<Memory> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    entry_id: Option<Value>,
}

impl Tool for MemoryDelete {
    type Args = Args;

    fn name(&self) -> &str {
        "memory_delete"
    }

    fn description(&self) -> String {
        "Delete one memory entry by its `entry_id` (from memory_search or memory_list_titles). `deleted` says \
         whether there was such an entry."
            .into()
    }

    fn parameters(&self) -> Value {
        let mut properties = Map::new();
        properties.insert("entry_id".into(), super::nullable_string("Id of the entry to delete."));
        super::strict_object(properties)
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let owner = super::owner(ctx)?;
        let entry_id = super::entry_id(&args.entry_id, "memory_delete")?;
        let memory = self.memory.store().await?;
        let deleted = memory.delete(owner, &entry_id).await.map_err(super::store_error)?;
        Ok(json!({ "owner_id": owner, "deleted": deleted, "entry_id": entry_id }))
    }
}
