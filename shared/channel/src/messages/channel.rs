//! How a channel actor plugs into the router: what it registers (where replies go, what it can do) and what it
//! is given (where user input goes).

use super::chat::{AskApproval, Inbound, NewSession, Outbound, OutboundFile, Progress, StopTurn};
use super::routing::{AcceptUpdates, Delivered, LastUpdate, RepairFormat, ReplayPending};
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
    /// The channel reports each answer it delivered ([`Delivered`]); until then a finished turn's answer stays
    /// pending, so a crash or a stop before it reached the user sends it at the next start. A channel that
    /// shows answers at once (the console) leaves this off.
    pub confirms_delivery: bool,
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
    /// Starts a chat's conversation afresh (the console's `/new`).
    pub new_session: Recipient<NewSession>,
    pub register: Recipient<RegisterChannel>,
    /// Replays turns a crash interrupted, once the channel is registered to answer them.
    pub replay: Recipient<ReplayPending>,
    /// Durable intake for channels whose source redelivers until told otherwise (Telegram's update ids).
    pub accept: Recipient<AcceptUpdates>,
    /// The last update id [`AcceptUpdates`] recorded for a source.
    pub last_update: Recipient<LastUpdate>,
    /// Asks the model to rewrite an answer the channel could not parse.
    pub repair: Recipient<RepairFormat>,
    /// Answers that reached the user (channels that confirm delivery).
    pub delivered: Recipient<Delivered>,
}
