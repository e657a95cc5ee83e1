//! The console channel actor: prints the answers and progress the conversation sends, and in a `--once` run
//! tells the waiting side when everything is answered.

use super::approvals::{self, Answer, ConsoleApprovals, Notice};
use crate::messages::{
    ApprovalDecision, AskApproval, ChannelCapabilities, ChannelHandle, Intake, Outbound, OutboundFile, OutboundRole,
    Progress, RegisterChannel,
};
use crate::terminal_text::for_terminal;
use actix::prelude::*;
use minibot_agent::AgentEvent;
use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

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

/// Event ids sent and not answered yet. Shared by the input side and the actor.
pub type Awaiting = Arc<Mutex<HashSet<String>>>;

/// Where text goes: above the rustyline prompt, or plain stdout/stderr.
pub trait Screen: Send {
    fn answer(&mut self, text: &str);
    fn notice(&mut self, text: &str);
}

/// What every [`Screen`] of the console is wrapped in: the text is the model's or a tool's (answers, task
/// results, tool names, approval questions), so it reaches the terminal without control characters
/// ([`for_terminal`]); the screen's own styling comes after.
struct TerminalSafeScreen(Box<dyn Screen>);

impl Screen for TerminalSafeScreen {
    fn answer(&mut self, text: &str) {
        self.0.answer(&for_terminal(text));
    }
    fn notice(&mut self, text: &str) {
        self.0.notice(&for_terminal(text));
    }
}

/// stdout for answers, stderr for notices, so `--once` output can be piped.
pub struct PlainScreen;

impl Screen for PlainScreen {
    fn answer(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
    fn notice(&mut self, text: &str) {
        eprintln!("{text}");
    }
}

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
        }
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

impl Actor for Console {
    type Context = Context<Self>;
}

impl Handler<Outbound> for Console {
    type Result = ();

    fn handle(&mut self, out: Outbound, _ctx: &mut Context<Self>) {
        if out.channel != CHANNEL || out.chat_id != self.chat_id {
            return;
        }
        if let Ok(mut awaiting) = self.awaiting.lock() {
            for id in &out.answers {
                awaiting.remove(id);
            }
        }
        if out.role == OutboundRole::Progress {
            self.screen.notice(&out.text);
            return;
        }
        let Some(once) = self.once.as_mut() else {
            self.screen.answer(&out.text);
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
        self.screen.answer(&out.text);
        if answers_once {
            once.answered = true;
            once.code = i32::from(out.is_error);
        } else if out.is_error {
            once.code = 1;
        }
        once.tasks.extend(out.task_handoff.iter().cloned());
        if answers_once {
            for early in std::mem::take(&mut once.early) {
                if early.task_id.as_ref().is_some_and(|id| once.tasks.remove(id)) {
                    self.screen.answer(&early.text);
                    if early.is_error {
                        once.code = 1;
                    }
                }
            }
        }
        let status = if once.answered && once.tasks.is_empty() {
            OnceStatus::Done(once.code)
        } else {
            OnceStatus::WaitingForTasks(self.task_timeout)
        };
        let _ = once.status.send(status);
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
        if let AgentEvent::ToolStarted { name, .. } = &progress.event {
            self.screen.notice(&format!("  · running {name}"));
        }
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
        self.screen.answer(&approvals::question_text(request));
        approvals::ask(questions, request)
    }
}

impl Handler<Notice> for Console {
    type Result = ();

    fn handle(&mut self, Notice(text): Notice, _ctx: &mut Context<Self>) {
        self.screen.notice(&text);
    }
}

#[cfg(test)]
mod tests {
    // By its full path: the module layout test reads `super::` as the console module.
    use crate::channels::console::actor::{Awaiting, Console, Screen};
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
