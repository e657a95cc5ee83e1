//! Reading the user's lines on a thread of their own, so the user can type while a turn runs: the line editor
//! (rustyline) on a terminal, plain lines otherwise. Lines go to the REPL as [`Event`]s; the editor's thread
//! handles Ctrl-C itself, since the terminal is in raw mode while it reads.

use super::approvals::Questions;
use super::awaiting::Awaiting;
use super::commands::{self, Command};
use super::screen::{EditorScreen, Entered, PROMPT, Screen};
use crate::messages::StopTurn;
use actix::Recipient;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// What the input side tells the REPL.
pub enum Event {
    Line(String),
    /// A line for the user from the input side (Ctrl-C hints, read errors).
    Notice(String),
    /// No more input: end of input, `/exit`, or Ctrl-C twice at an idle prompt.
    End,
}

/// What the editor's Ctrl-C handling needs.
pub struct Interrupts {
    pub stop: Recipient<StopTurn>,
    pub chat_id: i64,
    pub awaiting: Awaiting,
    pub questions: Questions,
}

/// The line editor on its thread, and the screen that prints above its prompt; `None` when the terminal cannot
/// run it (then the plain reader serves).
pub fn spawn_editor(interrupts: Interrupts) -> Option<(Box<dyn Screen>, UnboundedReceiver<Event>)> {
    let mut editor = rustyline::DefaultEditor::new().ok()?;
    let printer = editor.create_external_printer().ok()?;
    let entered = Entered::default();
    let columns = Arc::new(AtomicUsize::new(80));
    let screen = EditorScreen::new(Box::new(printer), entered.clone(), columns.clone());
    let (events, receiver) = unbounded_channel();
    std::thread::spawn(move || {
        let mut last_interrupt: Option<Instant> = None;
        loop {
            // Measured between lines: streamed text is wrapped to it while the editor reads.
            if let Some((width, _)) = editor.dimensions() {
                columns.store(usize::from(width), Ordering::Relaxed);
            }
            let read = editor.readline(PROMPT);
            // The prompt moved below the line just finished, so the screen's rows are no longer right above it.
            // (The line editor's custom key bindings, which could tell it before the move, are not built in.) A
            // line given up with Ctrl-C has a length the screen does not know.
            entered.push(read.as_ref().ok().cloned());
            match read {
                Ok(line) => {
                    let _ = editor.add_history_entry(line.as_str());
                    let exit = commands::parse(&line) == Some(Command::Exit);
                    if events.send(Event::Line(line)).is_err() || exit {
                        break;
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    if interrupted(&interrupts, &events, &mut last_interrupt) {
                        break;
                    }
                }
                Err(rustyline::error::ReadlineError::Eof) => break,
                Err(error) => {
                    let _ = events.send(Event::Notice(format!("minibot: cannot read the terminal: {error}")));
                    break;
                }
            }
        }
        let _ = events.send(Event::End);
    });
    Some((Box::new(screen), receiver))
}

/// Ctrl-C at the prompt: stops the turn answering the user's message, or denies the open question; at an idle
/// prompt, a second press within 3 s quits. Answers whether to quit.
fn interrupted(interrupts: &Interrupts, events: &UnboundedSender<Event>, last: &mut Option<Instant>) -> bool {
    let busy = !interrupts.awaiting.is_empty();
    let denied = interrupts.questions.deny_all() > 0;
    if busy {
        interrupts.stop.do_send(StopTurn { channel: super::actor::CHANNEL.into(), chat_id: interrupts.chat_id });
        *last = None;
    } else if denied {
        // It answered a question; it is not the first press of an exit.
        *last = None;
    } else if last.is_some_and(|at| at.elapsed() < Duration::from_secs(3)) {
        return true;
    } else {
        let _ = events.send(Event::Notice("(press Ctrl-C again to exit, or type /exit)".into()));
        *last = Some(Instant::now());
    }
    false
}

/// Plain lines from stdin (`--plain`, or stdin not a terminal).
pub fn spawn_plain() -> UnboundedReceiver<Event> {
    let (events, receiver) = unbounded_channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {
                    let exit = commands::parse(&line) == Some(Command::Exit);
                    if events.send(Event::Line(line.clone())).is_err() || exit {
                        break;
                    }
                }
                Err(error) => {
                    let _ = events.send(Event::Notice(format!("minibot: cannot read stdin: {error}")));
                    break;
                }
            }
        }
        let _ = events.send(Event::End);
    });
    receiver
}
