//! The roster of live workers, kept from their announcements and heartbeats. Routing is the queue's job (a
//! worker only consumes the routes it serves); the roster answers what the queue cannot: whether anyone alive
//! can take a task at all, and who ran what. A worker leaves the roster when it says so or after three missed
//! heartbeats.

use minibot_protocol::{WorkerState, WorkerStatus};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Heartbeats a worker may miss before it is taken for gone.
const MISSED_BEATS: u32 = 3;
/// Most workers the roster holds.
const MAX_WORKERS: usize = 1_024;

pub struct Fleet {
    workers: HashMap<String, (WorkerStatus, Instant)>,
    /// When this orchestrator started listening: before a full heartbeat has passed, an empty roster only
    /// means nobody has spoken yet.
    listening_since: Instant,
    heartbeat: Duration,
}

/// What a task needs of a worker.
#[derive(Debug, Clone, Copy)]
pub struct Needs<'a> {
    pub agent: Option<&'a str>,
    pub hash: Option<&'a str>,
    pub requires: &'a [String],
}

impl Fleet {
    /// `heartbeat` is this deployment's `[worker] heartbeat_seconds`.
    pub fn new(heartbeat: Duration) -> Self {
        Self { workers: HashMap::new(), listening_since: Instant::now(), heartbeat }
    }

    /// Takes in a status; true when it is a worker the roster did not hold.
    pub fn apply(&mut self, status: WorkerStatus) -> bool {
        if status.state == WorkerState::Leaving {
            tracing::info!(worker_id = %status.worker_id, host = %status.host, "worker left");
            self.workers.remove(&status.worker_id);
            return false;
        }
        let joined = !self.workers.contains_key(&status.worker_id);
        if joined && self.workers.len() >= MAX_WORKERS {
            // A host holding the key could otherwise grow the roster without end.
            tracing::warn!(worker_id = %status.worker_id, host = %status.host, "roster full ({MAX_WORKERS} workers); not added");
            return false;
        }
        if joined {
            let specialists: Vec<&str> = status.specialists.iter().map(|s| s.name.as_str()).collect();
            tracing::info!(worker_id = %status.worker_id, host = %status.host, labels = ?status.labels,
                specialists = ?specialists, "worker joined");
        }
        self.workers.insert(status.worker_id.clone(), (status, Instant::now()));
        joined
    }

    fn expiry(status: &WorkerStatus) -> Duration {
        // The beat is the worker's word: bounded as `[worker] heartbeat_seconds` is (1 to 3600 s), so a ghost
        // cannot stay live for ever, nor overflow the product.
        Duration::from_millis(status.heartbeat_ms.clamp(100, 3_600_000)) * MISSED_BEATS
    }

    /// Live workers, by id.
    pub fn live(&mut self) -> Vec<&WorkerStatus> {
        self.workers.retain(|id, (status, seen)| {
            let alive = seen.elapsed() <= Self::expiry(status);
            if !alive {
                tracing::warn!(worker_id = %id, host = %status.host, "worker missed its heartbeats; dropped");
            }
            alive
        });
        let mut live: Vec<&WorkerStatus> = self.workers.values().map(|(status, _)| status).collect();
        live.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
        live
    }

    /// The host a worker announced, if it is in the roster.
    pub fn host_of(&self, worker_id: &str) -> Option<String> {
        self.workers.get(worker_id).map(|(status, _)| status.host.clone())
    }

    /// Workers are being started now (local workers on the first task): give them a heartbeat and a half to
    /// announce themselves before judging.
    pub fn expect_workers(&mut self) {
        self.listening_since = Instant::now();
    }

    /// Whether a verdict on an empty or partial roster can be trusted yet.
    pub fn settled(&self) -> bool {
        self.listening_since.elapsed() >= self.heartbeat + self.heartbeat / 2
    }

    /// Why no live worker can take a task with these needs, or `None` when one can (or it is too early to say).
    pub fn unserved(&mut self, needs: Needs<'_>) -> Option<String> {
        if !self.settled() {
            return None;
        }
        let live = self.live();
        if live.iter().any(|w| w.serves(needs.agent, needs.hash)) {
            return None;
        }
        let who = match needs.agent {
            None => "the generic worker".to_string(),
            Some(name) => format!("specialist `{name}`"),
        };
        if live.is_empty() {
            return Some(format!("no worker is running to take tasks of {who}"));
        }
        if let Some(name) = needs.agent {
            // A worker with another version of the file takes the task and refuses it with a message that
            // says so (the queue routes by name): waiting would not help, the refusal tells the user why.
            if live.iter().any(|w| w.serves(Some(name), None)) {
                return None;
            }
            let labelled = live.iter().filter(|w| needs.requires.iter().all(|l| w.labels.contains(l))).count();
            if !needs.requires.is_empty() && labelled == 0 {
                return Some(format!(
                    "no live worker offers the labels {} that {who} requires ({} worker(s) live)",
                    needs.requires.join(", "),
                    live.len()
                ));
            }
        }
        Some(format!("none of the {} live worker(s) has {who} in its agents folder", live.len()))
    }

