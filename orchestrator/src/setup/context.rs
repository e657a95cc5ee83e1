//! What the wizard's steps share: the flags, the terminal, the document being edited and the secrets waiting for
//! the vault.

use super::args::InitArgs;
use super::ask::Ui;
use super::document::Document;
use super::vault::Vault;
use minibot_config::{Config, Secrets, Unlock};
use minibot_vault::Zeroizing;
use std::collections::BTreeMap;
use std::path::PathBuf;
/// What the steps share.
pub struct Context<'a> {
    pub args: &'a InitArgs,
    pub ui: Ui,
    pub doc: Document,
    pub target: PathBuf,
    /// The target's folder: relative paths in the file resolve here.
    pub base_dir: PathBuf,
    pub runtime: tokio::runtime::Runtime,
    /// Secrets to put into the vault when the file is written.
    pub(super) pending: BTreeMap<String, Zeroizing<String>>,
    pub(super) vault: Option<Vault>,
}

/// The document and the pending secrets at one moment, to go back to.
pub struct Snapshot(toml_edit::DocumentMut, BTreeMap<String, Zeroizing<String>>);

impl Context<'_> {
    /// Keeps `value` for the vault under `name` (written with the config, not before).
    pub fn store_secret(&mut self, name: &str, value: &str) {
        self.pending.insert(name.to_string(), Zeroizing::new(value.to_string()));
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot(self.doc.doc.clone(), self.pending.clone())
    }

    pub fn restore(&mut self, snapshot: &Snapshot) {
        self.doc.doc = snapshot.0.clone();
        self.pending = snapshot.1.clone();
    }

    pub(super) fn vault(&mut self) -> anyhow::Result<&mut Vault> {
        if self.vault.is_none() {
            self.vault = Some(Vault::open(&self.doc, &self.base_dir, &mut self.ui)?);
        }
        self.vault.as_mut().ok_or_else(|| anyhow::anyhow!("internal: the vault did not open"))
    }

    /// The document as it would be written, with the vault switched on when secrets wait for it.
    pub(super) fn final_text(&mut self) -> anyhow::Result<String> {
        if self.pending.is_empty() {
            return Ok(self.doc.text_of());
        }
        let mut doc = Document { doc: self.doc.doc.clone(), existed: self.doc.existed };
        doc.set(&["vault", "enabled"], true)?;
        Ok(doc.text_of())
    }

    /// The secrets for `text`: the pending ones, and the vault's too when `text` refers to any other.
    pub(super) fn secrets_for(&mut self, text: &str) -> anyhow::Result<Secrets> {
        let wanted = references(text);
        let mut entries: BTreeMap<String, String> = BTreeMap::new();
        if wanted.iter().any(|name| !self.pending.contains_key(name)) {
            entries.extend(self.vault()?.secrets().to_map());
        }
        entries.extend(self.pending.iter().map(|(k, v)| (k.clone(), v.to_string())));
        Ok(Secrets::new(entries))
    }

    /// The config as the document now says, loaded and validated as `minibot` will load it.
    pub fn candidate(&mut self) -> anyhow::Result<Config> {
        let text = self.final_text()?;
        let secrets = self.secrets_for(&text)?;
        let lookup = |name: &str| std::env::var(name).ok();
        let origin = self.target.display().to_string();
        Ok(Config::from_toml_with(&text, &origin, &self.base_dir, &lookup, Unlock::Given(secrets))?)
    }
}

/// The names of the `${secret:NAME}` references in the values of `text` (comments may mention the syntax).
pub(super) fn references(text: &str) -> Vec<String> {
    fn in_value(value: &toml_edit::Value, out: &mut Vec<String>) {
        match value {
            toml_edit::Value::String(text) => out.extend(
                text.value()
                    .split("${secret:")
                    .skip(1)
                    .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_string())),
            ),
            toml_edit::Value::Array(items) => items.iter().for_each(|v| in_value(v, out)),
            toml_edit::Value::InlineTable(table) => table.iter().for_each(|(_, v)| in_value(v, out)),
            _ => {}
        }
    }
    fn in_item(item: &toml_edit::Item, out: &mut Vec<String>) {
        match item {
            toml_edit::Item::Value(value) => in_value(value, out),
            toml_edit::Item::Table(table) => table.iter().for_each(|(_, i)| in_item(i, out)),
            toml_edit::Item::ArrayOfTables(tables) => {
                tables.iter().for_each(|t| t.iter().for_each(|(_, i)| in_item(i, out)))
            }
            toml_edit::Item::None => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(doc) = text.parse::<toml_edit::DocumentMut>() {
        in_item(doc.as_item(), &mut out);
    }
    out
}
