//! The terminal channel: an interactive REPL (line editing via rustyline) or a one-shot `--once` run.
//!
//! The REPL reads lines on its own thread so the user can type while a turn runs (the line is steered into the
//! turn); replies and "running tool X" notices are printed above the prompt. Ctrl-C during a turn stops the
//! turn; Ctrl-C at an idle prompt twice exits.

use crate::conversation::ChannelHandle;
use crate::messages::{Inbound, Outbound, OutboundRole, Progress, StopTurn};
use crate::router::{RegisterChannel, Router};
use actix::prelude::*;
use minibot_agent::{AgentEvent, ReplyKind};
use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

pub const CHANNEL: &str = "console";

/// Event ids sent and not answered yet. Shared by the input side and the actor.
pub type Awaiting = Arc<Mutex<HashSet<String>>>;

/// Where text goes: above the rustyline prompt, or plain stdout/stderr.
pub trait Screen: Send {
    fn answer(&mut self, text: &str);
    fn notice(&mut self, text: &str);
}

struct ExternalScreen(Box<dyn rustyline::ExternalPrinter + Send>);

impl Screen for ExternalScreen {
    fn answer(&mut self, text: &str) {
        let _ = self.0.print(format!("{text}\n"));
    }
    fn notice(&mut self, text: &str) {
        let _ = self.0.print(format!("\x1b[2m{text}\x1b[0m"));
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
    status: mpsc::UnboundedSender<OnceStatus>,
}

pub struct Console {
    chat_id: i64,
    screen: Box<dyn Screen>,
    awaiting: Awaiting,
    once: Option<Once>,
    /// How long a background task may take, for `--once` waiting.
    task_timeout: Duration,
}

impl Console {
    pub fn new(chat_id: i64, screen: Box<dyn Screen>, awaiting: Awaiting) -> Self {
        Self { chat_id, screen, awaiting, once: None, task_timeout: Duration::from_secs(1800 + 60) }
    }

    pub fn with_once(mut self, event_id: String, status: mpsc::UnboundedSender<OnceStatus>) -> Self {
        self.once = Some(Once { event_id, answered: false, code: 0, tasks: HashSet::new(), status });
        self
    }

    pub fn with_task_timeout(mut self, timeout: Duration) -> Self {
        self.task_timeout = timeout;
        self
    }

    pub fn register(addr: &Addr<Self>, router: &Addr<Router>) {
        router.do_send(RegisterChannel {
            name: CHANNEL.into(),
            handle: ChannelHandle { outbound: addr.clone().recipient(), progress: addr.clone().recipient() },
        });
    }
}

impl Actor for Console {
    type Context = Context<Self>;
}

impl Handler<Outbound> for Console {
    type Result = ();

    fn handle(&mut self, mut out: Outbound, _ctx: &mut Context<Self>) {
        if out.channel != CHANNEL || out.chat_id != self.chat_id {
            return;
        }
        if out.kind == ReplyKind::Html {
            out.text = strip_tags(&out.text);
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
        let status = if once.answered && once.tasks.is_empty() {
            OnceStatus::Done(once.code)
        } else {
            OnceStatus::WaitingForTasks(self.task_timeout)
        };
        let _ = once.status.send(status);
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

/// The interactive loop's input side, on its own thread. Returns when the user quits.
pub fn spawn_repl(
    router: Addr<Router>,
    chat_id: i64,
    user_id: i64,
    awaiting: Awaiting,
    plain: bool,
) -> anyhow::Result<(Box<dyn Screen>, oneshot::Receiver<()>)> {
    let (quit_tx, quit_rx) = oneshot::channel();
    let send = {
        let (router, awaiting) = (router.clone(), awaiting.clone());
        move |line: &str| -> bool {
            match line.trim() {
                "" => {}
                "/exit" | "/quit" => return false,
                "/stop" => router.do_send(StopTurn { channel: CHANNEL.into(), chat_id }),
                text => {
                    let inbound = Inbound::new(CHANNEL, chat_id, Some(user_id), text);
                    if let Ok(mut awaiting) = awaiting.lock() {
                        awaiting.insert(inbound.event_id.clone());
                    }
                    router.do_send(inbound);
                }
            }
            true
        }
    };
    let editor = if plain { None } else { rustyline::DefaultEditor::new().ok() };
    let Some(mut editor) = editor else {
        std::thread::spawn(move || {
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                if !send(&line) {
                    break;
                }
                line.clear();
            }
            let _ = quit_tx.send(());
        });
        return Ok((Box::new(PlainScreen), quit_rx));
    };
    let screen: Box<dyn Screen> = match editor.create_external_printer() {
        Ok(printer) => Box::new(ExternalScreen(Box::new(printer))),
        Err(_) => Box::new(PlainScreen),
    };
    std::thread::spawn(move || {
        let mut last_interrupt: Option<Instant> = None;
        loop {
            match editor.readline("you> ") {
                Ok(line) => {
                    let _ = editor.add_history_entry(line.as_str());
                    if !send(&line) {
                        break;
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    let busy = awaiting.lock().map(|a| !a.is_empty()).unwrap_or(false);
                    if busy {
                        router.do_send(StopTurn { channel: CHANNEL.into(), chat_id });
                        last_interrupt = None;
                    } else if last_interrupt.is_some_and(|at| at.elapsed() < Duration::from_secs(3)) {
                        break;
                    } else {
                        eprintln!("(press Ctrl-C again to exit, or type /exit)");
                        last_interrupt = Some(Instant::now());
                    }
                }
                Err(rustyline::error::ReadlineError::Eof) => break,
                Err(error) => {
                    eprintln!("minibot: cannot read the terminal: {error}");
                    break;
                }
            }
        }
        let _ = quit_tx.send(());
    });
    Ok((screen, quit_rx))
}

/// Ctrl-C outside the line editor (during `--once`, or with piped input): the first stops the running turn, the
/// next one exits.
pub fn watch_interrupts(router: Addr<Router>, chat_id: i64, awaiting: Awaiting) {
    actix::spawn(async move {
        let mut stop_sent = false;
        while tokio::signal::ctrl_c().await.is_ok() {
            let busy = awaiting.lock().map(|a| !a.is_empty()).unwrap_or(false);
            if busy && !stop_sent {
                stop_sent = true;
                eprintln!("(stopping; press Ctrl-C again to exit)");
                router.do_send(StopTurn { channel: CHANNEL.into(), chat_id });
            } else {
                std::process::exit(130);
            }
        }
    });
}

/// A terminal cannot render HTML answers; show their text.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}