    /// The roster as `get_settings` and the task tools show it.
    pub fn describe(&mut self) -> Value {
        let workers: Vec<Value> = self
            .live()
            .into_iter()
            .map(|w| {
                json!({
                    "worker_id": w.worker_id, "host": w.host, "pid": w.pid, "version": w.app_version,
                    "labels": w.labels, "generic": w.generic,
                    "specialists": w.specialists.iter().map(|s| json!({ "name": s.name, "version": s.hash,
                        "requires": s.requires })).collect::<Vec<_>>(),
                    "capacity": w.capacity, "load": w.load,
                })
            })
            .collect();
        json!(workers)
    }
}

#[cfg(test)]
mod tests {
    use crate::tasks::fleet::*;
    use minibot_protocol::SpecialistVersion;

    fn worker(id: &str, labels: &[&str], specialists: &[(&str, &str)]) -> WorkerStatus {
        let mut status = WorkerStatus::new(id, "host-a");
        status.labels = labels.iter().map(|l| l.to_string()).collect();
        status.specialists = specialists
            .iter()
            .map(|(name, hash)| SpecialistVersion { name: name.to_string(), hash: hash.to_string(), requires: vec![] })
            .collect();
        status.heartbeat_ms = 60_000;
        status
    }

    fn settled() -> Fleet {
        let mut fleet = Fleet::new(Duration::ZERO);
        fleet.listening_since -= Duration::from_secs(1);
        fleet
    }

    #[test]
    fn says_why_no_live_worker_can_take_a_task() {
        let gpu = ["gpu".to_string()];
        let render = Needs { agent: Some("render"), hash: Some("v2"), requires: &gpu };
        let mut fleet = settled();
        assert_eq!(
            fleet.unserved(render).as_deref(),
            Some("no worker is running to take tasks of specialist `render`")
        );
        fleet.apply(worker("w1", &[], &[("coder", "c1")]));
        let reason = fleet.unserved(render).unwrap_or_default();
        assert!(reason.contains("labels gpu"), "{reason}");
        fleet.apply(worker("w3", &["gpu"], &[("render", "v2")]));
        assert_eq!(fleet.unserved(render), None);
        let mut leaving = worker("w3", &["gpu"], &[]);
        leaving.state = WorkerState::Leaving;
        fleet.apply(leaving);
        assert!(fleet.unserved(render).is_some(), "a worker that left serves nothing");
        // Another version takes the task and refuses it, saying why; nothing to wait for.
        fleet.apply(worker("w2", &["gpu"], &[("render", "v1")]));
        assert_eq!(fleet.unserved(render), None);
        assert_eq!(fleet.unserved(Needs { agent: None, hash: None, requires: &[] }), None);
    }

    #[test]
    fn the_roster_shows_how_busy_a_worker_is_not_which_tasks_it_runs() {
        let mut fleet = settled();
        let mut busy = worker("w1", &[], &[]);
        busy.load = 1;
        fleet.apply(busy);
        let shown = fleet.describe();
        assert_eq!((shown[0]["load"].as_u64(), shown[0]["capacity"].as_u64()), (Some(1), Some(1)));
        assert!(shown[0].get("running").is_none(), "{shown}");
    }

    #[test]
    fn an_early_verdict_waits_for_the_first_heartbeats_and_silent_workers_drop_out() {
        let mut fleet = Fleet::new(Duration::from_secs(60));
        assert_eq!(fleet.unserved(Needs { agent: None, hash: None, requires: &[] }), None, "too early to say");
        let mut fleet = settled();
        let mut quiet = worker("w1", &[], &[]);
        quiet.heartbeat_ms = 100;
        fleet.apply(quiet);
        assert_eq!(fleet.live().len(), 1);
        if let Some((_, seen)) = fleet.workers.get_mut("w1") {
            *seen -= Duration::from_millis(301);
        }
        assert!(fleet.live().is_empty(), "three missed beats");
    }
}
