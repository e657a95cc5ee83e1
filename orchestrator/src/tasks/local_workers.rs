//! Local worker processes for the SQLite backend: the orchestrator starts `[tasks] local_workers` of them,
//! restarts one that exits, and releases a dead worker's leases at once so its task starts again without
//! waiting for the lease to expire. Workers exit by themselves when the orchestrator is gone.
//!
//! A long-running orchestrator starts them at once, so the first task does not wait for a process to start. A
//! one-shot run (`console --once`) starts them with its first task (or at once when tasks of an earlier run are
//! still unfinished), so a question that needs no task forks no process.
//!
//! With the vault on, a worker gets the secrets this process unlocked through its stdin pipe
//! (`--secrets-from-stdin`), so it needs no password and nothing secret passes through its environment or a
//! file.

use super::hub::TaskHub;
use actix::prelude::*;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// How to start one worker process.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// When the worker processes start.
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
    /// Starts `count` workers (`[tasks] local_worker_count()`).
    pub fn new(hub: Arc<TaskHub>, command: WorkerCommand, count: u32, start: WorkerStart) -> Self {
        Self { hub, command, count, start }
    }
}

impl Actor for LocalWorkers {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let hub = self.hub.clone();
        let on_demand = self.start == WorkerStart::OnDemand;
        let wait = async move {
            if on_demand {
                hub.demand().await;
            }
        };
        ctx.wait(wait.into_actor(self).map(|(), act, ctx| {
            for slot in 0..act.count {
                let (hub, command) = (act.hub.clone(), act.command.clone());
                ctx.spawn(supervise(hub, command, slot).into_actor(act));
            }
        }));
    }
}

async fn supervise(hub: Arc<TaskHub>, command: WorkerCommand, slot: u32) {
    let mut generation = 0u32;
    loop {
        generation += 1;
        let worker_id = format!("local-{}-{slot}-{generation}", std::process::id());
        let hand_over = hub.config.vault.enabled;
        let mut spawn = tokio::process::Command::new(&command.program);
        spawn.args(&command.args);
        if hand_over {
            spawn.arg("--secrets-from-stdin");
        }
        let child = spawn
            .env("MINIBOT_WORKER_ID", &worker_id)
            .env("MINIBOT_PARENT_PID", std::process::id().to_string())
            .stdin(if hand_over { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(error) => {
                tracing::error!(program = %command.program.display(), error = %error, "cannot start a local worker");
                tokio::time::sleep(Duration::from_secs(5)).await;
                continue;
            }
        };
        if let Some(mut stdin) = child.stdin.take() {
            use tokio::io::AsyncWriteExt;
            let secrets = minibot_vault::hand_over(&hub.config.secrets, hub.config.vault_password.as_ref());
            // Closing the pipe tells the worker it has everything; a worker that died first shows up below.
            if let Err(error) = stdin.write_all(secrets.as_bytes()).await {
                tracing::warn!(worker_id = %worker_id, error = %error, "cannot hand the secrets to a local worker");
            }
        }
        tracing::info!(worker_id = %worker_id, pid = child.id(), "local worker started");
        let status = child.wait().await;
        tracing::warn!(worker_id = %worker_id, status = ?status, "local worker exited; restarting it");
        if let Some(queue) = &hub.sqlite {
            match queue.release_worker(&worker_id).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(worker_id = %worker_id, tasks = n, "released the dead worker's tasks"),
                Err(error) => tracing::warn!(error = %error, "cannot release the dead worker's tasks"),
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
