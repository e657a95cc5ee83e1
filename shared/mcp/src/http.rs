//! The HTTP client under the streamable HTTP transport: rmcp's reqwest client, with an answer over the size cap
//! turned into a too-large error for its request, as over stdio ([`crate::oversize`]).
//!
//! rmcp enforces the cap itself but reports an answer over it as a broken connection ("Transport closed" for an
//! SSE stream, a send error for a JSON body): the user reads "connection lost" about a server that answered, and
//! the session is thrown away. Here the request that POSTed gets the same error answer the stdio relay makes.

use crate::oversize::{MAX_MESSAGE_BYTES, too_large_error};
use futures_util::StreamExt;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Redirects followed for one request, as rmcp's own client.
const MAX_REDIRECTS: usize = 10;
/// Room for the SSE framing around one message (`event:`, `id:` and `data:` lines).
const SSE_FRAMING_BYTES: usize = 4 * 1024;

/// The transport config for `url`, with the size cap: a JSON body up to [`MAX_MESSAGE_BYTES`], an SSE event up to
/// that plus its framing.
pub fn capped_config(url: &str) -> StreamableHttpClientTransportConfig {
    StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .max_json_response_size(MAX_MESSAGE_BYTES)
        .max_sse_event_size(MAX_MESSAGE_BYTES + SSE_FRAMING_BYTES)
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

#[derive(Clone)]
pub struct CappedClient {
    inner: reqwest::Client,
}

impl CappedClient {
    /// A client set up as rmcp's default one: no idle connection pool (a pooled connection whose last body was
    /// not drained stalls the next request on Delayed ACK), and only same-origin 307/308 redirects, which keep the
    /// POST body and do not replay the session id and headers to another host.
    pub fn new() -> reqwest::Result<Self> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin =
                attempt.previous().first().is_some_and(|original| original.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let inner = reqwest::Client::builder().pool_max_idle_per_host(0).redirect(redirects).build()?;
        Ok(Self { inner })
    }
}

impl StreamableHttpClient for CappedClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = PostResult> + Send + '_ {
        self.inner.post_message(uri, message, session_id, auth_header, custom_headers)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        let id = request_id(&message);
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        answer_too_large(response, id)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let id = request_id(&message);
        let response = self
            .inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await;
        answer_too_large(response, id)
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner.delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<BoxedSseResponse, StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner.get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<BoxedSseResponse, StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// `response` with an answer to request `id` over the cap replaced by the too-large error answer: a JSON body over
/// it at once, an SSE stream when it reaches the event that is over it (the stream ends there).
fn answer_too_large(response: PostResult, id: Option<RequestId>) -> PostResult {
    let Some(id) = id else { return response };
    match response {
        // No session id: the transport takes one only from the answer to `initialize`, and an `initialize` that
        // fails this way leaves no session to keep anyway.
        Err(StreamableHttpError::ResponseBodyTooLarge { .. }) => {
            Ok(StreamableHttpPostResponse::Json(too_large_answer(id), None))
        }
        Ok(StreamableHttpPostResponse::Sse(stream, session_id)) => {
            let stream = stream
                .scan(false, move |ended, item| {
                    let next = match item {
                        _ if *ended => None,
                        Err(ref error) if event_too_large(error) => {
                            *ended = true;
                            let mut event = blank_event(&item);
                            event.data = serde_json::to_string(&too_large_answer(id.clone())).ok();
                            Some(Ok(event))
                        }
                        other => Some(other),
                    };
                    std::future::ready(next)
                })
                .boxed();
            Ok(StreamableHttpPostResponse::Sse(stream, session_id))
        }
        other => other,
    }
}

/// An empty event of the stream's own event type, which rmcp does not re-export.
fn blank_event<T: Default, E>(_like: &Result<T, E>) -> T {
    T::default()
}

/// The error answer for request `id`, naming the cap (the limits of [`capped_config`] allow for SSE framing).
fn too_large_answer(id: RequestId) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(too_large_error(MAX_MESSAGE_BYTES), Some(id))
}

/// Whether the stream broke off at an event over its size limit (rmcp's bounded stream says so in its error).
fn event_too_large(error: &SseError) -> bool {
    matches!(error, SseError::Body(inner) if inner.to_string().contains("exceeded the maximum size"))
}
