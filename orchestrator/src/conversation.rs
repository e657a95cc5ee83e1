//! One actor per chat. It runs the chat's turns one at a time, steers messages that arrive during a turn into
//! it, and cancels the turn on `/stop`. Different chats are different actors, so they never wait for each other.
//!
//! The actor alone keeps the steered messages of the running turn (`Running::steered`); the turn receives
//! them over a channel and reports back, by id, which ones it read. Those it did not read become the next turns.
//!
//! `/new` ([`NewSession`]) waits its turn like a message: the turns accepted before it finish in the old
//! conversation, and messages sent after it are neither steered into them nor answered from the old history.

use crate::messages::{
    ChannelHandle, Inbound, NOTHING_RUNNING_REPLY, NewSession, Outbound, OutboundRole, STOPPED_HISTORY_NOTE,
    STOPPED_REPLY, StopTurn, session_id,
};
use crate::render;
use crate::runtime::Runtime;
use crate::turn::{TurnReport, run_turn};
use actix::prelude::*;
use minibot_agent::Steer;
use minibot_store::Role;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

struct Running {
    inbound: Inbound,
    inbox: UnboundedSender<Steer>,
    /// Messages steered into the turn, in arrival order.
    steered: Vec<Inbound>,
    handle: SpawnHandle,
}

/// What waits for the running turn.
enum Queued {
    Turn(Inbound),
    NewSession(NewSession),
}

pub struct Conversation {
    rt: Arc<Runtime>,
    channel: ChannelHandle,
    running: Option<Running>,
    queue: VecDeque<Queued>,
}

impl Conversation {
    pub fn new(rt: Arc<Runtime>, channel: ChannelHandle) -> Self {
        Self { rt, channel, running: None, queue: VecDeque::new() }
    }

    fn accept(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        let after_new_session = self.queue.iter().any(|q| matches!(q, Queued::NewSession(_)));
        match &mut self.running {
            Some(_) if !inbound.is_steerable() || after_new_session => self.queue.push_back(Queued::Turn(inbound)),
            Some(running) => {
                let steer = Steer { id: inbound.event_id.clone(), text: inbound.text.clone() };
                if running.inbox.send(steer).is_ok() {
                    running.steered.push(inbound);
                } else {
                    // The turn is finishing; the message becomes the next turn instead.
                    self.queue.push_back(Queued::Turn(inbound));
                }
            }
            None => self.start(inbound, ctx),
        }
    }

    fn start(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        if self.rt.is_draining() {
            // Shutting down: the message stays pending and is answered after the next start.
            tracing::info!(event_id = %inbound.event_id, "shutting down; turn left for the next start");
            return;
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let future = run_turn(self.rt.clone(), inbound.clone(), rx, self.channel.clone());
        let handle = ctx.spawn(future.into_actor(self).map(|report, act, ctx| act.finished(report, ctx)));
        self.running = Some(Running { inbound, inbox: tx, steered: Vec::new(), handle });
    }

    fn finished(&mut self, report: TurnReport, ctx: &mut Context<Self>) {
        let mut reply = report.reply;
        if let Some(running) = self.running.take() {
            match report.read {
                Some(read) => {
                    let unread = running.steered.into_iter().filter(|s| !read.contains(&s.event_id));
                    for inbound in unread.rev() {
                        self.queue.push_front(Queued::Turn(inbound));
                    }
                }
                None => self.answered_by_failure(running.steered, &mut reply),
            }
        }
        self.send(reply);
        self.next(ctx);
    }

    /// A failed turn's error reply answers the messages steered into it too: they leave the pending list.
    fn answered_by_failure(&self, steered: Vec<Inbound>, reply: &mut Outbound) {
        if steered.is_empty() {
            return;
        }
        let ids: Vec<String> = steered.into_iter().map(|s| s.event_id).collect();
        reply.answers.extend(ids.iter().cloned());
        let store = self.rt.store.clone();
        actix::spawn(async move {
            for id in ids {
                if let Err(error) = store.clear_pending(&id).await {
                    tracing::error!(error = %error, "cannot clear pending turn");
                }
            }
        });
    }

    /// Whether the message is running, steered into the running turn or queued (a replay can meet it again).
    fn has(&self, event_id: &str) -> bool {
        let running = self
            .running
            .as_ref()
            .is_some_and(|r| r.inbound.event_id == event_id || r.steered.iter().any(|s| s.event_id == event_id));
        running || self.queue.iter().any(|q| matches!(q, Queued::Turn(queued) if queued.event_id == event_id))
    }

    fn next(&mut self, ctx: &mut Context<Self>) {
        if self.running.is_some() {
            return;
        }
        match self.queue.pop_front() {
            Some(Queued::Turn(inbound)) => self.start(inbound, ctx),
            Some(Queued::NewSession(new)) => self.new_session(new, ctx),
            None => {}
        }
    }

    /// Moves the chat's history aside (it stays in the database) and tells the chat; the mailbox waits, so the
    /// next message already reads the empty history.
    fn new_session(&mut self, new: NewSession, ctx: &mut Context<Self>) {
        let store = self.rt.store.clone();
        let session = session_id(&new.channel, new.chat_id);
        let archive = async move { store.archive_session(&session).await };
        ctx.wait(archive.into_actor(self).map(move |archived, act, ctx| {
            let text = match archived {
                Ok((_, 0)) => "New conversation started.".to_string(),
                Ok((archive, moved)) => format!(
                    "New conversation started. The previous one ({moved} messages) is kept in the history database \
                     as session {archive}."
                ),
                Err(error) => {
                    tracing::error!(error = %error, "cannot start a new conversation");
                    format!("Could not start a new conversation: the history store failed ({error}).")
                }
            };
            let mut note = Outbound::text(&new.channel, new.chat_id, text, OutboundRole::Progress);
            note.answers = vec![new.event_id];
            act.send(note);
            act.next(ctx);
        }));
    }

    fn send(&self, message: Outbound) {
        for part in render::fit(message, &self.channel.capabilities) {
            self.channel.outbound.do_send(part);
        }
    }

    fn reply(&self, inbound_channel: &str, chat_id: i64, text: &str, answers: Vec<String>) {
        let mut reply = Outbound::text(inbound_channel, chat_id, text, OutboundRole::Answer);
        reply.answers = answers;
        self.send(reply);
    }
}

impl Actor for Conversation {
    type Context = Context<Self>;
}

impl Handler<Inbound> for Conversation {
    type Result = ();

