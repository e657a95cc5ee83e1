//! The task worker: claims queued tasks, builds the named specialist (or the generic worker), runs the agent
//! loop under the task's limits with progress and control messages alongside, and reports the result. A worker
//! holds no state that matters: kill one and its task goes to another worker as a new attempt.
//!
//! A worker takes only tasks it can run ([`Offer`]: the generic worker's and those of the specialists in its
//! agents folder whose `requires` its `[worker] labels` meet), announces itself with heartbeats, and says it is
//! leaving when stopped (SIGTERM, SIGINT); a task it was running goes back to the queue.
//!
//! A worker may also exit after a set time without a task ([`IDLE_SECONDS_VAR`]): the orchestrator asks that of
//! the local workers it starts, and starts them again with the next task.
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

/// The environment variable that makes a worker exit after that many seconds without a task. The orchestrator
/// sets it for the local workers it starts (`[tasks] local_worker_idle_seconds`) and starts them again with the
/// next task; a worker started by hand runs until stopped unless it is set.
pub const IDLE_SECONDS_VAR: &str = "MINIBOT_WORKER_IDLE_SECONDS";

/// How long this worker waits for a task before it exits ([`IDLE_SECONDS_VAR`]); `None`: for ever.
pub fn idle_limit() -> anyhow::Result<Option<Duration>> {
    let Ok(text) = std::env::var(IDLE_SECONDS_VAR) else { return Ok(None) };
    let seconds: u64 = text.trim().parse().map_err(|_| {
        anyhow::anyhow!("{IDLE_SECONDS_VAR}: expected whole seconds (0 for never), got `{}`", text.escape_debug())
    })?;
    Ok((seconds > 0).then(|| Duration::from_secs(seconds)))
}

/// Runs a worker until its queue fails, it is stopped, or it waited its idle limit ([`idle_limit`]) for a task.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let idle = idle_limit()?;
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
    let worker = Worker::new(config.clone(), queue.clone(), &id);
    let beats =
        tokio::spawn(heartbeat::run(config.clone(), queue.clone(), id.clone(), offer.clone(), worker.running.clone()));
    let result = tokio::select! {
        result = worker.run_until_idle(idle) => {
            if result.is_ok() {
                let idle_seconds = idle.map_or(0, |idle| idle.as_secs());
                tracing::info!(idle_seconds, "no task came for the idle period; exiting");
            }
            result.map_err(anyhow::Error::from)
        }
        signal = stop_signal() => {
            tracing::info!(signal, "stopping; a task in progress goes back to the queue");
            Ok(())
        }
        () = parent_gone() => {
            tracing::info!("the orchestrator is gone; exiting (a task in progress goes back to the queue)");
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
/// when it was killed too hard to stop its children. Resolves then; never for a worker started by hand. The
/// worker then leaves as at a stop: the task it held goes back to the queue at once, for the next assistant's
/// workers, instead of staying claimed until its lease expires.
async fn parent_gone() {
    let Some(parent) = std::env::var("MINIBOT_PARENT_PID").ok().and_then(|p| p.parse::<u32>().ok()) else {
        return std::future::pending().await;
    };
    while std::os::unix::process::parent_id() == parent {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
