//! The contract between the orchestrator and the workers: what a queued task carries ([`TaskEnvelope`]), what a
//! worker reports back ([`WorkerEvent`]), and what the orchestrator can tell a running task ([`ControlMessage`]).
//! Pure data, encoded as MessagePack with field names (`rmp_serde::to_vec_named`) so either side can add
//! optional fields without breaking the other, and a kind of event or control message this side does not know
//! decodes as `Unknown` (skipped) rather than failing. Every message carries [`PROTOCOL_VERSION`]; a message
//! that does not decode, or has a version this side does not speak, is a [`ProtocolError`], never a panic.
//!
//! Over a broker every message is sealed ([`MessageKey`], `seal`): signed with a shared key and timestamped.
//!
//! Workers also announce themselves ([`WorkerStatus`]): start, heartbeat, leave.
//!
//! Tool approvals from a worker ride the same two paths: the question is a worker event
//! ([`WorkerEventKind::ApprovalRequest`]), the answer a control message ([`ControlKind::ApprovalResult`]).
//!
//! The task states the orchestrator records and shows ([`TaskStatus`], [`Delivery`], [`TaskUsage`]) live here
//! too, so the store, the task tools and the orchestrator share one spelling of each.

mod fleet;
mod seal;
mod state;

pub use fleet::{SpecialistVersion, WorkerState, WorkerStatus};
pub use seal::{KeyError, MIN_KEY_CHARS, MessageKey, SealError, SealKind, generate_key_hex, is_sealed};
pub use state::{Delivery, TaskStatus, TaskUsage, UnknownName};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Bumped when a change is not backwards compatible.
pub const PROTOCOL_VERSION: u16 = 1;

/// The largest answer a task reports, in bytes of its text; a worker cuts a longer one and says so, and a
/// receiver refuses an event that is larger than this allows.
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("message does not decode: {0}")]
    Decode(String),
    #[error("message has protocol version {found}; this side speaks {PROTOCOL_VERSION}")]
    Version { found: u16 },
    #[error("message does not encode: {0}")]
    Encode(String),
}

/// Limits a worker applies to one task. `None` is unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLimits {
    pub timeout_seconds: u64,
    pub max_steps: Option<u32>,
    pub max_tool_calls: Option<u32>,
}

/// Per-task model overrides chosen by the main agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelOverrides {
    pub model_provider: Option<String>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
}

/// A queued task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskEnvelope {
    pub version: u16,
    pub task_id: String,
    /// The specialist to run; `None` runs the generic worker.
    pub agent_name: Option<String>,
    pub prompt: String,
    /// JSON object text given by the main agent (`context_json`), if any.
    pub context_json: Option<String>,
    pub model_overrides: ModelOverrides,
    pub limits: TaskLimits,
    pub owner_id: String,
    pub channel: String,
    pub chat_id: Option<i64>,
    pub user_id: Option<i64>,
    /// Deliveries after which the task is dead.
    pub max_attempts: u32,
    /// The version of the specialist's definition the task was sent with ([`definition_hash`] of its file); a
    /// worker whose file differs refuses the task instead of running another prompt. `None` from older senders
    /// and for the generic worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_hash: Option<String>,
    /// Worker labels the specialist requires (its `requires`); only workers offering all of them take it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// The whole definition file of a managed (model-authored) specialist, whose version is `agent_hash`. A
    /// worker runs this text, not a file of its own, so it never runs a stale definition and can run one
    /// created after it started; it refuses the task when the text's hash is not `agent_hash`. `None` for the
    /// owner's specialists (workers read those from their agents folder) and the generic worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_definition: Option<String>,
}

impl TaskEnvelope {
    /// The route the task travels on: see [`route_for`]. A task that carries its definition needs nothing of
    /// the worker's folder, so it travels on the generic route that every worker takes.
    pub fn route(&self) -> String {
        if self.agent_definition.is_some() {
            return route_for(None);
        }
        route_for(self.agent_name.as_deref())
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtocolError> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let envelope: Self = decode(bytes)?;
        check_version(envelope.version)?;
        Ok(envelope)
    }
}

/// How a task attempt ended; the task's status follows from it (`TaskStatus::from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskOutcome {
    Done,
    Failed,
    TimedOut,
    Cancelled,
}

/// A file a task's answer carries. `path` is relative to the managed root (`[tools.file_storage] root_dir`),
/// which the orchestrator resolves against its own root, so a worker on another machine with the same shared
/// folder names the same file; an absolute path is only accepted where `allow_outside_root` is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAttachment {
    pub path: String,
    #[serde(default)]
    pub caption: Option<String>,
}

