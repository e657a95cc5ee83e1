//! `memory_get`: one entry by id.

use super::Memory;
use minibot_agent::{Tool, ToolContext, ToolResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

tool_struct!(MemoryGet { memory: Arc<Memory> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    entry_id: Option<Value>,
}

impl Tool for MemoryGet {
    type Args = Args;

    fn name(&self) -> &str {
        "memory_get"
    }

    fn description(&self) -> String {
        "Read one memory entry in full by its `entry_id` (from memory_search or memory_list_titles).".into()
    }

    fn parameters(&self) -> Value {
        let mut properties = Map::new();
        properties.insert("entry_id".into(), super::nullable_string("Id of the entry to read."));
        super::strict_object(properties)
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let owner = super::owner(ctx)?;
        let entry_id = super::entry_id(&args.entry_id, "memory_get")?;
        let memory = self.memory.store().await?;
        Ok(match memory.get(owner, &entry_id).await.map_err(super::store_error)? {
            Some(entry) => Value::Object(super::entry_payload(&entry)),
            None => json!({ "ok": false, "error": "Entry not found", "entry_id": entry_id }),
        })
    }
}
