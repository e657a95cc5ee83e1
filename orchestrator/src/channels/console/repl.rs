//! The interactive console: a line editor on its own thread, so the user can type (and steer) while a turn runs.

use super::actor::{Awaiting, CHANNEL, Console, PlainScreen, Screen};
use crate::cli::ConsoleArgs;
use crate::messages::{Inbound, Intake, ReplayPending, StopTurn};
use actix::prelude::*;
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
    let awaiting: Awaiting = Awaiting::default();
    watch_interrupts(intake.stop.clone(), options.chat_id, awaiting.clone());
    let (screen, quit) = spawn_repl(intake.clone(), options.chat_id, options.user_id, awaiting.clone(), options.plain)?;
    let addr = Console::new(options.chat_id, screen, awaiting).start();
    Console::register(&addr, &intake);
    let replayed = intake.replay.send(ReplayPending).await.unwrap_or_default();
    if !replayed.is_empty() {
        eprintln!("(resuming {} message(s) interrupted by a restart)", replayed.len());
    }
    let _ = quit.await;
    Ok(0)
}

/// The interactive loop's input side, on its own thread. Returns when the user quits.
fn spawn_repl(
    intake: Intake,
    chat_id: i64,
    user_id: i64,
    awaiting: Awaiting,
    plain: bool,
) -> anyhow::Result<(Box<dyn Screen>, oneshot::Receiver<()>)> {
    let (quit_tx, quit_rx) = oneshot::channel();
    let send = {
        let (intake, awaiting) = (intake.clone(), awaiting.clone());
        move |line: &str| -> bool {
            match line.trim() {
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
                    if busy {
                        intake.stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id });
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
pub(super) fn watch_interrupts(stop: Recipient<StopTurn>, chat_id: i64, awaiting: Awaiting) {
    actix::spawn(async move {
        let mut stop_sent = false;
        while tokio::signal::ctrl_c().await.is_ok() {
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
