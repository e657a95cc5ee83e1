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

    /// Whether this build has a client for the format ([`crate::support::FEATURES`]).
    pub fn is_callable(self) -> bool {
        crate::support::format_callable(self)
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
    /// The section whose `api_key` applies: `llm`, or `providers.<name>` when that section exists.
    pub key_section: String,
    /// `[llm] api_key` is set but a `[providers.<name>]` section replaces it (MiniBot's rule).
    pub llm_key_unused: bool,
    pub base_url: String,
    pub headers: BTreeMap<String, String>,
    pub model: String,
    pub temperature: Option<f64>,
    pub max_new_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// The longest pause between two reads of an answer (`sock_read_timeout_seconds`): a stream that stalls
    /// fails here rather than at the whole request's limit.
    pub read_timeout: Duration,
    /// `[llm] http2`: HTTP/2 where the server offers it (TLS); off, every request is HTTP/1.1.
    pub http2: bool,
    /// API-specific options from `[llm]`: OpenRouter's routing, xAI's search tools, the Responses cache.
    pub options: EndpointOptions,
    pub retry_attempts: u32,
    pub retry_delay: Duration,
    /// [`Config::redactor`]: every configured credential, so the client can keep them out of the conversation it
    /// sends and the provider text it reports (the endpoint's own key travels only in the `Authorization`
    /// header).
    pub redactor: minibot_vault::Redactor,
}

/// The `[llm]` options only some APIs read.
#[derive(Debug, Clone, Default)]
pub struct EndpointOptions {
    pub openrouter: crate::OpenRouterSection,
    pub xai: crate::XaiSection,
    /// Responses: `reasoning.summary`.
    pub reasoning_summary: Option<String>,
    /// Responses: send `prompt_cache_key`.
    pub prompt_cache_enabled: bool,
    pub prompt_cache_retention: Option<String>,
}

/// No key is configured for a provider that needs one. The message names the section whose `api_key` counts,
/// since `[providers.<name>]` replaces `[llm] api_key` even when its own is empty.
#[derive(Debug)]
pub struct MissingApiKey {
    pub provider: String,
    /// `llm` or `providers.<name>`.
    pub section: String,
    /// Its API format, whose environment variable could also hold the key.
    pub api_format: ApiFormat,
    pub origin: String,
    /// `[llm] api_key` is set but does not apply to this provider.
    pub llm_key_unused: bool,
    /// The base URL, when it is not the format's own address: the environment variable's key is not sent there.
    pub custom_url: Option<String>,
}

impl std::fmt::Display for MissingApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { provider, section, api_format, origin, llm_key_unused, custom_url } = self;
        let variable = api_format.key_variable();
        let file = if origin.starts_with("defaults") {
            "a config file (none was found: `minibot init` writes one)".to_string()
        } else {
            origin.clone()
        };
        write!(
            f,
            "no API key for provider `{provider}`: set `{section}.api_key` (api_key in the [{section}] section) in \
             {file}"
        )?;
        match custom_url {
            None => write!(f, ", or the {variable} environment variable")?,
            Some(url) => write!(
                f,
                " (the {variable} environment variable goes only to its provider's own address, not to {url}; \
                 `api_key = \"${{{variable}}}\"` sends it there)"
            )?,
        }
        if *llm_key_unused {
            write!(f, "; [llm] api_key is not used for this provider because [{section}] exists")?;
        }
        Ok(())
    }
}

impl std::error::Error for MissingApiKey {}

/// Why a provider name cannot serve a request in this build.
#[derive(Debug)]
pub enum ProviderUnavailable {
    /// Neither an API format nor a `[providers.<name>]` section.
    Unknown(String),
    /// Its API format has no client in this build.
    NotCallable {
        provider: String,
        api_format: ApiFormat,
    },
    MissingKey(MissingApiKey),
}

impl std::fmt::Display for ProviderUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(name) => write!(f, "`{name}` is not a configured provider"),
            Self::NotCallable { provider, api_format } => write!(
                f,
                "provider `{provider}` uses the `{}` API format, which this version cannot call",
                api_format.as_str()
            ),
            Self::MissingKey(missing) => missing.fmt(f),
        }
    }
}

impl std::error::Error for ProviderUnavailable {}

/// A provider a task may select: known, callable by this build, and with credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderChoice {
    pub name: String,
    pub api_format: ApiFormat,
    /// `[providers.<name>] models`, advisory.
    pub models: Vec<String>,
}

impl LlmEndpoint {
    /// Local servers (Ollama, llama.cpp, vLLM on loopback) take no key; everything else must have one.
    pub fn require_key(&self, origin: &str) -> Result<(), MissingApiKey> {
        if !self.api_key.is_empty() || is_loopback_url(&self.base_url) {
            return Ok(());
        }
        Err(MissingApiKey {
            provider: self.provider.clone(),
            section: self.key_section.clone(),
            api_format: self.api_format,
            origin: origin.into(),
            llm_key_unused: self.llm_key_unused,
            custom_url: (!self.at_default_url()).then(|| self.base_url.clone()),
        })
    }

