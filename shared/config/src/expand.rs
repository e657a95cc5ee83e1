//! `${NAME}` expansion over every string value of the parsed TOML tree, before typed validation.
//!
//! Only `${NAME}` with `NAME = [A-Za-z_][A-Za-z0-9_]*` is expanded; `$${NAME}` is the escape for a literal
//! `${NAME}`; `$NAME` and `${NAME:-x}` stay untouched (MiniBot's rule, so its files load unchanged). Keys and
//! table names are never expanded. Expanded text is not expanded again.

use toml::Value;

/// A variable that is referenced but not set, with the dotted key path that references it.
#[derive(Debug, PartialEq, Eq)]
pub struct Unset {
    pub var: String,
    pub key: String,
}

/// A string value that was exactly one `${NAME}` reference. Numeric and boolean keys may be written that way
/// (`port = "${PORT}"`), so the loader gets a chance to read the expanded text as a number or a boolean.
#[derive(Debug, Clone)]
pub struct WholeReference {
    pub key: String,
}

pub struct Expansion {
    pub whole_references: Vec<WholeReference>,
}

pub fn expand_tree(
    root: &mut toml::Table,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Expansion, Unset> {
    let mut whole = Vec::new();
    for (key, value) in root.iter_mut() {
        expand_value(value, key, lookup, &mut whole)?;
    }
    Ok(Expansion { whole_references: whole })
}

fn expand_value(
    value: &mut Value,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    whole: &mut Vec<WholeReference>,
) -> Result<(), Unset> {
    match value {
        Value::String(text) => {
            let expanded = expand_str(text, path, lookup)?;
            if is_single_reference(text) {
                whole.push(WholeReference { key: path.to_string() });
            }
            *text = expanded;
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                expand_value(item, &format!("{path}[{index}]"), lookup, whole)?;
            }
        }
        Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                expand_value(item, &format!("{path}.{key}"), lookup, whole)?;
            }
        }
        Value::Integer(_) | Value::Float(_) | Value::Boolean(_) | Value::Datetime(_) => {}
    }
    Ok(())
}

fn is_single_reference(text: &str) -> bool {
    text.strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(is_variable_name)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Expands one string. `path` only serves the error message.
pub fn expand_str(
    text: &str,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Unset> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let escaped = start > 0 && rest.as_bytes()[start - 1] == b'$';
        let after = &rest[start + 2..];
        let reference = after
            .find('}')
            .map(|end| &after[..end])
            .filter(|name| is_variable_name(name));
        match reference {
            Some(name) if escaped => {
                out.push_str(&rest[..start - 1]);
                out.push_str("${");
                out.push_str(name);
                out.push('}');
                rest = &after[name.len() + 1..];
            }
            Some(name) => {
                out.push_str(&rest[..start]);
                let value = lookup(name).ok_or_else(|| Unset {
                    var: name.to_string(),
                    key: path.to_string(),
                })?;
                out.push_str(&value);
                rest = &after[name.len() + 1..];
            }
            None => {
                out.push_str(&rest[..start + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "KEY" => Some("sk-1".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_escapes_and_leaves_other_dollar_forms() {
        assert_eq!(expand_str("a ${KEY} b", "k", &env).ok(), Some("a sk-1 b".into()));
        assert_eq!(expand_str("$${KEY}", "k", &env).ok(), Some("${KEY}".into()));
        assert_eq!(expand_str("$KEY ${KEY:-x}", "k", &env).ok(), Some("$KEY ${KEY:-x}".into()));
        assert_eq!(expand_str("${EMPTY}", "k", &env).ok(), Some(String::new()));
        assert_eq!(expand_str("${KEY", "k", &env).ok(), Some("${KEY".into()));
    }

    #[test]
    fn unset_variable_names_variable_and_key() {
        let mut table: toml::Table = toml::from_str("[llm]\nheaders = { a = [\"x\", \"${NOPE}\"] }")
            .unwrap_or_default();
        let err = expand_tree(&mut table, &env).err();
        assert_eq!(
            err,
            Some(Unset { var: "NOPE".into(), key: "llm.headers.a[1]".into() })
        );
    }
}
