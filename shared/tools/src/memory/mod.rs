//! The key/value memory tools (`[tools.kv_memory]`), one per operation as in MiniBot: `memory_create`,
//! `memory_update`, `memory_get`, `memory_search`, `memory_delete`, `memory_list_titles`. The notes belong to
//! the turn's owner (`[runtime] owner_id`) and live in `minibot-kv-memory`'s SQLite file.
//!
//! The arguments are read leniently, as MiniBot reads them (every field may be `null` or missing, numbers may
//! come as text), and strictly where it matters: a bad value is refused with a `memory:invalid_arguments:*`
//! code and a message that names the argument.

mod memory_create;
mod memory_delete;
mod memory_get;
mod memory_list_titles;
mod memory_search;
mod memory_update;

pub use memory_create::MemoryCreate;
pub use memory_delete::MemoryDelete;
pub use memory_get::MemoryGet;
pub use memory_list_titles::MemoryListTitles;
pub use memory_search::MemorySearch;
pub use memory_update::MemoryUpdate;

use crate::ToolServices;
use chrono::{DateTime, Datelike, Utc};
use minibot_agent::{ToolContext, ToolError, ToolRegistry, dyn_tool, excerpt};
use minibot_config::Config;
use minibot_kv_memory::{CATEGORIES, Entry, Filter, KvMemory, Limits};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;

pub fn register(registry: &mut ToolRegistry, services: &ToolServices) {
    if !services.config.tools.kv_memory.enabled {
        return;
    }
    let memory = Arc::new(Memory::from_config(&services.config));
    let closing = Arc::clone(&memory);
    services.closers.add(move || {
        let memory = Arc::clone(&closing);
        Box::pin(async move { memory.close().await })
    });
    registry.register(dyn_tool(MemoryCreate::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemoryUpdate::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemoryGet::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemorySearch::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemoryDelete::new(Arc::clone(&memory))));
    registry.register(dyn_tool(MemoryListTitles::new(memory)));
}

/// The store, opened by the first call that needs it: tool sets are assembled synchronously, and a process
/// whose model never touches memory should not open (or migrate) the file at all. A failed open is retried by
/// the next call.
pub struct Memory {
    path: Option<PathBuf>,
    pool_size: u32,
    limits: Limits,
    store: tokio::sync::OnceCell<KvMemory>,
}

impl Memory {
    pub fn from_config(config: &Config) -> Self {
        let section = &config.tools.kv_memory;
        Self {
            path: minibot_config::sqlite_path_from_url(&section.sqlite_url).map(|p| config.resolve_path(&p)),
            pool_size: section.pool_size,
            limits: Limits { default_limit: section.default_limit, max_limit: section.max_limit },
            store: tokio::sync::OnceCell::new(),
        }
    }

    /// Closes the store if a call opened it (before the runtime stops, see [`minibot_sqlite`]).
    pub async fn close(&self) {
        if let Some(store) = self.store.get() {
            store.close().await;
        }
    }

    /// An already opened store (tests and benchmarks).
    pub fn with_store(store: KvMemory) -> Self {
        Self { path: None, pool_size: 0, limits: store.limits(), store: tokio::sync::OnceCell::new_with(Some(store)) }
    }

    async fn store(&self) -> Result<&KvMemory, ToolError> {
        self.store
            .get_or_try_init(|| async {
                let Some(path) = &self.path else {
                    return Err(ToolError::respond(
                        "memory:unavailable",
                        "[tools.kv_memory] sqlite_url is not a SQLite URL such as sqlite:///./data/kv_memory.db",
                    ));
                };
                KvMemory::open(path, self.pool_size, self.limits).await.map_err(store_error)
            })
            .await
    }
}

fn store_error(error: minibot_kv_memory::Error) -> ToolError {
    ToolError::respond("memory:store_failed", format!("the memory store failed: {error}"))
}

/// The turn's owner; MiniBot refuses to act without one.
fn owner(ctx: &ToolContext) -> Result<&str, ToolError> {
    if ctx.owner_id.trim().is_empty() {
        return Err(ToolError::respond("memory:owner_required", "memory tools need an owner: set [runtime] owner_id"));
    }
    Ok(&ctx.owner_id)
}

fn input_error(code: &str, message: impl Into<String>) -> ToolError {
    ToolError::respond(format!("memory:invalid_arguments:{code}"), message)
}

/// An optional text argument: missing, `null` or blank is `None`; the text comes back trimmed.
fn text(value: &Option<Value>, name: &str) -> Result<Option<String>, ToolError> {
    let text = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text.trim(),
        Some(other) => {
            return Err(input_error(
                &format!("invalid_{name}"),
                format!("{name} must be a string, not {}", excerpt(&other.to_string())),
            ));
        }
    };
    if let Some(most) = max_chars(name)
        && text.chars().count() > most
    {
        return Err(input_error(&format!("invalid_{name}"), format!("{name} is longer than {most} characters")));
    }
    Ok(Some(text.to_string()).filter(|t| !t.is_empty()))
}

/// The longest text each argument may be: MiniBot's column sizes (title 100, source 256), and bounds that keep one
/// entry a note rather than a document (a search returns up to 100 of them to the model).
fn max_chars(name: &str) -> Option<usize> {
    Some(match name {
        "title" => 100,
        "source" => 256,
        "data" => 20_000,
        "query" => 1_000,
        "entry_id" => 64,
        _ => return None,
    })
}

/// The most bytes of `metadata` an entry keeps, as JSON.
const MAX_METADATA_BYTES: usize = 4_096;

/// The entry id every tool but create and search needs.
fn entry_id(value: &Option<Value>, tool: &str) -> Result<String, ToolError> {
    text(value, "entry_id")?.ok_or_else(|| {
        input_error(
            "entry_id_required",
            format!(
                "{tool} requires entry_id. Get it from memory_search or memory_list_titles; to add a new entry use \
                 memory_create instead."
            ),
        )
    })
}

