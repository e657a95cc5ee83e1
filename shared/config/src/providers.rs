//! `[llm]` + `[providers.<name>]` → one endpoint, as MiniBot resolves it: when `[providers.<llm.provider>]`
//! exists, its `api_key`, `base_url` and `auth_path` replace `[llm]`'s (even when empty) and headers merge.
//! Unlike MiniBot, an empty key is never sent: [`LlmEndpoint::require_key`] says which key or variable to set.

use crate::Config;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiFormat {
    OpenAi,
    OpenAiResponses,
    OpenRouter,
    Claude,
    Google,
    ChatgptCodex,
}

impl ApiFormat {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "openai" => Self::OpenAi,
            "openai_responses" => Self::OpenAiResponses,
            "openrouter" => Self::OpenRouter,
            "claude" => Self::Claude,
            "google" => Self::Google,
            "chatgpt_codex" => Self::ChatgptCodex,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::OpenAiResponses => "openai_responses",
            Self::OpenRouter => "openrouter",
            Self::Claude => "claude",
            Self::Google => "google",
            Self::ChatgptCodex => "chatgpt_codex",
        }
    }

    /// The environment variable read when no key is configured.
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::OpenAi | Self::OpenAiResponses => "OPENAI_API_KEY",
            Self::OpenRouter => "OPENROUTER_API_KEY",
            Self::Claude => "ANTHROPIC_API_KEY",
            Self::Google => "GEMINI_API_KEY",
            Self::ChatgptCodex => "OPENAI_API_KEY",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi | Self::OpenAiResponses | Self::ChatgptCodex => "https://api.openai.com/v1",
            Self::OpenRouter => "https://openrouter.ai/api/v1",
            Self::Claude => "https://api.anthropic.com/v1",
            Self::Google => "https://generativelanguage.googleapis.com/v1beta",
        }
    }
}

/// Everything a provider client needs.
#[derive(Debug, Clone)]
pub struct LlmEndpoint {
    /// The provider name as written (`[llm].provider`).
    pub provider: String,
    pub api_format: ApiFormat,
    pub api_key: String,
    /// Which config key or variable supplies the key, for messages.
    pub api_key_source: String,
    pub base_url: String,
    pub headers: BTreeMap<String, String>,
    pub model: String,
    pub temperature: Option<f64>,
    pub max_new_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub retry_attempts: u32,
    pub retry_delay: Duration,
}

/// No key is configured for a provider that needs one.
#[derive(Debug, thiserror::Error)]
#[error(
    "no API key for provider `{provider}`: set `{key}` in {origin} or the {variable} environment variable"
)]
pub struct MissingApiKey {
    pub provider: String,
    pub key: String,
    pub variable: String,
    pub origin: String,
}

impl LlmEndpoint {
    /// Local servers (Ollama, llama.cpp, vLLM on loopback) take no key; everything else must have one.
    pub fn require_key(&self, origin: &str) -> Result<(), MissingApiKey> {
        if !self.api_key.is_empty() || is_loopback_url(&self.base_url) {
            return Ok(());
        }
        Err(MissingApiKey {
            provider: self.provider.clone(),
            key: self.api_key_source.clone(),
            variable: self.api_format.key_variable().into(),
            origin: origin.into(),
        })
    }
}

fn is_loopback_url(url: &str) -> bool {
    let host = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest)
        .split(['/', '?'])
        .next()
        .unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    host == "localhost" || host.starts_with("127.") || host == "::1"
}

impl Config {
    /// The main agent's endpoint. Validation already checked the provider name, so this cannot fail.
    pub fn main_llm(&self) -> LlmEndpoint {
        let llm = &self.llm;
        let section = self.providers.get(&llm.provider);
        let format_name = section
            .and_then(|s| s.api_format.as_deref())
            .unwrap_or(llm.provider.as_str());
        let api_format = ApiFormat::parse(format_name).unwrap_or(ApiFormat::OpenAi);
        let (mut api_key, base_url, mut key_source) = match section {
            Some(p) => (
                p.api_key.clone(),
                p.base_url.clone(),
                format!("providers.{}.api_key", llm.provider),
            ),
            None => (llm.api_key.clone(), llm.base_url.clone(), "llm.api_key".to_string()),
        };
        if api_key.is_empty()
            && let Ok(value) = std::env::var(api_format.key_variable())
            && !value.is_empty()
        {
            api_key = value;
            key_source = api_format.key_variable().to_string();
        }
        let base_url = base_url
            .filter(|u| !u.is_empty())
            .or_else(|| {
                matches!(api_format, ApiFormat::OpenAi)
                    .then(|| std::env::var("OPENAI_BASE_URL").ok())
                    .flatten()
                    .filter(|u| !u.is_empty())
            })
            .unwrap_or_else(|| api_format.default_base_url().to_string());
        let mut headers = llm.extra_headers.clone();
        if let Some(p) = section {
            headers.extend(p.headers.clone());
        }
        if api_format == ApiFormat::OpenRouter && llm.openrouter.attribution_enabled {
            headers
                .entry("HTTP-Referer".into())
                .or_insert_with(|| "https://github.com/minibot-rs".into());
            headers.entry("X-OpenRouter-Title".into()).or_insert_with(|| "MiniBot".into());
        }
        LlmEndpoint {
            provider: llm.provider.clone(),
            api_format,
            api_key,
            api_key_source: key_source,
            base_url: base_url.trim_end_matches('/').to_string(),
            headers,
            model: llm.model.clone(),
            temperature: llm.temperature,
            max_new_tokens: llm.max_new_tokens,
            reasoning_effort: llm.reasoning_effort.clone(),
            request_timeout: secs(llm.request_timeout_seconds),
            connect_timeout: secs(llm.sock_connect_timeout_seconds),
            retry_attempts: llm.retry_attempts,
            retry_delay: secs(llm.retry_delay_seconds),
        }
    }
}

fn secs(value: f64) -> Duration {
    Duration::try_from_secs_f64(value.max(0.0)).unwrap_or(Duration::from_secs(45))
}

#[cfg(test)]
mod tests {
    use super::is_loopback_url;

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback_url("http://127.0.0.1:11434/v1"));
        assert!(is_loopback_url("http://localhost:8080"));
        assert!(is_loopback_url("http://[::1]:8080/v1"));
        assert!(!is_loopback_url("https://api.openai.com/v1"));
        assert!(!is_loopback_url("https://localhost.evil.com/v1"));
    }
}
