//! The web channel's actor, as the router knows it: it takes each chat's answers, streamed text, tool notices
//! and approval questions, and passes them to every socket open on that chat (a chat can be open in several
//! tabs). Sockets join and leave; a question stays open until answered or withdrawn, and is shown again to a
//! socket that joins meanwhile.

use super::markup;
use super::protocol::{ServerMessage, ShownMessage};
use super::queue::SocketSender;
use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use minibot_agent::AgentEvent;
use minibot_channel::approval_wait;
use minibot_channel::messages::{
    ApprovalDecision, ApprovalRequest, AskApproval, Outbound, OutboundRole, Progress, STOPPED_REPLY,
};
use minibot_channel::shown::CUT_MARK;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Closes every socket: the server is stopping.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseAll;

impl Handler<CloseAll> for WebHub {
    type Result = ();

    fn handle(&mut self, _: CloseAll, _ctx: &mut Context<Self>) {
        self.sockets.clear();
    }
}

/// Messages the user sent during a running turn that a tab opened meanwhile is shown, at most (the latest);
/// the history holds them all once the turn ends.
const SHOWN_WHILE_BUSY: usize = 20;

#[derive(Default)]
pub struct WebHub {
    sockets: HashMap<i64, Vec<(u64, SocketSender)>>,
    questions: Questions,
    /// The text each chat's running step has streamed so far: a stopped turn's answer is that text, cut.
    drafts: HashMap<i64, String>,
    /// Chats whose turn runs, with what the user sent since it began (not in the stored history until the turn
    /// ends): a socket that joins meanwhile is shown them, the busy state and the draft.
    busy: HashMap<i64, Vec<String>>,
}

/// Open approval questions by id.
#[derive(Clone, Default)]
struct Questions(Arc<Mutex<HashMap<String, Question>>>);

struct Question {
    chat_id: i64,
    request: ApprovalRequest,
    answer: oneshot::Sender<ApprovalDecision>,
}

impl Questions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Question>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl WebHub {
    /// A turn runs in the chat: its sockets say so (once).
    fn mark_busy(&mut self, chat_id: i64) {
        if let std::collections::hash_map::Entry::Vacant(entry) = self.busy.entry(chat_id) {
            entry.insert(Vec::new());
            self.send(chat_id, &ServerMessage::Busy { busy: true });
        }
    }

    fn send(&mut self, chat_id: i64, message: &ServerMessage) {
        let Some(sockets) = self.sockets.get_mut(&chat_id) else { return };
        let text = message.to_json();
        // A socket whose receiving side is gone has closed; it is dropped here rather than waiting for Leave.
        sockets.retain(|(_, tx)| tx.try_send(text.clone()));
        if sockets.is_empty() {
            self.sockets.remove(&chat_id);
        }
    }
}

impl Actor for WebHub {
    type Context = Context<Self>;
}

impl Supervised for WebHub {}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Join {
    pub chat_id: i64,
    pub socket_id: u64,
    pub tx: SocketSender,
}

impl Handler<Join> for WebHub {
    type Result = ();

    fn handle(&mut self, join: Join, _ctx: &mut Context<Self>) {
        if let Some(sent) = self.busy.get(&join.chat_id) {
            for text in sent {
                let shown = ShownMessage { id: None, role: "user", text: text.clone(), html: None };
                join.tx.try_send(ServerMessage::Message { message: shown, source: "user", is_error: false }.to_json());
            }
            join.tx.try_send(ServerMessage::Busy { busy: true }.to_json());
            if let Some(draft) = self.drafts.get(&join.chat_id).filter(|d| !d.is_empty()) {
                join.tx.try_send(ServerMessage::Delta { step: 0, text: draft.clone() }.to_json());
            }
        }
        for (approval_id, question) in self.questions.lock().iter().filter(|(_, q)| q.chat_id == join.chat_id) {
            join.tx.try_send(question_message(approval_id, &question.request).to_json());
        }
        self.sockets.entry(join.chat_id).or_default().push((join.socket_id, join.tx));
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Leave {
    pub chat_id: i64,
    pub socket_id: u64,
}

impl Handler<Leave> for WebHub {
    type Result = ();

    fn handle(&mut self, leave: Leave, _ctx: &mut Context<Self>) {
        if let Some(sockets) = self.sockets.get_mut(&leave.chat_id) {
            sockets.retain(|(id, _)| *id != leave.socket_id);
            if sockets.is_empty() {
                self.sockets.remove(&leave.chat_id);
            }
        }
    }
}

/// The user sent a message from one socket: the chat's other sockets show it, and the chat is busy.
#[derive(Message)]
#[rtype(result = "()")]
pub struct UserSent {
    pub chat_id: i64,
    pub socket_id: u64,
    pub text: String,
}

impl Handler<UserSent> for WebHub {
    type Result = ();

    fn handle(&mut self, msg: UserSent, ctx: &mut Context<Self>) {
        let shown = ShownMessage { id: None, role: "user", text: msg.text.clone(), html: None };
        let echo = ServerMessage::Message { message: shown, source: "user", is_error: false };
        self.handle(Broadcast { chat_id: msg.chat_id, except: Some(msg.socket_id), message: echo }, ctx);
        self.mark_busy(msg.chat_id);
        if let Some(sent) = self.busy.get_mut(&msg.chat_id) {
            if sent.len() == SHOWN_WHILE_BUSY {
                sent.remove(0);
            }
            sent.push(msg.text);
        }
    }
}

/// Something one socket did that the chat's other sockets should see.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Broadcast {
    pub chat_id: i64,
    /// The socket it came from, which already shows it.
    pub except: Option<u64>,
    pub message: ServerMessage,
}

impl Handler<Broadcast> for WebHub {
    type Result = ();

