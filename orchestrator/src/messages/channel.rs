//! How a channel actor plugs into the router: what it registers (where replies go, what it can do) and what it
//! is given (where user input goes).

use super::chat::{Inbound, Outbound, Progress, StopTurn};
use super::routing::ReplayPending;
use actix::{Message, Recipient};
pub use minibot_agent::{ApprovalDecision, ApprovalRequest, ChannelCapabilities, TextFormat};

/// Where a chat's replies and progress go, and what the channel can do with them.
#[derive(Clone)]
pub struct ChannelHandle {
    pub outbound: Recipient<Outbound>,
    pub progress: Recipient<Progress>,
    pub capabilities: ChannelCapabilities,
    /// Where approval questions for this channel's chats go; `None` when the channel cannot ask (then every
    /// call that needs approval is denied at once, with a message that says why).
    pub approvals: Option<Recipient<AskApproval>>,
}

/// Ask the user of one chat to approve a tool call; answers with the decision.
#[derive(Debug, Clone, Message)]
#[rtype(result = "ApprovalDecision")]
pub struct AskApproval {
    pub channel: String,
    pub chat_id: i64,
    pub request: ApprovalRequest,
}

/// A channel announces itself under its name (the `channel` part of a session key).
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterChannel {
    pub name: String,
    pub handle: ChannelHandle,
}

/// What a channel sends user input to.
#[derive(Clone)]
pub struct Intake {
    pub inbound: Recipient<Inbound>,
    pub stop: Recipient<StopTurn>,
    pub register: Recipient<RegisterChannel>,
    /// Replays turns a crash interrupted, once the channel is registered to answer them.
    pub replay: Recipient<ReplayPending>,
}