fn category(value: &Option<Value>) -> Result<Option<String>, ToolError> {
    let Some(category) = text(value, "category")? else { return Ok(None) };
    if !CATEGORIES.contains(&category.as_str()) {
        return Err(input_error(
            "invalid_category",
            format!("category {:?} is not valid. Use exactly one of: {}.", excerpt(&category), CATEGORIES.join(", ")),
        ));
    }
    Ok(Some(category))
}

/// `metadata`: a JSON object, given as JSON text (MiniBot's schema) or as an object, without `category`.
fn metadata(value: &Option<Value>) -> Result<Option<Map<String, Value>>, ToolError> {
    let invalid =
        || input_error("invalid_metadata", r#"metadata must be a JSON object, for example {"note": "text"}."#);
    let map = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map.clone(),
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
        Some(Value::String(text)) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            _ => return Err(invalid()),
        },
        Some(_) => return Err(invalid()),
    };
    if serde_json::to_string(&map).map_or(0, |json| json.len()) > MAX_METADATA_BYTES {
        return Err(input_error(
            "invalid_metadata",
            format!("metadata is larger than {MAX_METADATA_BYTES} bytes as JSON"),
        ));
    }
    if map.contains_key("category") {
        return Err(input_error(
            "category_in_metadata",
            "metadata must not contain category: pass it as the top-level category field and remove it from metadata.",
        ));
    }
    Ok(Some(map))
}

fn datetime(value: &Option<Value>, name: &str) -> Result<Option<DateTime<Utc>>, ToolError> {
    let Some(raw) = text(value, name)? else { return Ok(None) };
    minibot_kv_memory::time::parse(&raw).map(Some).ok_or_else(|| {
        input_error(
            &format!("invalid_{name}"),
            format!("{name} must be an ISO 8601 date-time such as 2025-06-01T09:00:00Z, not {:?}", excerpt(&raw)),
        )
    })
}

/// `expires_at`, which must lie ahead: an entry that is already expired would never be seen again.
fn expiry(value: &Option<Value>) -> Result<Option<DateTime<Utc>>, ToolError> {
    let expires_at = datetime(value, "expires_at")?;
    if let Some(at) = expires_at
        && at.year() > minibot_kv_memory::time::LAST_YEAR
    {
        return Err(input_error(
            "invalid_expires_at",
            format!("expires_at must be in the year {} or earlier (UTC)", minibot_kv_memory::time::LAST_YEAR),
        ));
    }
    if let Some(at) = expires_at
        && at <= Utc::now()
    {
        return Err(input_error(
            "expires_at_in_past",
            format!(
                "expires_at {} is not in the future; expired entries are deleted. Use memory_delete to remove an \
                 entry now.",
                minibot_kv_memory::time::iso(at)
            ),
        ));
    }
    Ok(expires_at)
}

/// `limit` or `offset`: an integer, also as a whole float or as text (as MiniBot accepts).
fn integer(value: &Option<Value>, name: &str) -> Result<Option<i64>, ToolError> {
    let invalid = || input_error(&format!("invalid_{name}"), format!("{name} must be an integer"));
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            #[allow(clippy::cast_possible_truncation)]
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
            _ => Err(invalid()),
        },
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => text.trim().parse().map(Some).map_err(|_| invalid()),
        Some(_) => Err(invalid()),
    }
}

/// The filters `memory_search` and `memory_list_titles` share.
fn filter(
    category_arg: &Option<Value>,
    source: &Option<Value>,
    after: &Option<Value>,
    before: &Option<Value>,
) -> Result<Filter, ToolError> {
    Ok(Filter {
        category: category(category_arg)?,
        source: text(source, "source")?,
        updated_after: datetime(after, "updated_after")?,
        updated_before: datetime(before, "updated_before")?,
    })
}

/// An entry as every tool shows it (MiniBot's `_entry_payload`).
fn entry_payload(entry: &Entry) -> Map<String, Value> {
    let value = json!({
        "id": entry.id,
        "owner_id": entry.owner_id,
        "title": entry.title,
        "data": entry.data,
        "category": entry.category(),
        "metadata": entry.metadata,
        "source": entry.source,
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
        "expires_at": entry.expires_at,
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `{"type": ["string", "null"]}` with a description.
fn nullable_string(description: &str) -> Value {
    json!({ "type": ["string", "null"], "description": description })
}

fn nullable_category() -> Value {
    json!({ "anyOf": [{ "type": "string", "enum": CATEGORIES }, { "type": "null" }], "description": "Only entries of this category." })
}

/// The filters `memory_search` and `memory_list_titles` share: category, source and the updated_at bounds.
fn filter_properties(properties: &mut Map<String, Value>) {
    properties.insert("category".into(), nullable_category());
    properties.insert("source".into(), nullable_string("Only entries from this source."));
    properties.insert("updated_after".into(), nullable_string("Inclusive ISO datetime lower bound on updated_at."));
    properties.insert("updated_before".into(), nullable_string("Inclusive ISO datetime upper bound on updated_at."));
}

fn pagination(properties: &mut Map<String, Value>) {
    properties.insert(
        "limit".into(),
        json!({ "type": ["integer", "null"], "description": "Entries per page (default and maximum set by the owner)." }),
    );
    properties.insert("offset".into(), json!({ "type": ["integer", "null"], "description": "Entries to skip." }));
}

/// MiniBot's strict object: every property listed in `required` (optional ones are nullable), nothing else.
fn strict_object(properties: Map<String, Value>) -> Value {
    let required: Vec<String> = properties.keys().cloned().collect();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

#[cfg(test)]
mod tests;
