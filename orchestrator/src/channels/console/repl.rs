//! The interactive console: a line editor on its own thread, so the user can type (and steer) while a turn runs.

use super::actor::{Awaiting, CHANNEL, Console, PlainScreen, Screen};
use super::approvals::{ConsoleApprovals, Questions, is_reply};
use crate::cli::ConsoleArgs;
use crate::messages::{Inbound, Intake, ReplayPending, StopTurn};
use crate::terminal_text::for_terminal;
use actix::prelude::*;
use anyhow::Context as _;
use minibot_agent::Patterns;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

struct ExternalScreen(Box<dyn rustyline::ExternalPrinter + Send>);

impl Screen for ExternalScreen {
    fn answer(&mut self, text: &str) {
        let _ = self.0.print(format!("{text}\n"));
    }
    fn notice(&mut self, text: &str) {
        let _ = self.0.print(format!("\x1b[2m{text}\x1b[0m"));
    }
}

/// Runs the REPL until the user quits.
pub async fn run_repl(intake: Intake, options: &ConsoleArgs) -> anyhow::Result<i32> {
    let pre_approved = approve_patterns(options)?;
    let awaiting: Awaiting = Awaiting::default();
    let questions = Questions::default();
    watch_interrupts(intake.stop.clone(), options.chat_id, awaiting.clone(), Some(questions.clone()));
    let input = Input {
        intake: intake.clone(),
        chat_id: options.chat_id,
        user_id: options.user_id,
        awaiting: awaiting.clone(),
        questions: questions.clone(),
    };
    let (screen, quit) = spawn_repl(input, options.plain)?;
    let approvals = ConsoleApprovals { pre_approved, questions: Some(questions) };
    let addr = Console::new(options.chat_id, screen, awaiting).with_approvals(approvals).start();
    Console::register(&addr, &intake, true);
    let replayed = intake.replay.send(ReplayPending).await.unwrap_or_default();
    if !replayed.is_empty() {
        eprintln!("(resuming {} message(s) interrupted by a restart)", replayed.len());
    }
    let _ = quit.await;
    Ok(0)
}

/// `--approve` patterns; a bad one names the flag.
pub(super) fn approve_patterns(args: &ConsoleArgs) -> anyhow::Result<Patterns> {
    Patterns::new(&args.approve).context("--approve")
}

/// What the input side needs: where lines go and what they may answer.
struct Input {
    intake: Intake,
    chat_id: i64,
    user_id: i64,
    awaiting: Awaiting,
    questions: Questions,
}

/// The interactive loop's input side, on its own thread. Returns when the user quits.
fn spawn_repl(input: Input, plain: bool) -> anyhow::Result<(Box<dyn Screen>, oneshot::Receiver<()>)> {
    let Input { intake, chat_id, user_id, awaiting, questions } = input;
    let (quit_tx, quit_rx) = oneshot::channel();
    let send = {
        let (intake, awaiting, questions) = (intake.clone(), awaiting.clone(), questions.clone());
        move |line: &str| -> bool {
            let text = line.trim();
            // An open approval question takes the next line, except the commands that end the turn or the
            // session: those deny it and keep their meaning.
            if matches!(text, "/stop" | "/exit" | "/quit") {
                questions.deny_all();
            } else if let Some((tool, approved)) = questions.answer(text) {
                let tool = for_terminal(&tool);
                eprintln!("  · {tool} {}", if approved { "approved" } else { "denied" });
                if is_reply(text) {
                    return true;
                }
            }
            match text {
                "" => {}
                "/exit" | "/quit" => return false,
                "/stop" => intake.stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id }),
                text => {
                    let inbound = Inbound::new(CHANNEL, chat_id, Some(user_id), text);
                    if let Ok(mut awaiting) = awaiting.lock() {
                        awaiting.insert(inbound.event_id.clone());
                    }
                    intake.inbound.do_send(inbound);
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
                    let denied = questions.deny_all() > 0;
                    if busy {
                        intake.stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id });
                        last_interrupt = None;
                    } else if denied {
                        // It answered a question; it is not the first press of an exit.
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
pub(super) fn watch_interrupts(
    stop: Recipient<StopTurn>,
    chat_id: i64,
    awaiting: Awaiting,
    questions: Option<Questions>,
) {
    actix::spawn(async move {
        let mut stop_sent = false;
        while tokio::signal::ctrl_c().await.is_ok() {
            // Ctrl-C while a question is open says no to it, and stops the turn as usual.
            if let Some(questions) = &questions {
                questions.deny_all();
            }
            let busy = awaiting.lock().map(|a| !a.is_empty()).unwrap_or(false);
            if busy && !stop_sent {
                stop_sent = true;
                eprintln!("(stopping; press Ctrl-C again to exit)");
                stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id });
            } else {
                std::process::exit(130);
            }
        }
    });
}
