//! The interactive console. Lines come from [`super::input`]; this side answers approval questions, runs the
//! slash commands ([`super::commands`]) and sends the rest to the chat's conversation.
//!
//! With stdin not a terminal (a pipe, a file) each line is sent only once the one before it is answered, so
//! every line gets its own answer instead of being steered into the turn before, and is shown after the prompt
//! (no terminal echoes it); a line is still taken while an approval question waits, since it may be the reply.
//! At the end of input or `/exit` the console waits for the answers to every message it accepted (and every
//! message of its chat resumed at start) before it returns and the stores close.

use super::actor::{CHANNEL, Console, Flush, Info};
use super::approvals::{ConsoleApprovals, Notice, Questions, is_reply};
use super::awaiting::Awaiting;
use super::banner::banner;
use super::commands::{self, Command};
use super::input::{self, Event, Interrupts};
use super::screen::{PROMPT, PlainScreen, Screen};
use crate::cli::ConsoleArgs;
use crate::messages::{Inbound, Intake, NewSession, ReplayPending, StopTurn, session_id};
use crate::runtime::Runtime;
use actix::prelude::*;
use anyhow::Context as _;
use minibot_agent::Patterns;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// How often waiting loops look at what is still unanswered.
const POLL: Duration = Duration::from_millis(20);

/// Runs the REPL until the user quits and every accepted message is answered.
pub async fn run_repl(intake: Intake, rt: Arc<Runtime>, options: &ConsoleArgs) -> anyhow::Result<i32> {
    let pre_approved = approve_patterns(options)?;
    let awaiting = Awaiting::default();
    let questions = Questions::default();
    let paced = !std::io::stdin().is_terminal();
    let welcome = banner(&rt, options.chat_id);
    // Piped stdout holds answers only.
    if std::io::stdout().is_terminal() {
        println!("{welcome}");
    } else {
        eprintln!("{welcome}");
    }
    watch_interrupts(intake.stop.clone(), options.chat_id, awaiting.clone(), Some(questions.clone()));
    let interrupts = Interrupts {
        stop: intake.stop.clone(),
        chat_id: options.chat_id,
        awaiting: awaiting.clone(),
        questions: questions.clone(),
    };
    let editor = if options.plain || paced { None } else { input::spawn_editor(interrupts) };
    let (screen, mut events): (Box<dyn Screen>, _) = match editor {
        Some(editor) => editor,
        // Lines typed on the terminal itself share it with a spinner badly.
        None if paced => (Box::new(PlainScreen::new()), input::spawn_plain()),
        None => (Box::new(PlainScreen::without_status()), input::spawn_plain()),
    };
    let approvals = ConsoleApprovals { pre_approved, questions: Some(questions.clone()) };
    let console = Console::new(options.chat_id, screen, awaiting.clone())
        .with_approvals(approvals)
        .with_tasks(rt.tasks.clone())
        .start();
    Console::register(&console, &intake, true);
    let replayed = intake.replay.send(ReplayPending).await.unwrap_or_default();
    for resumed in replayed.iter().filter(|i| i.channel == CHANNEL && i.chat_id == options.chat_id) {
        awaiting.expect(&resumed.event_id);
    }
    if !replayed.is_empty() {
        console.do_send(Notice(format!("(resuming {} message(s) interrupted by a restart)", replayed.len())));
    }
    let repl = Repl {
        intake,
        rt,
        console,
        awaiting,
        questions,
        chat_id: options.chat_id,
        user_id: options.user_id,
        echo: paced,
    };
    loop {
        if paced {
            repl.until_answered_or_asked().await;
        }
        match events.recv().await {
            Some(Event::Line(line)) => {
                if !repl.line(&line).await {
                    break;
                }
            }
            Some(Event::Notice(text)) => repl.console.do_send(Notice(text)),
            Some(Event::End) | None => break,
        }
    }
    repl.finish().await;
    Ok(0)
}

/// `--approve` patterns; a bad one names the flag.
pub(super) fn approve_patterns(args: &ConsoleArgs) -> anyhow::Result<Patterns> {
    Patterns::new(&args.approve).context("--approve")
}

struct Repl {
    intake: Intake,
    rt: Arc<Runtime>,
    console: Addr<Console>,
    awaiting: Awaiting,
    questions: Questions,
    chat_id: i64,
    user_id: i64,
    /// Piped lines are not on the screen (no terminal echoes them): each is shown as `you> …` before what answers
    /// it, so a reader sees where one answer ends and the next exchange starts.
    echo: bool,
}

impl Repl {
    fn info(&self, text: impl Into<String>) {
        self.console.do_send(Info(text.into()));
    }

