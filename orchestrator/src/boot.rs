//! Start-up wiring, the one place that knows every actor: it builds the shared [`Runtime`], starts the router,
//! the MCP connection actors, the task coordinator and the local workers, then runs the channel the command
//! line asked for. Only `main` calls it.

use crate::channels::console;
use crate::cli::{Command, ConsoleArgs};
use crate::daemon;
use crate::intake_ledger::IntakeLedger;
use crate::mcp_supervisor;
use crate::messages::Intake;
use crate::router::{self, Router};
use crate::runtime::Runtime;
use crate::scheduler::{Scheduler, StopScheduler};
use crate::tasks::coordinator::TaskCoordinator;
use crate::tasks::local_workers::{LocalWorkers, WorkerCommand, WorkerStart};
use actix::prelude::*;
use minibot_config::{Config, TaskBackend};
use std::sync::Arc;
use std::time::Duration;

/// The running actor system, as channels see it.
pub struct Booted {
    pub runtime: Arc<Runtime>,
    pub router: Addr<Router>,
    pub intake: Intake,
}

/// Builds the runtime and starts every actor but the channels. `workers` says when local worker processes
/// first start (SQLite backend; they stop when idle and start again with the next task); `worker` is how to
/// start one.
pub async fn start(config: Config, worker: Option<WorkerCommand>, workers: WorkerStart) -> anyhow::Result<Booted> {
    let runtime = Runtime::build(config).await?;
    let router = Router::new(runtime.clone()).start();
    if let Some(hub) = &runtime.mcp {
        mcp_supervisor::supervise(hub);
    }
    if let Some(hub) = &runtime.tasks {
        TaskCoordinator::new(hub.clone(), router::task_routes(&router)).start();
        // Each worker runs one task at a time, so `max_concurrent_workers` caps how many are started.
        let count = runtime.config.tasks.local_worker_count();
        if let (Some(command), TaskBackend::Sqlite, true) = (worker, runtime.config.tasks.backend, count > 0) {
            LocalWorkers::new(hub.clone(), command, count, workers).start();
        }
    }
    let ledger = IntakeLedger::new(runtime.clone()).start();
    let intake = router::intake(&router, &ledger);
    Ok(Booted { runtime, router, intake })
}

/// Runs what the command line asked for; returns the process exit code.
pub async fn run(config: Config, command: Option<Command>) -> anyhow::Result<i32> {
    let Some(Command::Console(args)) = command else {
        daemon::check_channels(&config)?;
        let worker = worker_command(&config);
        let booted = start(config, worker, WorkerStart::OnDemand).await?;
        let channels = daemon::channels(&booted.runtime)?;
        // Turns it fires before the channels are up wait in the router.
        let names: Vec<&str> = channels.iter().map(|c| c.name()).collect();
        let scheduler = start_scheduler(&booted, &names);
        let code = daemon::run(&booted.runtime, &booted.intake, channels).await;
        stop_scheduler(scheduler).await;
        halt_chats(&booted).await;
        booted.runtime.close().await;
        return code;
    };
    let task_timeout = Duration::from_secs(config.tasks.worker_timeout_seconds + 60);
    // Every mode forks worker processes only when it submits a task (or finds unfinished ones): an idle
    // assistant is one process.
    let worker = worker_command(&config);
    let booted = start(config, worker, WorkerStart::OnDemand).await?;
    // A one-shot console run answers its message and exits: it fires nothing, so a job cannot fire into a
    // process that is about to end. The interactive console fires the console chat's jobs.
    let scheduler = if args.once.is_none() { start_scheduler(&booted, &[console::CHANNEL]) } else { None };
    let code = run_console(&booted, &args, task_timeout).await;
    stop_scheduler(scheduler).await;
    halt_chats(&booted).await;
    booted.runtime.close().await;
    code
}

/// Turns still running after the grace are dropped now, inside the runtime: a database connection they hold goes
/// back to its pool (dropped after the runtime ended, it would panic the exit). Their messages stay pending.
async fn halt_chats(booted: &Booted) {
    let _ = booted.router.send(router::HaltChats).await;
    // The actors stop on their next poll; give them that before the pools close.
    tokio::time::sleep(Duration::from_millis(50)).await;
}

fn start_scheduler(booted: &Booted, channels: &[&str]) -> Option<Addr<Scheduler>> {
    let channels = channels.iter().map(|c| c.to_string()).collect();
    Scheduler::new(&booted.runtime, booted.router.clone(), booted.intake.accept.clone(), channels).map(Actor::start)
}

async fn stop_scheduler(scheduler: Option<Addr<Scheduler>>) {
    if let Some(scheduler) = scheduler {
        let _ = scheduler.send(StopScheduler).await;
    }
}

async fn run_console(booted: &Booted, args: &ConsoleArgs, task_timeout: Duration) -> anyhow::Result<i32> {
    match &args.once {
        Some(text) => console::run_once(booted.intake.clone(), booted.runtime.clone(), args, text, task_timeout).await,
        None => console::run_repl(booted.intake.clone(), booted.runtime.clone(), args).await,
    }
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
