//! `auth_secret`: a vault entry sent as `Authorization: Bearer <secret>` to an HTTP server.

use crate::{McpError, Result};
use minibot_config::schema::McpSection;

/// Turns each server's `auth_secret` into an `Authorization` header, looking secrets up with `resolve` (the
/// vault). The crate has no vault of its own, so callers run this before [`crate::McpHub::start`].
///
/// Fails, naming the server, when the secret is missing or the server already sets `Authorization`: sending one
/// of two credentials silently would be worse than not starting.
pub fn apply_auth_secrets(section: &mut McpSection, resolve: impl Fn(&str) -> Option<String>) -> Result<()> {
    for server in &mut section.servers {
        let Some(secret_name) = server.auth_secret.take() else {
            continue;
        };
        let config_error = |message: String| McpError::Config { server: server.name.clone(), message };
        if server.headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")) {
            return Err(config_error("both `auth_secret` and an Authorization header are set".into()));
        }
        let Some(secret) = resolve(&secret_name) else {
            return Err(config_error(format!("auth_secret `{secret_name}` is not in the vault")));
        };
        server.headers.insert("Authorization".into(), format!("Bearer {secret}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use minibot_config::schema::McpServerSection;

    fn section(server: McpServerSection) -> McpSection {
        McpSection { servers: vec![server], ..Default::default() }
    }

    #[test]
    fn secret_becomes_bearer_header() {
        let mut mcp =
            section(McpServerSection { name: "web".into(), auth_secret: Some("token".into()), ..Default::default() });
        apply_auth_secrets(&mut mcp, |name| (name == "token").then(|| "s3cr3t".to_string())).unwrap_or_default();
        assert_eq!(mcp.servers[0].headers.get("Authorization").map(String::as_str), Some("Bearer s3cr3t"));
        assert_eq!(mcp.servers[0].auth_secret, None);
    }

    #[test]
    fn conflicts_and_missing_secrets_fail() {
        let mut conflict = section(McpServerSection {
            name: "web".into(),
            auth_secret: Some("token".into()),
            headers: [("authorization".to_string(), "Bearer x".to_string())].into_iter().collect(),
            ..Default::default()
        });
        let err = apply_auth_secrets(&mut conflict, |_| Some("s".into())).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("web") && e.contains("Authorization")));

        let mut missing =
            section(McpServerSection { name: "web".into(), auth_secret: Some("nope".into()), ..Default::default() });
        let err = apply_auth_secrets(&mut missing, |_| None).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("`nope`")));
    }
}
