//! The checks that ask a server: the model provider and the Telegram bot, through [`crate::checks`].

use super::report::Report;
use crate::checks::{ProbeError, provider, telegram};
use minibot_config::{Config, LlmEndpoint};
use std::io::Write;

/// The `provider` line: the main agent's endpoint answers, takes the key and has the model.
pub async fn provider(config: &Config, report: &mut Report<impl Write>) {
    let endpoint = config.main_llm();
    let name = format!("{} at {}", endpoint.provider, endpoint.redactor.redact(&endpoint.base_url));
    if let Err(missing) = endpoint.require_key(&config.origin()) {
        report.fail("provider", format!("{name}: {missing}"), "run `minibot init`, or set the key as the message says");
        return;
    }
    match provider::probe(&endpoint).await {
        Ok(model) => {
            let key = if endpoint.api_key.is_empty() {
                "no key".to_string()
            } else {
                format!("key from {}", endpoint.api_key_source)
            };
            report.ok("provider", format!("{name}: model `{model}` is there; {key}"));
            if !endpoint.api_key.is_empty() && minibot_config::is_plain_http_to_another_host(&endpoint.base_url) {
                report.warn(
                    "provider",
                    "the key goes over plain http:// to another machine, readable by anyone on the way",
                    "use https://, or a tunnel to the server",
                );
            }
            let known = minibot_llm::model_limits(endpoint.api_format, &endpoint.model).is_some();
            if !known && config.memory.max_history_tokens.is_none() {
                report.warn(
                    "history",
                    format!(
                        "model `{}` is not in the built-in model table: its context size is unknown, so long \
                         conversations are not compacted and may fail when they outgrow it",
                        endpoint.model
                    ),
                    "set [memory] max_history_tokens to a little under the model's context (in tokens)",
                );
            }
        }
        Err(error) => report.fail("provider", format!("{name}: {error}"), provider_fix(&endpoint, &error)),
    }
}

fn provider_fix(endpoint: &LlmEndpoint, error: &ProbeError) -> String {
    let section = &endpoint.key_section;
    match error {
        ProbeError::Refused { .. } | ProbeError::Timeout { .. } | ProbeError::Network { .. } => {
            format!("start the server, or set `{section}.base_url` to where it listens")
        }
        ProbeError::Dns { .. } => format!("correct the host name in `{section}.base_url`"),
        ProbeError::Tls { .. } => {
            format!("check `{section}.base_url` (http:// or https://?) and the server's certificate")
        }
        ProbeError::Rejected { .. } if endpoint.api_key.is_empty() => format!(
            "the server wants a key and none was sent: put it in `{section}.api_key` (a `${{secret:…}}` from the \
             vault)"
        ),
        ProbeError::Rejected { .. } if endpoint.api_key_source.contains('.') => {
            format!("put a valid key in `{}`", endpoint.api_key_source)
        }
        ProbeError::Rejected { .. } => format!(
            "the key comes from the {} environment variable: set a valid one there, or in `{section}.api_key`",
            endpoint.api_key_source
        ),
        ProbeError::ModelNotFound { available, .. } if available.is_empty() => {
            "set `llm.model` to a model this provider has".into()
        }
        ProbeError::ModelNotFound { available, .. } => {
            format!("set `llm.model` to one it offers, such as `{}`", available[0])
        }
        ProbeError::Status { status: 402 | 429, .. } => "check the account's credit and rate limits".into(),
        ProbeError::Status { status: 500..=599, .. } => "the provider has trouble; try again later".into(),
        ProbeError::Status { .. } | ProbeError::BadAnswer { .. } => {
            format!("check that `{section}.base_url` is an OpenAI-compatible API (it usually ends in /v1)")
        }
        ProbeError::Setup(_) => format!("change `llm.provider` or the [{section}] settings the message names"),
    }
}

/// The `telegram` line, when the channel is on and has a token.
pub async fn telegram(config: &Config, report: &mut Report<impl Write>) {
    let section = &config.channels.telegram;
    if !section.enabled {
        report.skip("telegram", "off ([channels.telegram] enabled = false)");
        return;
    }
    if section.bot_token.trim().is_empty() {
        report.skip("telegram", "no bot token: `minibot console` only (`minibot init` sets a bot up)");
        return;
    }
    match telegram::probe(&section.api_base_url, &section.bot_token).await {
        Ok(bot) => {
            let name = bot.username.map_or_else(|| "the bot".to_string(), |u| format!("@{u}"));
            report.ok("telegram", format!("{name} (id {}) answers at {}", bot.id, section.api_base_url));
        }
        Err(error) => {
            let fix = match &error {
                ProbeError::Rejected { .. } | ProbeError::Setup(_) => {
                    "put the token @BotFather gave you in `channels.telegram.bot_token`, or set \
                     [channels.telegram] enabled = false"
                }
                ProbeError::Dns { .. } | ProbeError::Tls { .. } => "check `channels.telegram.api_base_url`",
                _ => "check the network, and `channels.telegram.api_base_url`",
            };
            report.fail("telegram", error.to_string(), fix);
        }
    }
}
