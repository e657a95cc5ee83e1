//! The vocabulary the orchestrator's actors share. Every actor module depends on this one and this one on no
//! actor, so the dependency graph runs one way: channels and the task coordinator hold `Recipient`s of these
//! messages, never the address of a concrete actor.

mod channel;
mod chat;
mod routing;

pub use channel::{ChannelCapabilities, ChannelHandle, Intake, RegisterChannel, TextFormat};
pub use chat::{
    ApprovalDecision, ApprovalRequest, AskApproval, Inbound, NOTHING_RUNNING_REPLY, NewSession, Outbound, OutboundFile,
    OutboundRole, PendingAnswer, Progress, STOPPED_HISTORY_NOTE, STOPPED_REPLY, StopTurn, TaskSource, session_id,
};
pub use routing::{
    AcceptUpdates, Deliver, Delivered, FindApprovals, LastUpdate, RepairFormat, ReplayPending, TaskRoutes,
};
