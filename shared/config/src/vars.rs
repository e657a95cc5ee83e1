//! The environment as the loader sees it: one snapshot of variables, taken once, that serves `MINIBOT_CONFIG`,
//! `${NAME}` references, `MINIBOT_VAULT_PASSWORD` and the `MINIBOT__…` overrides alike. Tests build one from a
//! list instead of touching the process environment.

use std::collections::BTreeMap;

/// Environment variables by name (names are case-sensitive, as on Unix).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars {
    values: BTreeMap<String, String>,
    /// Override variables (`MINIBOT__…`) whose value is not UTF-8: refused by name rather than skipped, since
    /// the user meant to set something.
    pub(crate) unreadable: Vec<String>,
}

impl Vars {
    /// The process environment. Variables whose name or value is not UTF-8 cannot be referenced and are left
    /// out, except that such an override is remembered so loading can refuse it.
    pub fn process() -> Self {
        let mut vars = Self::default();
        for (name, value) in std::env::vars_os() {
            let Ok(name) = name.into_string() else { continue };
            match value.into_string() {
                Ok(value) => {
                    vars.values.insert(name, value);
                }
                Err(_) if crate::overrides::is_override(&name) => vars.unreadable.push(name),
                Err(_) => {}
            }
        }
        vars
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Every variable, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Vars {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        Self { values: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect(), unreadable: Vec::new() }
    }
}
