//! Local worker processes for the SQLite backend: the orchestrator runs up to `[tasks] local_workers` of them
//! (capped by `max_concurrent_workers`), one per slot. A slot starts its worker with the first task, and the
//! worker exits by itself after `[tasks] local_worker_idle_seconds` without a task; the next task starts it
//! again. An idle assistant is thus one process, and a task that finds no worker waits only for one to start.
//!
//! A worker that exits, idle or not, has its claims released at once, so a task it held starts again without
//! waiting for its lease to expire. Its slot starts a new worker at once when tasks wait (the one it held, one no
//! worker has started yet, or one whose worker is gone), else with the next task. At boot, tasks an earlier run
//! left unfinished start the workers at once. Workers also exit by themselves when the orchestrator is gone.
//!
//! With the vault on, a worker gets the secrets this process unlocked through its stdin pipe
//! (`--secrets-from-stdin`), so it needs no password and nothing secret passes through its environment or a
//! file.

use super::demand::Running;
use super::hub::TaskHub;
use actix::prelude::*;
use minibot_store::{TaskRecord, TaskStatus};
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Pause before a slot whose worker crashed starts another, so a worker that cannot start does not spin.
const CRASH_PAUSE: Duration = Duration::from_millis(300);
/// Pause after the worker program could not be started at all.
const SPAWN_FAILURE_PAUSE: Duration = Duration::from_secs(5);

/// How to start one worker process.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// When the worker processes first start: with the first task (or at boot when tasks of an earlier run are
/// unfinished), or at boot in any case. Either way they exit when idle and start again with the next task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStart {
    AtOnce,
    OnDemand,
}

pub struct LocalWorkers {
    hub: Arc<TaskHub>,
    command: WorkerCommand,
    count: u32,
    start: WorkerStart,
}

impl LocalWorkers {
    /// Supervises `count` worker slots (`[tasks] local_worker_count()`).
    pub fn new(hub: Arc<TaskHub>, command: WorkerCommand, count: u32, start: WorkerStart) -> Self {
        Self { hub, command, count, start }
    }
}

impl Actor for LocalWorkers {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.hub.workers.set_slots(self.count);
        let (hub, command, start) = (self.hub.clone(), self.command.clone(), self.start);
        let slots: Vec<Slot> =
            (0..self.count).map(|slot| Slot { hub: hub.clone(), command: command.clone(), slot }).collect();
        let run = async move {
            release_orphaned_claims(&hub).await;
            futures_util::future::join_all(slots.into_iter().map(|slot| slot.supervise(start))).await;
        };
        ctx.spawn(run.into_actor(self));
    }
}

/// Claims of local workers whose assistant is gone (killed, or quit while they ran a task): they die with it,
/// and their claims would hold the tasks until the lease expires (`[tasks.sqlite] lease_timeout_seconds`, half
/// an hour by default). Released at boot, before any worker starts, so those tasks run again at once. Local
/// worker ids carry their assistant's pid (`local-<pid>-…`); another assistant alive on the same queue keeps its
/// own.
async fn release_orphaned_claims(hub: &TaskHub) {
    let Some(queue) = &hub.sqlite else { return };
    let workers = match queue.claiming_workers().await {
        Ok(workers) => workers,
        Err(error) => {
            tracing::warn!(error = %error, "cannot read the claimed tasks");
            return;
        }
    };
    for worker_id in workers {
        let Some(pid) = worker_id.strip_prefix("local-").and_then(|rest| rest.split('-').next()) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        // This process's own pid can only be a dead assistant's (no worker of this one runs yet).
        if pid != std::process::id() && std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        match queue.release_worker(&worker_id).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(worker_id = %worker_id, tasks = n, "released the tasks of a worker whose assistant is gone")
            }
            Err(error) => tracing::warn!(error = %error, "cannot release a gone worker's tasks"),
        }
    }
}

/// How a worker process ended.
enum Ended {
    /// It exited by itself with success: it waited its idle period without a task (or was asked to stop).
    Stopped,
    /// Any other end: an error exit, a signal, a crash.
    Crashed(ExitStatus),
    /// The program did not start, or its end could not be read.
    Failed(std::io::Error),
}

struct Slot {
    hub: Arc<TaskHub>,
    command: WorkerCommand,
    slot: u32,
}

