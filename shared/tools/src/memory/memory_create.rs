//! `memory_create`: saves a new note under a title the owner has not used yet (ignoring case). A title in use
//! is not an error of the call: the result says so and carries the existing entry, so the model can update it.

use super::Memory;
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_kv_memory::{CATEGORIES, Created, NewEntry};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

tool_struct!(MemoryCreate { memory: Arc<Memory> });

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    title: Option<Value>,
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

impl Tool for MemoryCreate {
    type Args = Args;

    fn name(&self) -> &str {
        "memory_create"
    }

    fn description(&self) -> String {
        "Save a new long-term memory entry for the user: a short unique title, the content in `data`, and one \
         category. If an entry with the same title (ignoring case) exists, nothing is saved and the result returns \
         it as `existing_entry`: update that one with memory_update instead. `metadata` is an optional JSON object \
         (as text) of extra context, without `category`; `expires_at` an optional future ISO date-time after which \
         the entry is deleted."
            .into()
    }

    fn parameters(&self) -> Value {
        let mut properties = Map::new();
        properties.insert("title".into(), super::nullable_string("Title of the new entry. Must be unique."));
        properties.insert("data".into(), super::nullable_string("Entry content."));
        properties.insert(
            "category".into(),
            json!({ "type": "string", "enum": CATEGORIES, "description": "Required category." }),
        );
        properties.insert(
            "metadata".into(),
            super::nullable_string("Optional JSON object with extra structured context; category is separate."),
        );
        properties.insert("source".into(), super::nullable_string("Optional source of the fact."));
        properties.insert("expires_at".into(), super::nullable_string("Optional ISO datetime expiry."));
        super::strict_object(properties)
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        let owner = super::owner(ctx)?;
        let metadata = super::metadata(&args.metadata)?;
        let category = super::category(&args.category)?.ok_or_else(|| {
            super::input_error(
                "category_required",
                format!("category is required for create. Use exactly one of: {}.", CATEGORIES.join(", ")),
            )
        })?;
        let required = |value: &Option<Value>, name: &str| {
            super::text(value, name)?.ok_or_else(|| {
                super::input_error(
                    &format!("{name}_required"),
                    format!("{name} is required for create and must be a non-empty string."),
                )
            })
        };
        let title = required(&args.title, "title")?;
        let data = required(&args.data, "data")?;
        let mut metadata = metadata.unwrap_or_default();
        metadata.insert("category".into(), Value::String(category));
        let new = NewEntry {
            title,
            data,
            metadata,
            source: super::text(&args.source, "source")?,
            expires_at: super::expiry(&args.expires_at)?,
        };
        let memory = self.memory.store().await?;
        Ok(match memory.create(owner, new).await.map_err(super::store_error)? {
            Created::Created(entry) => {
                let mut out = Map::new();
                out.insert("created".into(), Value::Bool(true));
                out.extend(super::entry_payload(&entry));
                Value::Object(out)
            }
            Created::Duplicate(entry) => json!({
                "ok": false,
                "error": "An entry with this title already exists. Use memory_update with its entry_id instead.",
                "error_code": "memory:create:duplicate_title",
                "existing_entry": super::entry_payload(&entry),
            }),
        })
    }
}
