//! The HTTP side every provider shares: one reqwest client per endpoint (its headers, timeouts, HTTP/2 choice),
//! the POST with a capped read, and the translation of transport failures and error statuses into [`LlmError`]
//! in the user's terms. Provider text quoted in an error is masked before it is cut.

use crate::{LlmError, Result};
use minibot_config::LlmEndpoint;
use minibot_vault::Redactor;
use serde_json::Value;
use std::time::Duration;

/// The most of a response read: far above any real answer, far below what would hurt the process.
pub(crate) const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Bodies quoted in errors are cut to this many characters; a provider's HTML error page is no use in full.
const ERROR_BODY_CHARS: usize = 300;

/// How a request proves who sends it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Auth<'a> {
    /// `Authorization: Bearer <key>` (OpenAI, OpenRouter, xAI and every compatible server).
    Bearer(&'a str),
    /// The key in a named header (`x-api-key` for Anthropic, `x-goog-api-key` for Gemini).
    Header(&'static str, &'a str),
}

pub(crate) struct Transport {
    client: reqwest::Client,
    pub(crate) base_url: String,
    pub(crate) api_key: String,
    timeout: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    /// Where the API key came from (`llm.api_key`, `OPENAI_API_KEY`, …), for the message of a rejected key.
    key_source: String,
    /// Masks secrets in provider text that an error quotes, and in URLs that messages show.
    pub(crate) redactor: Redactor,
}

/// A 2xx response whose body is still to be read (streams).
pub(crate) struct Opened {
    pub response: reqwest::Response,
    pub url: String,
}

impl Transport {
    pub(crate) fn new(endpoint: &LlmEndpoint) -> Result<Self> {
        crate::install_crypto_provider();
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &endpoint.headers {
            let bad = |e: &dyn std::fmt::Display| LlmError::BadRequest {
                url: endpoint.base_url.clone(),
                status: 0,
                body: format!("header `{name}`: {e}"),
            };
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(&e))?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|e| bad(&e))?;
            headers.insert(name, value);
        }
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .redirect(same_origin_redirects())
            .connect_timeout(endpoint.connect_timeout)
            .timeout(endpoint.request_timeout)
            .read_timeout(endpoint.read_timeout)
            .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")));
        builder = if endpoint.http2 { builder } else { builder.http1_only() };
        let client = builder
            .build()
            .map_err(|e| LlmError::Connect { url: endpoint.base_url.clone(), detail: error_chain(&e) })?;
        Ok(Self {
            client,
            base_url: endpoint.base_url.clone(),
            api_key: endpoint.api_key.clone(),
            timeout: endpoint.request_timeout,
            connect_timeout: endpoint.connect_timeout,
            read_timeout: endpoint.read_timeout,
            key_source: endpoint.api_key_source.clone(),
            redactor: endpoint.redactor.clone(),
        })
    }

    /// POSTs a JSON body and reads the whole 2xx answer.
    pub(crate) async fn post_json(&self, url: &str, auth: Auth<'_>, body: &[u8], model: &str) -> Result<String> {
        let started = std::time::Instant::now();
        let opened = self.open(url, auth, body, model, &[]).await?;
        let (text, cut) = crate::body::read_capped(opened.response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| self.failed_after(url, &e, started))?;
        if cut {
            return Err(LlmError::InvalidResponse(format!(
                "{} sent more than {} MiB; the rest was not read",
                opened.url,
                MAX_RESPONSE_BYTES >> 20
            )));
        }
        Ok(text)
    }

    /// POSTs a JSON body and returns the 2xx response unread (for server-sent events); an error status is read
    /// and classified here.
    pub(crate) async fn open(
        &self,
        url: &str,
        auth: Auth<'_>,
        body: &[u8],
        model: &str,
        extra: &[(&str, &str)],
    ) -> Result<Opened> {
        let mut request =
            self.client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_vec());
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        match auth {
            Auth::Bearer(key) if !key.is_empty() => request = request.bearer_auth(key),
            Auth::Header(name, key) if !key.is_empty() => request = request.header(name, key),
            _ => {}
        }
        let started = std::time::Instant::now();
        let response = request.send().await.map_err(|e| self.failed_after(url, &e, started))?;
        let status = response.status().as_u16();
        let shown = self.shown(url);
        if (200..300).contains(&status) {
            return Ok(Opened { response, url: shown });
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok());
        let (text, _) = crate::body::read_capped(response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| self.failed_after(url, &e, started))?;
        let call = Call { url: &shown, model, key_source: &self.key_source, redactor: &self.redactor };
        Err(classify_status(status, retry_after, &text, &call))
    }

    /// A URL as messages show it: a key can sit in a configured URL (`?key=`).
    pub(crate) fn shown(&self, url: &str) -> String {
        self.redactor.redact(url).into_owned()
    }

    /// A request that failed `started.elapsed()` after it was sent. A timeout well before the whole request's
    /// limit was the pause between two reads (`sock_read_timeout_seconds`): the message names the key that ran
    /// out.
    pub(crate) fn failed_after(&self, url: &str, error: &reqwest::Error, started: std::time::Instant) -> LlmError {
        let shown = self.shown(url);
        if error.is_timeout() {
            let (after, setting) = if error.is_connect() {
                (self.connect_timeout, crate::error::CONNECT_SETTING)
            } else if started.elapsed() + Duration::from_millis(100) < self.timeout {
                (self.read_timeout, crate::error::READ_SETTING)
            } else {
                (self.timeout, "request_timeout_seconds")
            };
            return LlmError::Timeout { url: shown, after: Some(after), setting };
        }
        self.unreachable(url, shown, error)
    }

    /// A failure that is not a timeout: the connection, or the body cut off mid-read.
    fn unreachable(&self, url: &str, shown: String, error: &reqwest::Error) -> LlmError {
        let host = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
            .unwrap_or_else(|| shown.clone());
        // reqwest's message is also a cause (a body cut off mid-read); past the connection, keep its whole chain.
        let detail = if error.is_connect() { crate::cause::describe(error, &host) } else { error_chain(error) };
        LlmError::Connect { url: shown, detail: self.redactor.redact(&detail).into_owned() }
    }

    /// Provider text as an error quotes it.
    pub(crate) fn quote(&self, text: &str) -> String {
        quote(&self.redactor, text)
    }
}

