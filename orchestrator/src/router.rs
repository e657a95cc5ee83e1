//! Maps each chat (`"{channel}:{chat_id}"`) to its conversation actor, creating it on first use, and replays
//! turns that were pending when the process last stopped.

use crate::conversation::{ChannelHandle, Conversation};
use crate::messages::{Inbound, NOTHING_RUNNING_REPLY, Outbound, OutboundRole, StopTurn, session_id};
use crate::runtime::Runtime;
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// A channel announces where its chats' replies go.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterChannel {
    pub name: String,
    pub handle: ChannelHandle,
}

/// Replays pending turns of the registered channels; answers with the replayed messages.
#[derive(Message)]
#[rtype(result = "Vec<Inbound>")]
pub struct ReplayPending;

pub struct Router {
    rt: Arc<Runtime>,
    channels: HashMap<String, ChannelHandle>,
    conversations: HashMap<String, Addr<Conversation>>,
}

impl Router {
    pub fn new(rt: Arc<Runtime>) -> Self {
        Self { rt, channels: HashMap::new(), conversations: HashMap::new() }
    }

    fn conversation(&mut self, channel: &str, chat_id: i64) -> Option<Addr<Conversation>> {
        let handle = self.channels.get(channel)?.clone();
        let key = session_id(channel, chat_id);
        let rt = self.rt.clone();
        Some(self.conversations.entry(key).or_insert_with(|| Conversation::new(rt, handle).start()).clone())
    }
}

impl Actor for Router {
    type Context = Context<Self>;
}

impl Handler<RegisterChannel> for Router {
    type Result = ();

    fn handle(&mut self, msg: RegisterChannel, _ctx: &mut Context<Self>) {
        self.channels.insert(msg.name, msg.handle);
    }
}

impl Handler<Inbound> for Router {
    type Result = ();

    fn handle(&mut self, inbound: Inbound, _ctx: &mut Context<Self>) {
        match self.conversation(&inbound.channel, inbound.chat_id) {
            Some(conversation) => conversation.do_send(inbound),
            None => {
                tracing::warn!(channel = %inbound.channel, "message for a channel that is not running; dropped")
            }
        }
    }
}

/// Sends a message to a chat's channel (task results and progress).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver(pub Outbound);

impl Handler<Deliver> for Router {
    type Result = ();

    fn handle(&mut self, Deliver(message): Deliver, _ctx: &mut Context<Self>) {
        match self.channels.get(&message.channel) {
            Some(handle) => handle.outbound.do_send(message),
            None => tracing::warn!(channel = %message.channel, "no such channel running; message dropped"),
        }
    }
}

impl Handler<StopTurn> for Router {
    type Result = ();

    fn handle(&mut self, stop: StopTurn, _ctx: &mut Context<Self>) {
        let key = session_id(&stop.channel, stop.chat_id);
        if let Some(conversation) = self.conversations.get(&key) {
            conversation.do_send(stop);
        } else if let Some(handle) = self.channels.get(&stop.channel) {
            handle.outbound.do_send(Outbound::text(
                &stop.channel,
                stop.chat_id,
                NOTHING_RUNNING_REPLY,
                OutboundRole::Answer,
            ));
        }
    }
}

impl Handler<ReplayPending> for Router {
    type Result = ResponseActFuture<Self, Vec<Inbound>>;

    fn handle(&mut self, _msg: ReplayPending, _ctx: &mut Context<Self>) -> Self::Result {
        let store = self.rt.store.clone();
        Box::pin(async move { store.pending_turns().await }.into_actor(self).map(|pending, act, _ctx| {
            let pending = match pending {
                Ok(pending) => pending,
                Err(error) => {
                    tracing::error!(error = %error, "cannot read pending turns");
                    return Vec::new();
                }
            };
            let mut replayed = Vec::new();
            for turn in pending {
                let inbound: Inbound = match serde_json::from_str(&turn.message_json) {
                    Ok(inbound) => inbound,
                    Err(error) => {
                        tracing::error!(event_id = %turn.event_id, error = %error, "pending turn is unreadable; dropped");
                        let store = act.rt.store.clone();
                        actix::spawn(async move {
                            let _ = store.clear_pending(&turn.event_id).await;
                        });
                        continue;
                    }
                };
                if let Some(conversation) = act.conversation(&inbound.channel, inbound.chat_id) {
                    tracing::info!(event_id = %inbound.event_id, session = %turn.session_id, "replaying a turn interrupted by a restart");
                    conversation.do_send(inbound.clone());
                    replayed.push(inbound);
                }
            }
            replayed
        }))
    }
}
