//! The Telegram channel actor: what the router and the turns send to Telegram goes through here ([`super::start`]
//! starts it). Each chat has
//! its own ordered send queue (a task that ends when the chat is idle), so chats never wait for each other and a
//! chat's messages arrive in order. The typing indicator runs while a turn works; a background task's progress
//! is one message, edited at most every few seconds, and its result replies to it. A turn's answer shows as a
//! live draft while the model writes it ([`super::draft`]), and the answer replaces the draft.

use super::access;
use super::api::BotApi;
use super::approvals::{self, Question, Questions};
use super::draft::{self, DRAFT_EVERY, DraftMessage, DraftUpdate, LiveDraft};
use super::outbound::{Markup, Sender};
use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::{AnswerCallbackQueryParams, EditMessageReplyMarkupParams, SendChatActionParams};
use frankenstein::types::ChatAction;
use minibot_agent::AgentEvent;
use minibot_channel::approval_wait;
use minibot_channel::messages::{
    ApprovalDecision, AskApproval, Delivered, Outbound, OutboundFile, OutboundRole, Progress, STOPPED_REPLY,
};
use minibot_channel::shown::CUT_MARK;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// A task's progress message is edited at most this often.
const PROGRESS_EDIT_EVERY: Duration = Duration::from_secs(3);
/// Telegram shows "typing…" for about 5 s per call.
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// A turn that never answers does not type forever.
const TYPING_AT_MOST: Duration = Duration::from_secs(600);
/// A chat's send queue ends after this long without messages (and starts again with the next one).
const CHAT_IDLE: Duration = Duration::from_secs(60);
/// Progress messages remembered at most (their tasks' results reply to them).
const MAX_PROGRESS_MESSAGES: usize = 2000;

/// Something to send, in a chat's order.
enum Job {
    /// An answer, and the live draft its first message replaces.
    Answer(Outbound, Option<DraftMessage>),
    Progress(Outbound),
    File(OutboundFile),
    Draft(DraftUpdate),
}

/// Task id → (chat, message id) of its progress message.
#[derive(Clone, Default)]
struct ProgressMessages(Arc<Mutex<HashMap<String, i32>>>);

impl ProgressMessages {
    fn get(&self, task_id: &str) -> Option<i32> {
        self.0.lock().ok()?.get(task_id).copied()
    }
    fn set(&self, task_id: &str, message_id: i32) {
        if let Ok(mut map) = self.0.lock() {
            if map.len() >= MAX_PROGRESS_MESSAGES {
                map.clear();
            }
            map.insert(task_id.to_string(), message_id);
        }
    }
    fn remove(&self, task_id: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(task_id);
        }
    }
}

/// The latest progress of a task waiting for its edit slot.
struct Throttle {
    last: Instant,
    pending: Option<Outbound>,
}

/// A click on an inline button.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ButtonClick {
    pub query_id: String,
    pub user_id: i64,
    pub chat_id: Option<i64>,
    pub message_id: Option<i32>,
    pub data: String,
    /// The clicker passes the channel's access rules.
    pub authorized: bool,
}

/// Waits until every queued message is sent, at most the given time; answers whether all were.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Flush(pub Duration);

pub struct Telegram {
    sender: Sender,
    /// Where answers that reached the user are reported, so their turns stop being pending.
    delivered: Recipient<Delivered>,
    chats: HashMap<i64, mpsc::UnboundedSender<Job>>,
    /// Jobs queued or being sent.
    in_flight: Arc<AtomicUsize>,
    typing: HashMap<i64, (SpawnHandle, Instant)>,
    progress: ProgressMessages,
    throttle: HashMap<String, Throttle>,
    questions: Questions,
    /// The live draft of each chat whose turn is streaming its text.
    drafts: HashMap<i64, LiveDraft>,
}

impl Telegram {
    pub fn new(sender: Sender, delivered: Recipient<Delivered>) -> Self {
        Self {
            sender,
            delivered,
            chats: HashMap::new(),
            in_flight: Arc::default(),
            typing: HashMap::new(),
            progress: ProgressMessages::default(),
            throttle: HashMap::new(),
            questions: Questions::default(),
            drafts: HashMap::new(),
        }
    }