    fn handle(&mut self, msg: Broadcast, _ctx: &mut Context<Self>) {
        let Some(sockets) = self.sockets.get_mut(&msg.chat_id) else { return };
        let text = msg.message.to_json();
        sockets.retain(|(id, tx)| Some(*id) == msg.except || tx.try_send(text.clone()));
    }
}

/// The user's click on Approve or Deny. Only a socket of the chat that was asked can answer.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Answer {
    pub chat_id: i64,
    pub approval_id: String,
    pub approved: bool,
}

impl Handler<Answer> for WebHub {
    type Result = ();

    fn handle(&mut self, msg: Answer, _ctx: &mut Context<Self>) {
        let question = {
            let mut open = self.questions.lock();
            match open.get(&msg.approval_id) {
                Some(question) if question.chat_id == msg.chat_id => open.remove(&msg.approval_id),
                _ => None,
            }
        };
        let Some(question) = question else {
            self.send(
                msg.chat_id,
                &ServerMessage::ApprovalResolved { approval_id: msg.approval_id, outcome: "expired" },
            );
            return;
        };
        let (decision, outcome) =
            if msg.approved { (ApprovalDecision::Approved, "approved") } else { (ApprovalDecision::Denied, "denied") };
        let _ = question.answer.send(decision);
        self.send(msg.chat_id, &ServerMessage::ApprovalResolved { approval_id: msg.approval_id, outcome });
    }
}

impl Handler<Outbound> for WebHub {
    type Result = ();

    fn handle(&mut self, mut message: Outbound, _ctx: &mut Context<Self>) {
        let draft = self.drafts.remove(&message.chat_id).filter(|d| !d.trim().is_empty());
        if message.role == OutboundRole::Answer
            && message.text == STOPPED_REPLY
            && let Some(draft) = draft
        {
            // What the user saw stays, marked as cut: the history stores the same text.
            message.text = format!("{draft}{CUT_MARK}");
        }
        let source = match message.role {
            OutboundRole::Answer => "answer",
            OutboundRole::Progress => "progress",
            OutboundRole::TaskResult => "task_result",
        };
        let shown = ShownMessage {
            id: None,
            role: "assistant",
            html: Some(markup::to_html(&message.text, message.kind)),
            text: message.text,
        };
        self.send(message.chat_id, &ServerMessage::Message { message: shown, source, is_error: message.is_error });
        // Only the last part of an answer names the messages it answers: the turn is over.
        if message.role == OutboundRole::Answer && !message.answers.is_empty() {
            self.busy.remove(&message.chat_id);
            self.send(message.chat_id, &ServerMessage::Busy { busy: false });
        }
    }
}

impl Handler<Progress> for WebHub {
    type Result = ();

    fn handle(&mut self, progress: Progress, _ctx: &mut Context<Self>) {
        // A turn the user did not start from this page (a scheduled prompt, a task's result, the next queued
        // message) shows as busy too, so Stop works on it.
        self.mark_busy(progress.chat_id);
        let message = match progress.event {
            AgentEvent::AnswerText { step, text } => {
                self.drafts.entry(progress.chat_id).or_default().push_str(&text);
                ServerMessage::Delta { step, text }
            }
            AgentEvent::StepStarted { step } => {
                self.drafts.remove(&progress.chat_id);
                ServerMessage::Step { step }
            }
            AgentEvent::ToolStarted { name, .. } => ServerMessage::Tool { name, state: "started", ms: None },
            AgentEvent::ToolFinished { name, ok, duration, .. } => ServerMessage::Tool {
                name,
                state: if ok { "ok" } else { "error" },
                ms: Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
            },
            _ => return,
        };
        self.send(progress.chat_id, &message);
    }
}

fn question_message(approval_id: &str, request: &ApprovalRequest) -> ServerMessage {
    ServerMessage::Approval {
        approval_id: approval_id.to_string(),
        tool: request.tool.clone(),
        detail: request.detail.clone(),
        reason: request.reason.clone(),
    }
}

/// The hub's reply to [`AskApproval`]: waits for the click, and withdraws the question when the asker stops
/// waiting (approval timeout, stopped turn).
pub struct PendingQuestion {
    answer: oneshot::Receiver<ApprovalDecision>,
    approval_id: String,
    chat_id: i64,
    hub: Addr<WebHub>,
    questions: Questions,
}

impl MessageResponse<WebHub, AskApproval> for PendingQuestion {
    fn handle(self, _ctx: &mut Context<WebHub>, tx: Option<OneshotSender<ApprovalDecision>>) {
        let PendingQuestion { answer, approval_id, chat_id, hub, questions } = self;
        let withdraw = async move {
            if questions.lock().remove(&approval_id).is_some() {
                let message = ServerMessage::ApprovalResolved { approval_id, outcome: "expired" };
                hub.do_send(Broadcast { chat_id, except: None, message });
            }
        };
        approval_wait::answer_or_withdraw(answer, tx, "web chat", withdraw);
    }
}

impl Handler<AskApproval> for WebHub {
    type Result = PendingQuestion;

    fn handle(&mut self, ask: AskApproval, ctx: &mut Context<Self>) -> PendingQuestion {
        let approval_id = ask.request.approval_id.clone();
        let (answer_tx, answer) = oneshot::channel();
        let message = question_message(&approval_id, &ask.request);
        self.questions
            .lock()
            .insert(approval_id.clone(), Question { chat_id: ask.chat_id, request: ask.request, answer: answer_tx });
        if self.sockets.contains_key(&ask.chat_id) {
            self.send(ask.chat_id, &message);
        }
        PendingQuestion {
            answer,
            approval_id,
            chat_id: ask.chat_id,
            hub: ctx.address(),
            questions: self.questions.clone(),
        }
    }
}
