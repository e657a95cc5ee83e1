//! The console channel actor: prints the answers and progress the conversation sends, and in a `--once` run
//! tells the waiting side when everything is answered.

use super::approvals::{self, Answer, ConsoleApprovals, Notice};
use super::awaiting::Awaiting;
use super::screen::{Screen, TerminalSafeScreen, TurnStatus};
use crate::channels::shown::CUT_MARK;
use crate::messages::{
    ApprovalDecision, AskApproval, ChannelCapabilities, ChannelHandle, Intake, Outbound, OutboundFile, OutboundRole,
    Progress, RegisterChannel, STOPPED_REPLY,
};
use crate::tasks::TaskHub;
use actix::prelude::*;
use minibot_agent::AgentEvent;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the status line is redrawn while a turn runs (its spinner and seconds move).
const STATUS_TICK: Duration = Duration::from_millis(200);

pub const CHANNEL: &str = "console";

/// A terminal shows plain text of any length and cannot edit what it printed. A file is "delivered" by printing
/// its name, size and absolute path (the user is on the same machine). Only the REPL can ask for approval
/// ([`Console::register`] sets it).
pub const CAPABILITIES: ChannelCapabilities = ChannelCapabilities {
    approvals: false,
    files: true,
    edit_messages: false,
    max_message_chars: None,
    format: minibot_agent::TextFormat::Plain,
};

/// How a `--once` run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnceStatus {
    /// The answer is printed and background tasks it started are still running (wait at most this long).
    WaitingForTasks(Duration),
    /// Everything is answered; exit with this code.
    Done(i32),
}

/// `--once`: the message whose answer ends the run, and the tasks that answer handed off.
struct Once {
    event_id: String,
    answered: bool,
    code: i32,
    tasks: HashSet<String>,
    /// Task results that came before the answer that hands their task off (a quick `spawn_task` can finish
    /// before the turn that started it ends): shown after that answer instead of being lost.
    early: Vec<Outbound>,
    status: mpsc::UnboundedSender<OnceStatus>,
}

pub struct Console {
    chat_id: i64,
    screen: Box<dyn Screen>,
    awaiting: Awaiting,
    once: Option<Once>,
    /// How long a background task may take, for `--once` waiting.
    task_timeout: Duration,
    approvals: ConsoleApprovals,
    /// What the chat's running turn does, from its progress; `None` between turns.
    status: Option<TurnStatus>,
    /// Where a task result's specialist is looked up, to say which task a result answers.
    tasks: Option<Arc<TaskHub>>,
    /// `task 3f2a9c1e (researcher)` by task id.
    labels: HashMap<String, String>,
    /// The text of the running turn's current step as the screen streamed it; `None` when nothing streams.
    streamed: Option<String>,
}

impl Console {
    pub fn new(chat_id: i64, screen: Box<dyn Screen>, awaiting: Awaiting) -> Self {
        Self {
            chat_id,
            screen: Box::new(TerminalSafeScreen(screen)),
            awaiting,
            once: None,
            task_timeout: Duration::from_secs(1800 + 60),
            approvals: ConsoleApprovals::default(),
            status: None,
            tasks: None,
            labels: HashMap::new(),
            streamed: None,
        }
    }

    /// Task results then name their specialist (else only the task id).
    pub fn with_tasks(mut self, tasks: Option<Arc<TaskHub>>) -> Self {
        self.tasks = tasks;
        self
    }

    /// How approval questions are answered: `--approve` patterns, and where the REPL's questions wait (none:
    /// this run cannot ask).
    pub fn with_approvals(mut self, approvals: ConsoleApprovals) -> Self {
        self.approvals = approvals;
        self
    }

    pub fn with_once(mut self, event_id: String, status: mpsc::UnboundedSender<OnceStatus>) -> Self {
        self.once = Some(Once { event_id, answered: false, code: 0, tasks: HashSet::new(), early: Vec::new(), status });
        self
    }

    pub fn with_task_timeout(mut self, timeout: Duration) -> Self {
        self.task_timeout = timeout;
        self
    }

    /// Registers the console. `can_ask`: the REPL asks approval questions; a `--once` run answers them from
    /// `--approve` alone (it still takes them, to say which flag would allow the call).
    pub fn register(addr: &Addr<Self>, intake: &Intake, can_ask: bool) {
        intake.register.do_send(RegisterChannel {
            name: CHANNEL.into(),
            handle: ChannelHandle {
                outbound: addr.clone().recipient(),
                progress: addr.clone().recipient(),
                capabilities: ChannelCapabilities { approvals: can_ask, ..CAPABILITIES },
                files: Some(addr.clone().recipient()),
                approvals: Some(addr.clone().recipient()),
                confirms_delivery: false,
            },
        });
    }
}

impl Console {
    fn show_status(&mut self) {
        self.screen.status(self.status.as_ref());
    }

