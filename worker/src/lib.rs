//! The task worker: claims queued tasks, builds the named specialist (or the generic worker), runs the agent
//! loop under the task's limits with progress and control messages alongside, and reports the result. A worker
//! holds no state that matters: kill one and its task goes to another worker as a new attempt.
//!
//! A worker takes only tasks it can run ([`Offer`]: the generic worker's and those of the specialists in its
//! agents folder whose `requires` its `[worker] labels` meet), announces itself with heartbeats, and says it is
//! leaving when stopped (SIGTERM, SIGINT); a task it was running goes back to the queue.
//!
//! A worker trusts no envelope: each task runs under the worker's own `[tasks]` limits at most, a task whose texts
//! are longer than a task may carry fails before its model is called ([`assembly::check_sizes`]), and a task
//! that panics fails alone and is settled, while the worker goes on to the next one.

mod approvals;
pub mod assembly;
mod heartbeat;
pub mod offer;
mod runner;

pub use approvals::QueueApprovals;
pub use offer::Offer;
pub use runner::Worker;

use minibot_config::Config;
use std::sync::Arc;
use std::time::Duration;

/// The worker id: `MINIBOT_WORKER_ID`, else host name and process id.
pub fn worker_id() -> String {
    std::env::var("MINIBOT_WORKER_ID")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| format!("{}-{}", offer::host_name(), std::process::id()))
}

/// Loads a worker's config. A local worker started with `secrets_from_stdin` gets the secrets its parent unlocked
/// through stdin and never opens the vault (see docs/secrets.md); any other worker unlocks its own vault. The
/// parent's vault password comes along only to be masked, so both processes mask the same values.
pub fn load_config(path: Option<&std::path::Path>, secrets_from_stdin: bool) -> anyhow::Result<Config> {
    use anyhow::Context as _;
    if !secrets_from_stdin {
        return Ok(Config::load(path)?);
    }
    let handover = minibot_vault::receive(std::io::stdin().lock()).context("cannot read the secrets on stdin")?;
    let mut config = Config::load_with(path, minibot_config::Unlock::Given(handover.secrets))?;
    config.vault_password = handover.password;
    Ok(config)
}

/// Runs a worker until its queue fails.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let id = worker_id();
    let config = Arc::new(config);
    // A managed folder holding the assistant's state, or a sandbox this host cannot provide, stops the worker
    // here, not each task it would take.
    let services = minibot_tools::ToolServices::new(config.clone(), None)
        .map_err(|e| anyhow::anyhow!("tools.file_storage.root_dir: cannot create it: {e}"))?;
    minibot_tools::files::check_root(&config, services.files.as_deref())?;
    minibot_tools::exec::sandbox::check(&config, services.files.as_deref()).await?;
    let offer = Offer::read(&config)?;
    for (name, missing) in &offer.declined {
        tracing::info!(specialist = %name, missing = ?missing, "not taking this specialist's tasks: labels missing");
    }
    let queue = minibot_queue::backend::open_worker_queue(&config, &id, &offer.routes).await?;
    let specialists: Vec<&str> = offer.specialists.iter().map(|s| s.name.as_str()).collect();
    tracing::info!(worker_id = %id, backend = config.tasks.backend.as_str(), labels = ?config.worker.labels,
        specialists = ?specialists, "worker started");
    watch_parent();
    let worker = Worker::new(config.clone(), queue.clone(), &id);
    let beats =
        tokio::spawn(heartbeat::run(config.clone(), queue.clone(), id.clone(), offer.clone(), worker.running.clone()));
    let result = tokio::select! {
        result = worker.run() => result.map_err(anyhow::Error::from),
        signal = stop_signal() => {
            tracing::info!(signal, "stopping; a task in progress goes back to the queue");
            Ok(())
        }
    };
    beats.abort();
    heartbeat::leave(&config, queue.as_ref(), &id, &offer).await;
    // sqlx drops pooled connections on the runtime, so the pool closes before the runtime ends.
    queue.close().await;
    result
}

/// Resolves with the signal's name at SIGTERM or SIGINT.
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// A local worker started by an orchestrator (`MINIBOT_PARENT_PID`) exits when that orchestrator is gone, even
/// when it was killed too hard to stop its children. A claimed task is simply claimed again by a new worker.
fn watch_parent() {
    let Some(parent) = std::env::var("MINIBOT_PARENT_PID").ok().and_then(|p| p.parse::<u32>().ok()) else {
        return;
    };
    tokio::spawn(async move {
        loop {
            if std::os::unix::process::parent_id() != parent {
                tracing::info!("the orchestrator is gone; exiting");
                std::process::exit(0);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
}
