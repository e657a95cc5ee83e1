//! The task worker: claims queued tasks, builds the named specialist (or the generic worker), runs the agent
//! loop under the task's limits with progress and control messages alongside, and reports the result. A worker
//! holds no state that matters: kill one and its task goes to another worker as a new attempt.

pub mod assembly;
mod runner;

pub use runner::Worker;

use anyhow::Context;
use minibot_config::{Config, TaskBackend};
use minibot_queue::WorkQueue;
use std::sync::Arc;
use std::time::Duration;

/// The worker id: `MINIBOT_WORKER_ID`, else host name and process id.
pub fn worker_id() -> String {
    std::env::var("MINIBOT_WORKER_ID").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    })
}

/// Opens the configured queue for a worker.
pub async fn open_queue(config: &Config, worker_id: &str) -> anyhow::Result<Arc<dyn WorkQueue>> {
    match config.tasks.backend {
        TaskBackend::Sqlite => {
            let path = tasks_db_path(config)?;
            let lease = Duration::from_secs(config.tasks.sqlite.lease_timeout_seconds);
            let queue = minibot_queue::sqlite::SqliteQueue::open(&path, worker_id, lease).await?;
            Ok(Arc::new(queue))
        }
        TaskBackend::Rabbitmq => {
            let queue = minibot_queue::amqp::AmqpQueue::connect(&amqp_settings(config), worker_id)
                .await
                .with_context(|| format!("rabbitmq.broker_url = {}", redact_url(&config.rabbitmq.broker_url)))?;
            Ok(Arc::new(queue))
        }
    }
}

/// `[rabbitmq]` as the queue backend takes it.
pub fn amqp_settings(config: &Config) -> minibot_queue::amqp::AmqpSettings {
    let section = &config.rabbitmq;
    minibot_queue::amqp::AmqpSettings {
        broker_url: section.broker_url.clone(),
        queue_name: section.queue_name.clone(),
        exchange_name: section.exchange_name.clone(),
        prefetch_count: section.prefetch_count.max(1),
    }
}

/// A broker URL for messages: the password is replaced.
pub fn redact_url(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() + 3 => {
            let credentials = &rest[..at - scheme.len() - 3];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{}", &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

pub fn tasks_db_path(config: &Config) -> anyhow::Result<std::path::PathBuf> {
    let url = &config.tasks.sqlite.sqlite_url;
    minibot_config::sqlite_path_from_url(url)
        .map(|p| config.resolve_path(&p))
        .with_context(|| format!("tasks.sqlite.sqlite_url `{url}` is not a SQLite URL"))
}

/// Runs a worker until its queue fails.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let id = worker_id();
    let config = Arc::new(config);
    let queue = open_queue(&config, &id).await?;
    tracing::info!(worker_id = %id, backend = config.tasks.backend.as_str(), "worker started");
    watch_parent();
    Worker { config, queue, worker_id: id }.run().await?;
    Ok(())
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