    fn enqueue(&mut self, chat_id: i64, job: Job) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let job = match self.chats.get(&chat_id) {
            Some(queue) => match queue.send(job) {
                Ok(()) => return,
                // The queue ended (idle); a new one takes the job.
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        let (queue, jobs) = mpsc::unbounded_channel();
        let _ = queue.send(job);
        // Queues of chats gone quiet have ended: their entries go, so a bot that meets many chats over months
        // keeps only the active ones.
        self.chats.retain(|_, queue| !queue.is_closed());
        self.chats.insert(chat_id, queue);
        let queue = ChatQueue {
            sender: self.sender.clone(),
            progress: self.progress.clone(),
            delivered: self.delivered.clone(),
        };
        actix::spawn(chat_queue(jobs, queue, self.in_flight.clone()));
    }

    fn start_typing(&mut self, chat_id: i64, ctx: &mut Context<Self>) {
        if self.typing.contains_key(&chat_id) {
            return;
        }
        let api = self.sender.api.clone();
        let send = move || {
            let api = api.clone();
            actix::spawn(async move {
                let params = SendChatActionParams::builder().chat_id(chat_id).action(ChatAction::Typing).build();
                if let Err(error) = api.send_chat_action(&params).await {
                    tracing::debug!(chat_id, error = %error, "typing indicator not shown");
                }
            });
        };
        send();
        let handle = ctx.run_interval(TYPING_EVERY, move |act, ctx| {
            let expired = act.typing.get(&chat_id).is_some_and(|(_, since)| since.elapsed() > TYPING_AT_MOST);
            if expired {
                act.stop_typing(chat_id, ctx);
            } else {
                send();
            }
        });
        self.typing.insert(chat_id, (handle, Instant::now()));
    }

    fn stop_typing(&mut self, chat_id: i64, ctx: &mut Context<Self>) {
        if let Some((handle, _)) = self.typing.remove(&chat_id) {
            ctx.cancel_future(handle);
        }
    }

    /// A task's progress: sent now if its message was not edited lately, else the latest waits for its slot.
    fn task_progress(&mut self, message: Outbound, task_id: String, ctx: &mut Context<Self>) {
        let now = Instant::now();
        match self.throttle.get_mut(&task_id) {
            Some(throttle) if now.duration_since(throttle.last) < PROGRESS_EDIT_EVERY => {
                let first_waiting = throttle.pending.replace(message).is_none();
                if first_waiting {
                    let wait = PROGRESS_EDIT_EVERY - now.duration_since(throttle.last);
                    ctx.run_later(wait, move |act, _ctx| act.release_progress(&task_id));
                }
            }
            _ => {
                self.throttle.insert(task_id, Throttle { last: now, pending: None });
                self.enqueue(message.chat_id, Job::Progress(message));
            }
        }
    }

    /// A piece of the text the model is writing. The first starts the draft's timer: nothing is shown before
    /// its first tick, so an answer that comes sooner gets no draft.
    fn draft_piece(&mut self, chat_id: i64, reply_to: Option<i64>, piece: &str, ctx: &mut Context<Self>) {
        let live = self.drafts.entry(chat_id).or_insert_with(|| {
            let ticker = ctx.run_interval(DRAFT_EVERY, move |act, _ctx| act.draft_tick(chat_id));
            LiveDraft::new(reply_to, ticker)
        });
        live.text.push_str(piece);
    }

    fn draft_tick(&mut self, chat_id: i64) {
        if let Some(update) = self.drafts.get(&chat_id).and_then(|live| live.due(chat_id)) {
            self.enqueue(chat_id, Job::Draft(update));
        }
    }

    /// The chat's streamed text ends: a draft that was shown gets the whole text and `suffix`. With
    /// `even_unshown`, one not shown yet is sent too.
    fn end_draft(&mut self, chat_id: i64, suffix: &str, even_unshown: bool, ctx: &mut Context<Self>) {
        let Some(live) = self.drafts.remove(&chat_id) else { return };
        ctx.cancel_future(live.ticker);
        if let Some(update) = live.complete(chat_id, suffix, even_unshown) {
            self.enqueue(chat_id, Job::Draft(update));
        }
    }

    /// The turn's answer came: the draft it replaces, if one is shown. A stopped turn's draft keeps its text
    /// and is marked as cut; a failed turn's keeps its text, and the error comes as a message of its own.
    fn answer_draft(&mut self, message: &Outbound, ctx: &mut Context<Self>) -> Option<DraftMessage> {
        let live = self.drafts.get(&message.chat_id)?;
        let stopped = message.text == STOPPED_REPLY && message.text.trim() != live.text.trim();
        if message.is_error || stopped {
            // What the user saw stays; the history stores the same text with the mark.
            let cut = stopped && !live.text.trim().is_empty();
            self.end_draft(message.chat_id, if cut { CUT_MARK } else { "" }, cut, ctx);
            return None;
        }
        let live = self.drafts.remove(&message.chat_id)?;
        ctx.cancel_future(live.ticker);
        live.message.started().then_some(live.message)
    }

    fn release_progress(&mut self, task_id: &str) {
        if let Some(throttle) = self.throttle.get_mut(task_id)
            && let Some(message) = throttle.pending.take()
        {
            throttle.last = Instant::now();
            self.enqueue(message.chat_id, Job::Progress(message));
        }
    }
}

impl Actor for Telegram {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Queues of idle chats end by themselves; forget them so a bot with many chats stays small.
        ctx.run_interval(CHAT_IDLE, |act, _ctx| act.chats.retain(|_, queue| !queue.is_closed()));
    }
}

