use std::collections::BTreeMap;
use std::sync::Arc;

/// The secrets of an unlocked vault, by name. Cheap to clone. Its `Debug` shows names only, so a config
/// printed for debugging never shows a value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Arc<BTreeMap<String, String>>);

impl Secrets {
    pub fn new(entries: BTreeMap<String, String>) -> Self {
        Self(Arc::new(entries))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Names in sorted order.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    /// The values, for redaction.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.0.values().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets").field("names", &self.names()).finish()
    }
}
