//! Retries around any provider: exponential backoff from `retry_delay_seconds` (`base`, `2·base`, `4·base`, …,
//! capped at `max(4·base, 10 s)`), at most `retry_attempts` retries, only for errors that trying again can fix
//! ([`LlmError::is_retryable`]: never a context-length or invalid-request error). A `Retry-After` from the
//! provider wins when it is longer, up to 60 s. A streamed answer that already showed text is not retried:
//! the user would see it twice.

use crate::{ChatProvider, ChatRequest, ChatResponse, LlmError, Result, TextSink};
use backon::{ExponentialBuilder, Retryable};
use futures_util::future::BoxFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The longest wait a provider's `Retry-After` can ask for.
const MAX_ASKED_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Calls in all, the first included.
    pub attempts: u32,
    pub base: Duration,
}

impl RetryPolicy {
    /// The backoff of this policy, as backon builds it (no jitter: one client, and MiniBot's timings stay).
    pub fn backoff(&self) -> ExponentialBuilder {
        let cap = (self.base * 4).max(Duration::from_secs(10));
        ExponentialBuilder::default()
            .with_min_delay(self.base)
            .with_max_delay(cap)
            .with_factor(2.0)
            .with_max_times(self.attempts.saturating_sub(1) as usize)
    }
}

/// The wait before the next call: the backoff's, or longer when the provider asked for it.
fn adjusted(error: &LlmError, backoff: Option<Duration>) -> Option<Duration> {
    let backoff = backoff?;
    Some(error.retry_after().map_or(backoff, |asked| asked.min(MAX_ASKED_WAIT).max(backoff)))
}

fn log_retry(error: &LlmError, delay: Duration) {
    tracing::warn!(error = %error, delay_ms = delay.as_millis() as u64, "provider call failed; retrying");
}

/// A provider whose failed calls are retried by [`RetryPolicy`].
pub struct Retrying<P> {
    inner: P,
    policy: RetryPolicy,
}

impl<P> Retrying<P> {
    pub fn new(inner: P, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

impl<P: ChatProvider> ChatProvider for Retrying<P> {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(
            (|| self.inner.complete(request))
                .retry(self.policy.backoff())
                .sleep(tokio::time::sleep)
                .when(LlmError::is_retryable)
                .adjust(adjusted)
                .notify(log_retry),
        )
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let shown = AtomicBool::new(false);
            let sink = |text: &str| {
                shown.store(true, Ordering::Relaxed);
                on_text(text);
            };
            (|| self.inner.stream(request, &sink))
                .retry(self.policy.backoff())
                .sleep(tokio::time::sleep)
                .when(|error| error.is_retryable() && !shown.load(Ordering::Relaxed))
                .adjust(adjusted)
                .notify(log_retry)
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Fails with the given errors in turn, then answers.
    struct Flaky {
        errors: Mutex<Vec<LlmError>>,
        calls: Mutex<Vec<tokio::time::Instant>>,
    }

    impl ChatProvider for Flaky {
        fn complete<'a>(&'a self, _: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
            Box::pin(async move {
                self.calls.lock().unwrap().push(tokio::time::Instant::now());
                match self.errors.lock().unwrap().pop() {
                    Some(error) => Err(error),
                    None => Ok(ChatResponse { content: Some("ok".into()), ..ChatResponse::default() }),
                }
            })
        }
    }

    fn server() -> LlmError {
        LlmError::Server { url: String::new(), status: 500, body: String::new() }
    }

    #[tokio::test(start_paused = true)]
    async fn waits_grow_and_a_retry_after_wins() {
        let limited = LlmError::RateLimited { retry_after: Some(Duration::from_secs(3)), body: String::new() };
        // Popped from the end: a 500, a 500, then the 429 with Retry-After.
        let flaky = Flaky { errors: Mutex::new(vec![limited, server(), server()]), calls: Mutex::default() };
        let policy = RetryPolicy { attempts: 4, base: Duration::from_millis(100) };
        let retrying = Retrying::new(flaky, policy);
        let answer = retrying.complete(&ChatRequest::default()).await.unwrap();
        assert_eq!(answer.content.as_deref(), Some("ok"));
        let calls = retrying.inner.calls.lock().unwrap().clone();
        let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
        // The timer wheel rounds up to the next millisecond.
        let expected = [Duration::from_millis(100), Duration::from_millis(200), Duration::from_secs(3)];
        for (gap, expected) in gaps.iter().zip(expected) {
            assert!(*gap >= expected && *gap <= expected + Duration::from_millis(5), "{gaps:?}");
        }
        assert_eq!(gaps.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_the_attempts_and_never_retries_a_context_length_error() {
        let flaky = Flaky { errors: Mutex::new(vec![server(), server(), server()]), calls: Mutex::default() };
        let retrying = Retrying::new(flaky, RetryPolicy { attempts: 2, base: Duration::from_millis(10) });
        assert!(retrying.complete(&ChatRequest::default()).await.is_err());
        assert_eq!(retrying.inner.calls.lock().unwrap().len(), 2);

        let long = LlmError::ContextLength("too long".into());
        let flaky = Flaky { errors: Mutex::new(vec![long]), calls: Mutex::default() };
        let retrying = Retrying::new(flaky, RetryPolicy { attempts: 4, base: Duration::from_millis(10) });
        assert!(matches!(retrying.complete(&ChatRequest::default()).await, Err(LlmError::ContextLength(_))));
        assert_eq!(retrying.inner.calls.lock().unwrap().len(), 1);
    }
}