impl Supervised for Telegram {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        tracing::warn!("the Telegram channel actor stopped; restarting it");
        self.typing.clear();
        self.drafts.clear();
    }
}

/// What a chat's send queue works with.
struct ChatQueue {
    sender: Sender,
    progress: ProgressMessages,
    delivered: Recipient<Delivered>,
}

/// A chat's send queue: one job at a time, in order; ends after [`CHAT_IDLE`] without jobs.
async fn chat_queue(mut jobs: mpsc::UnboundedReceiver<Job>, queue: ChatQueue, in_flight: Arc<AtomicUsize>) {
    loop {
        let job = match tokio::time::timeout(CHAT_IDLE, jobs.recv()).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_idle) => {
                // Closed first, so a job sent from now on goes to a new queue; those already sent still run.
                jobs.close();
                while let Ok(job) = jobs.try_recv() {
                    run_job(&queue, job).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                return;
            }
        };
        run_job(&queue, job).await;
        in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn run_job(queue: &ChatQueue, job: Job) {
    let (sender, progress) = (&queue.sender, &queue.progress);
    match job {
        Job::Answer(message, draft) => {
            let task_message = message.task_id.as_deref().and_then(|task| progress.get(task));
            let reply_to = message.reply_to.and_then(|id| i32::try_from(id).ok()).or(task_message);
            sender.send_into(&message, reply_to, draft.and_then(|d| d.message_id())).await;
            // Sent, or refused for good (each part was tried until Telegram answered): not pending any more.
            if !message.answers.is_empty() {
                queue.delivered.do_send(Delivered { event_ids: message.answers.clone() });
            }
            if let Some(task) = &message.task_id
                && message.role != OutboundRole::Progress
            {
                progress.remove(task);
            }
        }
        Job::Progress(message) => {
            let Some(task) = message.task_id.clone() else { return };
            let result = match progress.get(&task) {
                Some(message_id) => sender.edit_text(message.chat_id, message_id, &message.text).await,
                None => match sender.send_text(message.chat_id, &message.text, Markup::Plain, None, None).await {
                    Ok(message_id) => {
                        progress.set(&task, message_id);
                        Ok(())
                    }
                    Err(error) => Err(error),
                },
            };
            if let Err(error) = result {
                tracing::warn!(task_id = %task, error = %error, "task progress not shown on Telegram");
            }
        }
        Job::Draft(update) => draft::show(sender, update).await,
        Job::File(file) => {
            let reply_to = file.task_id.as_deref().and_then(|task| progress.get(task));
            if let Err(error) = sender.send_file(&file, reply_to).await {
                tracing::error!(chat_id = file.chat_id, path = %file.path.display(), error = %error, "file not sent");
                let note = format!("I could not send the file {}: {error}", file.describe());
                let _ = sender.send_text(file.chat_id, &note, Markup::Plain, None, None).await;
            }
        }
    }
}

impl Handler<Outbound> for Telegram {
    type Result = ();

    fn handle(&mut self, message: Outbound, ctx: &mut Context<Self>) {
        match (message.role, message.task_id.clone()) {
            (OutboundRole::Progress, Some(task_id)) => return self.task_progress(message, task_id, ctx),
            (_, Some(task_id)) => {
                self.throttle.remove(&task_id);
            }
            _ => {}
        }
        // The last part of a turn's answer names the messages it answers: the turn is over.
        let mut draft = None;
        if message.role == OutboundRole::Answer && !message.answers.is_empty() {
            self.stop_typing(message.chat_id, ctx);
            draft = self.answer_draft(&message, ctx);
        }
        self.enqueue(message.chat_id, Job::Answer(message, draft));
    }
}

impl Handler<OutboundFile> for Telegram {
    type Result = ();

    fn handle(&mut self, file: OutboundFile, _ctx: &mut Context<Self>) {
        self.enqueue(file.chat_id, Job::File(file));
    }
}

impl Handler<Progress> for Telegram {
    type Result = ();

    fn handle(&mut self, progress: Progress, ctx: &mut Context<Self>) {
        self.start_typing(progress.chat_id, ctx);
        match &progress.event {
            AgentEvent::AnswerText { text, .. } => self.draft_piece(progress.chat_id, progress.reply_to, text, ctx),
            // The text before a tool call (or the next step) is complete, and not the answer: its draft stays. The
            // calls a script makes are not followed here.
            AgentEvent::StepStarted { .. } | AgentEvent::ToolStarted { parent_call_id: None, .. } => {
                self.end_draft(progress.chat_id, "", false, ctx);
            }
            _ => {}
        }
    }
}

impl Handler<Flush> for Telegram {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, Flush(limit): Flush, _ctx: &mut Context<Self>) -> Self::Result {
        let in_flight = self.in_flight.clone();
        Box::pin(async move {
            let deadline = Instant::now() + limit;
            while in_flight.load(Ordering::SeqCst) > 0 {
                if Instant::now() >= deadline {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            true
        })
    }
}

/// The actor's reply to [`AskApproval`]: waits for the click, and withdraws the question when the asker stops
/// waiting (approval timeout, stopped turn).
pub struct PendingQuestion {
    answer: oneshot::Receiver<ApprovalDecision>,
    questions: Questions,
    approval_id: String,
    sender: Sender,
}

impl MessageResponse<Telegram, AskApproval> for PendingQuestion {
    fn handle(self, _ctx: &mut Context<Telegram>, tx: Option<OneshotSender<ApprovalDecision>>) {
        let PendingQuestion { answer, questions, approval_id, sender } = self;
        let withdraw = async move { withdraw(&questions, &approval_id, &sender).await };
        approval_wait::answer_or_withdraw(answer, tx, "Telegram channel", withdraw);
    }
}

/// Nobody waits for the answer any more: the buttons go and the chat is told the call was denied.
async fn withdraw(questions: &Questions, approval_id: &str, sender: &Sender) {
    let Some(question) = questions.take(approval_id) else { return };
    if let Some(message_id) = question.message_id {
        remove_buttons(&sender.api, question.chat_id, message_id).await;
    }
    if let Err(error) =
        sender.send_text(question.chat_id, approvals::TIMED_OUT_REPLY, Markup::Plain, question.message_id, None).await
    {
        tracing::warn!(error = %error, "cannot tell the chat its approval question expired");
    }
}

async fn remove_buttons(api: &BotApi, chat_id: i64, message_id: i32) {
    let params = EditMessageReplyMarkupParams::builder().chat_id(chat_id).message_id(message_id).build();
    if let Err(error) = api.edit_message_reply_markup(&params).await
        && !error.is_not_modified()
    {
        tracing::debug!(error = %error, "approval buttons not removed");
    }
}

impl Handler<AskApproval> for Telegram {
    type Result = PendingQuestion;

    fn handle(&mut self, ask: AskApproval, _ctx: &mut Context<Self>) -> PendingQuestion {
        let approval_id = ask.request.approval_id.clone();
        let (answer_tx, answer) = oneshot::channel();
        let question = Question { chat_id: ask.chat_id, requester: ask.requester, message_id: None, answer: answer_tx };
        self.questions.insert(approval_id.clone(), question);
        let (sender, questions, id) = (self.sender.clone(), self.questions.clone(), approval_id.clone());
        actix::spawn(async move {
            let text = approvals::question_html(&ask.request);
            match sender.send_text(ask.chat_id, &text, Markup::Html, None, Some(approvals::buttons(&id))).await {
                Ok(message_id) => questions.set_message(&id, message_id),
                Err(error) => {
                    if let Some(question) = questions.take(&id) {
                        let why = format!("the question could not be shown on Telegram: {error}");
                        let _ = question.answer.send(ApprovalDecision::Unavailable(why));
                    }
                }
            }
        });
        PendingQuestion { answer, questions: self.questions.clone(), approval_id, sender: self.sender.clone() }
    }
}

impl Handler<ButtonClick> for Telegram {
    type Result = ();

    fn handle(&mut self, click: ButtonClick, _ctx: &mut Context<Self>) {
        let (sender, questions) = (self.sender.clone(), self.questions.clone());
        actix::spawn(async move { answer_click(&sender, &questions, click).await });
    }
}

async fn answer_click(sender: &Sender, questions: &Questions, click: ButtonClick) {
    let notice = |text: Option<String>| {
        let params =
            AnswerCallbackQueryParams::builder().callback_query_id(click.query_id.clone()).maybe_text(text).build();
        async move {
            if let Err(error) = sender.api.answer_callback_query(&params).await {
                tracing::debug!(error = %error, "button click not acknowledged");
            }
        }
    };
    let Some(choice) = approvals::parse_choice(&click.data) else {
        return notice(None).await;
    };
    if !click.authorized {
        return notice(Some(access::rejection(click.chat_id.unwrap_or_default(), Some(click.user_id)))).await;
    }
    match questions.requester(&choice.approval_id) {
        None => {
            notice(Some(approvals::EXPIRED_NOTICE.into())).await;
            if let (Some(chat_id), Some(message_id)) = (click.chat_id, click.message_id) {
                remove_buttons(&sender.api, chat_id, message_id).await;
            }
            return;
        }
        Some(Some(requester)) if requester != click.user_id => {
            return notice(Some(approvals::NOT_REQUESTER_NOTICE.into())).await;
        }
        Some(_) => {}
    }
    let Some(question) = questions.take(&choice.approval_id) else {
        return notice(Some(approvals::EXPIRED_NOTICE.into())).await;
    };
    let (decision, reply) = if choice.approved {
        (ApprovalDecision::Approved, approvals::APPROVED_REPLY)
    } else {
        (ApprovalDecision::Denied, approvals::DENIED_REPLY)
    };
    let _ = question.answer.send(decision);
    notice(Some(reply.into())).await;
    if let Some(message_id) = question.message_id.or(click.message_id) {
        remove_buttons(&sender.api, question.chat_id, message_id).await;
    }
    let reply_to = question.message_id.or(click.message_id);
    if let Err(error) = sender.send_text(question.chat_id, reply, Markup::Plain, reply_to, None).await {
        tracing::warn!(error = %error, "approval answer not confirmed in the chat");
    }
}
