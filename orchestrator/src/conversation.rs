//! One actor per chat. It runs the chat's turns one at a time, steers messages that arrive during a turn into
//! it, and cancels the turn on `/stop`. Different chats are different actors, so they never wait for each other.
//!
//! The actor alone keeps the steered messages of the running turn (`Running::steered`); the turn receives
//! them over a channel and reports back, by id, which ones it read. Those it did not read become the next turns.
//!
//! `/new` ([`NewSession`]) waits its turn like a message: the turns accepted before it finish in the old
//! conversation, and messages sent after it are neither steered into them nor answered from the old history.
//!
//! A message's pending row is written by the chat's [`recorder`](Conversation::recorder), a task of its own, and
//! the message is accepted when the row is in. The actor never waits on that write: the running turn may hold the
//! store's write transaction at that moment, and an actor that waits stops polling its turn, which then never
//! commits (the write would wait out the busy timeout, fail, and stall every chat behind the lock).

use crate::channels::shown::ShownText;
use crate::messages::{
    ChannelHandle, Inbound, NOTHING_RUNNING_REPLY, NewSession, Outbound, OutboundRole, STOPPED_REPLY, StopTurn,
    session_id,
};
use crate::render;
use crate::runtime::Runtime;
use crate::turn::{TurnReport, run_turn};
use actix::prelude::*;
use minibot_agent::Steer;
use minibot_store::Role;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

struct Running {
    inbound: Inbound,
    inbox: UnboundedSender<Steer>,
    /// Messages steered into the turn, in arrival order.
    steered: Vec<Inbound>,
    handle: SpawnHandle,
    /// What the turn has streamed to the chat, for the history of a stopped turn.
    shown: ShownText,
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
    /// The chat was told that its last compaction failed: it is told again only after one succeeds.
    compaction_error_told: bool,
    /// Since when nothing runs or waits, for the router to retire the actor of a quiet chat.
    idle: Arc<IdleSince>,
    /// Writes pending rows in arrival order and hands each arrival back as [`Recorded`]; started with the actor.
    recorder: Option<UnboundedSender<Arrival>>,
    /// Event ids handed to the recorder and not back yet, so a replay of one is not taken twice.
    recording: HashSet<String>,
}

/// What goes through the recorder, in the order it arrived: a `/new` sent after a message must not overtake it.
enum Arrival {
    Message(Inbound),
    NewSession(NewSession),
}

/// An arrival whose pending row (if it needed one) is written.
#[derive(Message)]
#[rtype(result = "()")]
struct Recorded(Arrival);

/// When a conversation became idle (nothing running, nothing queued); `None` while it works.
#[derive(Debug, Default)]
pub struct IdleSince(std::sync::Mutex<Option<std::time::Instant>>);

impl IdleSince {
    pub fn get(&self) -> Option<std::time::Instant> {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set(&self, since: Option<std::time::Instant>) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = since;
    }
}

/// The router retires a quiet chat's actor; the chat's next message starts a new one.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Retire;

impl Handler<Retire> for Conversation {
    type Result = ();

    fn handle(&mut self, _: Retire, ctx: &mut Context<Self>) {
        // The router only retires an idle actor, and sends it nothing afterwards.
        if self.running.is_none() && self.queue.is_empty() && self.recording.is_empty() {
            ctx.stop();
        }
    }
}

/// Stops the actor whatever it is doing (exit, after the grace for running turns): a turn still running is
/// dropped here, while the runtime that must take back its database connection still runs, and stays pending
/// for the next start.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Halt;

impl Handler<Halt> for Conversation {
    type Result = ();

