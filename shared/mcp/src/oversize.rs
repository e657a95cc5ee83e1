//! Messages from a stdio server over the size cap: answered as too large instead of lost.
//!
//! rmcp drops an incoming line longer than its own limit with nothing but a log line, so the request it answered
//! waits for the timeout and the user reads "no answer within 10s" about a server that did answer. [`relay`] sits
//! between the child's stdout and rmcp: a line up to [`MAX_MESSAGE_BYTES`] passes whole; a longer one is dropped
//! while it streams in (only its first and last few KiB are kept, to find its request id) and, when it was an
//! answer, rmcp receives an error answer for the same request id instead, which [`too_large`] recognises.

use rmcp::model::ErrorData;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The largest message taken from a server, in bytes. Below rmcp's own 16 MiB line limit so the relay, not rmcp,
/// decides; far above what a model can read (a long result spills to a file past `inline_result_chars`).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Bytes kept from each end of a dropped message: the request id sits near one of them (Python SDKs write it
/// first, the TypeScript SDK last).
const KEEP_BYTES: usize = 4 * 1024;
/// Key of the error's `data` that marks the answer as made here.
const MARKER: &str = "minibot_message_too_large";
/// A line buffer grown past this by a large message is given back afterwards.
const RETAINED_CAPACITY: usize = 1024 * 1024;

/// Copies `from` to `to` line by line, replacing each line over `limit` bytes as described in the module docs.
/// Ends at the end of `from` or when `to` is closed.
pub async fn relay<R, W>(from: R, mut to: W, limit: usize, server: String)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from = BufReader::with_capacity(64 * 1024, from);
    let mut line: Vec<u8> = Vec::new();
    let mut dropped: Option<Dropped> = None;
    loop {
        let (consumed, complete) = {
            let chunk = match from.fill_buf().await {
                Ok(chunk) if !chunk.is_empty() => chunk,
                // The end of the stream; a partial last line is no message.
                _ => break,
            };
            let newline = chunk.iter().position(|&b| b == b'\n');
            let content = &chunk[..newline.unwrap_or(chunk.len())];
            match &mut dropped {
                Some(dropped) => dropped.push(content),
                None if line.len() + content.len() > limit => {
                    let mut started = Dropped::start(&line);
                    started.push(content);
                    dropped = Some(started);
                    line.clear();
                }
                None => line.extend_from_slice(content),
            }
            (newline.map_or(chunk.len(), |at| at + 1), newline.is_some())
        };
        from.consume(consumed);
        if !complete {
            continue;
        }
        let written = match dropped.take() {
            Some(dropped) => {
                tracing::warn!(
                    server = %server,
                    bytes = dropped.size,
                    limit,
                    "mcp server sent a message over the size limit; dropped"
                );
                match dropped.reply(limit) {
                    Some(reply) => to.write_all(&reply).await,
                    None => Ok(()),
                }
            }
            None => {
                line.push(b'\n');
                let written = to.write_all(&line).await;
                line.clear();
                if line.capacity() > RETAINED_CAPACITY {
                    line = Vec::new();
                }
                written
            }
        };
        if written.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// What is kept of a line over the limit while the rest of it streams past (its size only goes to the log).
struct Dropped {
    head: Vec<u8>,
    tail: Vec<u8>,
    size: usize,
}

impl Dropped {
    fn start(line: &[u8]) -> Self {
        let mut dropped = Self { head: Vec::with_capacity(KEEP_BYTES), tail: Vec::with_capacity(KEEP_BYTES), size: 0 };
        dropped.push(line);
        dropped
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = KEEP_BYTES.saturating_sub(self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..room]);
        if bytes.len() >= KEEP_BYTES {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - KEEP_BYTES..]);
        } else {
            self.tail.extend_from_slice(bytes);
            let excess = self.tail.len().saturating_sub(KEEP_BYTES);
            self.tail.drain(..excess);
        }
        self.size += bytes.len();
    }

    /// The error answer (a whole line) for the request the dropped message answered; `None` when it was not an
    /// answer (a request or notification from the server) or its id cannot be found.
    fn reply(&self, limit: usize) -> Option<Vec<u8>> {
        let head = scan_head(&self.head);
        if head.method {
            return None;
        }
        let id = head.id.or_else(|| last_member_id(&self.tail))?;
        let message = json!({"jsonrpc": "2.0", "id": id, "error": too_large_error(limit)});
        let mut line = serde_json::to_vec(&message).ok()?;
        line.push(b'\n');
        Some(line)
    }
}

/// The error answer for a message over `limit` bytes, which [`too_large`] recognises.
pub fn too_large_error(limit: usize) -> ErrorData {
    ErrorData::internal_error(format!("the answer exceeded {limit} bytes"), Some(json!({MARKER: {"limit": limit}})))
}

/// The limit an error answer made by [`too_large_error`] names.
pub fn too_large(error: &ErrorData) -> Option<usize> {
    let limit = error.data.as_ref()?.get(MARKER)?.get("limit")?.as_u64()?;
    usize::try_from(limit).ok()
}

/// What the start of a JSON object says about it: its top-level `id` and whether it has a `method` (a request or a
/// notification rather than an answer), as far as the keys before the first cut-off value show.
#[derive(Debug, Default, PartialEq)]
struct Head {
    id: Option<Value>,
    method: bool,
}

fn scan_head(bytes: &[u8]) -> Head {
    let mut head = Head::default();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return head;
    }
    at += 1;
    loop {
        at = skip_space(bytes, at);
        let Some(key_end) = string_end(bytes, at) else { return head };
        let key = &bytes[at..key_end];
        at = skip_space(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return head;
        }
        let value_start = skip_space(bytes, at + 1);
        let Some(value_end) = value_end(bytes, value_start) else { return head };
        match key {
            b"\"id\"" => head.id = request_id(&bytes[value_start..value_end]),
            b"\"method\"" => head.method = true,
            _ => {}
        }
        at = skip_space(bytes, value_end);
        if bytes.get(at) != Some(&b',') {
            return head;
        }
        at += 1;
    }
}

/// The `id` when it is the last member of the object that `bytes` ends: `…,"id":7}` or `…,"id":"a-1"}`.
fn last_member_id(bytes: &[u8]) -> Option<Value> {
    let rest = trim_end(bytes).strip_suffix(b"}")?;
    let rest = trim_end(rest);
    let value_start = if rest.ends_with(b"\"") {
        let open = rest[..rest.len() - 1].iter().rposition(|&b| b == b'"')?;
        // An escaped quote: not a plain id, and not worth decoding backwards.
        if open > 0 && rest[open - 1] == b'\\' {
            return None;
        }
        open
    } else {
        rest.iter().rposition(|&b| !(b.is_ascii_digit() || b == b'-')).map_or(0, |at| at + 1)
    };
    let (before, value) = rest.split_at(value_start);
    let before = trim_end(trim_end(before).strip_suffix(b":")?).strip_suffix(b"\"id\"")?;
    matches!(trim_end(before).last(), Some(b',' | b'{')).then_some(())?;
    request_id(value)
}

/// A JSON-RPC request id: a number or a string.
fn request_id(raw: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Value>(raw).ok().filter(|v| v.is_number() || v.is_string())
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |at| at + 1);
    &bytes[..end]
}

/// The end (past the closing quote) of the string starting at `at`; `None` if there is none or it is cut off.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end of the JSON value starting at `at`; `None` if it is cut off.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = bytes[at..].iter().position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(at + len)
        }
    }
}

#[cfg(test)]
#[path = "oversize_tests.rs"]
mod tests;