    /// Whether the base URL is the API format's own address (where its environment variable's key belongs).
    fn at_default_url(&self) -> bool {
        self.base_url == self.api_format.default_base_url().trim_end_matches('/')
    }
}

/// How [`LlmEndpoint::api_key_source`] starts when the endpoint has no key: messages about a refused key say
/// that none was sent instead of blaming one.
pub const NO_KEY_SENT: &str = "no key was sent";

/// Whether `url` names this machine (`localhost`, `127.x`, `::1`): a server there needs no key.
pub fn is_loopback_url(url: &str) -> bool {
    // Parsed as the HTTP client parses it (WHATWG): `http://10.0.0.5\@localhost/` goes to 10.0.0.5, whatever a
    // split on `@` says (red-team report, #22 B8).
    let Ok(parsed) = url::Url::parse(url) else { return false };
    match parsed.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether a key sent to `url` crosses the network in clear text: plain `http` to another machine.
pub fn is_plain_http_to_another_host(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|parsed| parsed.scheme() == "http") && !is_loopback_url(url)
}

impl crate::ConfigFile {
    /// The API format a provider name stands for: its section's `api_format`, else the name itself; `None` when
    /// it is neither a format nor a section.
    pub fn api_format_of(&self, provider: &str) -> Option<ApiFormat> {
        let written = self.providers.get(provider).and_then(|p| p.api_format.as_deref()).unwrap_or(provider);
        ApiFormat::parse(written)
    }
}

impl Config {
    /// The main agent's endpoint. Validation already checked the provider name, so this cannot fail.
    pub fn main_llm(&self) -> LlmEndpoint {
        self.endpoint_for(&self.llm.provider)
    }

    /// The endpoint for a specialist or task: `provider` overrides `[llm].provider` (it must be an API format or
    /// a `[providers.<name>]` section); unlike MiniBot, a worker without an override keeps the main agent's
    /// credentials instead of silently losing `[llm].api_key` and `base_url`.
    pub fn llm_for(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
        reasoning_effort: Option<&str>,
    ) -> Result<LlmEndpoint, String> {
        let provider = provider.filter(|p| !p.is_empty()).unwrap_or(&self.llm.provider);
        let Some(api_format) = self.api_format_of(provider) else {
            let mut known: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            known.push(&self.llm.provider);
            return Err(format!("unknown model provider `{provider}`; configured: {}", known.join(", ")));
        };
        if !api_format.is_callable() {
            let unavailable = ProviderUnavailable::NotCallable { provider: provider.into(), api_format };
            return Err(unavailable.to_string());
        }
        let mut endpoint = self.endpoint_for(provider);
        if let Some(model) = model.filter(|m| !m.is_empty()) {
            endpoint.model = model.to_string();
        }
        if let Some(effort) = reasoning_effort.filter(|e| !e.is_empty()) {
            endpoint.reasoning_effort = Some(effort.to_string());
        }
        Ok(endpoint)
    }

    /// The endpoint a task's `model_provider` selects, or why no worker with this config can serve it.
    pub fn provider_for_task(&self, provider: &str) -> Result<LlmEndpoint, ProviderUnavailable> {
        let Some(api_format) = self.api_format_of(provider) else {
            return Err(ProviderUnavailable::Unknown(provider.into()));
        };
        if !api_format.is_callable() {
            return Err(ProviderUnavailable::NotCallable { provider: provider.into(), api_format });
        }
        let endpoint = self.endpoint_for(provider);
        endpoint.require_key(&self.origin()).map_err(ProviderUnavailable::MissingKey)?;
        Ok(endpoint)
    }

    /// The providers a task may select: `[llm].provider`, then every `[providers.<name>]`, each only when this
    /// build can call its API format and it has credentials (or a loopback `base_url`).
    pub fn available_providers(&self) -> Vec<ProviderChoice> {
        let mut names: Vec<&str> = vec![self.llm.provider.as_str()];
        names.extend(self.providers.keys().map(String::as_str).filter(|n| *n != self.llm.provider));
        names
            .into_iter()
            .filter_map(|name| {
                let endpoint = self.provider_for_task(name).ok()?;
                let models = self.providers.get(name).map(|p| p.models.clone()).unwrap_or_default();
                Some(ProviderChoice { name: name.to_string(), api_format: endpoint.api_format, models })
            })
            .collect()
    }

