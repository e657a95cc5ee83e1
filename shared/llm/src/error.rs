use std::time::Duration;

/// A provider call that failed. [`LlmError::is_retryable`] decides what the client retries.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("could not connect to {url}: {detail}")]
    Connect { url: String, detail: String },
    #[error("the provider did not answer within {0:?}")]
    Timeout(Duration),
    #[error("rate limited by the provider (HTTP 429){}", retry_hint(*.retry_after))]
    RateLimited { retry_after: Option<Duration>, body: String },
    #[error("the provider failed (HTTP {status}): {body}")]
    Server { status: u16, body: String },
    #[error("the provider rejected the API key (HTTP {status}): {body}")]
    Unauthorized { status: u16, body: String },
    #[error("out of credits or over the spending limit (HTTP {status}): {body}")]
    Quota { status: u16, body: String },
    #[error("the conversation is longer than the model's context window: {0}")]
    ContextLength(String),
    #[error("the provider rejected the request (HTTP {status}): {body}")]
    BadRequest { status: u16, body: String },
    #[error("the provider sent a response that is not valid: {0}")]
    InvalidResponse(String),
    #[error("the provider returned no choices")]
    EmptyResponse,
    #[error("provider `{0}` is not supported by this version; use an OpenAI-compatible endpoint")]
    Unsupported(String),
}

fn retry_hint(after: Option<Duration>) -> String {
    after.map(|d| format!("; retry after {}s", d.as_secs())).unwrap_or_default()
}

impl LlmError {
    /// Whether trying the same request again can help. Every variant is listed so a new one needs a decision.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect { .. } | Self::Timeout(_) | Self::RateLimited { .. } | Self::Server { .. } => true,
            Self::EmptyResponse | Self::InvalidResponse(_) => true,
            Self::Unauthorized { .. }
            | Self::Quota { .. }
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
            Self::Timeout(_) => "timeout",
            Self::RateLimited { .. } => "rate_limited",
            Self::Server { .. } => "server",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Quota { .. } => "quota",
            Self::ContextLength(_) => "context_length",
            Self::BadRequest { .. } => "bad_request",
            Self::InvalidResponse(_) => "invalid_response",
            Self::EmptyResponse => "empty_response",
            Self::Unsupported(_) => "unsupported",
        }
    }
}

pub type Result<T> = std::result::Result<T, LlmError>;