    fn session(&self) -> String {
        session_id(CHANNEL, self.chat_id)
    }

    /// Waits until every message sent is answered, or a question waits for the next line.
    async fn until_answered_or_asked(&self) {
        while !self.awaiting.is_empty() && self.questions.is_empty() {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Handles one line; answers `false` when the user quits.
    async fn line(&self, line: &str) -> bool {
        let text = line.trim();
        if self.echo && !text.is_empty() {
            // Through the console, so it comes after the answer before it and before this line's own output.
            self.info(format!("{PROMPT}{text}"));
        }
        let command = commands::parse(text);
        match &command {
            // They end the turn or the session: the open questions are denied, and they keep their meaning.
            Some(Command::Stop | Command::Exit) => {
                self.questions.deny_all();
            }
            // Other commands leave a question open for the next line.
            Some(_) => {}
            None => {
                if let Some((tool, approved)) = self.questions.answer(text) {
                    let verdict = if approved { "approved" } else { "denied" };
                    self.console.do_send(Notice(format!("  · {tool} {verdict}")));
                    if is_reply(text) {
                        return true;
                    }
                }
            }
        }
        match command {
            None if text.is_empty() => {}
            None => {
                let inbound = Inbound::new(CHANNEL, self.chat_id, Some(self.user_id), text);
                self.awaiting.expect(&inbound.event_id);
                self.intake.inbound.do_send(inbound);
            }
            Some(Command::Exit) => return false,
            Some(Command::Stop) => {
                self.intake.stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id: self.chat_id })
            }
            Some(Command::Help) => self.info(commands::HELP),
            Some(Command::New) => {
                let new = NewSession::new(CHANNEL, self.chat_id);
                self.awaiting.expect(&new.event_id);
                self.intake.new_session.do_send(new);
            }
            Some(Command::Model(None)) => {
                self.info(commands::describe_models(&self.rt, &self.rt.model_for(&self.session())));
            }
            Some(Command::Model(Some(name))) => self.switch_model(&name),
            Some(Command::Tasks) => self.tasks().await,
            Some(Command::Unknown(word)) => self.info(commands::unknown(&word)),
        }
        true
    }

    fn switch_model(&self, name: &str) {
        let chosen = commands::pick(&self.rt, name).and_then(|option| commands::session_model(&self.rt, &option));
        match chosen {
            Ok(model) => {
                self.info(format!(
                    "Model for this chat until you quit: {} (provider {}).",
                    model.settings.model, model.provider_name
                ));
                self.rt.set_model(&self.session(), model);
            }
            Err(why) => self.info(why),
        }
    }

    async fn tasks(&self) {
        let Some(hub) = &self.rt.tasks else {
            return self.info("Background tasks are off ([tasks] enabled = false).");
        };
        match hub.store.active().await {
            Ok(active) => {
                let ours: Vec<_> =
                    active.into_iter().filter(|t| t.channel == CHANNEL && t.chat_id == Some(self.chat_id)).collect();
                self.info(commands::describe_tasks(&ours));
            }
            Err(error) => self.info(format!("Cannot read the background tasks: {error}")),
        }
    }

    /// No more input: waits for the answers still coming. Questions asked from now on are denied, since no
    /// line can answer them. A second Ctrl-C leaves the rest for the next start ([`watch_interrupts`]).
    async fn finish(&self) {
        let denied = self.questions.deny_all();
        if denied > 0 {
            self.console.do_send(Notice(format!("(no more input: denied {denied} open approval question(s))")));
        }
        let waiting = self.awaiting.len();
        if waiting > 0 {
            self.console.do_send(Notice(format!(
                "(waiting for {waiting} answer(s) before exiting; Ctrl-C stops the running turn, a second Ctrl-C \
                 leaves them for the next start)"
            )));
        }
        while !self.awaiting.is_empty() {
            if self.questions.deny_all() > 0 {
                self.console.do_send(Notice("(no more input: approval denied)".into()));
            }
            tokio::time::sleep(POLL).await;
        }
        // Replies to the last commands are shown before the process ends.
        let _ = self.console.send(Flush).await;
    }
}

/// Ctrl-C outside the line editor (during `--once`, with piped input, or while the REPL finishes): the first
/// stops the running turn, the next one exits at once with code 130. Messages still unanswered then stay
/// pending and are answered at the next start.
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
            let busy = !awaiting.is_empty();
            if busy && !stop_sent {
                stop_sent = true;
                eprintln!("(stopping; press Ctrl-C again to exit)");
                stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id });
            } else {
                let left = awaiting.len();
                if left > 0 {
                    eprintln!("({left} message(s) left unanswered; they are answered at the next start)");
                }
                std::process::exit(130);
            }
        }
    });
}
