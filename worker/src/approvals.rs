//! How a task's tool calls ask the user: [`QueueApprovals`] is the worker's [`ApprovalPrompt`]. The question
//! goes to the orchestrator as an event of the task, which asks the chat that started it; the answer comes back
//! with the task's control messages, which the runner hands to the task's [`PendingApprovals`].
//!
//! The wait is the shorter of the approval timeout (applied by the [`minibot_agent::Approver`]) and what is left
//! of the task's time limit; silence, a question that could not be sent and an answer lost on the way all deny.

use futures_util::future::BoxFuture;
use minibot_agent::{ApprovalDecision, ApprovalPrompt, ApprovalRequest};
use minibot_queue::approvals::{ApprovalAnswer, ApprovalQuestion, PendingApprovals};
use minibot_queue::{ClaimedTask, WorkQueue};
use std::sync::Arc;
use tokio::time::Instant;

/// Asks over the queue, for one attempt of one task.
pub struct QueueApprovals {
    queue: Arc<dyn WorkQueue>,
    task: ClaimedTask,
    worker_id: String,
    pending: Arc<PendingApprovals>,
    /// When the task's time limit runs out; no question waits past it.
    deadline: Instant,
}

impl QueueApprovals {
    pub fn new(
        queue: Arc<dyn WorkQueue>,
        task: ClaimedTask,
        worker_id: &str,
        pending: Arc<PendingApprovals>,
        deadline: Instant,
    ) -> Self {
        Self { queue, task, worker_id: worker_id.to_string(), pending, deadline }
    }
}

impl ApprovalPrompt for QueueApprovals {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        Box::pin(async move {
            let remaining = self.deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return ApprovalDecision::Unavailable("the task's time limit ran out".into());
            }
            let question = ApprovalQuestion {
                approval_id: request.approval_id,
                tool: request.tool,
                detail: request.detail,
                reason: request.reason,
            };
            match self.pending.ask(self.queue.as_ref(), &self.task, &self.worker_id, question, remaining).await {
                ApprovalAnswer::Approved => ApprovalDecision::Approved,
                ApprovalAnswer::Denied => ApprovalDecision::Denied,
                ApprovalAnswer::Unanswered(why) => ApprovalDecision::Unavailable(why),
            }
        })
    }
}
