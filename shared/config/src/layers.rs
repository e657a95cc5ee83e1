//! Layering through the `config` crate: a [`config::ConfigBuilder`] takes the file's table first, then the
//! `MINIBOT__…` overrides through [`config::Environment`], and the merged tree goes back to a `toml::Table` for the
//! rest of the pipeline (unknown keys, `${…}` expansion, typed reading).
//!
//! What the crate does to keys decides how the file is handed over. Environment variable names are lower-cased
//! and split at `__` (wanted: that is the override syntax). A source's top-level keys go through the crate's
//! path parser, which splits at `.` and reads `[n]` as an index; keys inside a table value are merged as they
//! are, case and dots kept (`env = { API_KEY = "x" }`, `headers = { "X-Title" = "y" }`). So the file source
//! hands over whole sections: top-level keys are section names, already checked against the known sections.
//! The tests below pin that behaviour down.

use crate::overrides::Override;
use crate::{ConfigError, Result, keypath};
use config::{Value, ValueKind};

/// The marker key that carries a TOML date-time through the crate, which has no date-time value: the same
/// representation `toml` itself uses in serde.
const DATETIME_KEY: &str = "$__toml_private_datetime";

/// The file's parsed table as a [`config::Source`].
#[derive(Debug, Clone)]
struct FileLayer {
    origin: String,
    table: toml::Table,
}

impl config::Source for FileLayer {
    fn clone_into_box(&self) -> Box<dyn config::Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> std::result::Result<config::Map<String, Value>, config::ConfigError> {
        Ok(self.table.iter().map(|(key, value)| (key.clone(), to_config(value, &self.origin))).collect())
    }
}

/// The file's table with the overrides on top. An override's text stays text here (the typed read coerces it);
/// one that starts with `[` or `{` becomes the array or table it spells, replacing what the file had there.
pub(crate) fn merge(file: toml::Table, origin: &str, overrides: &[Override]) -> Result<toml::Table> {
    let vars: config::Map<String, String> = overrides.iter().map(|o| (o.var.clone(), o.value.clone())).collect();
    let environment =
        config::Environment::with_prefix("MINIBOT").prefix_separator("__").separator("__").source(Some(vars));
    let merged = config::Config::builder()
        .add_source(FileLayer { origin: origin.to_string(), table: file })
        .add_source(environment)
        .build()
        .map_err(|e| ConfigError::Invalid {
            file: origin.into(),
            message: format!("cannot merge the overrides: {e}"),
        })?;
    let mut table = match merged.cache.kind {
        ValueKind::Table(root) => to_toml_table(root),
        _ => toml::Table::new(),
    };
    for o in overrides {
        let Some(slot) = keypath::lookup_mut(&mut table, &o.key).filter(|v| v.as_str() == Some(&o.value)) else {
            // The names were checked to map onto plain key paths, so the crate must have put the text there.
            return Err(ConfigError::Override {
                var: o.var.clone(),
                key: o.key.clone(),
                message: "was not placed at its key while merging".into(),
            });
        };
        if let Some(value) = o.structured()? {
            *slot = value;
        }
    }
    Ok(table)
}

fn to_config(value: &toml::Value, origin: &String) -> Value {
    let kind = match value {
        toml::Value::String(s) => ValueKind::String(s.clone()),
        toml::Value::Integer(i) => ValueKind::I64(*i),
        toml::Value::Float(f) => ValueKind::Float(*f),
        toml::Value::Boolean(b) => ValueKind::Boolean(*b),
        toml::Value::Datetime(d) => {
            let marker = Value::new(Some(origin), ValueKind::String(d.to_string()));
            ValueKind::Table([(DATETIME_KEY.to_string(), marker)].into_iter().collect())
        }
        toml::Value::Array(items) => ValueKind::Array(items.iter().map(|v| to_config(v, origin)).collect()),
        toml::Value::Table(t) => ValueKind::Table(t.iter().map(|(k, v)| (k.clone(), to_config(v, origin))).collect()),
    };
    Value::new(Some(origin), kind)
}

fn to_toml_table(table: config::Map<String, Value>) -> toml::Table {
    table.into_iter().filter_map(|(key, value)| Some((key, to_toml(value)?))).collect()
}

/// `None` for the crate's nil, which only stands in for a missing value; neither source produces one.
fn to_toml(value: Value) -> Option<toml::Value> {
    let int = |n: Option<i64>, text: String| Some(n.map_or(toml::Value::String(text), toml::Value::Integer));
    match value.kind {
        ValueKind::Nil => None,
        ValueKind::Boolean(b) => Some(toml::Value::Boolean(b)),
        ValueKind::I64(i) => Some(toml::Value::Integer(i)),
        ValueKind::I128(i) => int(i64::try_from(i).ok(), i.to_string()),
        ValueKind::U64(u) => int(i64::try_from(u).ok(), u.to_string()),
        ValueKind::U128(u) => int(i64::try_from(u).ok(), u.to_string()),
        ValueKind::Float(f) => Some(toml::Value::Float(f)),
        ValueKind::String(s) => Some(toml::Value::String(s)),
        ValueKind::Array(items) => Some(toml::Value::Array(items.into_iter().filter_map(to_toml).collect())),
        ValueKind::Table(table) => Some(datetime(&table).unwrap_or_else(|| toml::Value::Table(to_toml_table(table)))),
    }
}

fn datetime(table: &config::Map<String, Value>) -> Option<toml::Value> {
    let marker = table.get(DATETIME_KEY).filter(|_| table.len() == 1)?;
    let ValueKind::String(text) = &marker.kind else { return None };
    text.parse().ok().map(toml::Value::Datetime)
}

#[cfg(test)]
#[path = "layers_tests.rs"]
mod tests;
