//! Counts every request to a model for the process's metrics: [`provider_for`](crate::provider_for) puts this
//! around the whole client, so retries count as one request and its time includes their waits, and a streamed
//! answer is timed until it is complete. Without a metrics recorder installed the counters are no-ops.
//!
//! Labels stay bounded: the provider is the configured name (`[llm] provider`, a key of `[providers]`), and the
//! outcome is `ok` or the error's kind, never its text.

use crate::{ChatProvider, ChatRequest, ChatResponse, LlmError, Result, TextSink};
use futures_util::future::BoxFuture;
use std::time::Instant;

pub struct Metered<P> {
    inner: P,
    provider: String,
}

impl<P> Metered<P> {
    pub fn new(inner: P, provider: impl Into<String>) -> Self {
        Self { inner, provider: provider.into() }
    }

    fn record(&self, started: Instant, result: &Result<ChatResponse>) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(error) => error_kind(error),
        };
        metrics::counter!("minibot_llm_requests_total", "provider" => self.provider.clone(), "outcome" => outcome)
            .increment(1);
        metrics::histogram!("minibot_llm_request_seconds", "provider" => self.provider.clone())
            .record(started.elapsed().as_secs_f64());
        if let Ok(response) = result {
            metrics::counter!("minibot_llm_tokens_total", "kind" => "input").increment(response.usage.prompt_tokens);
            metrics::counter!("minibot_llm_tokens_total", "kind" => "output")
                .increment(response.usage.completion_tokens);
        }
    }
}

/// The error's kind as a label value: one word per variant, so the label set stays small.
fn error_kind(error: &LlmError) -> &'static str {
    match error {
        LlmError::Connect { .. } => "connect",
        LlmError::Timeout { .. } => "timeout",
        LlmError::RateLimited { .. } => "rate_limited",
        LlmError::Server { .. } => "server",
        LlmError::Unauthorized { .. } => "unauthorized",
        LlmError::Quota { .. } => "quota",
        LlmError::ModelNotFound { .. } => "model_not_found",
        LlmError::ContextLength(_) => "context_length",
        LlmError::BadRequest { .. } => "bad_request",
        LlmError::InvalidResponse(_) => "invalid_response",
        LlmError::EmptyResponse => "empty_response",
        LlmError::Unsupported(_) => "unsupported",
    }
}

impl<P: ChatProvider> ChatProvider for Metered<P> {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.complete(request).await;
            self.record(started, &result);
            result
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.stream(request, on_text).await;
            self.record(started, &result);
            result
        })
    }
}