/// What a worker reports. Every event names the task and the attempt, so the orchestrator applies each one
/// once and the first terminal event wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerEvent {
    pub version: u16,
    pub task_id: String,
    pub attempt: u32,
    pub worker_id: String,
    pub kind: WorkerEventKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerEventKind {
    Started,
    Progress {
        step: u32,
        tool_names: Vec<String>,
        total_tokens: u64,
    },
    /// Terminal. `text` is the answer on `done`; `error` says what went wrong otherwise. `steps`,
    /// `tool_calls` and `total_tokens` are what the attempt used (the orchestrator keeps them as a
    /// [`TaskUsage`]); they are separate fields so the message stays readable by either side's older version.
    Finished {
        outcome: TaskOutcome,
        stop_reason: String,
        text: Option<String>,
        error: Option<String>,
        steps: u32,
        tool_calls: u32,
        total_tokens: u64,
        /// Files the task's answer carries (its `pre_response` attachments), for the chat; only on `done`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<TaskAttachment>,
    },
    /// A tool call of the task needs the user's approval. The orchestrator asks the chat that started the task
    /// and answers with [`ControlKind::ApprovalResult`] naming the same `approval_id`; the worker waits at
    /// most until its approval timeout or its deadline and takes silence as a no.
    ApprovalRequest {
        /// Unique per question (uuid hex).
        approval_id: String,
        /// The tool as the user should read it.
        tool: String,
        /// The arguments (or, for a withheld result, an excerpt), redacted and capped by the worker.
        detail: String,
        /// Why it is asked when a pattern is not the reason (the safety classifier's verdict).
        #[serde(default)]
        reason: Option<String>,
        /// How long the worker waits for the answer, in milliseconds; the orchestrator stops asking after
        /// that, so a late yes is never recorded for a call the worker already denied. `None` from older workers.
        #[serde(default)]
        wait_ms: Option<u64>,
    },
    /// An event of a kind this side does not know (sent by a newer version): decoded so it can be acknowledged
    /// and skipped instead of failing the whole message.
    #[serde(other)]
    Unknown,
}

impl WorkerEvent {
    pub fn new(task_id: &str, attempt: u32, worker_id: &str, kind: WorkerEventKind) -> Self {
        Self { version: PROTOCOL_VERSION, task_id: task_id.into(), attempt, worker_id: worker_id.into(), kind }
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self.kind, WorkerEventKind::Finished { .. })
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtocolError> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let event: Self = decode(bytes)?;
        check_version(event.version)?;
        Ok(event)
    }
}

/// From the orchestrator to whichever worker runs a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlMessage {
    pub version: u16,
    pub task_id: String,
    pub kind: ControlKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlKind {
    Cancel,
    /// A message from the main agent, read by the task before its next step.
    Steer {
        text: String,
    },
    /// The answer to a [`WorkerEventKind::ApprovalRequest`]. `attempt` is the attempt that asked, so a later
    /// attempt of the same task ignores it. `approved: false` with a `reason` means nobody could answer (the
    /// channel cannot ask, nobody answered in time); without one, the user said no.
    ApprovalResult {
        approval_id: String,
        attempt: u32,
        approved: bool,
        #[serde(default)]
        reason: Option<String>,
    },
    /// A message of a kind this side does not know (sent by a newer version); ignored.
    #[serde(other)]
    Unknown,
}

impl ControlMessage {
    pub fn new(task_id: &str, kind: ControlKind) -> Self {
        Self { version: PROTOCOL_VERSION, task_id: task_id.into(), kind }
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtocolError> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let message: Self = decode(bytes)?;
        check_version(message.version)?;
        Ok(message)
    }
}

/// The route of a task for `agent` (`None`: the generic worker). Tasks travel per specialist, so a worker only
/// ever sees tasks of specialists it has (and whose `requires` its labels meet): the generic worker's route is
/// `""`, a specialist's is `agent.<name>`. RabbitMQ gives each route its own queue, SQLite a column.
pub fn route_for(agent: Option<&str>) -> String {
    agent.map(|name| format!("agent.{name}")).unwrap_or_default()
}

