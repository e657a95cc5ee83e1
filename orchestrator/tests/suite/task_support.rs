//! What the task tests share: the hub, a chat's tool context, and channels registered as the real ones are,
//! including one that can be asked for approvals.

use super::harness::Harness;
use actix::prelude::*;
use minibot_agent::ToolContext;
use minibot_orchestrator::messages::{
    ApprovalDecision, AskApproval, ChannelCapabilities, ChannelHandle, Outbound, Progress, RegisterChannel,
};
use minibot_orchestrator::tasks::TaskHub;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

pub fn hub(h: &Harness) -> Arc<TaskHub> {
    h.runtime.tasks.clone().expect("tasks are enabled")
}

/// The tool context of chat `chat_id` on `channel`, user 7 of the primary owner.
pub fn chat(channel: &str, chat_id: i64) -> ToolContext {
    ToolContext {
        channel: channel.into(),
        chat_id: Some(chat_id),
        user_id: Some(7),
        owner_id: "primary".into(),
        ..ToolContext::default()
    }
}

/// A channel that can ask: it records every question and answers each with a fixed decision.
pub struct AskingChannel {
    pub asked: UnboundedSender<AskApproval>,
    pub answer: ApprovalDecision,
}

impl Actor for AskingChannel {
    type Context = Context<Self>;
}

impl Handler<AskApproval> for AskingChannel {
    type Result = MessageResult<AskApproval>;
    fn handle(&mut self, msg: AskApproval, _ctx: &mut Context<Self>) -> Self::Result {
        let _ = self.asked.send(msg);
        MessageResult(self.answer.clone())
    }
}

impl Handler<Outbound> for AskingChannel {
    type Result = ();
    fn handle(&mut self, _msg: Outbound, _ctx: &mut Context<Self>) {}
}

impl Handler<Progress> for AskingChannel {
    type Result = ();
    fn handle(&mut self, _msg: Progress, _ctx: &mut Context<Self>) {}
}

/// Registers `channel` under `name`; it is asked for approvals through `approvals`, when given.
pub async fn register_channel<A>(h: &Harness, name: &str, channel: Addr<A>, approvals: Option<Recipient<AskApproval>>)
where
    A: Actor<Context = Context<A>> + Handler<Outbound> + Handler<Progress>,
{
    let handle = ChannelHandle {
        outbound: channel.clone().recipient(),
        progress: channel.recipient(),
        capabilities: ChannelCapabilities::default(),
        files: None,
        approvals,
        confirms_delivery: false,
    };
    h.router.send(RegisterChannel { name: name.into(), handle }).await.unwrap();
}

/// Registers a channel that can ask for approvals under `name`.
pub async fn register_asking<A>(h: &Harness, name: &str, channel: Addr<A>)
where
    A: Actor<Context = Context<A>> + Handler<Outbound> + Handler<Progress> + Handler<AskApproval>,
{
    register_channel(h, name, channel.clone(), Some(channel.recipient())).await;
}
