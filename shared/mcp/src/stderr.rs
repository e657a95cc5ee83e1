//! A stdio server's stderr, into the log without growing memory or flooding the log.
//!
//! Everything the child writes is read (a child blocked on a full pipe would hang its tool calls), but each line
//! is cut to [`MAX_LINE_BYTES`] while it is read, at most [`LINES_PER_SECOND`] lines a second are logged (after a
//! burst of [`BURST_LINES`]), and the rest are counted and reported in one line a second. The last
//! [`TAIL_LINES`] lines, logged or not, are kept to explain a failed start.

use crate::untrusted::printable;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader};
use tokio::time::Instant;

/// The longest stderr line logged, in bytes; the rest of a longer line is counted, not kept.
pub const MAX_LINE_BYTES: usize = 2 * 1024;
/// Lines logged per server and second once a burst is spent; the others are counted.
pub const LINES_PER_SECOND: u32 = 10;
/// Lines logged at once before [`LINES_PER_SECOND`] applies.
pub const BURST_LINES: u32 = 100;
/// Lines kept to explain a failed start.
const TAIL_LINES: usize = 20;
const REPORT_EVERY: Duration = Duration::from_secs(1);
const LOG_TARGET: &str = "minibot_mcp::stderr";

/// The pump reading a child's stderr, and the last lines it read.
pub struct StderrTail {
    pump: tokio::task::JoinHandle<()>,
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl StderrTail {
    /// Starts reading `stderr` of the server named `server`; the pump ends at the child's end of the pipe.
    pub fn start<R: AsyncRead + Unpin + Send + 'static>(stderr: R, server: String) -> Self {
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
        let pump = tokio::spawn(pump(BufReader::new(stderr), server, Arc::clone(&tail)));
        Self { pump, tail }
    }

    /// The last lines. Waits briefly for the pump to drain: a child that failed usually wrote its reason just
    /// before exiting.
    pub async fn collect(self) -> Vec<String> {
        let _ = tokio::time::timeout(Duration::from_millis(500), self.pump).await;
        self.tail.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }
}

