//! Approval questions from workers: a specialist's tool call that needs the user's yes arrives as a worker event;
//! it is asked in the chat that started the task (never one the worker names), and the answer goes back to the
//! worker as a control message of the task. The question waits in the background, so the coordinator goes on
//! applying other events meanwhile.
//!
//! Nothing here is durable: after a restart the question is gone and the worker, hearing nothing, denies when
//! its wait runs out. A question from an attempt that is no longer current, or for a task that ended, is answered
//! no at once.

use super::hub::TaskHub;
use crate::messages::{ApprovalDecision, ApprovalRequest, AskApproval, FindApprovals, TaskRoutes};
use minibot_protocol::{ControlKind, ControlMessage};
use serde_json::json;
use std::time::Duration;

/// How much sooner than the worker the orchestrator stops asking: the event's trip from worker to here.
const WORKER_WAIT_MARGIN: Duration = Duration::from_secs(1);

/// One question as the worker sent it.
pub struct WorkerQuestion {
    pub task_id: String,
    pub attempt: u32,
    pub request: ApprovalRequest,
    /// How long the worker waits, as it said; the question is withdrawn a little before that.
    pub worker_wait: Option<Duration>,
}

/// Asks the task's chat and sends the answer back to the worker.
pub async fn relay(hub: &TaskHub, routes: &TaskRoutes, question: WorkerQuestion) {
    let WorkerQuestion { task_id, attempt, request, worker_wait } = question;
    let approval_id = request.approval_id.clone();
    let decision = ask(hub, routes, &task_id, attempt, request, worker_wait).await;
    let (approved, reason) = match decision {
        ApprovalDecision::Approved => (true, None),
        ApprovalDecision::Denied => (false, None),
        ApprovalDecision::Unavailable(why) => (false, Some(why)),
    };
    tracing::info!(task_id = %task_id, approval_id = %approval_id, approved, reason = ?reason, "worker approval answered");
    let noted = json!({ "approval_id": approval_id, "attempt": attempt, "approved": approved, "reason": reason });
    if let Err(error) = hub.store.add_event(&task_id, "approval_answered", &noted).await {
        tracing::warn!(task_id = %task_id, error = %error, "cannot note the approval answer");
    }
    let answer = ControlMessage::new(&task_id, ControlKind::ApprovalResult { approval_id, attempt, approved, reason });
    if let Err(error) = hub.queue.control(&answer).await {
        tracing::warn!(task_id = %task_id, error = %error, "cannot send the approval answer; the worker will deny");
    }
}

async fn ask(
    hub: &TaskHub,
    routes: &TaskRoutes,
    task_id: &str,
    attempt: u32,
    request: ApprovalRequest,
    worker_wait: Option<Duration>,
) -> ApprovalDecision {
    let record = match hub.store.get(task_id).await {
        Ok(Some(record)) => record,
        Ok(None) => return ApprovalDecision::Unavailable(format!("task {task_id} is unknown")),
        Err(error) => return ApprovalDecision::Unavailable(format!("the task store failed: {error}")),
    };
    if record.is_terminal() {
        return ApprovalDecision::Unavailable(format!("the task already ended ({})", record.status));
    }
    if attempt < record.attempts {
        return ApprovalDecision::Unavailable("a newer attempt of the task is running".into());
    }
    let Some(chat_id) = record.chat_id else {
        return ApprovalDecision::Unavailable("the task has no chat to ask".into());
    };
    let noted = json!({ "approval_id": request.approval_id, "attempt": attempt, "tool": request.tool,
                        "reason": request.reason });
    if let Err(error) = hub.store.add_event(task_id, "approval_requested", &noted).await {
        tracing::warn!(task_id = %task_id, error = %error, "cannot note the approval request");
    }
    // The channel's own prompt applies the approval timeout too; this bound only keeps a question from waiting
    // forever on a channel that never answers.
    // The worker stops waiting first (it counts from before the event travelled): ask for a little less, so
    // the chat never approves a call the worker has already given up on.
    let timeout = Duration::from_secs(hub.config.tools.approval.timeout_seconds.max(1))
        .min(worker_wait.map_or(Duration::MAX, |wait| wait.saturating_sub(WORKER_WAIT_MARGIN)));
    let channel = match routes.approval.send(FindApprovals { channel: record.channel.clone() }).await {
        Ok(Ok(channel)) => channel,
        Ok(Err(why)) => return ApprovalDecision::Unavailable(why),
        Err(_) => return ApprovalDecision::Unavailable("the orchestrator is shutting down".into()),
    };
    let question = AskApproval { channel: record.channel.clone(), chat_id, requester: record.user_id, request };
    // Asked straight at the channel: when this wait ends the request is dropped and the chat withdraws it.
    match tokio::time::timeout(timeout, channel.send(question)).await {
        Ok(Ok(decision)) => decision,
        Ok(Err(_)) => ApprovalDecision::Unavailable("the orchestrator is shutting down".into()),
        Err(_) => ApprovalDecision::Unavailable(format!(
            "nobody answered the approval request within {} s",
            timeout.as_secs()
        )),
    }
}
