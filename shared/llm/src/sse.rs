//! Server-sent events, as every streaming model API sends them: `event:` and `data:` lines, a blank line ends
//! one event. Only what those APIs use is read (no `id:`/`retry:`); lines may split across network chunks.
//!
//! What a provider sends cannot make the client work or allocate without bound: the whole stream is capped like
//! a plain answer, one event at [`MAX_EVENT_BYTES`], and each chunk is scanned once.

use crate::{LlmError, Result};
use futures_util::StreamExt;

/// The most parts (tool calls, content blocks) one streamed answer may number.
pub(crate) const MAX_STREAMED_PARTS: usize = 256;
/// The longest event (its lines together): far above any real delta.
const MAX_EVENT_BYTES: usize = 4 << 20;

/// One event: its `event:` name (empty when none was given) and its joined `data:` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub name: String,
    pub data: String,
}

/// Reads events from a response body, calling `on_event` for each until it returns `false` or the body ends.
/// The whole stream is capped like a plain answer.
pub(crate) async fn read_events(
    response: reqwest::Response,
    url: &str,
    mut on_event: impl FnMut(Event) -> Result<bool>,
) -> Result<()> {
    let mut body = response.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    // How much of `pending` is known to hold no newline.
    let mut scanned = 0usize;
    let mut event = Event { name: String::new(), data: String::new() };
    let mut total = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| stream_error(url, &e))?;
        total += chunk.len();
        if total > crate::http::MAX_RESPONSE_BYTES {
            return Err(LlmError::InvalidResponse(format!("{url} streamed more than 16 MiB; the rest was not read")));
        }
        pending.extend_from_slice(&chunk);
        let mut start = 0usize;
        while let Some(offset) = pending[scanned..].iter().position(|b| *b == b'\n') {
            let end = scanned + offset;
            let line = String::from_utf8_lossy(&pending[start..end]);
            let line = line.trim_end_matches('\r');
            if line.is_empty() {
                if !event.data.is_empty() || !event.name.is_empty() {
                    let done = std::mem::replace(&mut event, Event { name: String::new(), data: String::new() });
                    if !on_event(done)? {
                        return Ok(());
                    }
                }
            } else if let Some(name) = line.strip_prefix("event:") {
                event.name = name.trim().to_string();
            } else if let Some(data) = line.strip_prefix("data:") {
                if !event.data.is_empty() {
                    event.data.push('\n');
                }
                event.data.push_str(data.strip_prefix(' ').unwrap_or(data));
            }
            start = end + 1;
            scanned = start;
        }
        pending.drain(..start);
        scanned = pending.len();
        if pending.len() + event.data.len() > MAX_EVENT_BYTES {
            return Err(LlmError::InvalidResponse(format!(
                "{url} sent a streamed event longer than {} MiB",
                MAX_EVENT_BYTES >> 20
            )));
        }
    }
    if !event.data.is_empty() {
        on_event(event)?;
    }
    Ok(())
}

/// A stream that broke off: a stalled one names the setting that ran out.
fn stream_error(url: &str, error: &reqwest::Error) -> LlmError {
    if error.is_timeout() {
        return LlmError::Timeout { url: url.to_string(), after: None, setting: crate::error::READ_SETTING };
    }
    LlmError::Connect {
        url: url.to_string(),
        detail: format!("the answer stopped mid-stream: {}", crate::http::error_chain(error)),
    }
}
