//! The Bot API client: frankenstein's typed methods over our own reqwest client, so that every call shares one
//! retry policy. `429 retry_after` is waited out, 5xx answers and network failures are retried with backoff
//! (backon's, as everywhere in the workspace), and the bot token never appears in an error or a log line.
//! Flood control: <https://core.telegram.org/bots/api#responseparameters> (`retry_after`).

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use frankenstein::AsyncTelegramApi;
use frankenstein::response::ErrorResponse;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::time::Duration;

/// The most of one Bot API answer read: a hundred updates of long messages are far below it.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// How often a call that failed for a passing reason is tried again, and how long the waits grow.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { attempts: 8, first_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

impl RetryPolicy {
    /// The waits between the calls: `first_delay`, doubling up to `max_delay`, `attempts - 1` of them.
    pub fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.first_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_max_times(self.attempts.saturating_sub(1) as usize)
    }
}

/// The longest one incoming file may take to download.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("Telegram refused {method}: {description} (error {code})")]
    Api { method: String, code: u64, description: String, retry_after: Option<u64> },
    #[error("Telegram cannot be reached ({method}): {detail}")]
    Network { method: String, detail: String },
    #[error("Telegram sent an answer to {method} that is not valid: {detail}")]
    Decode { method: String, detail: String },
    #[error("cannot read {path}: {detail}")]
    File { path: String, detail: String },
    #[error("the file is larger than {limit} bytes")]
    TooLarge { limit: u64 },
}

impl ApiError {
    /// Telegram could not parse the MarkdownV2 or HTML of a message (`can't parse entities`).
    pub fn is_parse_error(&self) -> bool {
        matches!(self, Self::Api { code: 400, description, .. } if description.contains("can't parse entities"))
    }

    pub fn is_unauthorized(&self) -> bool {
        matches!(self, Self::Api { code: 401, .. })
    }

    /// An edit whose text did not change: nothing to do.
    pub fn is_not_modified(&self) -> bool {
        matches!(self, Self::Api { code: 400, description, .. } if description.contains("message is not modified"))
    }

    /// Worth trying again: rate limited, a server error, or no answer at all.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Api { code, .. } => *code == 429 || *code >= 500,
            Self::Network { .. } => true,
            Self::Decode { .. } | Self::File { .. } | Self::TooLarge { .. } => false,
        }
    }

    /// The wait Telegram's flood control asked for (`429` with `retry_after`, at least a second).
    pub fn asked_wait(&self) -> Option<Duration> {
        match self {
            Self::Api { code: 429, retry_after: Some(seconds), .. } => Some(Duration::from_secs((*seconds).max(1))),
            _ => None,
        }
    }
}

/// The wait before the next call: Telegram's `retry_after` when it gave one (calling earlier is refused again),
/// else the backoff's. No backoff left means no next call.
fn wait_before_retry(error: &ApiError, backoff: Option<Duration>) -> Option<Duration> {
    let backoff = backoff?;
    Some(error.asked_wait().unwrap_or(backoff))
}

/// One bot's API: `{api_base_url}/bot{token}/METHOD` and `{api_base_url}/file/bot{token}/PATH`.
#[derive(Clone)]
pub struct BotApi {
    client: reqwest::Client,
    methods: String,
    files: String,
    retry: RetryPolicy,
    /// How long a `getUpdates` long poll waits on the server; its HTTP timeout is this plus a margin.
    poll_timeout: Duration,
}

