//! Approval questions of a running task, matched with their answers.
//!
//! A worker asks by emitting a [`WorkerEventKind::ApprovalRequest`] for its claimed task; the orchestrator
//! answers with a [`ControlKind::ApprovalResult`] control message, which arrives wherever the task's cancel and
//! steer messages arrive (RabbitMQ: the control fanout; SQLite: rows of `queue_controls`). The worker reads its
//! control messages in one place and passes each through [`PendingApprovals::route`], which completes the
//! question it answers and hands every other message back.
//!
//! Silence is a no: [`PendingApprovals::ask`] waits at most the time it is given, and a question that could not
//! be sent, or whose answer was lost with a broker or an orchestrator, ends [`ApprovalAnswer::Unanswered`]. An
//! answer for another attempt of the task, or naming a question nobody waits for any more (it timed out, or its
//! run was cancelled), is dropped.

use crate::{ClaimedTask, WorkQueue};
use minibot_protocol::{ControlKind, ControlMessage, WorkerEvent, WorkerEventKind};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::oneshot;

/// One question: which call, shown how, and why it is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalQuestion {
    /// Unique per question (uuid hex); the answer names it.
    pub approval_id: String,
    pub tool: String,
    pub detail: String,
    pub reason: Option<String>,
}

/// How a question ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Approved,
    /// The user said no.
    Denied,
    /// Nobody answered; the text says why (for the model and the log).
    Unanswered(String),
}

/// The questions one attempt of one task is waiting on.
pub struct PendingApprovals {
    task_id: String,
    attempt: u32,
    waiting: Mutex<HashMap<String, oneshot::Sender<ApprovalAnswer>>>,
}

/// Forgets a question when its wait ends, however it ends (answer, timeout, or the run dropped).
struct Forget<'a> {
    pending: &'a PendingApprovals,
    approval_id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.pending.lock().remove(self.approval_id);
    }
}

impl PendingApprovals {
    pub fn new(task: &ClaimedTask) -> Self {
        Self { task_id: task.envelope.task_id.clone(), attempt: task.attempt, waiting: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ApprovalAnswer>>> {
        // Plain data: a panic elsewhere while holding it leaves nothing half-done.
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Questions still waiting for an answer.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    /// Sends the question as an event of `task` and waits at most `wait` for its answer.
    pub async fn ask(
        &self,
        queue: &dyn WorkQueue,
        task: &ClaimedTask,
        worker_id: &str,
        question: ApprovalQuestion,
        wait: Duration,
    ) -> ApprovalAnswer {
        let (answer_tx, answer_rx) = oneshot::channel();
        self.lock().insert(question.approval_id.clone(), answer_tx);
        let _forget = Forget { pending: self, approval_id: &question.approval_id };
        let event = WorkerEvent::new(
            &task.envelope.task_id,
            task.attempt,
            worker_id,
            WorkerEventKind::ApprovalRequest {
                approval_id: question.approval_id.clone(),
                tool: question.tool.clone(),
                detail: question.detail.clone(),
                reason: question.reason.clone(),
                wait_ms: Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
            },
        );
        if let Err(error) = queue.emit(task, &event).await {
            tracing::warn!(task_id = %task.envelope.task_id, error = %error, "cannot send an approval request");
            return ApprovalAnswer::Unanswered(format!("the approval request could not be sent: {error}"));
        }
        match tokio::time::timeout(wait, answer_rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => ApprovalAnswer::Unanswered("the approval request was withdrawn".into()),
            Err(_) => ApprovalAnswer::Unanswered(format!(
                "nobody answered the approval request within {}",
                if wait >= Duration::from_secs(1) {
                    format!("{} s", wait.as_secs())
                } else {
                    format!("{} ms", wait.as_millis())
                }
            )),
        }
    }

    /// Completes the question an approval answer names and returns `None`; hands back any other message.
    /// Answers for another task or attempt, or for a question nobody waits for, are dropped.
    pub fn route(&self, message: ControlMessage) -> Option<ControlMessage> {
        let ControlKind::ApprovalResult { approval_id, attempt, approved, reason } = &message.kind else {
            return Some(message);
        };
        if message.task_id != self.task_id || *attempt != self.attempt {
            tracing::debug!(task_id = %message.task_id, attempt, "approval answer for another attempt; ignored");
            return None;
        }
        let Some(waiter) = self.lock().remove(approval_id) else {
            tracing::debug!(approval_id = %approval_id, "approval answer nobody waits for; ignored");
            return None;
        };
        let answer = match (approved, reason) {
            (true, _) => ApprovalAnswer::Approved,
            (false, None) => ApprovalAnswer::Denied,
            (false, Some(reason)) => ApprovalAnswer::Unanswered(reason.clone()),
        };
        let _ = waiter.send(answer);
        None
    }
}
