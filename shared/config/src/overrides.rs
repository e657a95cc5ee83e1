//! `MINIBOT__<SECTION>__<KEY>=value` overrides: which variables are overrides, the key path each one sets, how
//! its text becomes a TOML value, and which variable to name when a key it set is refused.
//!
//! The name is matched without regard to case and maps to a lower-case key path: `__` separates the parts, a
//! single `_` belongs to a key name (`MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN` is `channels.telegram.bot_token`).
//! `MINIBOT_CONFIG`, `MINIBOT_WORKER_ID` and the like have one `_` after `MINIBOT` and are not overrides.

use crate::schema::SECTIONS;
use crate::vars::Vars;
use crate::{ConfigError, Result};

/// What every override variable starts with, in any case.
pub(crate) const PREFIX: &str = "MINIBOT__";

/// One override: the variable, the key path it sets and its text as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Override {
    pub var: String,
    pub key: String,
    pub value: String,
}

impl Override {
    fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::Override { var: self.var.clone(), key: self.key.clone(), message: message.into() }
    }

    /// A value that starts with `[` or `{` is a TOML array or inline table; anything else is text (to be read
    /// as a number or boolean where the key wants one, like a whole `${VAR}` reference in the file).
    pub fn structured(&self) -> Result<Option<toml::Value>> {
        if !self.value.trim_start().starts_with(['[', '{']) {
            return Ok(None);
        }
        self.value.parse::<toml::Value>().map(Some).map_err(|e| {
            let reason = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>();
            self.error(format!(
                "starts with `{}` but is not a TOML {}: {}",
                &self.value.trim_start()[..1],
                if self.value.trim_start().starts_with('[') { "array" } else { "inline table" },
                reason.join("; ")
            ))
        })
    }
}

pub(crate) fn is_override(name: &str) -> bool {
    name.get(..PREFIX.len()).is_some_and(|head| head.eq_ignore_ascii_case(PREFIX))
}

/// The overrides among `vars`, checked: each names a known section with a key path of plain parts, and no two
/// set the same key or one a key inside the other's (which would make the result depend on their order).
pub(crate) fn collect(vars: &Vars) -> Result<Vec<Override>> {
    if let Some(var) = vars.unreadable.first() {
        return Err(ConfigError::Override {
            var: var.clone(),
            key: key_path(var),
            message: "the value is not valid UTF-8".into(),
        });
    }
    let mut overrides: Vec<Override> = vars
        .iter()
        .filter(|(name, _)| is_override(name))
        .map(|(name, value)| Override { var: name.into(), key: key_path(name), value: value.into() })
        .collect();
    for o in &overrides {
        let parts: Vec<&str> = o.key.split('.').collect();
        // Checked on the name: the crate would also split at a `.` written in it.
        let plain = o.var[PREFIX.len()..].chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
        if !plain || parts.iter().any(|p| p.is_empty()) {
            return Err(o.error(
                "not a key path: after MINIBOT__ write SECTION__KEY, parts separated by `__` and made of letters, \
                 digits, `_` and `-`",
            ));
        }
        if !SECTIONS.contains(&parts[0]) {
            return Err(o.error(format!("unknown section [{}]", parts[0])));
        }
    }
    // Sorted by key, a key is directly followed by any key equal to it or inside it.
    overrides.sort_by(|a, b| a.key.cmp(&b.key).then_with(|| a.var.cmp(&b.var)));
    for pair in overrides.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.key == a.key || b.key.starts_with(&format!("{}.", a.key)) {
            return Err(a.error(format!("conflicts with {}, which sets `{}`; keep one", b.var, b.key)));
        }
    }
    Ok(overrides)
}

/// How `config::Environment` (prefix `MINIBOT`, separators `__`) turns a variable name into a key path.
fn key_path(name: &str) -> String {
    let lower = name.to_lowercase();
    lower.strip_prefix(&PREFIX.to_lowercase()).unwrap_or(&lower).replace("__", ".")
}

/// The override behind a problem found at `key`: the one that set `key`, a value around it (an inline table
/// holding it) or a key inside it (which turned it into a table).
pub(crate) fn responsible<'a>(overrides: &'a [Override], key: &str) -> Option<&'a Override> {
    let within = |outer: &str, inner: &str| {
        inner.strip_prefix(outer).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    overrides.iter().filter(|o| within(&o.key, key) || within(key, &o.key)).max_by_key(|o| (o.key == key, o.key.len()))
}

