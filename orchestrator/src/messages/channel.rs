//! How a channel actor plugs into the router: what it registers (where replies go, what it can do) and what it
//! is given (where user input goes).

use super::chat::{AskApproval, Inbound, Outbound, OutboundFile, Progress, StopTurn};
use super::routing::ReplayPending;
use actix::{Message, Recipient};
pub use minibot_agent::{ChannelCapabilities, TextFormat};

/// Where a chat's replies and progress go, and what the channel can do with them.
#[derive(Clone)]
pub struct ChannelHandle {
    pub outbound: Recipient<Outbound>,
    pub progress: Recipient<Progress>,
    pub capabilities: ChannelCapabilities,
    /// Where files for this channel's chats go; `None` when it cannot deliver files (then `send_file` and
    /// `pre_response` attachments are refused, whatever `capabilities.files` says).
    pub files: Option<Recipient<OutboundFile>>,
    /// Where approval questions for this channel's chats go; `None` when the channel cannot ask (then every
    /// call that needs approval is denied at once, with a message that says why).
    pub approvals: Option<Recipient<AskApproval>>,
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
