//! Tool schemas as each model family takes them (MiniBot's `schema_policy`). OpenAI's models (`gpt-…`, the
//! `o1`/`o3`/`o4` reasoning models, and `openai/…` ids on routers) get the strict shape their function calling
//! is built for: every property listed in `required`, the optional ones made nullable instead, every object
//! closed with `additionalProperties: false`. DeepSeek's models get a relaxed shape (no `null` in type unions,
//! objects left open), which they follow more reliably. Every other model gets the schemas as written.

use crate::{ChatProvider, ChatRequest, ChatResponse, Result, TextSink, ToolSpec};
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaPolicy {
    Strict,
    Relaxed,
    AsWritten,
}

impl SchemaPolicy {
    pub fn for_model(model: &str) -> Self {
        let lower = model.to_ascii_lowercase();
        let name = lower.rsplit('/').next().unwrap_or(&lower);
        let reasoning_model = name.len() > 1 && name.starts_with('o') && name.as_bytes()[1].is_ascii_digit();
        if lower.starts_with("openai/") || lower == "openai" || lower.starts_with("gpt-") || reasoning_model {
            Self::Strict
        } else if lower.starts_with("deepseek") || lower.contains("/deepseek") {
            Self::Relaxed
        } else {
            Self::AsWritten
        }
    }

    /// The tools as this policy sends them.
    pub fn apply<'t>(self, tools: &'t [ToolSpec]) -> Cow<'t, [ToolSpec]> {
        self.apply_with(tools, |parameters| Arc::new(self.shape(parameters)))
    }

    /// The tools as this policy sends them, each schema shaped by `shape` (which may reuse an earlier result).
    fn apply_with<'t>(
        self,
        tools: &'t [ToolSpec],
        mut shape: impl FnMut(&Arc<Value>) -> Arc<Value>,
    ) -> Cow<'t, [ToolSpec]> {
        if tools.is_empty() || self == Self::AsWritten {
            return Cow::Borrowed(tools);
        }
        Cow::Owned(
            tools
                .iter()
                .map(|tool| ToolSpec {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: shape(&tool.parameters),
                })
                .collect(),
        )
    }

    /// One schema in this policy's shape.
    fn shape(self, parameters: &Value) -> Value {
        let mut shaped = parameters.clone();
        match self {
            Self::Strict => strict(&mut shaped),
            Self::Relaxed => relaxed(&mut shaped),
            Self::AsWritten => {}
        }
        shaped
    }
}

fn is_object_schema(schema: &Map<String, Value>) -> bool {
    schema.get("type").is_some_and(|t| t == "object" || t.as_array().is_some_and(|a| a.iter().any(|t| t == "object")))
        || schema.contains_key("properties")
}

/// Every property required, the optional ones nullable, objects closed; nested schemas too.
fn strict(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if is_object_schema(map) {
        let required: Vec<String> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                strict(property);
                if !required.contains(name) {
                    make_nullable(property);
                }
            }
            let all: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
            map.insert("required".into(), Value::Array(all));
        } else {
            map.insert("properties".into(), Value::Object(Map::new()));
            map.insert("required".into(), Value::Array(Vec::new()));
        }
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    nested(map, strict);
}

/// No `null` in type unions; objects left open.
fn relaxed(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    map.remove("additionalProperties");
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(relaxed);
    }
    nested(map, relaxed);
}

/// Applies `f` to the schemas inside arrays and combinators (the properties are handled by the caller).
fn nested(map: &mut Map<String, Value>, f: fn(&mut Value)) {
    if let Some(items) = map.get_mut("items") {
        f(items);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(options)) = map.get_mut(key) {
            options.iter_mut().for_each(f);
        }
    }
}

fn make_nullable(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    match map.get_mut("type") {
        Some(Value::String(kind)) => {
            let kind = std::mem::take(kind);
            map.insert("type".into(), Value::Array(vec![Value::String(kind), Value::String("null".into())]));
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push(Value::String("null".into()));
            }
        }
        _ => {
            if let Some(Value::Array(options)) = map.get_mut("anyOf")
                && !options.iter().any(|o| o.get("type").is_some_and(|t| t == "null"))
            {
                options.push(serde_json::json!({ "type": "null" }));
            }
        }
    }
    if let Some(Value::Array(choices)) = map.get_mut("enum")
        && !choices.contains(&Value::Null)
    {
        choices.push(Value::Null);
    }
}

/// A schema's address and the policy it was shaped for.
type SchemaKey = (usize, SchemaPolicy);
/// The original (kept so its address cannot be reused by another) and its shaped copy.
type ShapedSchema = (Arc<Value>, Arc<Value>);

/// A provider whose requests carry tool schemas in the shape their model takes.
pub struct ShapedTools<P> {
    inner: P,
    /// Shaped schemas by their original: a turn's tools are the same `Arc`s request after request, so each is
    /// shaped once instead of per request.
    shaped: Mutex<HashMap<SchemaKey, ShapedSchema>>,
}

/// More distinct schemas than any tool set has; past it the cache starts again (MCP servers can change theirs).
const MAX_CACHED_SCHEMAS: usize = 1024;