impl BotApi {
    pub fn new(api_base_url: &str, token: &str, retry: RetryPolicy) -> Result<Self, ApiError> {
        minibot_llm::install_crypto_provider();
        let base = api_base_url.trim_end_matches('/');
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Network { method: "connect".into(), detail: e.without_url().to_string() })?;
        Ok(Self {
            client,
            methods: format!("{base}/bot{token}"),
            files: format!("{base}/file/bot{token}"),
            retry,
            poll_timeout: Duration::from_secs(25),
        })
    }

    pub fn with_poll_timeout(mut self, timeout: Duration) -> Self {
        self.poll_timeout = timeout;
        self
    }

    pub fn poll_timeout(&self) -> Duration {
        self.poll_timeout
    }

    /// Calls that wait on the server (long polls) get longer than the others.
    fn timeout_for(&self, method: &str) -> Duration {
        if method == "getUpdates" { self.poll_timeout + Duration::from_secs(15) } else { Duration::from_secs(60) }
    }

    /// Polls are retried by the poller itself, which also decides how long to wait. A message for a user is
    /// tried until Telegram takes it (an outage of minutes must not lose an answer); anything else gives up
    /// after the policy's attempts.
    fn backoff_for(&self, method: &str) -> ExponentialBuilder {
        match method {
            "getUpdates" => self.retry.backoff().with_max_times(0),
            "sendMessage" | "sendDocument" | "sendPhoto" => self.retry.backoff().without_max_times(),
            _ => self.retry.backoff(),
        }
    }

    async fn with_retries<T, F, Fut>(&self, method: &str, call: F) -> Result<T, ApiError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        call.retry(self.backoff_for(method))
            .sleep(tokio::time::sleep)
            .when(ApiError::is_retryable)
            .adjust(wait_before_retry)
            .notify(|error, wait| {
                tracing::warn!(method, error = %error, wait_ms = wait.as_millis() as u64, "Telegram call failed; trying again");
            })
            .await
    }

    async fn decode<T: DeserializeOwned>(method: &str, response: reqwest::Response) -> Result<T, ApiError> {
        let status = response.status();
        // A Bot API server (or what sits at `api_base_url`) that sends an endless body must not take the memory.
        let (body, cut) = minibot_llm::body::read_capped(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| ApiError::Network { method: method.into(), detail: e.without_url().to_string() })?;
        if cut {
            return Err(ApiError::Decode {
                method: method.into(),
                detail: format!("the answer is larger than {} MiB; the rest was not read", MAX_ANSWER_BYTES >> 20),
            });
        }
        let body = body.as_bytes();
        if status.is_success() {
            return serde_json::from_slice(body)
                .map_err(|e| ApiError::Decode { method: method.into(), detail: e.to_string() });
        }
        match serde_json::from_slice::<ErrorResponse>(body) {
            Ok(error) => Err(ApiError::Api {
                method: method.into(),
                code: error.error_code,
                description: error.description,
                retry_after: error.parameters.and_then(|p| p.retry_after).map(u64::from),
            }),
            Err(_) => Err(ApiError::Api {
                method: method.into(),
                code: u64::from(status.as_u16()),
                description: String::from_utf8_lossy(body).chars().take(200).collect(),
                retry_after: None,
            }),
        }
    }

    fn network(method: &str, error: reqwest::Error) -> ApiError {
        // `without_url`: the URL holds the bot token.
        ApiError::Network { method: method.into(), detail: error.without_url().to_string() }
    }

    /// Downloads a file `getFile` named, refusing one larger than `limit` bytes before reading it all.
    pub async fn download(&self, file_path: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
        let url = format!("{}/{}", self.files, file_path.trim_start_matches('/'));
        self.with_retries("download", || async {
            // A stalled download must not hold up the updates behind it.
            let request = self.client.get(&url).timeout(DOWNLOAD_TIMEOUT);
            let mut response = request.send().await.map_err(|e| Self::network("download", e))?;
            if !response.status().is_success() {
                return Err(ApiError::Api {
                    method: "download".into(),
                    code: u64::from(response.status().as_u16()),
                    description: "the file could not be downloaded".into(),
                    retry_after: None,
                });
            }
            if response.content_length().is_some_and(|len| len > limit) {
                return Err(ApiError::TooLarge { limit });
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| Self::network("download", e))? {
                body.extend_from_slice(&chunk);
                if body.len() as u64 > limit {
                    return Err(ApiError::TooLarge { limit });
                }
            }
            Ok(body)
        })
        .await
    }
}

#[async_trait]
impl AsyncTelegramApi for BotApi {
    type Error = ApiError;

