#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Child stderr reaches the log. A binary of its own: it installs a global subscriber, which the other tests'
//! threads would otherwise race with (tracing caches per-callsite interest across threads).

#[allow(dead_code, reason = "shared with the main suite; this binary uses a few helpers")]
#[path = "suite/peers.rs"]
mod peers;

use minibot_config::schema::McpMode;
use peers::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Collects formatted log lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn child_stderr_goes_to_the_log_with_the_server_name() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hub = start(&section(vec![fixture_server("noisy", McpMode::Bridge, &dir.path().join("s"))])).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
        if text.lines().any(|l| l.contains("fixture: ready") && l.contains("server=noisy")) {
            break;
        }
        assert!(Instant::now() < deadline, "stderr line not logged: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    hub.shutdown().await;
}
