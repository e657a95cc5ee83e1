//! Downloading a source: HTTPS (or loopback HTTP), at most [`MAX_DOWNLOAD_BYTES`], at most
//! [`MAX_REDIRECTS`] redirects, each held to the rule of the first URL ([`redirect_allowed`]).

use super::InstallError;
use super::source::{insecure, insecure_redirect, redirect_allowed, url_allowed};
use std::time::Duration;
use url::Url;

/// The most bytes one download may carry (as `npx skills`).
pub const MAX_DOWNLOAD_BYTES: usize = 10 * 1024 * 1024;
pub const MAX_REDIRECTS: usize = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const TOTAL_TIMEOUT: Duration = Duration::from_secs(120);

/// The HTTP client the installer downloads with.
pub fn client() -> Result<reqwest::Client, InstallError> {
    // reqwest is built without a TLS provider of its own; the workspace uses ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            let error = format!("more than {MAX_REDIRECTS} redirects");
            attempt.error(error)
        } else if let Some(origin) = attempt.previous().first()
            && !redirect_allowed(origin, attempt.url())
        {
            // reqwest lists the URL first requested first.
            let error = insecure_redirect(origin, attempt.url()).to_string();
            attempt.error(error)
        } else if !url_allowed(attempt.url()) {
            let error = insecure(attempt.url()).to_string();
            attempt.error(error)
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .timeout(TOTAL_TIMEOUT)
        .redirect(redirects)
        .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| InstallError::Download(format!("cannot build the HTTP client: {e}")))
}

/// The body of `url`, refused past [`MAX_DOWNLOAD_BYTES`] without reading the rest.
pub async fn download(client: &reqwest::Client, url: &Url) -> Result<Vec<u8>, InstallError> {
    if !url_allowed(url) {
        return Err(insecure(url));
    }
    let mut response = client.get(url.clone()).send().await.map_err(|e| failed(&e))?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(InstallError::Download(format!("HTTP {} for {url}", status.as_u16())));
    }
    if response.content_length().is_some_and(|length| length > MAX_DOWNLOAD_BYTES as u64) {
        return Err(too_large(url));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(&e))? {
        if body.len() + chunk.len() > MAX_DOWNLOAD_BYTES {
            return Err(too_large(url));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_large(url: &Url) -> InstallError {
    InstallError::Refused(format!("the download from {url} is larger than {MAX_DOWNLOAD_BYTES} bytes (10 MiB)"))
}

/// reqwest's message with its causes, which say what really failed (the redirect refusal, the TLS error).
fn failed(error: &reqwest::Error) -> InstallError {
    let mut message = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        cause = inner.source();
    }
    InstallError::Download(message)
}
