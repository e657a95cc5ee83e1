//! Tool argument schemas in the OpenAPI 3.0 subset Gemini's `functionDeclarations[].parameters` accepts
//! (<https://ai.google.dev/api/caching#Schema>). Tools describe their arguments in JSON Schema; Gemini refuses
//! the request (400 INVALID_ARGUMENT) for keywords outside its subset, so the conversion keeps only the keys it
//! lists and rewrites the JSON Schema idioms it has its own words for:
//! - `type: ["string", "null"]` and `anyOf: [X, {type: null}]` become `X` with `nullable: true`; a union of
//!   several non-null types becomes `anyOf`, and `oneOf` is read as `anyOf`;
//! - types are written in Gemini's enum spelling (`STRING`, `OBJECT`, …);
//! - `enum` stays for string values; other enums (and `const`) move into the description, since Gemini takes
//!   enums of strings only;
//! - `format` stays only where Gemini knows it (`enum`, `date-time`, `int32`, `int64`, `float`, `double`);
//! - `required` keeps only names that are among `properties`;
//! - everything else (`additionalProperties`, `$schema`, `default`, `examples`, `$ref`, …) is dropped.

use serde_json::{Map, Value, json};

/// Keys copied as they are (after their values are converted where they hold schemas).
const KEPT: &[&str] = &[
    "description",
    "title",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
    "propertyOrdering",
];

const KNOWN_FORMATS: &[&str] = &["enum", "date-time", "int32", "int64", "float", "double"];

/// `schema` in Gemini's subset. `None` when nothing is left to declare: a tool whose arguments object has no
/// properties is declared without `parameters`, as Gemini refuses an `OBJECT` without properties there.
pub(crate) fn parameters(schema: &Value) -> Option<Value> {
    let converted = convert(schema);
    let empty_object = converted.get("type").and_then(Value::as_str) == Some("OBJECT")
        && converted.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty);
    (!empty_object && converted.as_object().is_some_and(|o| !o.is_empty())).then_some(converted)
}

/// One schema node, converted; anything that is not an object (`true`, a stray string) becomes `{}`.
pub(crate) fn convert(schema: &Value) -> Value {
    let Some(source) = schema.as_object() else { return json!({}) };
    let mut out = Map::new();
    let mut nullable = source.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    let mut union = Vec::new();
    match source.get("type") {
        Some(Value::String(kind)) if kind == "null" => nullable = true,
        Some(Value::String(kind)) => {
            out.insert("type".into(), Value::String(kind.to_ascii_uppercase()));
        }
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            nullable |= kinds.contains(&"null");
            let others: Vec<&str> = kinds.into_iter().filter(|k| *k != "null").collect();
            match others.as_slice() {
                [one] => {
                    out.insert("type".into(), Value::String(one.to_ascii_uppercase()));
                }
                several => union = several.iter().map(|k| json!({ "type": k.to_ascii_uppercase() })).collect(),
            }
        }
        _ => {}
    }
    for key in KEPT {
        if let Some(value) = source.get(*key) {
            out.insert((*key).into(), value.clone());
        }
    }
    if let Some(format) = source.get("format").and_then(Value::as_str).filter(|f| KNOWN_FORMATS.contains(f)) {
        out.insert("format".into(), Value::String(format.into()));
    }
    let mut choices: Vec<Value> = Vec::new();
    for key in ["anyOf", "oneOf"] {
        for option in source.get(key).and_then(Value::as_array).into_iter().flatten() {
            if option.get("type").and_then(Value::as_str) == Some("null") {
                nullable = true;
            } else {
                choices.push(convert(option));
            }
        }
    }
    choices.extend(union);
    match choices.len() {
        0 => {}
        // `anyOf: [X, null]`: the node is X, nullable; X's own keys win over nothing, the node's over X's.
        1 if !out.contains_key("type") => {
            if let Some(Value::Object(only)) = choices.pop() {
                for (key, value) in only {
                    out.entry(key).or_insert(value);
                }
            }
        }
        _ => {
            out.insert("anyOf".into(), Value::Array(choices));
        }
    }
    if let Some(properties) = source.get("properties").and_then(Value::as_object) {
        let converted: Map<String, Value> = properties.iter().map(|(k, v)| (k.clone(), convert(v))).collect();
        if let Some(required) = source.get("required").and_then(Value::as_array) {
            let known: Vec<Value> = required
                .iter()
                .filter(|name| name.as_str().is_some_and(|n| converted.contains_key(n)))
                .cloned()
                .collect();
            if !known.is_empty() {
                out.insert("required".into(), Value::Array(known));
            }
        }
        out.insert("properties".into(), Value::Object(converted));
    }
    if let Some(items) = source.get("items") {
        out.insert("items".into(), convert(items));
    }
    add_enum(source, &mut out);
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    Value::Object(out)
}

