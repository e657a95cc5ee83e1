//! What the hub has given a socket that the socket has not yet written out: bounded in frames and in bytes. A
//! browser reads frames as they come; a socket this far behind is not reading, and the hub drops it (its page
//! reconnects and reloads the history) rather than holding frames for it without end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// Frames waiting for one socket, at most.
pub const MAX_FRAMES: usize = 512;
/// Bytes waiting for one socket, at most (a single larger frame still goes when nothing else waits). Room for a
/// long answer's final message behind its streamed parts.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;

/// The hub's end.
#[derive(Clone)]
pub struct SocketSender {
    tx: mpsc::Sender<String>,
    queued: Arc<AtomicUsize>,
    behind: Arc<AtomicBool>,
}

/// The socket's end.
pub struct SocketReceiver {
    rx: mpsc::Receiver<String>,
    queued: Arc<AtomicUsize>,
    behind: Arc<AtomicBool>,
}

pub fn socket_queue() -> (SocketSender, SocketReceiver) {
    let (tx, rx) = mpsc::channel(MAX_FRAMES);
    let queued = Arc::new(AtomicUsize::new(0));
    let behind = Arc::new(AtomicBool::new(false));
    (SocketSender { tx, queued: queued.clone(), behind: behind.clone() }, SocketReceiver { rx, queued, behind })
}

impl SocketSender {
    /// Queues `text`; false when the socket has gone or is too far behind.
    pub fn try_send(&self, text: String) -> bool {
        let len = text.len();
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        let refused = if before > 0 && before + len > MAX_BYTES {
            true
        } else {
            match self.tx.try_send(text) {
                Ok(()) => false,
                Err(mpsc::error::TrySendError::Full(_)) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.queued.fetch_sub(len, Ordering::AcqRel);
                    return false;
                }
            }
        };
        if refused {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.behind.store(true, Ordering::Release);
        }
        !refused
    }
}

impl SocketReceiver {
    /// The next frame; `None` once the hub has let go of the socket.
    pub async fn recv(&mut self) -> Option<String> {
        let text = self.rx.recv().await?;
        self.queued.fetch_sub(text.len(), Ordering::AcqRel);
        Some(text)
    }

    /// Whether a frame was refused because this socket was too far behind (and not the server stopping).
    pub fn fell_behind(&self) -> bool {
        self.behind.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_socket_that_does_not_read_is_refused_past_its_bytes_then_takes_more_once_it_reads() {
        let (tx, mut rx) = socket_queue();
        let frame = "x".repeat(MAX_BYTES / 4);
        assert!(tx.try_send("y".repeat(MAX_BYTES * 2)), "one large frame goes when nothing waits");
        assert!(!rx.fell_behind());
        assert!(!tx.try_send(frame.clone()), "behind it, nothing more");
        assert!(rx.fell_behind());
        assert_eq!(rx.recv().await.map(|t| t.len()), Some(MAX_BYTES * 2));
        for _ in 0..4 {
            assert!(tx.try_send(frame.clone()));
        }
        assert!(!tx.try_send("z".into()), "MAX_BYTES queued");
        rx.recv().await;
        assert!(tx.try_send(frame.clone()), "read one, room for one");
        let small = socket_queue();
        for _ in 0..MAX_FRAMES {
            assert!(small.0.try_send("a".into()));
        }
        assert!(!small.0.try_send("a".into()), "bounded in frames too");
        drop(small.1);
        let (tx, rx) = socket_queue();
        let behind = rx.behind.clone();
        drop(rx);
        assert!(!tx.try_send("a".into()), "a closed socket takes nothing");
        assert!(!behind.load(Ordering::Acquire), "closed is not behind");
    }
}
