//! LLM providers. [`ChatProvider`] is what the agent loop calls: one request, one [`ChatResponse`], with the
//! provider's own retries (429, 5xx, connection errors; `Retry-After` honoured) already applied. Errors are
//! [`LlmError`], classified retryable or not by an exhaustive match.
//!
//! [`provider_for`] builds the right client for a resolved [`minibot_config::LlmEndpoint`]. Today every
//! OpenAI-compatible Chat Completions endpoint is served; other API formats are refused with a clear error.

pub mod body;
pub mod cause;
mod error;
mod openai;
mod retry;
mod types;

pub use error::{LlmError, Result};
pub use openai::OpenAiChat;
pub use retry::RetryPolicy;
pub use types::*;

use futures_util::future::BoxFuture;
use minibot_config::{ApiFormat, LlmEndpoint};
use std::sync::Arc;

/// A model that answers chat requests.
pub trait ChatProvider: Send + Sync {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>>;
}

/// The client for an endpoint.
pub fn provider_for(endpoint: &LlmEndpoint) -> Result<Arc<dyn ChatProvider>> {
    match endpoint.api_format {
        ApiFormat::OpenAi | ApiFormat::OpenRouter => Ok(Arc::new(OpenAiChat::new(endpoint)?)),
        ApiFormat::OpenAiResponses | ApiFormat::Claude | ApiFormat::Google | ApiFormat::ChatgptCodex => {
            Err(LlmError::Unsupported(endpoint.api_format.as_str().into()))
        }
    }
}

/// reqwest is built without a default TLS crypto backend (aws-lc takes minutes to build); ring serves instead.
/// Installing twice is harmless, so every client constructor calls this.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
