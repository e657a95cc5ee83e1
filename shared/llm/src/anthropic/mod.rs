//! Anthropic Messages (`POST {base_url}/messages`, <https://docs.anthropic.com/en/api/messages>): the key in
//! `x-api-key`, the API version in `anthropic-version`, whole answers or server-sent events
//! (<https://docs.anthropic.com/en/api/messages-streaming>). The body is built in [`request`], answers are read in
//! [`answer`], and both go through the serde types of [`wire`].

mod answer;
mod request;
mod wire;

use crate::http::{Auth, Transport};
use crate::types::{ChatRequest, ChatResponse};
use crate::{ChatProvider, LlmError, Result, TextSink};
use futures_util::future::BoxFuture;
use minibot_config::LlmEndpoint;

/// The API version this client speaks. A configured `anthropic-version` header (`extra_headers`) wins.
const API_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    transport: Transport,
    url: String,
    /// Prompt caching (`prompt_cache_enabled`, on by default).
    cache: bool,
}

impl Anthropic {
    pub fn new(endpoint: &LlmEndpoint) -> Result<Self> {
        let mut endpoint = endpoint.clone();
        if !endpoint.headers.keys().any(|name| name.eq_ignore_ascii_case("anthropic-version")) {
            endpoint.headers.insert("anthropic-version".into(), API_VERSION.into());
        }
        Ok(Self {
            url: format!("{}/messages", endpoint.base_url),
            cache: endpoint.options.prompt_cache_enabled,
            transport: Transport::new(&endpoint)?,
        })
    }

    fn body(&self, request: &ChatRequest, stream: bool) -> Result<Vec<u8>> {
        let body = request::request_body(request, self.cache, stream);
        serde_json::to_vec(&body).map_err(|e| LlmError::InvalidResponse(format!("cannot write the request: {e}")))
    }

    fn auth(&self) -> Auth<'_> {
        Auth::Header("x-api-key", &self.transport.api_key)
    }
}

impl ChatProvider for Anthropic {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let body = self.body(request, false)?;
            let text = self.transport.post_json(&self.url, self.auth(), &body, &request.model).await?;
            answer::parse_response(&text, &self.transport.shown(&self.url), &self.transport)
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let body = self.body(request, true)?;
            let opened = self.transport.open(&self.url, self.auth(), &body, &request.model, &[]).await?;
            let url = opened.url.clone();
            let mut answer = answer::StreamedAnswer::new(&url, &self.transport);
            crate::sse::read_events(opened.response, &url, |event| answer.add(&event.data, on_text)).await?;
            answer.finish()
        })
    }
}