/// String enums as Gemini takes them; other values told in the description, so the model still learns them.
fn add_enum(source: &Map<String, Value>, out: &mut Map<String, Value>) {
    let values: Vec<Value> = match (source.get("enum"), source.get("const")) {
        (Some(Value::Array(values)), _) => values.iter().filter(|v| !v.is_null()).cloned().collect(),
        (None, Some(value)) => vec![value.clone()],
        _ => return,
    };
    if values.is_empty() {
        return;
    }
    if values.iter().all(Value::is_string) {
        out.insert("enum".into(), Value::Array(values));
        out.entry("type").or_insert_with(|| Value::String("STRING".into()));
        return;
    }
    let listed: Vec<String> = values.iter().map(Value::to_string).collect();
    let note = format!("One of: {}.", listed.join(", "));
    let description = match out.get("description").and_then(Value::as_str) {
        Some(text) if !text.is_empty() => format!("{text} {note}"),
        _ => note,
    };
    out.insert("description".into(), Value::String(description));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_keywords_go_and_nested_shapes_stay() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": { "type": "string", "description": "file", "default": "a.txt", "format": "uri" },
                "mode": { "type": "string", "enum": ["read", "write"] },
                "lines": { "type": "array", "items": { "type": "integer", "minimum": 1 }, "maxItems": 3 },
                "opts": { "type": "object", "properties": { "deep": { "type": "boolean" } },
                          "required": ["deep"], "additionalProperties": { "type": "string" } }
            },
            "required": ["path", "ghost"]
        });
        assert_eq!(
            parameters(&schema),
            Some(json!({
                "type": "OBJECT",
                "properties": {
                    "path": { "type": "STRING", "description": "file" },
                    "mode": { "type": "STRING", "enum": ["read", "write"] },
                    "lines": { "type": "ARRAY", "items": { "type": "INTEGER", "minimum": 1 }, "maxItems": 3 },
                    "opts": { "type": "OBJECT", "properties": { "deep": { "type": "BOOLEAN" } }, "required": ["deep"] }
                },
                "required": ["path"]
            }))
        );
    }

    #[test]
    fn null_unions_become_nullable() {
        assert_eq!(convert(&json!({ "type": ["string", "null"] })), json!({ "type": "STRING", "nullable": true }));
        assert_eq!(
            convert(&json!({ "anyOf": [{ "type": "integer" }, { "type": "null" }], "description": "n" })),
            json!({ "type": "INTEGER", "description": "n", "nullable": true })
        );
        assert_eq!(
            convert(&json!({ "type": ["string", "number"] })),
            json!({ "anyOf": [{ "type": "STRING" }, { "type": "NUMBER" }] })
        );
        assert_eq!(
            convert(&json!({ "oneOf": [{ "type": "string" }, { "type": "array", "items": { "type": "string" } }] })),
            json!({ "anyOf": [{ "type": "STRING" }, { "type": "ARRAY", "items": { "type": "STRING" } }] })
        );
    }

    #[test]
    fn enums_that_are_not_strings_are_told_in_the_description() {
        assert_eq!(
            convert(&json!({ "type": "integer", "enum": [1, 2], "description": "level" })),
            json!({ "type": "INTEGER", "description": "level One of: 1, 2." })
        );
        assert_eq!(convert(&json!({ "const": "x" })), json!({ "type": "STRING", "enum": ["x"] }));
    }

    #[test]
    fn a_tool_without_arguments_declares_no_parameters() {
        assert_eq!(parameters(&json!({ "type": "object", "properties": {} })), None);
        assert_eq!(parameters(&json!({ "type": "object", "additionalProperties": false })), None);
        assert_eq!(parameters(&json!({})), None);
    }
}