impl Slot {
    async fn supervise(self, start: WorkerStart) {
        let mut submitted = self.hub.workers.subscribe();
        let mut start_now = start == WorkerStart::AtOnce || unfinished_tasks(&self.hub).await;
        let mut generation = 0u32;
        loop {
            if !start_now && submitted.changed().await.is_err() {
                return;
            }
            generation += 1;
            let worker_id = format!("local-{}-{}-{generation}", std::process::id(), self.slot);
            let ended = self.run_worker(&worker_id).await;
            // Seen before the queue is looked at: a task submitted from here on wakes the slot again, and one
            // submitted earlier is in the store by now (its record is written before it is announced).
            submitted.borrow_and_update();
            let released = self.release(&worker_id).await;
            let idle_seconds = self.hub.config.tasks.local_worker_idle_seconds;
            match ended {
                Ended::Stopped => {
                    tracing::info!(worker_id = %worker_id, idle_seconds, "local worker stopped; the next task starts it again");
                }
                Ended::Crashed(status) => {
                    tracing::warn!(worker_id = %worker_id, status = %status, "local worker exited unexpectedly");
                    tokio::time::sleep(CRASH_PAUSE).await;
                }
                Ended::Failed(error) => {
                    tracing::error!(program = %self.command.program.display(), error = %error, "cannot run a local worker");
                    tokio::time::sleep(SPAWN_FAILURE_PAUSE).await;
                }
            }
            start_now = released > 0 || waiting_tasks(&self.hub).await;
            if start_now {
                tracing::info!(worker_id = %worker_id, "tasks are waiting; starting a local worker again");
            }
        }
    }

    /// Starts one worker and waits for it to end.
    async fn run_worker(&self, worker_id: &str) -> Ended {
        let hub = &self.hub;
        let hand_over = hub.config.vault.enabled;
        let mut spawn = tokio::process::Command::new(&self.command.program);
        spawn.args(&self.command.args);
        if hand_over {
            spawn.arg("--secrets-from-stdin");
        }
        let idle_seconds = hub.config.tasks.local_worker_idle_seconds;
        if idle_seconds > 0 {
            spawn.env(minibot_worker::IDLE_SECONDS_VAR, idle_seconds.to_string());
        } else {
            // Not inherited either: 0 means these workers never stop by themselves.
            spawn.env_remove(minibot_worker::IDLE_SECONDS_VAR);
        }
        // The roster is empty until the worker announces itself: no task is "unserved" meanwhile.
        if let Ok(mut fleet) = hub.fleet.lock() {
            fleet.expect_workers();
        }
        let child = spawn
            .env("MINIBOT_WORKER_ID", worker_id)
            .env("MINIBOT_PARENT_PID", std::process::id().to_string())
            .stdin(if hand_over { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(error) => return Ended::Failed(error),
        };
        let _running = Running::count(&hub.workers);
        if let Some(mut stdin) = child.stdin.take() {
            use tokio::io::AsyncWriteExt;
            let secrets = minibot_vault::hand_over(&hub.config.secrets, hub.config.vault_password.as_ref());
            // Closing the pipe tells the worker it has everything; a worker that died first shows up below.
            if let Err(error) = stdin.write_all(secrets.as_bytes()).await {
                tracing::warn!(worker_id = %worker_id, error = %error, "cannot hand the secrets to a local worker");
            }
        }
        tracing::info!(worker_id = %worker_id, pid = child.id(), "local worker started");
        match child.wait().await {
            Ok(status) if status.success() => Ended::Stopped,
            Ok(status) => Ended::Crashed(status),
            Err(error) => Ended::Failed(error),
        }
    }

    /// Makes the exited worker's claims reclaimable now; how many there were.
    async fn release(&self, worker_id: &str) -> u64 {
        let Some(queue) = &self.hub.sqlite else { return 0 };
        match queue.release_worker(worker_id).await {
            Ok(0) => 0,
            Ok(n) => {
                tracing::info!(worker_id = %worker_id, tasks = n, "released the exited worker's tasks");
                n
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot release the exited worker's tasks");
                0
            }
        }
    }
}

/// Tasks not ended, from this run or an earlier one (at boot: a crash or a stop left them).
async fn unfinished_tasks(hub: &TaskHub) -> bool {
    hub.store.active().await.is_ok_and(|active| !active.is_empty())
}

/// Tasks that need a worker: not started yet, or started by a worker that is gone (one of an earlier run, whose
/// claim a worker takes over once it expires). A task a live worker claimed a moment ago may still read as
/// waiting: the slot then starts a worker that finds nothing and stops after its idle period.
async fn waiting_tasks(hub: &TaskHub) -> bool {
    let live: HashSet<String> = hub
        .fleet
        .lock()
        .map(|mut fleet| fleet.live().into_iter().map(|worker| worker.worker_id.clone()).collect())
        .unwrap_or_default();
    let orphaned = |task: &TaskRecord| task.worker_id.as_ref().is_none_or(|id| !live.contains(id));
    match hub.store.active().await {
        Ok(active) => active.iter().any(|task| task.status == TaskStatus::Pending || orphaned(task)),
        Err(error) => {
            // Unknown is treated as waiting: a worker too many stops again when idle, a task left alone would not.
            if hub.is_closed() {
                tracing::debug!(error = %error, "task store closed at exit");
            } else {
                tracing::warn!(error = %error, "cannot read the queued tasks");
            }
            true
        }
    }
}
