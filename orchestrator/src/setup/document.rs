//! The config file as an editable document: reads what is there, changes only the keys the wizard sets (and only
//! when the value differs), keeps everything else byte for byte, and writes it back readable by its owner only.

use anyhow::Context;
use std::path::{Path, PathBuf};
use toml_edit::{DocumentMut, Item, Table, Value};

const HEADER: &str = "\
# minibot configuration, written by `minibot init`.
# Run `minibot init` again to change it: it keeps your comments and every key it does not ask about.
# All keys: docs/configuration.md. Secrets (API keys, the bot token) are not in this file: they are in the
# encrypted vault ([vault] below, `minibot vault list`) and written here as \"${secret:NAME}\".
";

/// Comments for the tables the wizard creates, so a new file explains itself.
fn comment_for(path: &[&str]) -> Option<&'static str> {
    Some(match path {
        ["llm"] => "# The main agent's provider and model.",
        ["providers", _] => "# Where that provider is and how to sign in.",
        ["vault"] => {
            "# The encrypted vault that holds the secrets; the password is in password_file if one is set, else \
                      MINIBOT_VAULT_PASSWORD, else it is asked on the terminal."
        }
        ["channels", "telegram"] => "# The Telegram bot. Only the users in allowed_user_ids may talk to it.",
        ["tasks"] => {
            "# Background tasks: sqlite runs local_workers worker processes on this machine; rabbitmq \
                      hands tasks to minibot-worker processes anywhere."
        }
        ["rabbitmq"] => "# The broker for the rabbitmq tasks backend; message_key signs every message.",
        ["tools", "mcp"] => "# MCP servers: their tools are offered to the assistant (docs/tools.md).",
        _ => return None,
    })
}

pub struct Document {
    pub doc: DocumentMut,
    /// The file existed before this run.
    pub existed: bool,
}

impl Document {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let doc = text.parse::<DocumentMut>().with_context(|| {
                    format!("{} is not valid TOML; fix it or pass --config to write another file", path.display())
                })?;
                Ok(Self { doc, existed: true })
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let mut doc = DocumentMut::new();
                doc.decor_mut().set_prefix(HEADER);
                Ok(Self { doc, existed: false })
            }
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// The item at a dotted path, if any.
    pub fn get(&self, path: &[&str]) -> Option<&Item> {
        let mut item = self.doc.as_item();
        for key in path {
            item = item.get(key)?;
        }
        Some(item)
    }

    pub fn str(&self, path: &[&str]) -> Option<String> {
        self.get(path).and_then(Item::as_str).map(str::to_string)
    }

    /// A non-empty string value.
    pub fn text(&self, path: &[&str]) -> Option<String> {
        self.str(path).filter(|s| !s.trim().is_empty())
    }

    pub fn has_table(&self, path: &[&str]) -> bool {
        self.get(path).is_some_and(Item::is_table_like)
    }

    /// The table at `path`, made (with its comment) when missing. Tables that only hold others (`[providers]`,
    /// `[channels]`, `[tools]`) stay implicit, as people write them.
    pub fn table(&mut self, path: &[&str]) -> anyhow::Result<&mut Table> {
        let mut table = self.doc.as_table_mut();
        for (depth, key) in path.iter().enumerate() {
            let is_last = depth + 1 == path.len();
            let item = table.entry(key).or_insert_with(|| {
                let mut fresh = Table::new();
                if is_last {
                    if let Some(comment) = comment_for(path) {
                        fresh.decor_mut().set_prefix(format!("\n{}\n", wrap_comment(comment)));
                    }
                } else {
                    fresh.set_implicit(true);
                }
                Item::Table(fresh)
            });
            table = item.as_table_mut().with_context(|| {
                format!("`{}` in the config is not a table; fix it by hand first", path[..=depth].join("."))
            })?;
        }
        Ok(table)
    }

    /// Sets `path` to `value` unless it already holds exactly that, so a re-run leaves untouched keys (and their
    /// comments and formatting) as they were. Returns whether it changed.
    pub fn set(&mut self, path: &[&str], value: impl Into<Value>) -> anyhow::Result<bool> {
        let value = value.into();
        let Some((key, parent)) = path.split_last() else { return Ok(false) };
        if let Some(current) = self.get(path).and_then(Item::as_value)
            && same(current, &value)
        {
            return Ok(false);
        }
        let table = self.table(parent)?;
        match table.get_mut(key).and_then(Item::as_value_mut) {
            // Replacing keeps the comment written before the key and after the value.
            Some(current) => {
                let decor = current.decor().clone();
                *current = value;
                *current.decor_mut() = decor;
            }
            None => {
                table.insert(key, Item::Value(value));
            }
        }
        Ok(true)
    }

    /// As [`Self::set`], but in a file that existed, a key it does not have stays out when `value` is the
    /// built-in default anyway: a re-run adds nothing that was not asked for.
    pub fn set_unless_default(
        &mut self,
        path: &[&str],
        value: impl Into<Value>,
        default: impl Into<Value>,
    ) -> anyhow::Result<bool> {
        let value = value.into();
        if self.existed && self.get(path).is_none() && same(&value, &default.into()) {
            return Ok(false);
        }
        self.set(path, value)
    }

    pub fn remove(&mut self, path: &[&str]) -> bool {
        let Some((key, parent)) = path.split_last() else { return false };
        let mut item = self.doc.as_item_mut();
        for part in parent {
            let Some(next) = item.get_mut(part) else { return false };
            item = next;
        }
        item.as_table_like_mut().and_then(|t| t.remove(key)).is_some()
    }

    /// The `[[tools.mcp.servers]]` entries.
    pub fn mcp_servers(&mut self) -> anyhow::Result<&mut toml_edit::ArrayOfTables> {
        let mcp = self.table(&["tools", "mcp"])?;
        let item = mcp.entry("servers").or_insert_with(|| Item::ArrayOfTables(Default::default()));
        item.as_array_of_tables_mut().context(
            "`tools.mcp.servers` in the config is not written as [[tools.mcp.servers]] tables; fix it by hand first",
        )
    }

    pub fn text_of(&self) -> String {
        let mut text = self.doc.to_string();
        if !self.existed && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

fn same(current: &Value, new: &Value) -> bool {
    match (current, new) {
        (Value::String(a), Value::String(b)) => a.value() == b.value(),
        (Value::Integer(a), Value::Integer(b)) => a.value() == b.value(),
        (Value::Boolean(a), Value::Boolean(b)) => a.value() == b.value(),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same(x, y)),
        _ => false,
    }
}

/// A comment cut into `# ` lines of at most 116 characters.
fn wrap_comment(text: &str) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.trim_start_matches("# ").split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > 114 {
            lines.push(format!("# {line}"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(format!("# {line}"));
    lines.join("\n")
}

/// Writes `text` to `path` with mode 0600 through a temp file and a rename, so a crash leaves the old file or
/// the new one and the file is never readable by others, not even for a moment. Makes the folder (0700) when
/// it is missing.
/// Creates `dir` and the folders above it that are missing, readable by their owner only.
pub fn private_folder(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.as_os_str().is_empty() && !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    }
    Ok(())
}

pub fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    private_folder(&dir)?;
    minibot_vault::write_private(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}