/// A transport for unit tests of the answer parsers.
#[cfg(test)]
pub(crate) fn test_transport() -> Transport {
    let config =
        minibot_config::Config::from_toml("[llm]\napi_key = \"k\"\n", "t.toml", ".", &|_| None).expect("test config");
    Transport::new(&config.main_llm()).expect("test transport")
}

pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Provider text as an error quotes it: secrets masked, then cut. Masking comes first so a cut through a key
/// cannot leave its start readable.
/// A JSON body is read first, so a key the server escaped (`\/`, `\u0041`) is matched in its plain form.
pub(crate) fn quote(redactor: &Redactor, text: &str) -> String {
    let unescaped = redactor.redact_json_text(text);
    cut(&redactor.redact(&unescaped))
}

fn cut(text: &str) -> String {
    let trimmed = text.trim();
    match trimmed.char_indices().nth(ERROR_BODY_CHARS) {
        Some((index, _)) => format!("{}…", &trimmed[..index]),
        None => trimmed.to_string(),
    }
}

/// What a failed call was, for the error that reports it.
pub(crate) struct Call<'a> {
    pub url: &'a str,
    pub model: &'a str,
    pub key_source: &'a str,
    pub redactor: &'a Redactor,
}

/// An error status in the user's terms. The phrases cover every provider built: OpenAI's `context_length`,
/// Anthropic's "prompt is too long" and `overloaded_error` (529), Gemini's `RESOURCE_EXHAUSTED` (429) and
/// "exceeds the maximum number of tokens".
pub(crate) fn classify_status(status: u16, retry_after: Option<Duration>, body: &str, call: &Call<'_>) -> LlmError {
    let lower = body.to_ascii_lowercase();
    let text = quote(call.redactor, &provider_text(body));
    let url = call.url.to_string();
    let too_long = [
        "context_length",
        "maximum context length",
        "prompt is too long",
        "exceeds the maximum number of tokens",
        "input token count",
        // Anthropic, when the prompt fits but the prompt plus `max_tokens` does not.
        "exceed context limit",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase));
    match status {
        429 if lower.contains("insufficient_quota") => LlmError::Quota { status, body: text },
        429 => LlmError::RateLimited { retry_after: retry_after.or_else(|| google_retry_delay(body)), body: text },
        402 => LlmError::Quota { status, body: text },
        401 | 403 => LlmError::Unauthorized { url, status, body: text, key_source: call.key_source.into() },
        // Gemini refuses a wrong key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
        400 if lower.contains("api_key_invalid") || lower.contains("api key not valid") => {
            LlmError::Unauthorized { url, status, body: text, key_source: call.key_source.into() }
        }
        408 => LlmError::Timeout { url, after: None, setting: "request_timeout_seconds" },
        400 | 413 if too_long => LlmError::ContextLength(text),
        400 | 404 | 422 if names_missing_model(&lower, status) => {
            LlmError::ModelNotFound { url, model: call.model.into(), status, body: text }
        }
        500..=599 => LlmError::Server { url, status, body: text },
        _ => LlmError::BadRequest { url, status, body: text },
    }
}

