//! The worker's announcements: one at start, one every `[worker] heartbeat_seconds`, one when it leaves. They
//! are best effort (a lost one is replaced by the next); the orchestrator drops a worker after three missed.
//! They say how many tasks the worker runs, never which: any broker user bound to the fanout reads them.

use crate::offer::Offer;
use minibot_config::Config;
use minibot_protocol::WorkerState;
use minibot_queue::WorkQueue;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) async fn run(
    config: Arc<Config>,
    queue: Arc<dyn WorkQueue>,
    worker_id: String,
    offer: Offer,
    running: Arc<Mutex<Vec<String>>>,
) {
    let interval = Duration::from_secs(config.worker.heartbeat_seconds.max(1));
    loop {
        let load = running.lock().map(|r| r.len()).unwrap_or_default();
        let status = offer.status(&config, &worker_id, load, WorkerState::Up);
        if let Err(error) = queue.announce(&status).await {
            tracing::debug!(error = %error, "heartbeat not sent");
        }
        tokio::time::sleep(interval).await;
    }
}

/// Says the worker is leaving, so the roster drops it now rather than after missed heartbeats.
pub(crate) async fn leave(config: &Config, queue: &dyn WorkQueue, worker_id: &str, offer: &Offer) {
    let status = offer.status(config, worker_id, 0, WorkerState::Leaving);
    let _ = tokio::time::timeout(Duration::from_secs(2), queue.announce(&status)).await;
}
