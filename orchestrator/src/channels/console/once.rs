//! `console --once`: one message in, its answer (and the results of tasks it started) out, then exit.

use super::actor::{CHANNEL, Console, OnceStatus};
use super::approvals::ConsoleApprovals;
use super::awaiting::Awaiting;
use super::repl::watch_interrupts;
use super::screen::PlainScreen;
use crate::cli::ConsoleArgs;
use crate::messages::{Inbound, Intake, ReplayPending, StopTurn};
use crate::runtime::Runtime;
use actix::prelude::*;
use anyhow::Context as _;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// Sends `text` (`-` reads stdin) and waits for its answer; returns the exit code.
pub async fn run_once(
    intake: Intake,
    rt: Arc<Runtime>,
    args: &ConsoleArgs,
    text: &str,
    task_timeout: Duration,
) -> anyhow::Result<i32> {
    let text = if text == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read the message from stdin")?;
        text
    } else {
        text.to_string()
    };
    if text.trim().is_empty() {
        anyhow::bail!("--once needs a non-empty message");
    }
    let pre_approved = super::repl::approve_patterns(args)?;
    let awaiting = Awaiting::default();
    watch_interrupts(intake.stop.clone(), args.chat_id, awaiting.clone(), None);
    let inbound = Inbound::new(CHANNEL, args.chat_id, Some(args.user_id), text.trim());
    let (status_tx, mut status_rx) = tokio::sync::mpsc::unbounded_channel();
    let console = Console::new(args.chat_id, Box::new(PlainScreen::new()), awaiting.clone())
        .with_once(inbound.event_id.clone(), status_tx)
        .with_task_timeout(task_timeout)
        .with_approvals(ConsoleApprovals { pre_approved, questions: None })
        .with_tasks(rt.tasks.clone());
    let addr = console.start();
    Console::register(&addr, &intake, false);
    let wait = Duration::try_from_secs_f64(args.timeout_seconds.max(1.0)).unwrap_or(Duration::from_secs(120));
    // Messages interrupted by a crash are answered first, so the new one does not merge into them.
    let replayed = intake.replay.send(ReplayPending).await.unwrap_or_default();
    await_answers(&awaiting, &replayed, args.chat_id, wait).await;
    awaiting.expect(&inbound.event_id);
    intake.inbound.do_send(inbound);
    let mut deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, status_rx.recv()).await {
            Ok(Some(OnceStatus::Done(code))) => return Ok(code),
            // A background task is running: its result is worth waiting for as long as it may take.
            Ok(Some(OnceStatus::WaitingForTasks(limit))) => {
                deadline = deadline.max(tokio::time::Instant::now() + limit);
            }
            Ok(None) => anyhow::bail!("the conversation ended without an answer"),
            Err(_) => {
                // Stopped rather than left running: the stores close next, and a turn that meets a closed store
                // fails. The stop is stored before they close (shutting down waits for it).
                intake.stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id: args.chat_id });
                anyhow::bail!("no answer within the time limit (--timeout-seconds); the turn was stopped")
            }
        }
    }
}

/// Waits until every replayed message of this chat has its answer (or `limit` passes).
async fn await_answers(awaiting: &Awaiting, replayed: &[Inbound], chat_id: i64, limit: Duration) {
    let ids: Vec<String> =
        replayed.iter().filter(|i| i.channel == CHANNEL && i.chat_id == chat_id).map(|i| i.event_id.clone()).collect();
    if ids.is_empty() {
        return;
    }
    for id in &ids {
        awaiting.expect(id);
    }
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if ids.iter().all(|id| !awaiting.contains(id)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
