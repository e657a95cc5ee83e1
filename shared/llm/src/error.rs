use std::time::Duration;

/// A provider call that failed. [`LlmError::is_retryable`] decides what the client retries. Each message names the
/// URL that was called and what went wrong there, in the words a user can act on: the log line of a failed turn
/// is this text, and the chat reply points at the log.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// No HTTP answer at all: `detail` says why in words a user can act on (refused, DNS, TLS, …).
    #[error("cannot reach {url}: {detail}")]
    Connect { url: String, detail: String },
    /// `after` is the configured limit that ran out, and `setting` the key that sets it; `None` when the
    /// provider itself answered HTTP 408.
    #[error("{}", timeout_text(.url, *.after, .setting))]
    Timeout { url: String, after: Option<Duration>, setting: &'static str },
    #[error("rate limited by the provider (HTTP 429){}", retry_hint(*.retry_after))]
    RateLimited { retry_after: Option<Duration>, body: String },
    #[error("{url} failed (HTTP {status}): {body}")]
    Server { url: String, status: u16, body: String },
    /// `key_source` is the config key or variable the key came from, so the message says what to fix.
    #[error("{}", unauthorized_text(.url, *.status, .body, .key_source))]
    Unauthorized { url: String, status: u16, body: String, key_source: String },
    #[error("out of credits or over the spending limit (HTTP {status}): {body}")]
    Quota { status: u16, body: String },
    /// The provider says the model does not exist (or this key may not use it); `body` is its own words.
    #[error("model `{model}` is not available at {url}: {body} (HTTP {status}; check [llm] model)")]
    ModelNotFound { url: String, model: String, status: u16, body: String },
    #[error("the conversation is longer than the model's context window: {0}")]
    ContextLength(String),
    #[error("{}", bad_request_text(.url, *.status, .body))]
    BadRequest { url: String, status: u16, body: String },
    #[error("the provider sent a response that is not valid: {0}")]
    InvalidResponse(String),
    #[error("the provider returned no choices")]
    EmptyResponse,
    #[error("provider `{0}` is not supported by this version; use an OpenAI-compatible endpoint")]
    Unsupported(String),
}

fn unauthorized_text(url: &str, status: u16, body: &str, key_source: &str) -> String {
    if key_source.starts_with(minibot_config::NO_KEY_SENT) {
        format!("{url} wants an API key, and {key_source}: {body} (HTTP {status})")
    } else {
        format!("{url} rejected the API key from {key_source}: {body} (HTTP {status})")
    }
}

fn retry_hint(after: Option<Duration>) -> String {
    after.map(|d| format!("; retry after {}s", d.as_secs())).unwrap_or_default()
}

/// The key that limits how long connecting may take; the other limit is `request_timeout_seconds`.
pub(crate) const CONNECT_SETTING: &str = "sock_connect_timeout_seconds";

/// The key that limits the pause between two reads of an answer.
pub(crate) const READ_SETTING: &str = "sock_read_timeout_seconds";

fn timeout_text(url: &str, after: Option<Duration>, setting: &str) -> String {
    match after {
        Some(after) if setting == CONNECT_SETTING => {
            format!("could not connect to {url} within {} s ([llm] {setting})", seconds(after))
        }
        Some(after) if setting == READ_SETTING => {
            format!("{url} sent nothing for {} s ([llm] {setting})", seconds(after))
        }
        Some(after) => format!("{url} did not answer within {} s ([llm] {setting})", seconds(after)),
        // A stream that ran out of time mid-answer: either limit may have run out.
        None if setting == READ_SETTING => format!(
            "{url} stopped sending before the answer was complete ([llm] {setting} or request_timeout_seconds ran out)"
        ),
        None => format!("{url} gave up on the request (HTTP 408)"),
    }
}

/// Whole seconds when the limit is whole, else one decimal: a 0.5 s limit must not read as "0 s".
fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        duration.as_secs().to_string()
    } else {
        format!("{:.1}", duration.as_secs_f64())
    }
}

fn bad_request_text(url: &str, status: u16, body: &str) -> String {
    match status {
        // A 404 that does not name the model is a wrong address, most often a base_url without its `/v1`.
        404 => format!("{url} does not exist on that server: {body} (HTTP 404; check [llm] base_url)"),
        _ => format!("{url} rejected the request (HTTP {status}): {body}"),
    }
}

impl LlmError {
    /// The error with every secret of `redactor` masked in its text: provider words reach errors on paths that
    /// do not quote them (a refusal's reason, a parse error that cites the body), and errors reach logs and,
    /// at DEBUG, the chat.
    pub fn redacted(self, redactor: &minibot_vault::Redactor) -> Self {
        if redactor.is_empty() {
            return self;
        }
        let r = |text: String| redactor.redact(&text).into_owned();
        match self {
            Self::Connect { url, detail } => Self::Connect { url: r(url), detail: r(detail) },
            Self::Timeout { url, after, setting } => Self::Timeout { url: r(url), after, setting },
            Self::RateLimited { retry_after, body } => Self::RateLimited { retry_after, body: r(body) },
            Self::Server { url, status, body } => Self::Server { url: r(url), status, body: r(body) },
            Self::Unauthorized { url, status, body, key_source } => {
                Self::Unauthorized { url: r(url), status, body: r(body), key_source }
            }
            Self::Quota { status, body } => Self::Quota { status, body: r(body) },
            Self::ModelNotFound { url, model, status, body } => {
                Self::ModelNotFound { url: r(url), model, status, body: r(body) }
            }
            Self::ContextLength(body) => Self::ContextLength(r(body)),
            Self::BadRequest { url, status, body } => Self::BadRequest { url: r(url), status, body: r(body) },
            Self::InvalidResponse(body) => Self::InvalidResponse(r(body)),
            Self::EmptyResponse => Self::EmptyResponse,
            Self::Unsupported(what) => Self::Unsupported(what),
        }
    }

    /// Whether trying the same request again can help. Every variant is listed so a new one needs a decision.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect { .. } | Self::Timeout { .. } | Self::RateLimited { .. } | Self::Server { .. } => true,
            Self::EmptyResponse | Self::InvalidResponse(_) => true,
            Self::Unauthorized { .. }
            | Self::Quota { .. }
            | Self::ModelNotFound { .. }
            | Self::ContextLength(_)
            | Self::BadRequest { .. }
            | Self::Unsupported(_) => false,
        }
    }

    /// A wait the provider asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A short kind name for logs and the debug reply.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Connect { .. } => "connect",
            Self::Timeout { .. } => "timeout",
            Self::RateLimited { .. } => "rate_limited",
            Self::Server { .. } => "server",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Quota { .. } => "quota",
            Self::ModelNotFound { .. } => "model_not_found",
            Self::ContextLength(_) => "context_length",
            Self::BadRequest { .. } => "bad_request",
            Self::InvalidResponse(_) => "invalid_response",
            Self::EmptyResponse => "empty_response",
            Self::Unsupported(_) => "unsupported",
        }
    }
}

pub type Result<T> = std::result::Result<T, LlmError>;
