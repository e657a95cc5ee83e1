//! Local worker processes for the SQLite backend: the orchestrator starts `[tasks] local_workers` of them,
//! restarts one that exits, and releases a dead worker's leases at once so its task starts again without
//! waiting for the lease to expire. Workers exit by themselves when the orchestrator is gone.

use super::TaskHub;
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

pub struct LocalWorkers {
    hub: Arc<TaskHub>,
    command: WorkerCommand,
    count: u32,
}

impl LocalWorkers {
    pub fn new(hub: Arc<TaskHub>, command: WorkerCommand, count: u32) -> Self {
        Self { hub, command, count }
    }
}

impl Actor for LocalWorkers {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for slot in 0..self.count {
            let (hub, command) = (self.hub.clone(), self.command.clone());
            ctx.spawn(supervise(hub, command, slot).into_actor(self));
        }
    }
}

async fn supervise(hub: Arc<TaskHub>, command: WorkerCommand, slot: u32) {
    let mut generation = 0u32;
    loop {
        generation += 1;
        let worker_id = format!("local-{}-{slot}-{generation}", std::process::id());
        let child = tokio::process::Command::new(&command.program)
            .args(&command.args)
            .env("MINIBOT_WORKER_ID", &worker_id)
            .env("MINIBOT_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
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