    /// An answer, after a line naming the background task it comes from (if any).
    fn show(&mut self, out: &Outbound) {
        if let Some(label) = out.task_id.as_ref().and_then(|id| self.labels.get(id)) {
            let about = if out.role == OutboundRole::TaskResult { "result of" } else { "answer after" };
            self.screen.notice(&format!("⋯ {about} {label}:"));
        }
        self.screen.answer(&out.text);
    }

    /// The task whose label a message needs and that is not known yet.
    fn unlabelled(&self, out: &Outbound) -> Option<String> {
        let id = out.task_id.as_ref().filter(|_| out.role != OutboundRole::Progress)?;
        (!self.labels.contains_key(id)).then(|| id.clone())
    }

    /// The text streamed so far is complete: it stays on screen, and what comes next goes below it.
    fn end_stream(&mut self) {
        if self.streamed.take().is_some() {
            self.screen.partial_end();
        }
    }

    /// The turn's answer came: the streamed text ends, marked as cut when the turn was stopped. Answers whether
    /// the answer is that text, already on the screen.
    fn finish_stream(&mut self, out: &Outbound) -> bool {
        let Some(streamed) = self.streamed.as_deref() else { return false };
        let whole = out.text.trim() == streamed.trim();
        if !whole && out.text == STOPPED_REPLY && !streamed.trim().is_empty() {
            self.screen.partial(CUT_MARK);
        }
        self.end_stream();
        whole
    }

    fn deliver(&mut self, out: Outbound) {
        if out.role == OutboundRole::Progress {
            self.screen.notice(&out.text);
            return;
        }
        let mut streamed_whole = false;
        if out.role == OutboundRole::Answer && !out.answers.is_empty() {
            // The turn is over: its answer replaces the status line.
            self.status = None;
            self.show_status();
            streamed_whole = self.finish_stream(&out);
        }
        let Some(once) = self.once.as_mut() else {
            if !streamed_whole {
                self.show(&out);
            }
            return;
        };
        let answers_once = out.answers.contains(&once.event_id);
        let follows_task = out.task_id.as_ref().is_some_and(|id| once.tasks.remove(id));
        if !answers_once && !follows_task {
            if !once.answered && out.task_id.is_some() && out.answers.is_empty() {
                once.early.push(out);
                return;
            }
            if !out.answers.is_empty() {
                self.screen.notice(&format!("(answer to a message interrupted by a restart)\n{}", out.text));
            }
            return;
        }
        if !streamed_whole {
            self.show(&out);
        }
        let Some(once) = self.once.as_mut() else { return };
        if answers_once {
            once.answered = true;
            once.code = i32::from(out.is_error);
        } else if out.is_error {
            once.code = 1;
        }
        once.tasks.extend(out.task_handoff.iter().cloned());
        let mut due = Vec::new();
        if answers_once {
            for early in std::mem::take(&mut once.early) {
                if early.task_id.as_ref().is_some_and(|id| once.tasks.remove(id)) {
                    if early.is_error {
                        once.code = 1;
                    }
                    due.push(early);
                }
            }
        }
        for early in &due {
            self.show(early);
        }
        let Some(once) = self.once.as_mut() else { return };
        let status = if once.answered && once.tasks.is_empty() {
            OnceStatus::Done(once.code)
        } else {
            OnceStatus::WaitingForTasks(self.task_timeout)
        };
        let _ = once.status.send(status);
    }
}

impl Actor for Console {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(STATUS_TICK, |console, _ctx| {
            if console.status.is_some() {
                console.show_status();
            }
        });
    }
}

impl Handler<Outbound> for Console {
    type Result = ();

    fn handle(&mut self, out: Outbound, ctx: &mut Context<Self>) {
        if out.channel != CHANNEL || out.chat_id != self.chat_id {
            return;
        }
        self.awaiting.answered(&out.answers);
        let Some(task_id) = self.unlabelled(&out) else {
            return self.deliver(out);
        };
        let short: String = task_id.chars().take(8).collect();
        let Some(hub) = self.tasks.clone() else {
            self.labels.insert(task_id, format!("task {short}"));
            return self.deliver(out);
        };
        // The mailbox waits for the lookup, so what comes after this result is still shown after it.
        let lookup = async move { hub.store.get(&task_id).await.ok().flatten().map(|r| (r.id, r.agent_name)) };
        ctx.wait(lookup.into_actor(self).map(move |found, console, _ctx| {
            if let Some((id, agent)) = found {
                let agent = agent.unwrap_or_else(|| "worker".into());
                console.labels.insert(id, format!("task {short} ({agent})"));
            }
            console.deliver(out);
        }));
    }
}

/// `[file] report.csv (1.2 KB) /abs/path/report.csv`, then the caption, on stdout with the answers.
impl Handler<OutboundFile> for Console {
    type Result = ();

    fn handle(&mut self, file: OutboundFile, _ctx: &mut Context<Self>) {
        if file.channel != CHANNEL || file.chat_id != self.chat_id {
            return;
        }
        self.screen.answer(&format!("[file] {}", file.describe()));
    }
}

