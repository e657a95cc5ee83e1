//! The second expansion pass: `${secret:NAME}` from the vault. `[vault]` is read first, on its own (it may use
//! `${ENV}` but no secrets, since the vault is still closed while it is read); when it is on, the vault is
//! unlocked even if nothing references it, because `list_secrets`, MCP `auth_secret` and redaction read
//! [`crate::Config::secrets`] directly.

use crate::expand::{self, Kind, WholeReference};
use crate::schema::VaultSection;
use crate::{ConfigError, Result, paths};
use minibot_vault::{Password, PasswordPrompt, PasswordSources, Secrets};
use std::path::Path;

/// How loading gets the vault's secrets when `[vault] enabled = true`.
pub enum Unlock<'a> {
    /// Open the vault file; the password comes from `[vault] password_file`, then `MINIBOT_VAULT_PASSWORD`
    /// (read through the loader's variable lookup), then this prompt.
    Password(&'a dyn PasswordPrompt),
    /// Secrets unlocked elsewhere: a local worker receives its parent's on stdin and never opens the file.
    Given(Secrets),
    /// Leave the vault closed and `${secret:…}` references as written. For `minibot vault`, which only needs
    /// `[vault]` (and must work before the vault exists or is enabled).
    Skip,
}

/// What the pass needs to know about the file being loaded.
pub(crate) struct Origin<'a> {
    pub name: &'a str,
    pub base_dir: &'a Path,
    /// The platform layout's data folder ([`crate::places`]), if this config uses it.
    pub state_dir: Option<&'a Path>,
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
}

/// Unlocks the vault as `unlock` says and expands `${secret:NAME}` in `table`; the references that were a
/// whole value join `whole` for scalar coercion. Returns the secrets and, when this process unlocked the vault
/// itself, the password (kept for masking only).
pub(crate) fn expand_secrets(
    table: &mut toml::Table,
    whole: &mut Vec<WholeReference>,
    origin: &Origin<'_>,
    unlock: Unlock<'_>,
) -> Result<(Secrets, Option<Password>)> {
    let file = origin.name.to_string();
    let vault = vault_section(table, whole, origin.name)?;
    if matches!(unlock, Unlock::Skip) {
        return Ok((Secrets::default(), None));
    }
    let references = expand::references(Kind::Secret, table);
    if !vault.enabled {
        return match references.into_iter().next() {
            Some((key, name)) => Err(ConfigError::SecretWithoutVault { file, key, name }),
            None => Ok((Secrets::default(), None)),
        };
    }
    let path = paths::resolve(origin.base_dir, origin.state_dir, &vault.path);
    // An unlock failure is reported at the first key that needed the vault, else at the switch that opened it.
    let at = references.first().map_or_else(|| "vault.enabled".to_string(), |(key, _)| key.clone());
    let (secrets, password) = match unlock {
        Unlock::Given(secrets) => (secrets, None),
        Unlock::Skip => (Secrets::default(), None),
        Unlock::Password(prompt) => {
            let password_file = Some(&vault.password_file)
                .filter(|f| !f.is_empty())
                .map(|f| paths::resolve(origin.base_dir, origin.state_dir, f));
            // A vault and password that others can replace hand the assistant their secrets (their key, their
            // server) (red-team report, #22 B7). Readable is left alone: Docker secrets are mode 0444.
            for (what, checked) in [("[vault] password_file", password_file.as_deref()), ("vault.path", Some(&path))] {
                if let Some(problem) = checked.and_then(crate::load::writable_by_anyone) {
                    return Err(ConfigError::Invalid { file, message: format!("{what}: {problem}") });
                }
            }
            let sources = PasswordSources {
                file: password_file,
                file_setting: "[vault] password_file",
                env: (origin.lookup)(minibot_vault::PASSWORD_ENV),
                prompt,
            };
            sources
                .password(&path)
                .and_then(|password| Ok((minibot_vault::read(&path, &password)?, Some(Password::new(password)))))
                .map_err(|error| ConfigError::Vault { file: file.clone(), key: at, error })?
        }
    };
    let expansion = expand::expand_tree_of(Kind::Secret, table, &|name| secrets.get(name).map(String::from))
        .map_err(|unset| ConfigError::MissingSecret { file, key: unset.key, name: unset.var, vault: path })?;
    whole.extend(expansion.whole_references);
    Ok((secrets, password))
}

/// `[vault]` alone, typed, with the same coercion and messages as the whole file.
fn vault_section(table: &toml::Table, whole: &[WholeReference], origin: &str) -> Result<VaultSection> {
    let Some(section) = table.get("vault") else {
        return Ok(VaultSection::default());
    };
    let mut alone = toml::Table::new();
    alone.insert("vault".into(), section.clone());
    if let Some((key, name)) = expand::references(Kind::Secret, &mut alone).into_iter().next() {
        return Err(ConfigError::SecretInVaultSection { file: origin.into(), key, name });
    }
    let own: Vec<WholeReference> = whole.iter().filter(|r| r.key.starts_with("vault.")).cloned().collect();
    Ok(crate::load::deserialize_with_coercion(alone, &own, origin)?.vault)
}
