//! Maps each chat (`"{channel}:{chat_id}"`) to its conversation actor, creating it on first use, and replays
//! turns that were pending when the process last stopped.

use crate::conversation::{Conversation, Halt, IdleSince, Retire};
use crate::intake_ledger::IntakeLedger;
use crate::messages::{
    ChannelHandle, Deliver, FindApprovals, Inbound, Intake, NOTHING_RUNNING_REPLY, NewSession, Outbound, OutboundFile,
    OutboundRole, PendingAnswer, RegisterChannel, ReplayPending, StopTurn, TaskRoutes, session_id,
};
use crate::render;
use crate::runtime::Runtime;
use actix::prelude::*;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Messages held per channel until it registers; past this, the oldest are dropped (and logged).
const MAX_HELD_PER_CHANNEL: usize = 1000;

/// Something for a channel that has not registered yet: task results and delegated turns can come in before
/// the channel is up at start-up.
enum Held {
    Turn(Inbound),
    Deliver(Outbound),
    File(OutboundFile),
}

pub struct Router {
    rt: Arc<Runtime>,
    channels: HashMap<String, ChannelHandle>,
    conversations: HashMap<String, Chat>,
    held: HashMap<String, VecDeque<Held>>,
}

/// A chat's conversation actor and what the router needs to retire it when the chat goes quiet.
struct Chat {
    addr: Addr<Conversation>,
    idle: Arc<IdleSince>,
    /// When the router last gave it a message.
    last_sent: Instant,
}

/// How long a chat's actor outlives its last message. A daemon that has served thousands of chats keeps only
/// the recent ones in memory; a chat that writes again gets a new actor, and its history is in the store.
const RETIRE_AFTER: Duration = Duration::from_secs(600);
const SWEEP_EVERY: Duration = Duration::from_secs(60);

impl Router {
    pub fn new(rt: Arc<Runtime>) -> Self {
        Self { rt, channels: HashMap::new(), conversations: HashMap::new(), held: HashMap::new() }
    }

    /// Retires the actors of chats quiet for [`RETIRE_AFTER`]: idle since after the last message the router sent
    /// them, so nothing is waiting in their mailbox. Only the router sends to them, so none can arrive later.
    fn retire_quiet_chats(&mut self, quiet_for: Duration) {
        self.conversations.retain(|_, chat| {
            let quiet = chat.idle.get().is_some_and(|since| since >= chat.last_sent && since.elapsed() >= quiet_for);
            if quiet {
                chat.addr.do_send(Retire);
            }
            !quiet
        });
    }

    fn hold(&mut self, channel: &str, message: Held) {
        let held = self.held.entry(channel.to_string()).or_default();
        if held.len() >= MAX_HELD_PER_CHANNEL {
            held.pop_front();
            tracing::warn!(channel = %channel, "channel not running; dropped its oldest held message");
        }
        held.push_back(message);
    }

    fn conversation(&mut self, channel: &str, chat_id: i64) -> Option<Addr<Conversation>> {
        let handle = self.channels.get(channel)?.clone();
        let key = session_id(channel, chat_id);
        let rt = self.rt.clone();
        let chat = self.conversations.entry(key).or_insert_with(|| {
            let idle = Arc::new(IdleSince::default());
            Chat { addr: Conversation::new(rt, handle, idle.clone()).start(), idle, last_sent: Instant::now() }
        });
        chat.last_sent = Instant::now();
        Some(chat.addr.clone())
    }
}

impl Router {
    /// A finished turn whose answer had not reached the user when the process stopped: the answer goes again,
    /// the turn does not run again.
    fn resend_answer(&mut self, event_id: &str, session: &str, answer_json: &str) {
        let parsed = session.rsplit_once(':').and_then(|(channel, chat)| Some((channel, chat.parse::<i64>().ok()?)));
        let answer = serde_json::from_str::<PendingAnswer>(answer_json);
        match (parsed, answer) {
            (Some((channel, chat_id)), Ok(answer)) if self.channels.contains_key(channel) => {
                tracing::info!(event_id, session, "sending an answer a restart interrupted");
                let message = answer.into_outbound(channel, chat_id, event_id);
                if let Some(handle) = self.channels.get(channel) {
                    for part in render::fit(message, &handle.capabilities) {
                        handle.outbound.do_send(part);
                    }
                }
            }
            (Some(_), Ok(_)) => {}
            _ => {
                tracing::error!(event_id, session, "a pending answer is unreadable; dropped");
                let (store, id) = (self.rt.store.clone(), event_id.to_string());
                actix::spawn(async move {
                    let _ = store.clear_pending(&id).await;
                });
            }
        }
    }
}

impl Actor for Router {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(SWEEP_EVERY, |act, _| act.retire_quiet_chats(RETIRE_AFTER));
    }
}

/// Stops every chat's actor before exit, so that turns still running are dropped while the runtime runs.
#[derive(Message)]
#[rtype(result = "()")]
pub struct HaltChats;

impl Handler<HaltChats> for Router {
    type Result = ();

    fn handle(&mut self, _: HaltChats, _: &mut Context<Self>) {
        for (_, chat) in self.conversations.drain() {
            chat.addr.do_send(Halt);
        }
    }
}

