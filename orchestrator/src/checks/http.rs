//! What the probes share: a client with short timeouts, and transport failures told apart (refused, DNS,
//! TLS, timeout) from reqwest's error chain, which buries them.

use super::{CONNECT_TIMEOUT, ProbeError, REQUEST_TIMEOUT};
use minibot_llm::cause::Cause;
use reqwest::header::HeaderMap;

/// Provider text quoted in an error is cut here; an HTML error page is no use in full.
const QUOTE_CHARS: usize = 300;

pub(super) fn client(headers: HeaderMap) -> Result<reqwest::Client, ProbeError> {
    minibot_llm::install_crypto_provider();
    reqwest::Client::builder()
        .default_headers(headers)
        .redirect(minibot_llm::same_origin_redirects())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProbeError::Setup(format!("cannot make an HTTP client: {}", e.without_url())))
}

/// A failed send or read, classified. `url` is what messages show (never the raw request URL, which may
/// carry a token), and reqwest's own text is taken without its URL for the same reason.
pub(super) fn transport(error: reqwest::Error, url: &str) -> ProbeError {
    let url = url.to_string();
    if error.is_timeout() {
        let seconds = if error.is_connect() { CONNECT_TIMEOUT } else { REQUEST_TIMEOUT }.as_secs();
        return ProbeError::Timeout { url, seconds };
    }
    let error = error.without_url();
    match minibot_llm::cause::classify(&error) {
        Cause::Tls(detail) => ProbeError::Tls { url, detail },
        Cause::Refused => ProbeError::Refused { url },
        Cause::TimedOut => ProbeError::Timeout { url, seconds: CONNECT_TIMEOUT.as_secs() },
        Cause::Dns(detail) => ProbeError::Dns { url, detail },
        Cause::Reset => ProbeError::Network { url, detail: "the server closed the connection".into() },
        Cause::Other(detail) => ProbeError::Network { url, detail },
    }
}

/// The server's own words from an error body: OpenAI's `error.message`, Telegram's `description`, else the
/// body itself; masked by `redact`, then cut.
pub(super) fn server_message(body: &str, redact: &dyn Fn(&str) -> String) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    let said =
        [&value["error"]["message"], &value["error"], &value["description"], &value["message"], &value["detail"]]
            .into_iter()
            .find_map(|v| v.as_str().filter(|s| !s.trim().is_empty()))
            .map_or_else(|| body.trim().to_string(), str::to_string);
    let said = if said.is_empty() { "(empty body)".to_string() } else { redact(&said) };
    match said.char_indices().nth(QUOTE_CHARS) {
        Some((index, _)) => format!("{}…", &said[..index]),
        None => said,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn failure(url: &str) -> ProbeError {
        let error = client(HeaderMap::new()).unwrap().get(url).send().await.unwrap_err();
        transport(error, url)
    }

    #[tokio::test]
    async fn a_closed_port_is_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/v1/models");
        assert_eq!(failure(&url).await, ProbeError::Refused { url });
    }

    #[tokio::test]
    async fn a_host_that_does_not_exist_is_a_dns_failure() {
        let error = failure("http://no-such-host.invalid/v1/models").await;
        assert!(matches!(error, ProbeError::Dns { .. }), "{error:?}");
    }

    #[tokio::test]
    async fn https_to_a_plain_http_server_is_a_tls_failure() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
            }
        });
        let error = failure(&format!("https://127.0.0.1:{port}/v1/models")).await;
        assert!(matches!(error, ProbeError::Tls { .. }), "{error:?}");
        assert!(error.to_string().starts_with(&format!("TLS with https://127.0.0.1:{port}/v1/models failed")));
    }

    #[test]
    fn the_servers_own_words_are_quoted_masked_and_cut() {
        let body = r#"{"error":{"message":"Incorrect API key provided: sk-secret-value","code":"invalid_api_key"}}"#;
        let masked = server_message(body, &|t| t.replace("sk-secret-value", "***"));
        assert_eq!(masked, "Incorrect API key provided: ***");
        assert_eq!(server_message(r#"{"ok":false,"description":"Unauthorized"}"#, &|t| t.to_string()), "Unauthorized");
        let long = "x".repeat(1000);
        assert_eq!(server_message(&long, &|t| t.to_string()).chars().count(), QUOTE_CHARS + 1);
    }
}