impl<P> ShapedTools<P> {
    pub fn new(inner: P) -> Self {
        Self { inner, shaped: Mutex::new(HashMap::new()) }
    }

    fn shaped<'r>(&self, request: &'r ChatRequest) -> Cow<'r, ChatRequest> {
        let policy = SchemaPolicy::for_model(&request.model);
        let mut cache = self.shaped.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() > MAX_CACHED_SCHEMAS {
            cache.clear();
        }
        let tools = policy.apply_with(&request.tools, |original| {
            let key = (Arc::as_ptr(original) as usize, policy);
            let (_, shaped) =
                cache.entry(key).or_insert_with(|| (Arc::clone(original), Arc::new(policy.shape(original))));
            Arc::clone(shaped)
        });
        match tools {
            Cow::Borrowed(_) => Cow::Borrowed(request),
            Cow::Owned(tools) => Cow::Owned(ChatRequest { tools, ..request.clone() }),
        }
    }
}

impl<P: ChatProvider> ChatProvider for ShapedTools<P> {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move { self.inner.complete(&self.shaped(request)).await })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move { self.inner.stream(&self.shaped(request), on_text).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(parameters: Value) -> ToolSpec {
        ToolSpec { name: "t".into(), description: "d".into(), parameters: Arc::new(parameters) }
    }

    #[test]
    fn families_are_told_apart() {
        for model in ["gpt-4o", "gpt-5-mini", "o3", "o4-mini", "openai/gpt-4.1", "OpenAI/o1"] {
            assert_eq!(SchemaPolicy::for_model(model), SchemaPolicy::Strict, "{model}");
        }
        for model in ["deepseek-chat", "deepseek/deepseek-r1", "openrouter/deepseek/deepseek-v3"] {
            assert_eq!(SchemaPolicy::for_model(model), SchemaPolicy::Relaxed, "{model}");
        }
        for model in ["claude-sonnet-4", "gemini-2.5-pro", "llama3.1", "ollama", "qwen3"] {
            assert_eq!(SchemaPolicy::for_model(model), SchemaPolicy::AsWritten, "{model}");
        }
    }

    #[test]
    fn strict_requires_everything_and_makes_the_optional_nullable() {
        let schema = json!({ "type": "object", "properties": {
            "path": { "type": "string" },
            "limit": { "type": "integer" },
            "mode": { "type": "string", "enum": ["a", "b"] },
            "filter": { "type": "object", "properties": { "glob": { "type": "string" } } },
            "tags": { "type": "array", "items": { "type": "object", "properties": { "k": { "type": "string" } } } }
        }, "required": ["path"] });
        let tools = [tool(schema)];
        let shaped = SchemaPolicy::Strict.apply(&tools);
        let p = &shaped[0].parameters;
        assert_eq!(p["required"], json!(["filter", "limit", "mode", "path", "tags"]));
        assert_eq!(p["additionalProperties"], false);
        assert_eq!(p["properties"]["path"]["type"], "string");
        assert_eq!(p["properties"]["limit"]["type"], json!(["integer", "null"]));
        assert_eq!(p["properties"]["mode"]["enum"], json!(["a", "b", null]));
        assert_eq!(p["properties"]["filter"]["additionalProperties"], false);
        assert_eq!(p["properties"]["filter"]["properties"]["glob"]["type"], json!(["string", "null"]));
        assert_eq!(p["properties"]["tags"]["items"]["additionalProperties"], false);
    }

    #[test]
    fn relaxed_drops_null_unions_and_as_written_changes_nothing() {
        let schema = json!({ "type": "object", "additionalProperties": false, "properties": {
            "limit": { "type": ["integer", "null"] } }, "required": ["limit"] });
        let tools = [tool(schema.clone())];
        let relaxed = SchemaPolicy::Relaxed.apply(&tools);
        assert_eq!(relaxed[0].parameters["properties"]["limit"]["type"], "integer");
        assert!(relaxed[0].parameters.get("additionalProperties").is_none());
        assert!(matches!(SchemaPolicy::AsWritten.apply(&tools), Cow::Borrowed(_)));
    }

    /// A turn's schemas are shaped once: the next request with the same schema gets the same shaped one, and a
    /// changed schema (an MCP server's new version) is shaped anew.
    #[test]
    fn each_schema_is_shaped_once() {
        let shaping = ShapedTools::new(());
        let schema = Arc::new(json!({ "type": "object", "properties": { "q": { "type": "string" } } }));
        let request = |parameters: &Arc<Value>| ChatRequest {
            model: "gpt-4o".into(),
            tools: vec![ToolSpec { name: "t".into(), description: "d".into(), parameters: Arc::clone(parameters) }],
            ..ChatRequest::default()
        };
        let first = shaping.shaped(&request(&schema)).tools[0].parameters.clone();
        let again = shaping.shaped(&request(&schema)).tools[0].parameters.clone();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first["additionalProperties"], false);
        let changed = Arc::new(json!({ "type": "object", "properties": { "n": { "type": "integer" } } }));
        let other = shaping.shaped(&request(&changed)).tools[0].parameters.clone();
        assert_eq!(other["required"], json!(["n"]));
    }
}