/// The version of a specialist's definition: the first 16 hex digits of the SHA-256 of its file's bytes.
pub fn definition_hash(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ProtocolError> {
    rmp_serde::to_vec_named(value).map_err(|e| ProtocolError::Encode(e.to_string()))
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ProtocolError> {
    rmp_serde::from_slice(bytes).map_err(|e| ProtocolError::Decode(e.to_string()))
}

fn check_version(found: u16) -> Result<(), ProtocolError> {
    if found == PROTOCOL_VERSION { Ok(()) } else { Err(ProtocolError::Version { found }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> TaskEnvelope {
        TaskEnvelope {
            version: PROTOCOL_VERSION,
            task_id: "t-1".into(),
            agent_name: Some("researcher".into()),
            prompt: "find it".into(),
            context_json: Some("{\"a\":1}".into()),
            model_overrides: ModelOverrides::default(),
            limits: TaskLimits { timeout_seconds: 60, max_steps: None, max_tool_calls: Some(5) },
            owner_id: "primary".into(),
            channel: "console".into(),
            chat_id: Some(1),
            user_id: None,
            max_attempts: 3,
            agent_hash: Some("0123456789abcdef".into()),
            requires: vec!["gpu".into()],
            agent_definition: None,
        }
    }

    #[test]
    fn a_carried_definition_travels_on_the_generic_route_and_older_messages_decode() {
        let mut task = envelope();
        assert_eq!(task.route(), "agent.researcher");
        task.agent_definition = Some("---\nname: researcher\n---\nYou research.\n".into());
        assert_eq!(task.route(), "");
        assert_eq!(TaskEnvelope::decode(&task.encode().unwrap()).unwrap(), task);
        // A message written before the field existed has no such key.
        let plain = envelope();
        let bytes = plain.encode().unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("agent_definition"), "skipped when absent");
        assert_eq!(TaskEnvelope::decode(&bytes).unwrap().agent_definition, None);
    }

    #[test]
    fn round_trips() {
        let original = envelope();
        assert_eq!(TaskEnvelope::decode(&original.encode().unwrap()).unwrap(), original);
        let event = WorkerEvent::new(
            "t-1",
            2,
            "w",
            WorkerEventKind::Finished {
                outcome: TaskOutcome::Done,
                stop_reason: "completed".into(),
                text: Some("ok".into()),
                error: None,
                steps: 1,
                tool_calls: 0,
                total_tokens: 9,
                attachments: vec![TaskAttachment { path: "out/report.csv".into(), caption: Some("Q3".into()) }],
            },
        );
        assert_eq!(WorkerEvent::decode(&event.encode().unwrap()).unwrap(), event);
    }

    #[test]
    fn approval_questions_and_answers_round_trip() {
        let question = WorkerEvent::new(
            "t-1",
            1,
            "w",
            WorkerEventKind::ApprovalRequest {
                approval_id: "a1".into(),
                tool: "bash".into(),
                detail: "- command: ls".into(),
                reason: Some("deletes files".into()),
                wait_ms: Some(90_000),
            },
        );
        assert_eq!(WorkerEvent::decode(&question.encode().unwrap()).unwrap(), question);
        assert!(!question.is_terminal());
        let answer = ControlMessage::new(
            "t-1",
            ControlKind::ApprovalResult { approval_id: "a1".into(), attempt: 1, approved: true, reason: None },
        );
        assert_eq!(ControlMessage::decode(&answer.encode().unwrap()).unwrap(), answer);
    }

    /// What a newer version may send: a kind this one does not know, or a known kind without a field added
    /// later. Both decode instead of failing the message.
    #[derive(Serialize)]
    struct Foreign<K: Serialize> {
        version: u16,
        task_id: &'static str,
        attempt: u32,
        worker_id: &'static str,
        kind: K,
    }

    #[test]
    fn unknown_kinds_and_missing_optional_fields_decode() {
        let future = Foreign {
            version: PROTOCOL_VERSION,
            task_id: "t-1",
            attempt: 1,
            worker_id: "w",
            kind: serde_json::json!({ "type": "teleport", "where": "mars" }),
        };
        let event = WorkerEvent::decode(&rmp_serde::to_vec_named(&future).unwrap()).unwrap();
        assert_eq!(event.kind, WorkerEventKind::Unknown);
        let control = serde_json::json!({ "version": PROTOCOL_VERSION, "task_id": "t-1",
            "kind": { "type": "pause_for_a_while" } });
        let control = ControlMessage::decode(&rmp_serde::to_vec_named(&control).unwrap()).unwrap();
        assert_eq!(control.kind, ControlKind::Unknown);
        let older = Foreign {
            version: PROTOCOL_VERSION,
            task_id: "t-1",
            attempt: 1,
            worker_id: "w",
            kind: serde_json::json!({ "type": "approval_request", "approval_id": "a", "tool": "bash", "detail": "" }),
        };
        let event = WorkerEvent::decode(&rmp_serde::to_vec_named(&older).unwrap()).unwrap();
        assert!(matches!(event.kind, WorkerEventKind::ApprovalRequest { reason: None, .. }));
    }

    #[test]
    fn garbage_and_foreign_versions_are_errors() {
        assert!(matches!(TaskEnvelope::decode(b"\xc1garbage"), Err(ProtocolError::Decode(_))));
        assert!(matches!(TaskEnvelope::decode(b"{\"json\": true}"), Err(ProtocolError::Decode(_))));
        let mut future = envelope();
        future.version = 99;
        let bytes = rmp_serde::to_vec_named(&future).unwrap();
        assert!(matches!(TaskEnvelope::decode(&bytes), Err(ProtocolError::Version { found: 99 })));
    }
}
