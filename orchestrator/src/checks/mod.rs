//! Probes of what a setup depends on, each one real request with a short timeout: the model provider
//! ([`provider::probe`]) and the Telegram bot token ([`telegram::probe`]). `minibot doctor` reports them and
//! `minibot init` checks what the user just typed with them.

mod http;
pub mod provider;
pub mod telegram;
pub mod workers;

use std::time::Duration;

/// How long a probe waits to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a whole probe request may take (a provider's model list can be large).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a probe failed. Every message names the URL it tried (a bot token never: Telegram's are shown as
/// `<token>`), and what the server said when it answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot connect to {url}: connection refused (nothing listens on that host and port)")]
    Refused { url: String },
    #[error("cannot find the host of {url} (DNS): {detail}")]
    Dns { url: String, detail: String },
    #[error("TLS with {url} failed: {detail}")]
    Tls { url: String, detail: String },
    #[error("{url} did not answer: timeout after {seconds} s")]
    Timeout { url: String, seconds: u64 },
    #[error("cannot reach {url}: {detail}")]
    Network { url: String, detail: String },
    /// 401 or 403: the key or token is wrong, revoked or lacks the right.
    #[error("{url} refused the {credential} (HTTP {status}): {message}")]
    Rejected { url: String, credential: &'static str, status: u16, message: String },
    #[error("{url} has no model `{model}`{}", available_text(.available))]
    ModelNotFound { url: String, model: String, available: Vec<String> },
    #[error("{url} answered HTTP {status}: {message}")]
    Status { url: String, status: u16, message: String },
    #[error("{url} sent an answer that is not what was expected: {detail}")]
    BadAnswer { url: String, detail: String },
    /// The settings cannot even make a request (an API format with no client, a header that is not valid).
    #[error("{0}")]
    Setup(String),
}

fn available_text(available: &[String]) -> String {
    if available.is_empty() { String::new() } else { format!("; it offers {}", available.join(", ")) }
}
