//! Who is alive on the task queue: workers announce themselves and send a heartbeat every
//! `[worker] heartbeat_seconds`, so listening one and a half beats hears every live one.

use minibot_config::Config;
use minibot_protocol::{WorkerState, WorkerStatus};
use minibot_queue::TaskQueue;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long to listen to hear every live worker once.
pub fn listen_window(config: &Config) -> Duration {
    let heartbeat = Duration::from_secs(config.worker.heartbeat_seconds.max(1));
    heartbeat + heartbeat / 2
}

/// The workers heard within `window` that did not say they were leaving, by id.
pub async fn listen(queue: &dyn TaskQueue, window: Duration) -> minibot_queue::Result<Vec<WorkerStatus>> {
    let until = Instant::now() + window;
    let mut seen: BTreeMap<String, WorkerStatus> = BTreeMap::new();
    while let Ok(next) = tokio::time::timeout_at(until.into(), queue.next_status()).await {
        let status = next?;
        if status.state == WorkerState::Leaving {
            seen.remove(&status.worker_id);
        } else {
            seen.insert(status.worker_id.clone(), status);
        }
    }
    Ok(seen.into_values().collect())
}