    fn endpoint_for(&self, provider: &str) -> LlmEndpoint {
        let llm = &self.llm;
        let section = self.providers.get(provider);
        let format_name = section.and_then(|s| s.api_format.as_deref()).unwrap_or(provider);
        let api_format = ApiFormat::parse(format_name).unwrap_or(ApiFormat::OpenAi);
        let key_section = if section.is_some() { format!("providers.{provider}") } else { "llm".to_string() };
        let (mut api_key, base_url) = match section {
            Some(p) => (p.api_key.clone(), p.base_url.clone()),
            None => (llm.api_key.clone(), llm.base_url.clone()),
        };
        let mut key_source = format!("{key_section}.api_key");
        let configured_url = base_url.filter(|u| !u.is_empty());
        let env_url = matches!(api_format, ApiFormat::OpenAi)
            .then(|| std::env::var("OPENAI_BASE_URL").ok())
            .flatten()
            .filter(|u| !u.is_empty());
        let default_url = api_format.default_base_url();
        // The variable's key goes to its provider's own address, or to one the environment names too: a config
        // file (perhaps someone else's) that points the base URL elsewhere does not get it by default.
        let env_key_fits = match &configured_url {
            Some(url) => url.trim_end_matches('/') == default_url.trim_end_matches('/'),
            None => true,
        };
        if api_key.is_empty()
            && env_key_fits
            && let Ok(value) = std::env::var(api_format.key_variable())
            && !value.is_empty()
        {
            api_key = value;
            key_source = api_format.key_variable().to_string();
        }
        if api_key.is_empty() {
            // A server that asks for a key must not be told it "rejected" one: say that none was sent, and why
            // a key in the environment was not.
            let variable = api_format.key_variable();
            key_source = match std::env::var(variable) {
                Ok(value) if !value.is_empty() => format!(
                    "{NO_KEY_SENT} ({variable} is set but goes only to {default_url}); set `{key_section}.api_key`"
                ),
                _ => format!("{NO_KEY_SENT}; set `{key_section}.api_key`"),
            };
        }
        let base_url = configured_url.or(env_url).unwrap_or_else(|| default_url.to_string());
        let mut headers = llm.extra_headers.clone();
        if let Some(p) = section {
            headers.extend(p.headers.clone());
        }
        if api_format == ApiFormat::OpenRouter && llm.openrouter.attribution_enabled {
            headers.entry("HTTP-Referer".into()).or_insert_with(|| "https://github.com/minibot-rs".into());
            headers.entry("X-OpenRouter-Title".into()).or_insert_with(|| "MiniBot".into());
        }
        LlmEndpoint {
            provider: provider.to_string(),
            api_format,
            api_key,
            api_key_source: key_source,
            llm_key_unused: section.is_some() && !llm.api_key.is_empty(),
            key_section,
            base_url: base_url.trim_end_matches('/').to_string(),
            headers,
            model: llm.model.clone(),
            temperature: llm.temperature,
            max_new_tokens: llm.max_new_tokens,
            reasoning_effort: llm.reasoning_effort.clone(),
            request_timeout: secs(llm.request_timeout_seconds),
            connect_timeout: secs(llm.sock_connect_timeout_seconds),
            read_timeout: secs(llm.sock_read_timeout_seconds),
            http2: llm.http2,
            options: EndpointOptions {
                openrouter: llm.openrouter.clone(),
                xai: llm.xai.clone(),
                reasoning_summary: llm.reasoning_summary.clone(),
                prompt_cache_enabled: llm.prompt_cache_enabled,
                prompt_cache_retention: llm.prompt_cache_retention.clone(),
            },
            retry_attempts: llm.retry_attempts,
            retry_delay: secs(llm.retry_delay_seconds),
            redactor: self.redactor(),
        }
    }
}

/// Whether a credential found in the config (not in the vault) is long enough to be a real one and worth
/// masking. Local servers take placeholders (`ollama`, `EMPTY`, `lm-studio`) and RabbitMQ's default password is
/// `guest`: ordinary words, and masking them would garble logs, errors and conversations. Vault values are
/// masked from [`minibot_vault::Redactor::MIN_LEN`] characters.
pub fn is_credential(value: &str) -> bool {
    value.chars().count() >= 12
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

    #[test]
    fn the_host_is_the_one_the_client_connects_to() {
        for url in
            ["http://192.0.2.2:18098\\@localhost/v1", "http://192.0.2.2:18098#@localhost/v1", "HTTP://192.0.2.2/v1"]
        {
            assert!(!is_loopback_url(url), "{url}");
            assert!(super::is_plain_http_to_another_host(url), "{url}");
        }
        assert!(is_loopback_url("HTTP://LOCALHOST:8080/v1"));
        assert!(!super::is_plain_http_to_another_host("https://api.example.com/v1"));
    }

    #[test]
    fn only_this_machines_addresses_are_loopback() {
        for url in ["http://127.0.0.1:11434/v1", "http://localhost/v1", "http://[::1]:8080", "http://127.8.9.1"] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in ["http://127.0.0.1.evil.example/v1", "https://api.openai.com/v1", "http://10.0.0.1", "http://[::2]"]
        {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
