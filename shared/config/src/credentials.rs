//! Every credential the configuration holds, whatever its source, for [`Config::redactor`]: the vault's values
//! and the password that opened it, and the values of the keys that carry a credential (API keys, tokens,
//! passwords in URLs, secret-named headers and MCP environment variables) as they stand after `${VAR}` and
//! `${secret:NAME}` expansion, so a key written literally, read from the environment or taken from the vault is
//! masked alike. Both binaries build their redactor here, so a value hidden in one is hidden in the other.
//!
//! Values that are not from the vault are masked only from [`is_credential`]'s length on: the config also holds
//! placeholders (`ollama`, `EMPTY`, RabbitMQ's `guest`) that are ordinary words, and masking those would garble
//! what the user and the model say. A vault value is a secret by the user's own choice and is masked from
//! [`Redactor::MIN_LEN`] characters, as the redactor does for any value.

use crate::providers::ApiFormat;
use crate::{Config, is_credential};
use minibot_vault::Redactor;
use std::collections::BTreeMap;

/// Name fragments of headers and environment variables whose values are credentials (`Authorization`,
/// `X-Api-Key`, `GITHUB_TOKEN`, `DB_PASSWORD`, `CLIENT_SECRET`, `Cookie`). Matched case-insensitively.
const SECRET_NAME_PARTS: &[&str] = &["auth", "key", "token", "secret", "pass", "credential", "cookie"];

/// Whether a header or environment variable with this name holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|part| name.contains(part))
}

/// The environment variables a provider without a configured key falls back on (see `endpoint_for`). Every one
/// counts, set or not used by the main model: a task may select any provider.
const KEY_VARIABLES: &[ApiFormat] = &[ApiFormat::OpenAi, ApiFormat::OpenRouter, ApiFormat::Claude, ApiFormat::Google];

impl Config {
    /// What the program masks wherever it writes or sends text it did not compose itself: logs, the transcript
    /// and task databases, and the conversation in every provider request. See the module docs for the set.
    pub fn redactor(&self) -> Redactor {
        self.redactor_with(&|name| std::env::var(name).ok())
    }

    /// [`Self::redactor`] with the process environment given (tests cannot set variables safely).
    pub(crate) fn redactor_with(&self, env: &dyn Fn(&str) -> Option<String>) -> Redactor {
        let configured = self.credentials(env);
        let password = self.vault_password.as_ref().map(minibot_vault::Password::expose);
        Redactor::from_values(self.secrets.values().chain(password).chain(configured.iter().map(String::as_str)))
    }

    /// The credential values outside the vault, long enough to mask.
    fn credentials(&self, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        let mut values: Vec<String> = Vec::new();
        let mut add = |value: &str| values.push(value.to_string());

        add(&self.llm.api_key);
        header_values(&self.llm.extra_headers, &mut add);
        url_password(self.llm.base_url.as_deref().unwrap_or_default(), &mut add);
        for provider in self.providers.values() {
            add(&provider.api_key);
            header_values(&provider.headers, &mut add);
            url_password(provider.base_url.as_deref().unwrap_or_default(), &mut add);
        }
        for format in KEY_VARIABLES {
            if let Some(value) = env(format.key_variable()) {
                add(&value);
            }
        }
        add(&self.decision.api_key);
        url_password(&self.decision.base_url, &mut add);

        let telegram = &self.channels.telegram;
        add(&telegram.bot_token);
        add(telegram.webhook_secret_token.as_deref().unwrap_or_default());
        url_password(&telegram.api_base_url, &mut add);

        url_password(&self.rabbitmq.broker_url, &mut add);
        add(&self.rabbitmq.message_key);
        add(&self.http.auth_token);
        add(&self.http.basic_auth_password);

        for server in &self.tools.mcp.servers {
            for (name, value) in &server.env {
                if is_secret_name(name) {
                    add(value);
                }
            }
            header_values(&server.headers, &mut add);
            url_password(server.url.as_deref().unwrap_or_default(), &mut add);
        }

        values.retain(|value| is_credential(value));
        values.sort();
        values.dedup();
        values
    }
}

/// Whether the environment variable `name` = `value` looks like a credential, more broadly than
/// [`is_secret_name`] (which also picks headers to mask): `*_PWD`, `*_PAT`, JWTs, DSNs, webhooks, private keys,
/// and any value with a password in it (`postgres://u:p@…`, `…;Password=…`). Programs started for others do not
/// inherit these, and config errors never quote them.
pub fn is_secret_variable(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let named = is_secret_name(name)
        || is_assistant_secret_variable(name)
        || ["_PWD", "_PAT"].iter().any(|end| upper.ends_with(end))
        || ["JWT", "DSN", "WEBHOOK", "BEARER", "PRIVATE", "SALT", "SIGNING"].iter().any(|part| upper.contains(part));
    named || value_holds_password(value)
}

/// `scheme://user:password@host…`, or a connection string with `Password=` / `Pwd=`.
fn value_holds_password(value: &str) -> bool {
    let userinfo_password = value.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| userinfo.contains(':'))
    });
    let lower = value.to_ascii_lowercase();
    userinfo_password || lower.contains("password=") || lower.contains("pwd=")
}

/// Whether the environment variable `name` holds one of the assistant's own secrets: a provider key it reads
/// (`OPENAI_API_KEY`, …), the vault password, or a `MINIBOT__…` override (which can set any key). Programs the
/// assistant starts for others (MCP servers) do not inherit these.
pub fn is_assistant_secret_variable(name: &str) -> bool {
    name == "MINIBOT_VAULT_PASSWORD"
        || name.starts_with("MINIBOT__")
        || KEY_VARIABLES.iter().any(|format| format.key_variable() == name)
}

/// The values of secret-named headers, whole and without their scheme word: a server that echoes
/// `Authorization: Bearer sk-…` may quote only `sk-…`.
fn header_values(headers: &BTreeMap<String, String>, add: &mut impl FnMut(&str)) {
    for (name, value) in headers {
        if is_secret_name(name) {
            add(value);
            if let Some((_, token)) = value.trim().rsplit_once(' ') {
                add(token);
            }
        }
    }
}

/// The credentials a URL carries, as written and percent-decoded (clients report either): the password of its
/// `user:password@` part, also as the base64 of `user:password` that HTTP Basic auth sends (a server may echo
/// the header), and the values of its query (`?key=…`, `&token=…`), which is where some APIs take the key.
fn url_password(url: &str, add: &mut impl FnMut(&str)) {
    use base64::Engine as _;
    let Some((_, rest)) = url.split_once("://") else { return };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some((_, query)) = rest.split('#').next().unwrap_or_default().split_once('?') {
        for value in query.split('&').filter_map(|pair| pair.split_once('=').map(|(_, value)| value)) {
            add(value);
            if let Some(decoded) = percent_decode(value) {
                add(&decoded);
            }
        }
    }
    let Some((userinfo, _)) = authority.rsplit_once('@') else { return };
    let Some((user, password)) = userinfo.split_once(':') else { return };
    add(password);
    let decoded = percent_decode(password);
    if let Some(decoded) = &decoded {
        add(decoded);
    }
    let user = percent_decode(user).unwrap_or_else(|| user.to_string());
    let basic = format!("{user}:{}", decoded.as_deref().unwrap_or(password));
    add(&base64::engine::general_purpose::STANDARD.encode(basic));
}

/// `%XX` escapes decoded; `None` when there are none or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return None;
    }
    percent_encoding::percent_decode_str(text).decode_utf8().ok().map(String::from)
}

#[cfg(test)]
#[path = "credentials_tests.rs"]
mod tests;
