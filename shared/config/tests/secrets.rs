#![allow(clippy::expect_used, clippy::unwrap_used)]

//! `${secret:NAME}` against real vault files: expansion, where the password comes from, and the one-line
//! errors that stop start-up.

use minibot_config::{Config, ConfigError, Unlock};
use minibot_vault::{NoPrompt, Secrets};
use std::collections::BTreeMap;
use std::path::Path;

const PASSWORD: &str = "correct horse";

fn secrets(pairs: &[(&str, &str)]) -> Secrets {
    Secrets::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>())
}

/// A config folder holding `secrets.vault.yml` with two secrets.
fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let vault = secrets(&[("OPENAI_KEY", "sk-from-vault"), ("http.port", "9191")]);
    minibot_vault::write(&dir.path().join("secrets.vault.yml"), PASSWORD, &vault).unwrap();
    dir
}

fn env_with_password(name: &str) -> Option<String> {
    match name {
        "MINIBOT_VAULT_PASSWORD" => Some(PASSWORD.into()),
        "WHICH" => Some("OPENAI_KEY".into()),
        _ => None,
    }
}

fn load(dir: &Path, text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    Config::from_toml(text, "config.toml", dir, lookup)
}

const ENABLED: &str = "[vault]\nenabled = true\n";

#[test]
fn references_expand_after_env_and_fill_config_secrets() {
    let dir = folder();
    let text = format!(
        "{ENABLED}[llm]\napi_key = \"${{secret:OPENAI_KEY}}\"\nsystem_prompt = \"key ${{secret:${{WHICH}}}}; literal $${{secret:OPENAI_KEY}}\"\n\
         [http]\nport = \"${{secret:http.port}}\"\n"
    );
    let config = load(dir.path(), &text, &env_with_password).unwrap();
    assert_eq!(config.llm.api_key, "sk-from-vault");
    // `${WHICH}` is expanded first and names the secret; the escape stays literal.
    assert_eq!(config.llm.system_prompt.as_deref(), Some("key sk-from-vault; literal ${secret:OPENAI_KEY}"));
    assert_eq!(config.http.port, 9191, "a whole reference fills a numeric key");
    assert_eq!(config.secrets.names(), ["OPENAI_KEY", "http.port"]);
}

#[test]
fn an_enabled_vault_is_unlocked_even_without_references() {
    let dir = folder();
    let config = load(dir.path(), ENABLED, &env_with_password).unwrap();
    assert_eq!(config.secrets.get("OPENAI_KEY"), Some("sk-from-vault"));
    let off = load(dir.path(), "", &env_with_password).unwrap();
    assert!(off.secrets.is_empty(), "a vault that is off stays closed");
}

#[test]
fn password_file_is_relative_to_the_config_folder_and_wins_over_the_variable() {
    let dir = folder();
    std::fs::create_dir(dir.path().join("private")).unwrap();
    std::fs::write(dir.path().join("private/vault.pw"), format!("{PASSWORD}\n")).unwrap();
    let text = format!("{ENABLED}password_file = \"private/vault.pw\"\n[llm]\napi_key = \"${{secret:OPENAI_KEY}}\"\n");
    let wrong_env = |name: &str| (name == "MINIBOT_VAULT_PASSWORD").then(|| "not it".to_string());
    let config = load(dir.path(), &text, &wrong_env).unwrap();
    assert_eq!(config.llm.api_key, "sk-from-vault");
}

/// The message of a load that must fail: one line, naming the file and the key.
fn one_line(result: Result<Config, ConfigError>) -> String {
    let message = result.expect_err("the load must fail").to_string();
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.starts_with("config.toml: key "), "{message}");
    message
}

#[test]
fn a_reference_without_the_vault_stops_loading() {
    let dir = folder();
    let message = one_line(load(dir.path(), "[llm]\napi_key = \"${secret:OPENAI_KEY}\"\n", &env_with_password));
    assert_eq!(
        message,
        "config.toml: key llm.api_key: ${secret:OPENAI_KEY} needs the vault, which is off: set [vault] enabled = true"
    );
}

