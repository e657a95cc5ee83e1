//! Google Gemini's generateContent API (<https://ai.google.dev/api/generate-content>):
//! `POST {base_url}/models/{model}:generateContent`, or `:streamGenerateContent?alt=sse` to stream, where each
//! event is a whole answer chunk. The key goes in the `x-goog-api-key` header, never in the URL (URLs are
//! logged and quoted in errors). A model written `models/x` (as Gemini's model list names them) or
//! `tunedModels/x` is used as the path it already is.
//!
//! The request is built in [`request`] (with tool schemas converted by [`schema`]), the answer read in
//! [`answer`], thought signatures carried between steps by [`signatures`]. Error statuses are classified by the
//! shared transport (`RESOURCE_EXHAUSTED` 429 is a rate limit, "exceeds the maximum number of tokens" a
//! context-length error); an error that arrives inside a stream is classified here.

mod answer;
mod request;
mod schema;
mod signatures;
mod wire;

use crate::http::{Auth, Transport};
use crate::types::{ChatRequest, ChatResponse, Message};
use crate::{ChatProvider, LlmError, Result, TextSink};
use answer::Collected;
use futures_util::future::BoxFuture;
use minibot_config::LlmEndpoint;
use wire::{Answer, ErrorDetail};

const KEY_HEADER: &str = "x-goog-api-key";

pub struct Gemini {
    transport: Transport,
}

impl Gemini {
    pub fn new(endpoint: &LlmEndpoint) -> Result<Self> {
        Ok(Self { transport: Transport::new(endpoint)? })
    }

    fn url(&self, model: &str, stream: bool) -> String {
        let method = if stream { "streamGenerateContent?alt=sse" } else { "generateContent" };
        format!("{}/{}:{method}", self.transport.base_url, model_path(model))
    }

    fn body(request: &ChatRequest) -> Result<Vec<u8>> {
        serde_json::to_vec(&request::request_body(request))
            .map_err(|e| LlmError::InvalidResponse(format!("cannot write the request: {e}")))
    }

    fn auth(&self) -> Auth<'_> {
        Auth::Header(KEY_HEADER, &self.transport.api_key)
    }

    fn parse(&self, text: &str) -> Result<Answer> {
        serde_json::from_str(text)
            .map_err(|e| LlmError::InvalidResponse(format!("{e}; body starts with {:?}", self.transport.quote(text))))
    }

    /// An error Gemini sent inside a 200 answer or stream, in the terms the transport would give its status.
    fn error_inside(&self, url: &str, error: &ErrorDetail) -> LlmError {
        let said = self.transport.quote(&format!("{} ({})", error.message, error.status));
        let lower = error.message.to_ascii_lowercase();
        match error.code.unwrap_or(500) {
            429 => LlmError::RateLimited { retry_after: None, body: said },
            400 if lower.contains("exceeds the maximum number of tokens") || lower.contains("input token count") => {
                LlmError::ContextLength(said)
            }
            status @ 500..=599 => LlmError::Server { url: url.into(), status, body: said },
            status => LlmError::BadRequest { url: url.into(), status, body: said },
        }
    }
}

/// The model's path under the base URL: `models/{model}` unless it is written as a path already.
fn model_path(model: &str) -> String {
    if model.starts_with("models/") || model.starts_with("tunedModels/") {
        model.to_string()
    } else {
        format!("models/{model}")
    }
}

/// Model replies already in the request: numbers the ids of this answer's calls.
fn turn(request: &ChatRequest) -> usize {
    request.messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count()
}

impl ChatProvider for Gemini {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let url = self.url(&request.model, false);
            let body = Self::body(request)?;
            let text = self.transport.post_json(&url, self.auth(), &body, &request.model).await?;
            let answer = self.parse(&text)?;
            let shown = self.transport.shown(&url);
            if let Some(error) = answer.error.as_ref() {
                return Err(self.error_inside(&shown, error));
            }
            let mut collected = Collected::default();
            collected.add(answer, None);
            collected.finish(&shown, turn(request))
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let url = self.url(&request.model, true);
            let body = Self::body(request)?;
            let opened = self.transport.open(&url, self.auth(), &body, &request.model, &[]).await?;
            let shown = opened.url.clone();
            let mut collected = Collected::default();
            crate::sse::read_events(opened.response, &shown, |event| {
                if event.data.trim().is_empty() {
                    return Ok(true);
                }
                let chunk = self.parse(&event.data)?;
                if let Some(error) = chunk.error.as_ref() {
                    return Err(self.error_inside(&shown, error));
                }
                collected.add(chunk, Some(on_text));
                Ok(true)
            })
            .await?;
            collected.finish(&shown, turn(request))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_written_as_a_path_is_not_prefixed_twice() {
        assert_eq!(model_path("gemini-2.5-flash"), "models/gemini-2.5-flash");
        assert_eq!(model_path("models/gemini-2.5-flash"), "models/gemini-2.5-flash");
        assert_eq!(model_path("tunedModels/mine-1"), "tunedModels/mine-1");
    }
}
