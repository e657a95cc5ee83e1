//! `MINIBOT__SECTION__KEY` variables as the deploy files use them: the key a name reaches, and the config a
//! container or service ends up with (its file, `${VAR}` expanded from its environment, its overrides on top),
//! loaded by `minibot_config` exactly as the program loads it at start-up.

use minibot_config::{Config, Secrets, Unlock, Vars};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub type Env = BTreeMap<String, String>;

const PREFIX: &str = "MINIBOT__";

/// Whether `name` reaches a key (not a section) of `config`: `MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN` is
/// `channels.telegram.bot_token`. Checked on the serialized config, so a name found only in a comment (where no
/// value says what to load) is checked too.
pub fn check_name(config: &Config, name: &str) -> Result<(), String> {
    let rest = name.strip_prefix(PREFIX).ok_or_else(|| format!("{name} does not start with {PREFIX}"))?;
    let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
    let mut node = serde_json::to_value(&**config).map_err(|e| e.to_string())?;
    for depth in 0..path.len() {
        node = node
            .as_object_mut()
            .and_then(|table| table.remove(&path[depth]))
            .ok_or_else(|| format!("{name}: the config has no key `{}`", path[..=depth].join(".")))?;
    }
    match node {
        Value::Object(_) => Err(format!("{name}: `{}` is a section, not a key", path.join("."))),
        _ => Ok(()),
    }
}

/// The config a process whose environment is `env` loads from `file`.
pub fn effective(file: &Path, env: &Env) -> Result<Config, String> {
    let vars: Vars = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let cwd = file.parent().unwrap_or(Path::new("/"));
    Config::load_from(Some(file), cwd, &vars, Unlock::Given(Secrets::default())).map_err(|e| e.to_string())
}

#[test]
fn names_are_checked_against_the_config_keys() {
    let defaults = Config::defaults(std::env::temp_dir());
    assert!(check_name(&defaults, "MINIBOT__RABBITMQ__BROKER_URL").is_ok());
    assert!(check_name(&defaults, "MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN").is_ok());
    let unknown = check_name(&defaults, "MINIBOT__RABBITMQ__BROKER").unwrap_err();
    assert!(unknown.contains("no key `rabbitmq.broker`"), "{unknown}");
    let section = check_name(&defaults, "MINIBOT__CHANNELS__TELEGRAM").unwrap_err();
    assert!(section.contains("is a section"), "{section}");
}
