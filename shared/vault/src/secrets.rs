use std::collections::BTreeMap;
use std::sync::Arc;
use zeroize::{Zeroize, Zeroizing};

/// The secrets of an unlocked vault, by name. Cheap to clone; the values are overwritten with zeros when the
/// last clone goes. Its `Debug` shows names only, so a config printed for debugging never shows a value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Arc<Entries>);

#[derive(Default, PartialEq, Eq)]
struct Entries(BTreeMap<String, String>);

impl Drop for Entries {
    fn drop(&mut self) {
        for value in self.0.values_mut() {
            value.zeroize();
        }
    }
}

impl Secrets {
    pub fn new(entries: BTreeMap<String, String>) -> Self {
        Self(Arc::new(Entries(entries)))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.0.get(name).map(String::as_str)
    }

    /// Names in sorted order.
    pub fn names(&self) -> Vec<&str> {
        self.0.0.keys().map(String::as_str).collect()
    }

    /// The values, for redaction.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.0.0.values().map(String::as_str)
    }

    /// Name and value pairs in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A copy of the entries to change (`vault set`, `vault rm`); build a new [`Secrets`] from it.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.0.0.clone()
    }

    pub fn len(&self) -> usize {
        self.0.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.0.is_empty()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets").field("names", &self.names()).finish()
    }
}

/// The vault password, kept after unlocking only so that it can be masked like the secrets it opens. Cheap to
/// clone; overwritten with zeros when the last clone goes; its `Debug` never shows it.
#[derive(Clone)]
pub struct Password(Arc<Zeroizing<String>>);

impl Password {
    pub fn new(password: Zeroizing<String>) -> Self {
        Self(Arc::new(password))
    }

    pub fn expose(&self) -> &str {
        self.0.as_str()
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_names_only() {
        let secrets = Secrets::new(BTreeMap::from([("KEY".to_string(), "sk-hidden".to_string())]));
        let shown = format!("{secrets:?}");
        assert!(shown.contains("KEY") && !shown.contains("sk-hidden"), "{shown}");
        let password = Password::new(Zeroizing::new("vault-pw-hidden".into()));
        assert_eq!(format!("{password:?}"), "Password(***)");
    }
}