    async fn request<Params, Output>(&self, method: &str, params: Option<Params>) -> Result<Output, Self::Error>
    where
        Params: Serialize + std::fmt::Debug + Send,
        Output: DeserializeOwned,
    {
        let body = match &params {
            Some(params) => serde_json::to_vec(params)
                .map_err(|e| ApiError::Decode { method: method.into(), detail: e.to_string() })?,
            None => b"{}".to_vec(),
        };
        let url = format!("{}/{method}", self.methods);
        let timeout = self.timeout_for(method);
        self.with_retries(method, || async {
            let response = self
                .client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .timeout(timeout)
                .body(body.clone())
                .send()
                .await
                .map_err(|e| Self::network(method, e))?;
            Self::decode(method, response).await
        })
        .await
    }

    async fn request_with_form_data<Params, Output>(
        &self,
        method: &str,
        params: Params,
        files: Vec<(&str, PathBuf)>,
    ) -> Result<Output, Self::Error>
    where
        Params: Serialize + std::fmt::Debug + Send,
        Output: DeserializeOwned,
    {
        let fields = match serde_json::to_value(&params) {
            Ok(serde_json::Value::Object(fields)) => fields,
            Ok(_) | Err(_) => {
                return Err(ApiError::Decode { method: method.into(), detail: "parameters are not an object".into() });
            }
        };
        let mut parts = Vec::new();
        for (name, path) in &files {
            let bytes = read_checked_file(path)
                .await
                .map_err(|e| ApiError::File { path: path.display().to_string(), detail: e.to_string() })?;
            let file_name = path.file_name().map_or_else(|| "file".to_string(), |n| n.to_string_lossy().into_owned());
            parts.push((name.to_string(), file_name, bytes));
        }
        let url = format!("{}/{method}", self.methods);
        self.with_retries(method, || async {
            let mut form = reqwest::multipart::Form::new();
            for (key, value) in &fields {
                if parts.iter().any(|(name, _, _)| name == key) {
                    continue;
                }
                form = match value {
                    serde_json::Value::String(text) => form.text(key.clone(), text.clone()),
                    other => form.text(key.clone(), other.to_string()),
                };
            }
            for (name, file_name, bytes) in &parts {
                let part = reqwest::multipart::Part::bytes(bytes.clone()).file_name(file_name.clone());
                form = form.part(name.clone(), part);
            }
            let response = self
                .client
                .post(&url)
                .timeout(Duration::from_secs(120))
                .multipart(form)
                .send()
                .await
                .map_err(|e| Self::network(method, e))?;
            Self::decode(method, response).await
        })
        .await
    }
}