async fn pump<R: AsyncBufRead + Unpin>(stderr: R, server: String, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = CappedLines::new(stderr);
    let mut limit = RateLimit::new(Instant::now());
    loop {
        // While lines are being held back, wake up when they are due to be reported, even if the child has gone
        // quiet.
        let next = match limit.report_due() {
            Some(due) => match tokio::time::timeout_at(due, lines.next_line()).await {
                Ok(next) => next,
                Err(_) => {
                    limit.report(Instant::now(), &server);
                    continue;
                }
            },
            None => lines.next_line().await,
        };
        let Some(line) = next else { break };
        if limit.admit(Instant::now(), &server) {
            tracing::info!(target: LOG_TARGET, server = %server, "{line}");
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    limit.report(Instant::now() + REPORT_EVERY, &server);
}

/// Lines of a byte stream, each cut to [`MAX_LINE_BYTES`] as it is read, so a line without end costs no memory.
struct CappedLines<R> {
    inner: R,
    line: Vec<u8>,
    /// Bytes of the current line past the cap.
    cut: usize,
}

impl<R: AsyncBufRead + Unpin> CappedLines<R> {
    fn new(inner: R) -> Self {
        Self { inner, line: Vec::with_capacity(256), cut: 0 }
    }

    /// The next line (without its line break, made printable, with a note when it was cut); `None` at the end or
    /// on a read error. Cancel-safe: a partial line stays in `self` for the next call.
    async fn next_line(&mut self) -> Option<String> {
        loop {
            let (consumed, complete) = {
                let chunk = match self.inner.fill_buf().await {
                    Ok(chunk) => chunk,
                    Err(_) => return None,
                };
                if chunk.is_empty() {
                    if self.line.is_empty() && self.cut == 0 {
                        return None;
                    }
                    (0, true)
                } else {
                    let newline = chunk.iter().position(|&b| b == b'\n');
                    let content = &chunk[..newline.unwrap_or(chunk.len())];
                    let room = MAX_LINE_BYTES.saturating_sub(self.line.len()).min(content.len());
                    self.line.extend_from_slice(&content[..room]);
                    self.cut += content.len() - room;
                    (newline.map_or(chunk.len(), |at| at + 1), newline.is_some())
                }
            };
            self.inner.consume(consumed);
            if complete {
                return Some(self.take());
            }
        }
    }

    fn take(&mut self) -> String {
        let raw = String::from_utf8_lossy(&self.line);
        let mut line = printable(raw.trim_end_matches('\r'), false);
        if self.cut > 0 {
            line.push_str(&format!(" [{} more bytes cut]", self.cut));
        }
        self.line.clear();
        self.cut = 0;
        line
    }
}

/// A token bucket: [`BURST_LINES`] lines at once (a traceback at start-up comes whole), then [`LINES_PER_SECOND`].
/// Lines over it are counted and reported at most once a second.
struct RateLimit {
    tokens: f64,
    refilled_at: Instant,
    held_back: u64,
    reported_at: Instant,
}

impl RateLimit {
    fn new(now: Instant) -> Self {
        Self { tokens: f64::from(BURST_LINES), refilled_at: now, held_back: 0, reported_at: now }
    }

    /// Whether a line read at `now` may be logged.
    fn admit(&mut self, now: Instant, server: &str) -> bool {
        self.report(now, server);
        let earned = now.saturating_duration_since(self.refilled_at).as_secs_f64() * f64::from(LINES_PER_SECOND);
        self.tokens = (self.tokens + earned).min(f64::from(BURST_LINES));
        self.refilled_at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.held_back += 1;
            false
        }
    }

    /// When the lines held back are due to be reported, if there are any.
    fn report_due(&self) -> Option<Instant> {
        (self.held_back > 0).then(|| self.reported_at + REPORT_EVERY)
    }

    /// Reports the lines held back, once [`REPORT_EVERY`] has passed since the last report.
    fn report(&mut self, now: Instant, server: &str) {
        if self.held_back == 0 || now < self.reported_at + REPORT_EVERY {
            return;
        }
        tracing::warn!(
            target: LOG_TARGET,
            server = %server,
            suppressed = self.held_back,
            "mcp server stderr: {} lines not logged (more than {LINES_PER_SECOND} a second)",
            self.held_back
        );
        self.held_back = 0;
        self.reported_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8]) -> Vec<String> {
        let mut lines = CappedLines::new(input);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn long_lines_are_cut_while_read() {
        let mut input = vec![b'a'; MAX_LINE_BYTES + 500];
        input.extend_from_slice(b"\nshort\r\nlast without break");
        let lines = lines_of(&input).await;
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with(&"a".repeat(MAX_LINE_BYTES)), "{}", &lines[0][..20]);
        assert!(lines[0].ends_with(" [500 more bytes cut]"), "{}", &lines[0][MAX_LINE_BYTES..]);
        assert_eq!(lines[1], "short");
        assert_eq!(lines[2], "last without break");
    }

    #[tokio::test]
    async fn invalid_utf8_and_escapes_do_not_stop_the_reader() {
        let lines = lines_of(b"\xff\xfe bad\n\x1b[2Jclear\nnext\n").await;
        assert_eq!(lines, vec!["\u{fffd}\u{fffd} bad", "[2Jclear", "next"]);
    }

    #[test]
    fn rate_limit_allows_a_burst_then_a_rate_and_reports_the_rest() {
        let start = Instant::now();
        let mut limit = RateLimit::new(start);
        let admitted = (0..1000).filter(|_| limit.admit(start, "s")).count();
        assert_eq!(admitted, BURST_LINES as usize);
        assert_eq!(limit.held_back, 1000 - u64::from(BURST_LINES));
        assert_eq!(limit.report_due(), Some(start + REPORT_EVERY));
        // A second later: reported, and a second's worth of lines may be logged again.
        let later = start + REPORT_EVERY;
        let admitted = (0..1000).filter(|_| limit.admit(later, "s")).count();
        assert_eq!(admitted, LINES_PER_SECOND as usize);
        assert_eq!(limit.held_back, 1000 - u64::from(LINES_PER_SECOND));
        assert_eq!(limit.report_due(), Some(later + REPORT_EVERY));
    }
}