/// The wait Gemini asks for after a 429: it sends no `Retry-After` header but a `google.rpc.RetryInfo` in
/// `error.details` whose `retryDelay` is a protobuf duration (`"17s"`, `"3.9s"`).
fn google_retry_delay(body: &str) -> Option<Duration> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error").or_else(|| value.get(0)?.get("error"))?;
    let delay = error.get("details")?.as_array()?.iter().find_map(|d| d.get("retryDelay")?.as_str())?;
    Duration::try_from_secs_f64(delay.strip_suffix('s')?.parse().ok()?).ok()
}

/// Whether an error body says the requested model does not exist: OpenAI's `model_not_found`, Ollama's "model
/// … not found", OpenRouter's "not a valid model ID", vLLM's "The model `x` does not exist". A 404 that names a
/// model counts; a bare 404 is a wrong URL.
fn names_missing_model(lower: &str, status: u16) -> bool {
    let said = ["model_not_found", "not a valid model", "no such model", "unknown model", "model not found"]
        .iter()
        .any(|phrase| lower.contains(phrase));
    let missing = lower.contains("not found") || lower.contains("not exist");
    said || (lower.contains("model") && missing) || (status == 404 && lower.contains("model"))
}

/// The provider's own words from an error body: `error.message` (OpenAI, Anthropic, Gemini and most servers),
/// `error` as text (Ollama), `message` or `detail`; the body itself when it is none of those.
pub(crate) fn provider_text(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(body) else { return body.to_string() };
    // Gemini's streaming errors come as a one-element array.
    let value = match value {
        Value::Array(mut items) if items.len() == 1 => items.remove(0),
        other => other,
    };
    let error = value.get("error");
    let said = error
        .and_then(|e| e.get("message"))
        .or_else(|| error.filter(|e| e.is_string()))
        .or_else(|| value.get("message"))
        .or_else(|| value.get("detail"))
        .and_then(Value::as_str);
    said.map_or_else(|| body.to_string(), str::to_string)
}

/// The redirects a client that carries a key follows: same origin only. reqwest drops `Authorization` on a
/// redirect to another host but keeps every other header, so Anthropic's `x-api-key`, Gemini's
/// `x-goog-api-key` and `extra_headers` would reach any host a server (or whoever answers for it) names.
pub fn same_origin_redirects() -> reqwest::redirect::Policy {
    const MAX_REDIRECTS: usize = 5;
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin =
            attempt.previous().first().is_some_and(|original| original.origin() == attempt.url().origin());
        if !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let redactor = Redactor::default();
        let none =
            Call { url: "http://x/v1/chat/completions", model: "m", key_source: "llm.api_key", redactor: &redactor };
        assert!(classify_status(503, None, "", &none).is_retryable());
        assert!(
            classify_status(529, None, r#"{"type":"error","error":{"type":"overloaded_error"}}"#, &none).is_retryable()
        );
        assert!(!classify_status(401, None, "", &none).is_retryable());
        assert!(matches!(classify_status(429, None, "insufficient_quota", &none), LlmError::Quota { .. }));
        let gemini_429 = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}"#;
        assert_eq!(classify_status(429, None, gemini_429, &none).retry_after(), Some(Duration::from_millis(1500)));
        let gemini_key = r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#;
        assert!(matches!(classify_status(400, None, gemini_key, &none), LlmError::Unauthorized { .. }));
        for too_long in [
            "This model's maximum context length is 8192",
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197451 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}"#,
        ] {
            assert!(matches!(classify_status(400, None, too_long, &none), LlmError::ContextLength(_)), "{too_long}");
        }
    }

    #[test]
    fn a_missing_model_is_told_apart_from_a_wrong_url() {
        let redactor = Redactor::default();
        let call = Call { url: "http://x/v1/chat/completions", model: "llama9", key_source: "k", redactor: &redactor };
        let ollama = r#"{"error":"model \"llama9\" not found, try pulling it first"}"#;
        let openrouter = r#"{"error":{"message":"llama9 is not a valid model ID","code":400}}"#;
        for (status, body) in [(404, ollama), (400, openrouter)] {
            let error = classify_status(status, None, body, &call);
            assert!(matches!(error, LlmError::ModelNotFound { .. }), "{status} {body}: {error:?}");
            let text = error.to_string();
            assert!(text.contains("model `llama9`") && text.contains("http://x/v1/chat/completions"), "{text}");
            assert!(!text.contains("{\""), "the provider's words, not its JSON: {text}");
        }
        let wrong_url = classify_status(404, None, "404 page not found", &call).to_string();
        assert!(wrong_url.contains("check [llm] base_url"), "{wrong_url}");
        assert!(!wrong_url.contains("model `"), "{wrong_url}");
    }
}