/// Retires quiet chats now (tests and benchmarks: a daemon does it every minute).
#[derive(Message)]
#[rtype(result = "usize")]
pub struct RetireQuietChats(pub Duration);

impl Handler<RetireQuietChats> for Router {
    type Result = usize;

    fn handle(&mut self, msg: RetireQuietChats, _: &mut Context<Self>) -> usize {
        self.retire_quiet_chats(msg.0);
        self.conversations.len()
    }
}

/// What channels need: the router for their chats' traffic, the [`IntakeLedger`] for what must reach the disk
/// (and the format repair, a model call), so that neither ever waits in the router's mailbox.
pub fn intake(router: &Addr<Router>, ledger: &Addr<IntakeLedger>) -> Intake {
    Intake {
        inbound: router.clone().recipient(),
        stop: router.clone().recipient(),
        new_session: router.clone().recipient(),
        register: router.clone().recipient(),
        replay: router.clone().recipient(),
        accept: ledger.clone().recipient(),
        last_update: ledger.clone().recipient(),
        repair: ledger.clone().recipient(),
        delivered: ledger.clone().recipient(),
    }
}

/// Where the task coordinator sends what tasks produce.
pub fn task_routes(router: &Addr<Router>) -> TaskRoutes {
    TaskRoutes {
        deliver: router.clone().recipient(),
        files: router.clone().recipient(),
        turn: router.clone().recipient(),
        approval: router.clone().recipient(),
    }
}

impl Handler<RegisterChannel> for Router {
    type Result = ();

    fn handle(&mut self, msg: RegisterChannel, ctx: &mut Context<Self>) {
        let held = self.held.remove(&msg.name).unwrap_or_default();
        self.channels.insert(msg.name, msg.handle);
        for message in held {
            match message {
                Held::Turn(inbound) => self.handle(inbound, ctx),
                Held::Deliver(outbound) => self.handle(Deliver(outbound), ctx),
                Held::File(file) => self.handle(file, ctx),
            }
        }
    }
}

impl Handler<Inbound> for Router {
    type Result = ();

    fn handle(&mut self, inbound: Inbound, _ctx: &mut Context<Self>) {
        match self.conversation(&inbound.channel, inbound.chat_id) {
            Some(conversation) => conversation.do_send(inbound),
            None => {
                tracing::info!(channel = %inbound.channel, "turn for a channel that is not running yet; held");
                let channel = inbound.channel.clone();
                self.hold(&channel, Held::Turn(inbound));
            }
        }
    }
}

impl Handler<Deliver> for Router {
    type Result = ();

    fn handle(&mut self, Deliver(message): Deliver, _ctx: &mut Context<Self>) {
        match self.channels.get(&message.channel) {
            Some(handle) => {
                for part in render::fit(message, &handle.capabilities) {
                    handle.outbound.do_send(part);
                }
            }
            None => {
                tracing::info!(channel = %message.channel, "message for a channel that is not running yet; held");
                let channel = message.channel.clone();
                self.hold(&channel, Held::Deliver(message));
            }
        }
    }
}

/// A task result's file. A channel that cannot take files gets a line naming it instead, so the user still
/// learns where it is.
impl Handler<OutboundFile> for Router {
    type Result = ();

    fn handle(&mut self, file: OutboundFile, ctx: &mut Context<Self>) {
        match self.channels.get(&file.channel) {
            Some(ChannelHandle { files: Some(files), .. }) => files.do_send(file),
            Some(_) => {
                let text = format!("File: {}", file.describe());
                let note = Outbound::text(&file.channel, file.chat_id, text, OutboundRole::TaskResult);
                self.handle(Deliver(note), ctx);
            }
            None => {
                tracing::info!(channel = %file.channel, "file for a channel that is not running yet; held");
                let channel = file.channel.clone();
                self.hold(&channel, Held::File(file));
            }
        }
    }
}

impl Handler<StopTurn> for Router {
    type Result = ();

    fn handle(&mut self, stop: StopTurn, _ctx: &mut Context<Self>) {
        let key = session_id(&stop.channel, stop.chat_id);
        if let Some(chat) = self.conversations.get(&key) {
            chat.addr.do_send(stop);
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

impl Handler<NewSession> for Router {
    type Result = ();

    fn handle(&mut self, msg: NewSession, _ctx: &mut Context<Self>) {
        if let Some(conversation) = self.conversation(&msg.channel, msg.chat_id) {
            conversation.do_send(msg);
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
                if let Some(answer) = &turn.answer_json {
                    act.resend_answer(&turn.event_id, &turn.session_id, answer);
                    continue;
                }
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

impl Handler<FindApprovals> for Router {
    type Result = MessageResult<FindApprovals>;

    /// A worker's question goes to the chat's channel; a channel that is not running or cannot ask means no.
    fn handle(&mut self, msg: FindApprovals, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(match self.channels.get(&msg.channel) {
            None => Err(format!("the {} channel is not running", msg.channel)),
            Some(handle) => {
                handle.approvals.clone().ok_or_else(|| format!("the {} channel cannot ask for approval", msg.channel))
            }
        })
    }
}