/// `err`, reworded to name the variable when an override caused it. A file's own problems are left as they are.
pub(crate) fn blame(err: ConfigError, overrides: &[Override]) -> ConfigError {
    if overrides.is_empty() {
        return err;
    }
    // The message of each variant without its `{file}: key …:` lead-in, which the reworded error replaces.
    let (key, message) = match &err {
        // An unknown key's path already ends in the key itself (see `load::describe`).
        ConfigError::InvalidKey { key, message, .. } => (key.clone(), message.clone()),
        ConfigError::UnsetVariable { var, key, .. } => {
            (key.clone(), format!("environment variable {var} is not set; set it or write `$${{{var}}}` for a literal"))
        }
        ConfigError::SecretWithoutVault { key, name, .. } => {
            (key.clone(), format!("${{secret:{name}}} needs the vault, which is off: set [vault] enabled = true"))
        }
        ConfigError::MissingSecret { key, name, vault, .. } => {
            (key.clone(), format!("secret {name} is not in the vault {}", vault.display()))
        }
        ConfigError::SecretInVaultSection { key, name, .. } => (
            key.clone(),
            format!("[vault] cannot use ${{secret:{name}}}: the vault is still closed while [vault] is read"),
        ),
        ConfigError::Vault { key, error, .. } => (key.clone(), error.to_string()),
        ConfigError::Unsupported(_) => return blame_findings(err, overrides),
        _ => return err,
    };
    match responsible(overrides, &key) {
        Some(o) => ConfigError::Override { var: o.var.clone(), key, message },
        None => err,
    }
}

/// Features this version lacks, each named by the variable that asked for it rather than the file.
fn blame_findings(err: ConfigError, overrides: &[Override]) -> ConfigError {
    let ConfigError::Unsupported(mut findings) = err else { return err };
    for finding in &mut findings {
        if let Some(o) = responsible(overrides, &finding.key) {
            finding.file = format!("environment variable {}", o.var);
        }
    }
    ConfigError::Unsupported(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        pairs.iter().copied().collect()
    }

    #[test]
    fn only_double_underscore_names_are_overrides_in_any_case() {
        let found = collect(&vars(&[
            ("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN", "1"),
            ("minibot__Tasks__Backend", "rabbitmq"),
            ("MINIBOT_CONFIG", "x.toml"),
            ("MINIBOT_WORKER_ID", "w"),
            ("MINIBOT_VAULT_PASSWORD", "pw"),
            ("OTHER__TASKS__BACKEND", "x"),
        ]))
        .expect("valid");
        let keys: Vec<(&str, &str)> = found.iter().map(|o| (o.var.as_str(), o.key.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN", "channels.telegram.bot_token"),
                ("minibot__Tasks__Backend", "tasks.backend")
            ]
        );
    }

    #[test]
    fn malformed_names_and_overlaps_are_refused_by_name() {
        for (name, expect) in [
            ("MINIBOT__TASKS__", "not a key path"),
            ("MINIBOT__", "not a key path"),
            ("MINIBOT__TASKS__A.B", "not a key path"),
            ("MINIBOT__NOPE__X", "unknown section [nope]"),
        ] {
            let err = collect(&vars(&[(name, "1")])).expect_err(name).to_string();
            assert!(err.contains(name) && err.contains(expect), "{err}");
        }
        let err = collect(&vars(&[("MINIBOT__LLM__MODEL", "a"), ("minibot__llm__model", "b")]))
            .expect_err("same key twice")
            .to_string();
        assert!(err.contains("MINIBOT__LLM__MODEL") && err.contains("minibot__llm__model"), "{err}");
        let err =
            collect(&vars(&[("MINIBOT__CHANNELS__TELEGRAM", "{}"), ("MINIBOT__CHANNELS__TELEGRAM__ENABLED", "1")]))
                .expect_err("a key inside another")
                .to_string();
        assert!(err.contains("channels.telegram.enabled"), "{err}");
    }

    #[test]
    fn the_override_behind_a_key_is_the_closest_one() {
        let found = collect(&vars(&[("MINIBOT__LLM__EXTRA_HEADERS", "{}"), ("MINIBOT__LLM__MODEL", "m")])).unwrap();
        let var = |key: &str| responsible(&found, key).map(|o| o.var.as_str());
        assert_eq!(var("llm.model"), Some("MINIBOT__LLM__MODEL"));
        assert_eq!(var("llm.extra_headers.X-Title"), Some("MINIBOT__LLM__EXTRA_HEADERS"));
        assert_eq!(var("llm.modelx"), None);
        assert_eq!(var("llm.temperature"), None);
        assert_eq!(var("tasks"), None);
    }
}