    fn handle(&mut self, _: Halt, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Conversation {
    pub fn new(rt: Arc<Runtime>, channel: ChannelHandle, idle: Arc<IdleSince>) -> Self {
        Self {
            rt,
            channel,
            running: None,
            queue: VecDeque::new(),
            compaction_error_told: false,
            idle,
            recorder: None,
            recording: HashSet::new(),
        }
    }

    /// Hands an arrival to the recorder; gives it back when there is none (the actor is stopping).
    fn record_or_back(&mut self, arrival: Arrival) -> Option<Arrival> {
        let id = match &arrival {
            Arrival::Message(inbound) => Some(inbound.event_id.clone()),
            Arrival::NewSession(_) => None,
        };
        let Some(recorder) = &self.recorder else { return Some(arrival) };
        if let Err(refused) = recorder.send(arrival) {
            return Some(refused.0);
        }
        self.idle.set(None);
        if let Some(id) = id {
            self.recording.insert(id);
        }
        None
    }

    fn accept(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        self.idle.set(None);
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
        let shown = ShownText::default();
        let future = run_turn(self.rt.clone(), inbound.clone(), rx, self.channel.clone(), shown.clone());
        let handle = ctx.spawn(future.into_actor(self).map(|report, act, ctx| act.finished(report, ctx)));
        self.running = Some(Running { inbound, inbox: tx, steered: Vec::new(), handle, shown });
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
        match report.compaction {
            Some(job) => self.compact(job, ctx),
            None => self.next(ctx),
        }
    }

    /// Summarises the chat's history after the reply went out; the chat's next turn waits for it.
    fn compact(&mut self, job: crate::compaction::Job, ctx: &mut Context<Self>) {
        let notify = self.rt.config.memory.notify_compaction_updates;
        // After a failure the chat was told; the next attempts run quietly until one succeeds (a "running"
        // notice with no outcome after it would only puzzle).
        if let Some(notice) = job.running_notice(notify).filter(|_| !self.compaction_error_told) {
            self.send(notice);
        }
        let rt = self.rt.clone();
        // Counted as a running turn, so shutting down waits for the summary to be stored.
        let active = self.rt.turn_started();
        let work = async move {
            let _active = active;
            let done = job.run(&rt).await;
            (job, done)
        };
        ctx.wait(work.into_actor(self).map(move |(job, done), act, ctx| {
            let failed = matches!(done, crate::compaction::Done::Failed(_));
            for notice in job.done_notices(&done, notify, act.compaction_error_told) {
                act.send(notice);
            }
            act.compaction_error_told = failed;
            act.next(ctx);
        }));
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
            None if self.recording.is_empty() => self.idle.set(Some(std::time::Instant::now())),
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

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (tx, mut arrivals) = unbounded_channel::<Arrival>();
        let store = self.rt.store.clone();
        let me = ctx.address();
        // Ends when the actor is gone: its sender is dropped with it.
        actix::spawn(async move {
            while let Some(arrival) = arrivals.recv().await {
                if let Arrival::Message(inbound) = &arrival
                    && !inbound.recorded
                {
                    // The pending row is written before the turn can start, so a crash from here on loses nothing.
                    let json = serde_json::to_string(inbound).unwrap_or_default();
                    let written = store.mark_pending(&inbound.event_id, &inbound.session_id(), &json).await;
                    if let Err(error) = written {
                        tracing::error!(error = %error, "cannot record the pending turn; running it anyway");
                    }
                }
                if !me.connected() {
                    break;
                }
                me.do_send(Recorded(arrival));
            }
        });
        self.recorder = Some(tx);
    }
}

impl Handler<Recorded> for Conversation {
    type Result = ();

    fn handle(&mut self, Recorded(arrival): Recorded, ctx: &mut Context<Self>) {
        match arrival {
            Arrival::Message(inbound) => {
                self.recording.remove(&inbound.event_id);
                if self.has(&inbound.event_id) {
                    tracing::debug!(event_id = %inbound.event_id, "message already taken; ignored");
                    return;
                }
                self.accept(inbound, ctx);
            }
            Arrival::NewSession(new) => {
                self.queue.push_back(Queued::NewSession(new));
                self.next(ctx);
            }
        }
    }
}

impl Handler<Inbound> for Conversation {
    type Result = ();

    fn handle(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        if self.has(&inbound.event_id) || self.recording.contains(&inbound.event_id) {
            tracing::debug!(event_id = %inbound.event_id, "message already taken; ignored");
            return;
        }
        // A recorded message (a replay) skips the write, but not the line: it must not overtake one being written.
        if inbound.recorded && self.recording.is_empty() {
            return self.accept(inbound, ctx);
        }
        if let Some(Arrival::Message(inbound)) = self.record_or_back(Arrival::Message(inbound)) {
            tracing::error!(event_id = %inbound.event_id, "the chat's recorder is gone; running the turn unrecorded");
            self.accept(inbound, ctx);
        }
    }
}

impl Handler<NewSession> for Conversation {
    type Result = ();

    fn handle(&mut self, new: NewSession, ctx: &mut Context<Self>) {
        let new = if self.recording.is_empty() {
            new
        } else {
            match self.record_or_back(Arrival::NewSession(new)) {
                None | Some(Arrival::Message(_)) => return,
                Some(Arrival::NewSession(new)) => new,
            }
        };
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
        let stopped_note = running.shown.stopped_note();
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
            entries.push((Role::Assistant, stopped_note.as_str()));
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
