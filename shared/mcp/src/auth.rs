//! `auth_secret`: a vault entry sent as `Authorization: Bearer <secret>` to an HTTP server.

use crate::{McpError, Result};
use minibot_config::Config;
use minibot_config::schema::McpServerSection;

/// Turns the server's `auth_secret` into an `Authorization: Bearer` header with the secret from
/// [`Config::secrets`].
///
/// Fails, naming the server and the secret, when the vault is off or lacks the secret, and naming the server when
/// it also sets an `Authorization` header: sending one of two credentials, or none, silently would be worse than
/// not starting.
pub(crate) fn resolve_auth_secret(server: &mut McpServerSection, config: &Config) -> Result<()> {
    let Some(secret_name) = server.auth_secret.take() else {
        return Ok(());
    };
    let config_error = |message: String| McpError::Config { server: server.name.clone(), message };
    if server.headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")) {
        return Err(config_error("`auth_secret` and an `Authorization` header are both set; keep only one".into()));
    }
    if !config.vault.enabled {
        return Err(config_error(format!("auth_secret `{secret_name}` needs the vault, but [vault] is not enabled")));
    }
    let Some(secret) = config.secrets.get(&secret_name) else {
        return Err(config_error(format!("auth_secret `{secret_name}` is not in the vault")));
    };
    server.headers.insert("Authorization".into(), format!("Bearer {secret}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(vault: bool, secrets: &[(&str, &str)]) -> Config {
        let mut config = Config::defaults("/tmp");
        config.vault.enabled = vault;
        let entries: BTreeMap<String, String> = secrets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        config.secrets = minibot_vault::Secrets::new(entries);
        config
    }

    fn server(auth_secret: &str, headers: &[(&str, &str)]) -> McpServerSection {
        McpServerSection {
            name: "web".into(),
            auth_secret: Some(auth_secret.into()),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    fn error(server: &mut McpServerSection, config: &Config) -> String {
        resolve_auth_secret(server, config).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn secret_becomes_bearer_header() {
        let mut web = server("token", &[("X-Other", "1")]);
        assert!(resolve_auth_secret(&mut web, &config(true, &[("token", "s3cr3t")])).is_ok());
        assert_eq!(web.headers.get("Authorization").map(String::as_str), Some("Bearer s3cr3t"));
        assert_eq!(web.headers.get("X-Other").map(String::as_str), Some("1"));
    }

    #[test]
    fn conflicting_header_names_the_server() {
        let mut web = server("token", &[("authorization", "Basic eA==")]);
        let err = error(&mut web, &config(true, &[("token", "s")]));
        assert!(err.contains("`web`") && err.contains("Authorization"), "{err}");
    }

    #[test]
    fn vault_off_or_missing_secret_names_server_and_secret() {
        let err = error(&mut server("token", &[]), &config(false, &[("token", "s")]));
        assert!(err.contains("`web`") && err.contains("`token`") && err.contains("[vault]"), "{err}");
        let err = error(&mut server("nope", &[]), &config(true, &[("token", "s")]));
        assert!(err.contains("`web`") && err.contains("`nope`") && err.contains("not in the vault"), "{err}");
    }
}