/// A file a tool checked, read without following links (see [`minibot_sandbox::open_without_links`]).
async fn read_checked_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    tokio::fs::File::from_std(minibot_sandbox::open_without_links(path)?).read_to_end(&mut bytes).await?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    // By its full path: the module layout test reads `super::` as the telegram module.
    use crate::api::{ApiError, BotApi, RetryPolicy};
    use backon::BackoffBuilder;
    use frankenstein::AsyncTelegramApi;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Red-team report (#22, second pass): a Bot API server that sends an endless answer took the daemon to 3 GB.
    /// The answer is read up to its ceiling and the call fails, naming why.
    #[tokio::test]
    async fn an_endless_answer_is_cut_at_the_ceiling() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"ok\":true,\"x\":\"")
                .await;
            let chunk = vec![b'a'; 1 << 20];
            // 64 MiB at most, four times the ceiling.
            for _ in 0..64 {
                if socket.write_all(&chunk).await.is_err() {
                    return;
                }
            }
        });
        let retry =
            RetryPolicy { attempts: 1, first_delay: Duration::from_millis(1), max_delay: Duration::from_millis(1) };
        let api = BotApi::new(&format!("http://127.0.0.1:{port}"), "123:abc", retry).unwrap();
        let error = api.get_me().await.unwrap_err();
        server.abort();
        assert!(matches!(error, ApiError::Decode { .. }), "{error:?}");
        assert!(error.to_string().contains("larger than 16 MiB"), "{error}");
    }

    fn api_error(code: u64, retry_after: Option<u64>) -> ApiError {
        ApiError::Api { method: "m".into(), code, description: "d".into(), retry_after }
    }

    /// Calls `method` through the retry policy with answers that fail with `errors` in turn, then succeed; returns
    /// the outcome and the instants of the calls.
    async fn call_through(
        policy: RetryPolicy,
        method: &str,
        errors: Vec<ApiError>,
    ) -> (Result<(), ApiError>, Vec<tokio::time::Instant>) {
        let api = BotApi::new("http://127.0.0.1:9", "123:abc", policy).unwrap();
        let errors = std::sync::Mutex::new(errors.into_iter());
        let calls = std::sync::Mutex::new(Vec::new());
        let outcome = api
            .with_retries(method, || async {
                calls.lock().unwrap().push(tokio::time::Instant::now());
                errors.lock().unwrap().next().map_or(Ok(()), Err)
            })
            .await;
        (outcome, calls.into_inner().unwrap())
    }

    fn gaps(calls: &[tokio::time::Instant]) -> Vec<Duration> {
        calls.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The timer wheel rounds a sleep up to the next millisecond.
    fn assert_waits(gaps: &[Duration], expected: &[Duration]) {
        assert_eq!(gaps.len(), expected.len(), "{gaps:?}");
        for (gap, expected) in gaps.iter().zip(expected) {
            assert!(*gap >= *expected && *gap <= *expected + Duration::from_millis(5), "{gaps:?} vs {expected:?}");
        }
    }

    #[test]
    fn the_default_waits_double_from_half_a_second_up_to_thirty() {
        let waits: Vec<Duration> = RetryPolicy::default().backoff().build().collect();
        let expected = [500, 1000, 2000, 4000, 8000, 16000, 30000].map(Duration::from_millis);
        assert_eq!(waits, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn server_errors_wait_longer_each_time_and_flood_control_waits_what_telegram_asked() {
        // A shorter `retry_after` than the backoff is honoured as well: Telegram said when it takes calls again.
        let errors = vec![
            api_error(502, None),
            ApiError::Network { method: "m".into(), detail: "reset".into() },
            api_error(429, Some(3)),
            api_error(500, None),
            api_error(429, Some(0)),
        ];
        let (outcome, calls) = call_through(RetryPolicy::default(), "getMe", errors).await;
        assert!(outcome.is_ok(), "{outcome:?}");
        let expected = [500, 1000, 3000, 4000, 1000].map(Duration::from_millis);
        assert_waits(&gaps(&calls), &expected);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_sent_past_the_attempts_while_other_calls_give_up() {
        let policy =
            RetryPolicy { attempts: 3, first_delay: Duration::from_millis(10), max_delay: Duration::from_millis(40) };
        let failures = || (0..6).map(|_| api_error(502, None)).collect::<Vec<_>>();

        let (outcome, calls) = call_through(policy, "sendMessage", failures()).await;
        assert!(outcome.is_ok(), "{outcome:?}");
        assert_waits(&gaps(&calls), &[10, 20, 40, 40, 40, 40].map(Duration::from_millis));

        let (outcome, calls) = call_through(policy, "getChat", failures()).await;
        assert!(matches!(outcome, Err(ApiError::Api { code: 502, .. })), "{outcome:?}");
        assert_eq!(calls.len(), 3);

        // The poller decides itself how long to wait after a failed poll.
        let (outcome, calls) = call_through(policy, "getUpdates", failures()).await;
        assert!(outcome.is_err());
        assert_eq!(calls.len(), 1);

        let refused = vec![api_error(400, None)];
        let (outcome, calls) = call_through(policy, "sendMessage", refused).await;
        assert!(matches!(outcome, Err(ApiError::Api { code: 400, .. })), "{outcome:?}");
        assert_eq!(calls.len(), 1, "a refused message was sent again");
    }
}
