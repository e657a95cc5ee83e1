use crate::LlmError;
use std::time::Duration;

/// Exponential backoff: `base`, `2·base`, `4·base`, … capped at `max(4·base, 10 s)`; a `Retry-After` from the
/// provider wins when it is longer, up to 60 s.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base: Duration,
}

impl RetryPolicy {
    pub fn delay(&self, retry: u32, error: &LlmError) -> Duration {
        let cap = (self.base * 4).max(Duration::from_secs(10));
        let backoff = self.base.saturating_mul(1u32 << retry.min(16)).min(cap);
        match error.retry_after() {
            Some(asked) => asked.min(Duration::from_secs(60)).max(backoff),
            None => backoff,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_honours_retry_after() {
        let policy = RetryPolicy { attempts: 4, base: Duration::from_millis(100) };
        let server = LlmError::Server { url: String::new(), status: 500, body: String::new() };
        assert_eq!(policy.delay(0, &server), Duration::from_millis(100));
        assert_eq!(policy.delay(2, &server), Duration::from_millis(400));
        let limited = LlmError::RateLimited { retry_after: Some(Duration::from_secs(3)), body: String::new() };
        assert_eq!(policy.delay(0, &limited), Duration::from_secs(3));
    }
}
