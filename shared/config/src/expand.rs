//! Reference expansion over every string value of the parsed TOML tree, before typed validation. Two passes,
//! as in MiniBot: `${NAME}` from the environment first, then `${secret:NAME}` from the unlocked vault.
//!
//! - `${NAME}` with `NAME = [A-Za-z_][A-Za-z0-9_]*`; `$NAME` and `${NAME:-x}` stay untouched, so MiniBot's files
//!   load unchanged.
//! - `${secret:NAME}` with `NAME = [A-Za-z_][A-Za-z0-9_.-]*` (the vault's name rule).
//! - `$${…}` is the escape for the literal text `${…}`; each pass removes the escape of its own kind only.
//!
//! Keys and table names are never expanded, and the text a pass puts in is not expanded by that pass again.

use toml::Value;

/// Which references a pass expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `${NAME}`: environment variables.
    Env,
    /// `${secret:NAME}`: vault entries.
    Secret,
}

impl Kind {
    /// The name inside `${…}`, if `inner` is a reference of this kind.
    fn name(self, inner: &str) -> Option<&str> {
        match self {
            Self::Env => Some(inner).filter(|n| is_variable_name(n)),
            Self::Secret => inner.strip_prefix("secret:").filter(|n| minibot_vault::is_valid_name(n)),
        }
    }
}

/// A reference whose value is not there, with the dotted key path that holds it.
#[derive(Debug, PartialEq, Eq)]
pub struct Unset {
    pub var: String,
    pub key: String,
}

/// A string value that was exactly one reference. Numeric and boolean keys may be written that way
/// (`port = "${PORT}"`), so the loader gets a chance to read the expanded text as a number or a boolean.
#[derive(Debug, Clone)]
pub struct WholeReference {
    pub key: String,
}

pub struct Expansion {
    pub whole_references: Vec<WholeReference>,
}

/// The `${NAME}` pass.
pub fn expand_tree(root: &mut toml::Table, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Expansion, Unset> {
    expand_tree_of(Kind::Env, root, lookup)
}

/// One pass over every string value of `root`.
pub fn expand_tree_of(
    kind: Kind,
    root: &mut toml::Table,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Expansion, Unset> {
    let mut whole = Vec::new();
    walk(root, &mut |key, text| {
        let expanded = expand_str_of(kind, text, key, lookup)?;
        if is_single_reference(kind, text) {
            whole.push(WholeReference { key: key.to_string() });
        }
        *text = expanded;
        Ok(())
    })?;
    Ok(Expansion { whole_references: whole })
}

/// Every reference of `kind` in `root` (escapes excluded), as (dotted key, name), in file order of sections.
pub fn references(kind: Kind, root: &mut toml::Table) -> Vec<(String, String)> {
    let found = std::cell::RefCell::new(Vec::new());
    let _ = walk(root, &mut |key, text| {
        let _ = expand_str_of(kind, text, key, &|name| {
            found.borrow_mut().push((key.to_string(), name.to_string()));
            Some(String::new())
        });
        Ok(())
    });
    found.into_inner()
}

/// Calls `visit` with the dotted key and text of every string value.
fn walk(root: &mut toml::Table, visit: &mut dyn FnMut(&str, &mut String) -> Result<(), Unset>) -> Result<(), Unset> {
    for (key, value) in root.iter_mut() {
        walk_value(value, key, visit)?;
    }
    Ok(())
}

fn walk_value(
    value: &mut Value,
    path: &str,
    visit: &mut dyn FnMut(&str, &mut String) -> Result<(), Unset>,
) -> Result<(), Unset> {
    match value {
        Value::String(text) => visit(path, text)?,
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                walk_value(item, &format!("{path}[{index}]"), visit)?;
            }
        }
        Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                walk_value(item, &format!("{path}.{key}"), visit)?;
            }
        }
        Value::Integer(_) | Value::Float(_) | Value::Boolean(_) | Value::Datetime(_) => {}
    }
    Ok(())
}

fn is_single_reference(kind: Kind, text: &str) -> bool {
    text.strip_prefix("${").and_then(|rest| rest.strip_suffix('}')).and_then(|inner| kind.name(inner)).is_some()
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Expands the `${NAME}` references of one string. `path` only serves the error message.
pub fn expand_str(text: &str, path: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Unset> {
    expand_str_of(Kind::Env, text, path, lookup)
}

fn expand_str_of(kind: Kind, text: &str, path: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Unset> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let escaped = start > 0 && rest.as_bytes()[start - 1] == b'$';
        let after = &rest[start + 2..];
        let reference =
            after.find('}').map(|end| &after[..end]).and_then(|inner| kind.name(inner).map(|name| (inner, name)));
        match reference {
            Some((inner, _)) if escaped => {
                out.push_str(&rest[..start - 1]);
                out.push_str("${");
                out.push_str(inner);
                out.push('}');
                rest = &after[inner.len() + 1..];
            }
            Some((inner, name)) => {
                out.push_str(&rest[..start]);
                let value = lookup(name).ok_or_else(|| Unset { var: name.to_string(), key: path.to_string() })?;
                out.push_str(&value);
                rest = &after[inner.len() + 1..];
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

    fn secret(name: &str) -> Option<String> {
        (name == "openai.key-1").then(|| "sk-vault".into())
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
    fn each_pass_handles_only_its_own_references_and_escapes() {
        let text = "${KEY} ${secret:openai.key-1} $${secret:openai.key-1} $${KEY}";
        let after_env = expand_str_of(Kind::Env, text, "k", &env).ok();
        assert_eq!(after_env.as_deref(), Some("sk-1 ${secret:openai.key-1} $${secret:openai.key-1} ${KEY}"));
        let after_secret = expand_str_of(Kind::Secret, after_env.as_deref().unwrap_or_default(), "k", &secret).ok();
        assert_eq!(after_secret.as_deref(), Some("sk-1 sk-vault ${secret:openai.key-1} ${KEY}"));
        assert_eq!(
            expand_str_of(Kind::Secret, "${secret:9bad} ${secret:}", "k", &secret).ok().as_deref(),
            Some("${secret:9bad} ${secret:}")
        );
    }

    #[test]
    fn unset_variable_names_variable_and_key() {
        let mut table: toml::Table =
            toml::from_str("[llm]\nheaders = { a = [\"x\", \"${NOPE}\"] }").unwrap_or_default();
        let err = expand_tree(&mut table, &env).err();
        assert_eq!(err, Some(Unset { var: "NOPE".into(), key: "llm.headers.a[1]".into() }));
    }

    #[test]
    fn references_lists_unescaped_secret_references_with_their_keys() {
        let mut table: toml::Table = toml::from_str(
            "[llm]\napi_key = \"${secret:A}\"\nbase_url = \"$${secret:B}\"\n[x]\nl = [\"p ${secret:C} q\"]",
        )
        .unwrap_or_default();
        let found = references(Kind::Secret, &mut table);
        assert_eq!(found, [("llm.api_key".to_string(), "A".to_string()), ("x.l[0]".into(), "C".into())]);
    }
}
