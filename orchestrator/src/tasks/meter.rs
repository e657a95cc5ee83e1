//! The background tasks' metrics (`minibot_tasks_total`, `minibot_task_dispatch_seconds`,
//! `minibot_task_queue_depth`, `minibot_workers_online`), taken from what the coordinator and the hub learn:
//! workers report only through their events and heartbeats, so they need no metrics endpoint of their own.

use minibot_store::TaskRecord;

/// A task reached its terminal status (call once per task: where the store answered `Applied::Finished`).
pub fn ended(record: &TaskRecord) {
    metrics::counter!("minibot_tasks_total", "status" => record.status.as_str()).increment(1);
}

/// A worker's start of attempt `attempt` was applied to `record`: the time from submission to the first
/// attempt's start is observed (a retry's start is not a dispatch of the task).
pub fn started(record: &TaskRecord, attempt: u32) {
    if attempt > 1 {
        return;
    }
    let Some(created) = minibot_sqlite::stored_time::from_text(&record.created_at) else { return };
    let waited = (chrono::Utc::now() - created).to_std().unwrap_or_default();
    metrics::histogram!("minibot_task_dispatch_seconds").record(waited.as_secs_f64());
}

/// Tasks waiting for a worker, as the coordinator's sweep counts them every second.
pub fn queue_depth(waiting: usize) {
    metrics::gauge!("minibot_task_queue_depth").set(waiting as f64);
}

/// The live workers on the roster.
pub fn workers_online(live: usize) {
    metrics::gauge!("minibot_workers_online").set(live as f64);
}