impl Handler<Progress> for Console {
    type Result = ();

    fn handle(&mut self, progress: Progress, _ctx: &mut Context<Self>) {
        if progress.channel != CHANNEL || progress.chat_id != self.chat_id {
            return;
        }
        let status = self.status.get_or_insert_with(TurnStatus::new);
        status.asking = false;
        match &progress.event {
            AgentEvent::StepStarted { step } => {
                status.step = *step;
                status.tool = None;
            }
            AgentEvent::ToolStarted { name, .. } => status.tool = Some(name.clone()),
            AgentEvent::ToolFinished { .. } => status.tool = None,
            _ => {}
        }
        match &progress.event {
            AgentEvent::AnswerText { text, .. } => {
                if self.screen.streams() {
                    self.screen.partial(text);
                    self.streamed.get_or_insert_with(String::new).push_str(text);
                }
                // The piece was drawn with the status line under it.
                return;
            }
            // The text before a tool call (or before the next step) is complete, not the answer: it stays.
            AgentEvent::StepStarted { .. } => self.end_stream(),
            AgentEvent::ToolStarted { name, .. } => {
                self.end_stream();
                self.screen.notice(&format!("  · running {name}"));
            }
            _ => {}
        }
        self.show_status();
    }
}

impl Handler<AskApproval> for Console {
    type Result = Answer;

    fn handle(&mut self, msg: AskApproval, _ctx: &mut Context<Self>) -> Answer {
        let request = &msg.request;
        if msg.channel != CHANNEL || msg.chat_id != self.chat_id {
            return Answer::Now(ApprovalDecision::Unavailable(format!(
                "console chat {} is not open in this terminal",
                msg.chat_id
            )));
        }
        if self.approvals.pre_approves(request) {
            self.screen.notice(&format!("  · {} approved by --approve", request.tool));
            return Answer::Now(ApprovalDecision::Approved);
        }
        let Some(questions) = &self.approvals.questions else {
            let why = approvals::cannot_ask(request);
            // A call asked about for its own sake (a guarded file) says what it would have changed.
            let asked_because = request.reason.as_deref().map(|r| format!("\n    why: {r}")).unwrap_or_default();
            self.screen.notice(&format!("  · {} denied: {why}{asked_because}", request.tool));
            return Answer::Now(ApprovalDecision::Unavailable(why));
        };
        let answer = approvals::ask(questions, request);
        self.screen.answer(&approvals::question_text(request));
        if let Some(status) = self.status.as_mut() {
            status.asking = true;
        }
        self.show_status();
        answer
    }
}

impl Handler<Notice> for Console {
    type Result = ();

    fn handle(&mut self, Notice(text): Notice, _ctx: &mut Context<Self>) {
        self.screen.notice(&text);
    }
}

/// Answered once everything sent to the console before it is shown (its mailbox is in order).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Flush;

impl Handler<Flush> for Console {
    type Result = ();

    fn handle(&mut self, _flush: Flush, _ctx: &mut Context<Self>) {}
}

/// The console's own text (command replies), shown with [`Screen::info`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct Info(pub String);

impl Handler<Info> for Console {
    type Result = ();

    fn handle(&mut self, Info(text): Info, _ctx: &mut Context<Self>) {
        self.screen.info(&text);
    }
}

#[cfg(test)]
mod tests {
    // By its full path: the module layout test reads `super::` as the console module.
    use crate::channels::console::actor::Console;
    use crate::channels::console::awaiting::Awaiting;
    use crate::channels::console::screen::Screen;
    use std::sync::{Arc, Mutex};

    /// Keeps what the console shows, answers and notices alike.
    struct Capture(Arc<Mutex<Vec<String>>>);

    impl Screen for Capture {
        fn answer(&mut self, text: &str) {
            self.0.lock().unwrap().push(text.to_string());
        }
        fn notice(&mut self, text: &str) {
            self.0.lock().unwrap().push(text.to_string());
        }
    }

    /// Red-team report `repro_terminal_escape.sh`: the model's reply reached the terminal raw, so it could set
    /// the clipboard (OSC 52), clear the screen or send an 8-bit CSI. Every screen the console gets is wrapped.
    #[test]
    fn whatever_the_console_shows_loses_its_control_characters() {
        let shown = Arc::new(Mutex::new(Vec::new()));
        let mut console = Console::new(1, Box::new(Capture(Arc::clone(&shown))), Awaiting::default());
        console.screen.answer("a \x1b]52;c;cm0gLXJmIH4K\x07 b \x1b[2J c \u{9b}31m d\nnext\tline");
        console.screen.notice("  · running \x1b]0;title\x07tool\r");
        assert_eq!(
            *shown.lock().unwrap(),
            ["a ]52;c;cm0gLXJmIH4K b [2J c 31m d\nnext\tline", "  · running ]0;titletool"]
        );
    }
}
