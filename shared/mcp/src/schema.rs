//! Input-schema normalisation and argument cleanup for remote tools.
//!
//! Remote servers publish whatever JSON Schema their SDK produces; LLM providers accept a narrower dialect (OpenAI
//! strict-ish validators reject `propertyNames`, unknown string formats, and `$ref` mixed with siblings). The
//! rules follow the 0.36 bridge so the same servers keep working.

use serde_json::{Map, Value};

/// String formats every provider we target accepts; any other `format` is dropped.
const SUPPORTED_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Keywords providers reject outright.
const DROPPED_KEYWORDS: &[&str] = &["propertyNames", "minProperties", "maxProperties"];

/// `$ref` chains deeper than this are left as they are, so a self-referencing schema cannot loop.
const MAX_REF_DEPTH: usize = 16;

/// Normalises a remote tool's input schema into one every provider accepts.
pub fn normalize_input_schema(schema: &Map<String, Value>) -> Value {
    if schema.is_empty() {
        return serde_json::json!({"type": "object", "properties": {}, "additionalProperties": true});
    }
    let root = Value::Object(schema.clone());
    let mut out = normalize_node(&root, &root, 0);
    if let Value::Object(map) = &mut out {
        if !map.contains_key("type") {
            map.insert("type".into(), Value::String("object".into()));
        }
        if map.get("type").and_then(Value::as_str) == Some("object") && !map.contains_key("properties") {
            map.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    out
}

fn normalize_node(node: &Value, root: &Value, depth: usize) -> Value {
    match node {
        Value::Object(map) => normalize_object(map, root, depth),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalize_node(v, root, depth)).collect()),
        other => other.clone(),
    }
}

fn normalize_object(map: &Map<String, Value>, root: &Value, depth: usize) -> Value {
    // A `$ref` next to other keywords is ignored by some validators and rejected by others; inlining the target
    // and letting the siblings override it keeps the meaning either way.
    if let Some(Value::String(reference)) = map.get("$ref")
        && map.len() > 1
        && depth < MAX_REF_DEPTH
        && let Some(Value::Object(target)) = resolve_ref(root, reference)
    {
        let mut merged = target.clone();
        for (key, value) in map {
            if key != "$ref" {
                merged.insert(key.clone(), value.clone());
            }
        }
        return normalize_object(&merged, root, depth + 1);
    }

    let mut out = Map::with_capacity(map.len());
    for (key, value) in map {
        if DROPPED_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        if key == "format"
            && map.get("type").and_then(Value::as_str) == Some("string")
            && !value.as_str().is_some_and(|f| SUPPORTED_FORMATS.contains(&f))
        {
            continue;
        }
        // Property names are user data, not schema keywords: recurse into the values only.
        let normalized = if matches!(key.as_str(), "properties" | "$defs" | "definitions" | "patternProperties") {
            match value {
                Value::Object(props) => Value::Object(
                    props.iter().map(|(name, sub)| (name.clone(), normalize_node(sub, root, depth))).collect(),
                ),
                other => other.clone(),
            }
        } else {
            normalize_node(value, root, depth)
        };
        out.insert(key.clone(), normalized);
    }
    Value::Object(out)
}

/// Resolves a local JSON pointer (`#/$defs/Foo`); remote references are not followed.
fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

/// Removes `null` values from objects, recursively: models send `null` for optional parameters they mean to
/// omit, and many servers validate that as a type error.
pub fn drop_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, drop_nulls(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn empty_schema_becomes_open_object() {
        assert_eq!(
            normalize_input_schema(&Map::new()),
            json!({"type": "object", "properties": {}, "additionalProperties": true})
        );
    }

    #[test]
    fn missing_type_becomes_object() {
        let out = normalize_input_schema(&obj(json!({"properties": {"a": {"type": "string"}}})));
        assert_eq!(out["type"], "object");
        assert_eq!(out["properties"]["a"]["type"], "string");
    }

    #[test]
    fn drops_unsupported_keywords_and_formats() {
        let out = normalize_input_schema(&obj(json!({
            "type": "object",
            "propertyNames": {"pattern": "^a"},
            "minProperties": 1,
            "maxProperties": 3,
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "site": {"type": "string", "format": "uri"},
                "nested": {"type": "object", "maxProperties": 2, "properties": {"format": {"type": "string"}}}
            }
        })));
        assert!(out.get("propertyNames").is_none());
        assert!(out.get("minProperties").is_none());
        assert!(out.get("maxProperties").is_none());
        assert_eq!(out["properties"]["when"]["format"], "date-time");
        assert!(out["properties"]["site"].get("format").is_none());
        assert!(out["properties"]["nested"].get("maxProperties").is_none());
        // A property that happens to be called `format` is kept.
        assert_eq!(out["properties"]["nested"]["properties"]["format"]["type"], "string");
    }

    #[test]
    fn ref_with_siblings_is_inlined() {
        let out = normalize_input_schema(&obj(json!({
            "type": "object",
            "$defs": {"Color": {"type": "string", "enum": ["red", "blue"]}},
            "properties": {
                "plain": {"$ref": "#/$defs/Color"},
                "described": {"$ref": "#/$defs/Color", "description": "pick one"}
            }
        })));
        assert_eq!(out["properties"]["plain"], json!({"$ref": "#/$defs/Color"}));
        assert_eq!(
            out["properties"]["described"],
            json!({"type": "string", "enum": ["red", "blue"], "description": "pick one"})
        );
    }

    #[test]
    fn self_referencing_ref_terminates() {
        let out = normalize_input_schema(&obj(json!({
            "type": "object",
            "$defs": {"Node": {"$ref": "#/$defs/Node", "description": "loop"}},
            "properties": {"n": {"$ref": "#/$defs/Node", "title": "n"}}
        })));
        assert_eq!(out["type"], "object");
    }

    #[test]
    fn nulls_are_dropped_recursively() {
        let out = drop_nulls(json!({"a": null, "b": {"c": null, "d": 1}, "e": [{"f": null}, null]}));
        assert_eq!(out, json!({"b": {"d": 1}, "e": [{}, null]}));
    }
}
