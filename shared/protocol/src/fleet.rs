//! What a worker tells the orchestrators about itself: [`WorkerStatus`], sent when it starts, every heartbeat
//! and when it leaves. The orchestrator keeps the live ones as its roster, routes nothing by it (the queue
//! does that), but uses it to tell a chat at once when no live worker can take its task.
//!
//! Statuses go out on a fanout that any broker user bound to it can read, so they say how busy a worker is
//! (`load`), never which tasks it runs: a task id is what a forged event or control message needs. A status
//! from an older worker that still lists them (`running`) decodes all the same; the list is dropped unread.

use crate::{PROTOCOL_VERSION, ProtocolError, check_version, decode, encode};
use serde::{Deserialize, Serialize};

/// A specialist a worker can run, at the version of its definition file there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecialistVersion {
    pub name: String,
    /// [`crate::definition_hash`] of its file on the worker's host.
    pub hash: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Running and taking tasks (also sent as the heartbeat).
    Up,
    /// Stopping: drop it from the roster now instead of after missed heartbeats.
    Leaving,
    /// A state of a newer version; treated as up.
    #[serde(other)]
    Unknown,
}

/// One worker's announcement or heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStatus {
    pub version: u16,
    pub worker_id: String,
    pub host: String,
    pub pid: u32,
    /// The worker's program version (`CARGO_PKG_VERSION`).
    pub app_version: String,
    pub state: WorkerState,
    /// `[worker] labels`.
    #[serde(default)]
    pub labels: Vec<String>,
    /// The specialists it takes tasks of (those whose `requires` its labels meet).
    #[serde(default)]
    pub specialists: Vec<SpecialistVersion>,
    /// Whether it takes tasks for the generic worker (route `""`).
    #[serde(default)]
    pub generic: bool,
    /// Tasks it runs at once, and how many it runs now.
    pub capacity: u32,
    pub load: u32,
    /// How often it sends this; the roster drops it after three missed beats.
    pub heartbeat_ms: u64,
}

impl WorkerStatus {
    /// Whether this worker takes tasks of `route` for a definition at `hash` (any version when `None`).
    pub fn serves(&self, agent: Option<&str>, hash: Option<&str>) -> bool {
        match agent {
            None => self.generic,
            Some(name) => self.specialists.iter().any(|s| s.name == name && hash.is_none_or(|wanted| wanted == s.hash)),
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtocolError> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let status: Self = decode(bytes)?;
        check_version(status.version)?;
        Ok(status)
    }

    pub fn new(worker_id: &str, host: &str) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            worker_id: worker_id.into(),
            host: host.into(),
            pid: std::process::id(),
            app_version: String::new(),
            state: WorkerState::Up,
            labels: Vec::new(),
            specialists: Vec::new(),
            generic: true,
            capacity: 1,
            load: 0,
            heartbeat_ms: 5000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_answers_who_serves_what() {
        let mut status = WorkerStatus::new("w1", "gpu-box");
        status.labels = vec!["gpu".into()];
        status.specialists =
            vec![SpecialistVersion { name: "render".into(), hash: "abc".into(), requires: vec!["gpu".into()] }];
        let decoded = WorkerStatus::decode(&status.encode().unwrap()).unwrap();
        assert_eq!(decoded, status);
        assert!(status.serves(None, None));
        assert!(status.serves(Some("render"), Some("abc")));
        assert!(status.serves(Some("render"), None));
        assert!(!status.serves(Some("render"), Some("def")), "another version is not served");
        assert!(!status.serves(Some("coder"), None));
        status.generic = false;
        assert!(!status.serves(None, None));
    }

    /// A status as a worker before this version sent it: with the ids of the tasks it ran.
    #[derive(Serialize)]
    struct OlderStatus {
        #[serde(flatten)]
        status: WorkerStatus,
        running: Vec<String>,
    }

    #[test]
    fn a_status_names_no_task_and_an_older_one_that_does_still_decodes() {
        let mut status = WorkerStatus::new("w1", "box");
        status.load = 1;
        let bytes = status.encode().unwrap();
        let fields: serde_json::Value = rmp_serde::from_slice(&bytes).unwrap();
        assert!(fields.get("running").is_none(), "{fields}");
        assert_eq!(fields["load"], 1);

        let older = OlderStatus { status: status.clone(), running: vec!["5f0c2a9e-task".into()] };
        let bytes = rmp_serde::to_vec_named(&older).unwrap();
        assert_eq!(WorkerStatus::decode(&bytes).unwrap(), status);
    }
}
