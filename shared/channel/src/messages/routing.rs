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

/// Updates from a source that redelivers what it was not told it has (Telegram): each update id is recorded
/// together with the pending turn it carries, in one write. Answers, per update, whether it was new: the
/// channel then sends the new turns as [`Inbound`]s; an update recorded before (a redelivery) is skipped, so it
/// is never answered twice.
#[derive(Message)]
#[rtype(result = "Result<Vec<bool>, String>")]
pub struct AcceptUpdates {
    /// Names the source, for example `telegram:<bot id>`.
    pub source: String,
    /// Each update id, with the user message it carries (`None`: nothing to answer, such as a button click).
    pub updates: Vec<(i64, Option<Inbound>)>,
}

/// The highest update id recorded for a source, where polling goes on after a restart.
#[derive(Message)]
#[rtype(result = "Result<Option<i64>, String>")]
pub struct LastUpdate {
    pub source: String,
}

/// A channel could not parse an answer's markup: the model rewrites it (no tools). Answers with the new text.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct RepairFormat {
    pub channel: String,
    pub chat_id: i64,
    pub text: String,
    /// What the channel said was wrong.
    pub parse_error: String,
    /// What the channel can show, in words for the model (for example Telegram's MarkdownV2 rules).
    pub instructions: String,
}

/// A channel that confirms delivery ([`super::ChannelHandle::confirms_delivery`]) took these answers to the
/// user (or gave up on them for good): their pending rows go.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Delivered {
    pub event_ids: Vec<String>,
}
