use crate::expand::{self, WholeReference};
use crate::schema::{ConfigFile, SECTIONS};
use crate::vault::{Origin, Unlock};
use crate::{Config, ConfigError, Result};
use minibot_vault::Secrets;
use std::path::Path;
use toml::Value;

pub(crate) fn from_file(path: &Path, lookup: &dyn Fn(&str) -> Option<String>, unlock: Unlock<'_>) -> Result<Config> {
    if path.exists() && !path.is_file() {
        return Err(ConfigError::NotAFile(path.to_path_buf()));
    }
    if path.extension().and_then(|e| e.to_str()) != Some("toml") {
        return Err(ConfigError::NotToml(path.to_path_buf()));
    }
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let origin = path.display().to_string();
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let base_dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
    let (file, secrets) = parse(&text, &Origin { name: &origin, base_dir: &base_dir, lookup }, unlock)?;
    let config = Config { file, source: Some(absolute), base_dir, secrets };
    crate::validate::check(&config, &origin)?;
    Ok(config)
}

/// Parses, expands `${ENV}` then `${secret:…}` (unlocking the vault as `unlock` says), and types the file.
pub(crate) fn parse(text: &str, source: &Origin<'_>, unlock: Unlock<'_>) -> Result<(ConfigFile, Secrets)> {
    let (origin, lookup) = (source.name, source.lookup);
    let mut table: toml::Table = toml::from_str(text)
        .map_err(|e| ConfigError::Syntax { path: origin.to_string(), message: e.to_string().trim_end().to_string() })?;
    if let Some(section) = table.keys().find(|k| !SECTIONS.contains(&k.as_str())) {
        return Err(ConfigError::UnknownSection { file: origin.into(), section: section.clone() });
    }
    let expansion = expand::expand_tree(&mut table, lookup).map_err(|unset| ConfigError::UnsetVariable {
        file: origin.into(),
        var: unset.var,
        key: unset.key,
    })?;
    let mut whole = expansion.whole_references;
    let secrets = crate::vault::expand_secrets(&mut table, &mut whole, source, unlock)?;
    Ok((deserialize_with_coercion(table, &whole, origin)?, secrets))
}

/// A value written as exactly `"${VAR}"` may stand for a number or a boolean (`port = "${PORT}"`). Such values
/// are first read as that scalar; where the key turns out to want text, the text is put back and we try again.
pub(crate) fn deserialize_with_coercion(
    table: toml::Table,
    whole: &[WholeReference],
    origin: &str,
) -> Result<ConfigFile> {
    let mut coerced = table.clone();
    let mut candidates: Vec<&str> = Vec::new();
    for reference in whole {
        if let Some(slot) = lookup_mut(&mut coerced, &reference.key)
            && let Value::String(text) = slot
            && let Some(scalar) = scalar_from_text(text)
        {
            *slot = scalar;
            candidates.push(&reference.key);
        }
    }
    loop {
        match serde_path_to_error::deserialize::<_, ConfigFile>(Value::Table(coerced.clone())) {
            Ok(file) => return Ok(file),
            Err(err) => {
                let path = err.path().to_string();
                if let Some(index) = candidates.iter().position(|key| *key == path) {
                    let key = candidates.swap_remove(index);
                    if let (Some(slot), Some(original)) = (lookup_mut(&mut coerced, key), lookup_ref(&table, key)) {
                        *slot = original.clone();
                        continue;
                    }
                }
                return Err(describe(err, origin));
            }
        }
    }
}

fn describe(err: serde_path_to_error::Error<toml::de::Error>, origin: &str) -> ConfigError {
    let path = err.path().to_string();
    // toml appends "in `section`" on a second line; the key path already says where.
    let message = err.into_inner().to_string();
    let message = message.lines().next().unwrap_or_default().trim_end().to_string();
    let key = if path.is_empty() || path == "?" { String::from("(top level)") } else { path };
    ConfigError::InvalidKey { file: origin.into(), key, message }
}

fn scalar_from_text(text: &str) -> Option<Value> {
    match text {
        "true" => return Some(Value::Boolean(true)),
        "false" => return Some(Value::Boolean(false)),
        _ => {}
    }
    if let Ok(int) = text.parse::<i64>() {
        return Some(Value::Integer(int));
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::Float)
}

/// Splits `a.b[2].c` into segments.
fn segments(key: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, indices) = part.split_once('[').map_or((part, ""), |(n, rest)| (n, rest));
        if !name.is_empty() {
            out.push(Segment::Key(name));
        }
        for index in indices.split('[') {
            if let Some(number) = index.trim_end_matches(']').parse::<usize>().ok().filter(|_| !index.is_empty()) {
                out.push(Segment::Index(number));
            }
        }
    }
    out
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn lookup_mut<'t>(table: &'t mut toml::Table, key: &str) -> Option<&'t mut Value> {
    let segs = segments(key);
    let (first, rest) = segs.split_first()?;
    let Segment::Key(name) = first else {
        return None;
    };
    let mut current = table.get_mut(*name)?;
    for seg in rest {
        current = match (seg, current) {
            (Segment::Key(name), Value::Table(t)) => t.get_mut(*name)?,
            (Segment::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(current)
}

fn lookup_ref<'t>(table: &'t toml::Table, key: &str) -> Option<&'t Value> {
    let segs = segments(key);
    let (first, rest) = segs.split_first()?;
    let Segment::Key(name) = first else {
        return None;
    };
    let mut current = table.get(*name)?;
    for seg in rest {
        current = match (seg, current) {
            (Segment::Key(name), Value::Table(t)) => t.get(*name)?,
            (Segment::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(current)
}
