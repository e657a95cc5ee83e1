//! Messages from the background side (task coordinator, start-up) to the router.

use super::chat::{AskApproval, Inbound, Outbound, OutboundFile};
use actix::{Message, Recipient};

/// Sends a message to a chat's channel (task results and progress), outside any turn.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver(pub Outbound);

/// Replays the turns that were pending when the process last stopped; answers with the replayed messages.
#[derive(Message)]
#[rtype(result = "Vec<Inbound>")]
pub struct ReplayPending;

/// Where the task coordinator routes what a finished or progressing task produces: notes and `spawn_task`
/// results straight to the chat, `delegate` results as a new turn of the main agent.
#[derive(Clone)]
pub struct TaskRoutes {
    pub deliver: Recipient<Deliver>,
    /// Files a task result carries, sent before its text.
    pub files: Recipient<OutboundFile>,
    pub turn: Recipient<Inbound>,
    /// Where a worker's approval questions for a chat go: the task relay asks the channel directly, so a
    /// question it stops waiting for is withdrawn from the chat.
    pub approval: Recipient<FindApprovals>,
}

/// The channel's approval recipient, or why there is none (not running, or it cannot ask).
#[derive(Message)]
#[rtype(result = "Result<Recipient<AskApproval>, String>")]
pub struct FindApprovals {
    pub channel: String,
}