#[test]
fn a_missing_secret_names_the_secret_the_key_and_the_vault() {
    let dir = folder();
    let text = format!("{ENABLED}[providers.openai]\napi_key = \"${{secret:OPENAI_KEY2}}\"\n");
    let message = one_line(load(dir.path(), &text, &env_with_password));
    let vault = dir.path().join("secrets.vault.yml");
    assert_eq!(
        message,
        format!(
            "config.toml: key providers.openai.api_key: secret OPENAI_KEY2 is not in the vault {}",
            vault.display()
        )
    );
}

#[test]
fn a_wrong_password_names_the_key_and_the_vault_and_leaks_nothing() {
    let dir = folder();
    let text = format!("{ENABLED}[llm]\napi_key = \"${{secret:OPENAI_KEY}}\"\n");
    let wrong = |name: &str| (name == "MINIBOT_VAULT_PASSWORD").then(|| "wrong".to_string());
    let message = one_line(load(dir.path(), &text, &wrong));
    let vault = dir.path().join("secrets.vault.yml");
    assert_eq!(
        message,
        format!("config.toml: key llm.api_key: wrong vault password or damaged file: {}", vault.display())
    );
    // Without references the switch that opened the vault is named.
    let message = one_line(load(dir.path(), ENABLED, &wrong));
    assert!(message.starts_with("config.toml: key vault.enabled: wrong vault password"), "{message}");
}

#[test]
fn no_password_source_names_the_three_ways() {
    let dir = folder();
    let message = one_line(load(dir.path(), ENABLED, &|_| None));
    assert!(
        message.ends_with("set [vault] password_file, set MINIBOT_VAULT_PASSWORD, or run on a terminal to type it"),
        "{message}"
    );
}

#[test]
fn a_missing_vault_file_says_how_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{ENABLED}path = \"conf/v.yml\"\n");
    let message = one_line(load(dir.path(), &text, &env_with_password));
    assert!(message.contains("conf/v.yml does not exist") && message.contains("minibot vault init"), "{message}");
}

#[test]
fn the_vault_section_cannot_reference_secrets() {
    let dir = folder();
    let text = "[vault]\nenabled = true\npassword_file = \"${secret:PW}\"\n";
    let message = one_line(load(dir.path(), text, &env_with_password));
    assert!(message.starts_with("config.toml: key vault.password_file: [vault] cannot use ${secret:PW}"), "{message}");
}

#[test]
fn given_secrets_are_used_without_opening_a_file() {
    // What a local worker does: its parent hands over the unlocked secrets; there is no vault file here at all.
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{ENABLED}[llm]\napi_key = \"${{secret:OPENAI_KEY}}\"\n");
    let given = secrets(&[("OPENAI_KEY", "sk-handed-over")]);
    let config =
        Config::from_toml_with(&text, "config.toml", dir.path(), &|_| None, Unlock::Given(given.clone())).unwrap();
    assert_eq!(config.llm.api_key, "sk-handed-over");
    assert_eq!(config.secrets, given);
}

#[test]
fn skip_leaves_references_as_written() {
    // What `minibot vault` does: it needs [vault] only, also before the vault exists or is switched on.
    let dir = tempfile::tempdir().unwrap();
    let text = "[vault]\npath = \"mine.vault.yml\"\n[llm]\napi_key = \"${secret:OPENAI_KEY}\"\n";
    let config = Config::from_toml_with(text, "config.toml", dir.path(), &|_| None, Unlock::Skip).unwrap();
    assert_eq!(config.llm.api_key, "${secret:OPENAI_KEY}");
    assert_eq!(config.vault.path, "mine.vault.yml");
    assert!(config.secrets.is_empty());
}

#[test]
fn a_prompt_that_cannot_ask_fails_instead_of_waiting() {
    let dir = folder();
    let unlock = Unlock::Password(&NoPrompt);
    let result = Config::from_toml_with(ENABLED, "config.toml", dir.path(), &|_| None, unlock);
    assert!(matches!(result, Err(ConfigError::Vault { .. })), "{result:?}");
}