    fn handle(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        if self.has(&inbound.event_id) {
            tracing::debug!(event_id = %inbound.event_id, "message already taken; ignored");
            return;
        }
        if inbound.recorded {
            return self.accept(inbound, ctx);
        }
        // The pending row is written before the turn can start, so a crash from here on loses nothing.
        let store = self.rt.store.clone();
        let (event_id, session) = (inbound.event_id.clone(), inbound.session_id());
        let json = serde_json::to_string(&inbound).unwrap_or_default();
        let write = async move { store.mark_pending(&event_id, &session, &json).await };
        ctx.wait(write.into_actor(self).map(move |result, act, ctx| {
            if let Err(error) = result {
                tracing::error!(error = %error, "cannot record the pending turn; running it anyway");
            }
            act.accept(inbound, ctx);
        }));
    }
}

impl Handler<NewSession> for Conversation {
    type Result = ();

    fn handle(&mut self, new: NewSession, ctx: &mut Context<Self>) {
        self.queue.push_back(Queued::NewSession(new));
        self.next(ctx);
    }
}

impl Handler<StopTurn> for Conversation {
    type Result = ();

    fn handle(&mut self, stop: StopTurn, ctx: &mut Context<Self>) {
        let Some(running) = self.running.take() else {
            self.reply(&stop.channel, stop.chat_id, NOTHING_RUNNING_REPLY, Vec::new());
            return;
        };
        ctx.cancel_future(running.handle);
        let store = self.rt.store.clone();
        let (inbound, steered) = (running.inbound, running.steered);
        let session = inbound.session_id();
        let mut ids = vec![inbound.event_id.clone()];
        ids.extend(steered.iter().map(|s| s.event_id.clone()));
        let answers = ids.clone();
        // Counted as a running turn, so shutting down waits for the stopped turn to be stored.
        let saving = self.rt.turn_started();
        let save = async move {
            let _saving = saving;
            let mut entries: Vec<(Role, &str)> = vec![(Role::User, inbound.text.as_str())];
            entries.extend(steered.iter().map(|s| (Role::User, s.text.as_str())));
            entries.push((Role::Assistant, STOPPED_HISTORY_NOTE));
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            if let Err(error) = store.finish_turn(&session, &entries, &ids).await {
                tracing::error!(error = %error, "cannot store the stopped turn");
            }
        };
        ctx.wait(save.into_actor(self).map(move |(), act, ctx| {
            tracing::info!(channel = %stop.channel, chat_id = stop.chat_id, "turn stopped by the user");
            act.reply(&stop.channel, stop.chat_id, STOPPED_REPLY, answers);
            act.next(ctx);
        }));
    }
}
