//! LLM providers. [`ChatProvider`] is what the agent loop calls: one request, one [`ChatResponse`], whole or
//! streamed. Each API format has its own module that turns a [`ChatRequest`] into that API's wire types and its
//! answer back; what every provider needs is shared around them: the HTTP transport and error classification
//! (`http`), server-sent events (`sse`), and the wrappers that [`provider_for`] puts around any client:
//! [`Masking`] (no secret leaves in a request), [`ShapedTools`] (tool schemas in the shape the model family
//! takes), [`Retrying`] (backoff on errors that can pass) and [`Metered`] (the process's metrics). Errors are
//! [`LlmError`], classified retryable or not by an exhaustive match.
//!
//! Which formats this build can call is decided once, by the config's feature table
//! ([`minibot_config::ApiFormat::is_callable`]); [`provider_for`] has a client for each of those.

mod anthropic;
pub mod body;
pub mod cause;
mod error;
mod gemini;
mod http;
mod limits;
mod masking;
mod metered;
mod openai_chat;
mod openai_responses;
mod retry;
mod schema_policy;
mod sse;
mod types;

pub use anthropic::Anthropic;
pub use error::{LlmError, Result};
pub use gemini::Gemini;
pub use http::same_origin_redirects;
pub use limits::{
    BudgetSource, ContextBudget, DEFAULT_ANSWER_TOKENS, DEFAULT_COMPACT_RATIO, IMAGE_TOKENS, ModelLimits, ProviderName,
    TokenEncoding, count_text_tokens, count_tokens, model_limits, model_table_source,
};
pub use masking::Masking;
pub use metered::Metered;
pub use openai_chat::OpenAiChat;
pub use openai_responses::OpenAiResponses;
pub use retry::{RetryPolicy, Retrying};
pub use schema_policy::{SchemaPolicy, ShapedTools};
pub use types::*;

use futures_util::future::BoxFuture;
use minibot_config::{ApiFormat, LlmEndpoint};
use std::sync::Arc;

/// Receives an answer's text piece by piece as a provider streams it.
pub type TextSink<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// A model that answers chat requests.
pub trait ChatProvider: Send + Sync {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>>;

    /// [`Self::complete`], showing the answer's text as it arrives: `on_text` gets each new piece, and the
    /// response is the whole answer (tool calls that streamed in parts put together). A provider that cannot
    /// stream answers whole and shows it as one piece.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let response = self.complete(request).await?;
            if let Some(text) = response.content.as_deref().filter(|t| !t.is_empty()) {
                on_text(text);
            }
            Ok(response)
        })
    }
}

impl<P: ChatProvider + ?Sized> ChatProvider for Arc<P> {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        (**self).complete(request)
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        (**self).stream(request, on_text)
    }
}

/// The client for an endpoint, with secret masking, tool schemas shaped for the model, retries and metrics around
/// it. Every chat request of the process goes through here, so this is where requests are counted.
pub fn provider_for(endpoint: &LlmEndpoint) -> Result<Arc<dyn ChatProvider>> {
    if !endpoint.api_format.is_callable() {
        return Err(LlmError::Unsupported(endpoint.api_format.as_str().into()));
    }
    let client: Arc<dyn ChatProvider> = match endpoint.api_format {
        ApiFormat::OpenAi | ApiFormat::OpenRouter => Arc::new(OpenAiChat::new(endpoint)?),
        ApiFormat::OpenAiResponses => Arc::new(OpenAiResponses::new(endpoint)?),
        ApiFormat::Claude => Arc::new(Anthropic::new(endpoint)?),
        ApiFormat::Google => Arc::new(Gemini::new(endpoint)?),
        // Needs ChatGPT's OAuth login file; refused at start-up by the feature table.
        ApiFormat::ChatgptCodex => return Err(LlmError::Unsupported(endpoint.api_format.as_str().into())),
    };
    let policy = RetryPolicy { attempts: endpoint.retry_attempts + 1, base: endpoint.retry_delay };
    let masked = Masking::new(ShapedTools::new(Retrying::new(client, policy)), endpoint.redactor.clone());
    Ok(Arc::new(Metered::new(masked, endpoint.provider.clone())))
}

/// reqwest is built without a default TLS crypto backend (aws-lc takes minutes to build); ring serves instead.
/// Installing twice is harmless, so every client constructor calls this.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
