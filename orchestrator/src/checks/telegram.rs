//! Is the bot token good: `getMe` answers who the bot is. The token is part of every Bot API URL, so no
//! message here shows a URL with it: they name `{api_base_url}/bot<token>/getMe` instead.

use super::ProbeError;
use super::http::{client, server_message, transport};
use serde_json::Value;

/// The bot a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    pub id: i64,
    /// Without the `@`; bots always have one, but the API marks it optional.
    pub username: Option<String>,
}

/// Calls `getMe` at `api_base` (`[channels.telegram] api_base_url`) with `token`.
pub async fn probe(api_base: &str, token: &str) -> Result<BotIdentity, ProbeError> {
    let base = api_base.trim().trim_end_matches('/');
    let shown = format!("{base}/bot<token>/getMe");
    let token = token.trim();
    // Masks the token wherever a server or a library might echo it back.
    let redact = |text: &str| if token.is_empty() { text.to_string() } else { text.replace(token, "<token>") };
    if token.is_empty() {
        return Err(ProbeError::Setup("the bot token is empty".into()));
    }
    if token.chars().any(|c| c.is_whitespace() || c == '/' || c == '?' || c == '#') {
        return Err(ProbeError::Setup(
            "the bot token has characters a token never has (it looks like 123456789:AAE…)".into(),
        ));
    }
    let url = format!("{base}/bot{token}/getMe");
    let mask = |error: ProbeError| mask_error(error, &redact);
    let response = client(Default::default())?.get(&url).send().await.map_err(|e| mask(transport(e, &shown)))?;
    let status = response.status().as_u16();
    let (body, _) = minibot_llm::body::read_capped(response, 64 << 10).await.map_err(|e| mask(transport(e, &shown)))?;
    let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    if value["ok"] == Value::Bool(true) {
        let result = &value["result"];
        let id = result["id"].as_i64().ok_or_else(|| ProbeError::BadAnswer {
            url: shown.clone(),
            detail: "getMe answered without the bot's id".into(),
        })?;
        let username = result["username"].as_str().map(str::to_string);
        return Ok(BotIdentity { id, username });
    }
    let message = server_message(&body, &redact);
    // A token that is not even shaped like one is answered 404 Not Found.
    Err(match status {
        401 | 403 | 404 => ProbeError::Rejected { url: shown, credential: "bot token", status, message },
        200..=299 => ProbeError::BadAnswer { url: shown, detail: message },
        status => ProbeError::Status { url: shown, status, message },
    })
}

fn mask_error(error: ProbeError, redact: &dyn Fn(&str) -> String) -> ProbeError {
    match error {
        ProbeError::Dns { url, detail } => ProbeError::Dns { url, detail: redact(&detail) },
        ProbeError::Tls { url, detail } => ProbeError::Tls { url, detail: redact(&detail) },
        ProbeError::Network { url, detail } => ProbeError::Network { url, detail: redact(&detail) },
        other => other,
    }
}
