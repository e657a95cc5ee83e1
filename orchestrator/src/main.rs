//! `minibot`: the orchestrator binary. Parses the command line, loads the config and runs the actor system.

use anyhow::Context as _;
use clap::Parser;
use minibot_config::Config;
use minibot_orchestrator::channels::console::{self, Console, OnceStatus, PlainScreen};
use minibot_orchestrator::cli::{Cli, Command, ConsoleArgs};
use minibot_orchestrator::messages::Inbound;
use minibot_orchestrator::router::{ReplayPending, Router};
use minibot_orchestrator::tasks::WorkerCommand;
use minibot_orchestrator::{logging, runtime};
use std::io::Read;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("minibot: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = Config::load(cli.config.as_deref())?;
    logging::init(&config, cli.verbose)?;
    if matches!(cli.command, Some(Command::Worker)) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        runtime.block_on(minibot_worker::run(config))?;
        return Ok(ExitCode::SUCCESS);
    }
    config.main_llm().require_key(&config.origin())?;
    let worker = worker_command(&config);
    let task_timeout = Duration::from_secs(config.tasks.worker_timeout_seconds + 60);
    let system = actix::System::new();
    let code = system.block_on(async move {
        let rt = runtime::Runtime::build(config).await?;
        let router = actix::Actor::start(Router::new(rt.clone()));
        rt.start_tasks(&router, worker);
        rt.start_mcp_supervision();
        match cli.command {
            Some(Command::Console(args)) => run_console(router, args, task_timeout).await,
            Some(Command::Worker) => Ok(0),
            None => {
                anyhow::bail!("no channel is enabled in this version: run `minibot console` to chat in the terminal")
            }
        }
    })?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// Local workers are this same binary in worker mode, on the same config.
fn worker_command(config: &Config) -> Option<WorkerCommand> {
    let program = std::env::current_exe().ok()?;
    let mut args = vec!["worker".to_string()];
    if let Some(path) = &config.source {
        args.push("--config".into());
        args.push(path.display().to_string());
    }
    Some(WorkerCommand { program, args })
}

async fn run_console(router: actix::Addr<Router>, args: ConsoleArgs, task_timeout: Duration) -> anyhow::Result<i32> {
    let awaiting: console::Awaiting = Arc::new(Mutex::new(Default::default()));
    console::watch_interrupts(router.clone(), args.chat_id, awaiting.clone());
    if let Some(once) = args.once {
        let text = if once == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("cannot read the message from stdin")?;
            text
        } else {
            once
        };
        if text.trim().is_empty() {
            anyhow::bail!("--once needs a non-empty message");
        }
        let inbound = Inbound::new(console::CHANNEL, args.chat_id, Some(args.user_id), text.trim());
        let (status_tx, mut status_rx) = tokio::sync::mpsc::unbounded_channel();
        let console = Console::new(args.chat_id, Box::new(PlainScreen), awaiting.clone())
            .with_once(inbound.event_id.clone(), status_tx)
            .with_task_timeout(task_timeout);
        let addr = actix::Actor::start(console);
        Console::register(&addr, &router);
        let wait = Duration::try_from_secs_f64(args.timeout_seconds.max(1.0)).unwrap_or(Duration::from_secs(120));
        // Messages interrupted by a crash are answered first, so the new one does not merge into them.
        let replayed = router.send(ReplayPending).await.unwrap_or_default();
        await_answers(&awaiting, &replayed, args.chat_id, wait).await;
        awaiting.lock().map(|mut a| a.insert(inbound.event_id.clone())).ok();
        router.do_send(inbound);
        let mut deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, status_rx.recv()).await {
                Ok(Some(OnceStatus::Done(code))) => return Ok(code),
                // A background task is running: its result is worth waiting for as long as it may take.
                Ok(Some(OnceStatus::WaitingForTasks(limit))) => {
                    deadline = deadline.max(tokio::time::Instant::now() + limit);
                }
                Ok(None) => anyhow::bail!("the conversation ended without an answer"),
                Err(_) => anyhow::bail!("no answer within the time limit (--timeout-seconds)"),
            }
        }
    }
    let (screen, quit) = console::spawn_repl(router.clone(), args.chat_id, args.user_id, awaiting.clone(), args.plain)?;
    let addr = actix::Actor::start(Console::new(args.chat_id, screen, awaiting));
    Console::register(&addr, &router);
    let replayed = router.send(ReplayPending).await.unwrap_or_default();
    if !replayed.is_empty() {
        eprintln!("(resuming {} message(s) interrupted by a restart)", replayed.len());
    }
    let _ = quit.await;
    Ok(0)
}

/// Waits until every replayed message of this chat has its answer (or `limit` passes).
async fn await_answers(awaiting: &console::Awaiting, replayed: &[Inbound], chat_id: i64, limit: Duration) {
    let ids: Vec<String> = replayed
        .iter()
        .filter(|i| i.channel == console::CHANNEL && i.chat_id == chat_id)
        .map(|i| i.event_id.clone())
        .collect();
    if ids.is_empty() {
        return;
    }
    if let Ok(mut set) = awaiting.lock() {
        set.extend(ids.iter().cloned());
    }
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        let done = awaiting.lock().map(|set| ids.iter().all(|id| !set.contains(id))).unwrap_or(true);
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
