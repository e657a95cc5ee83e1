//! `minibot queue migrate|workers`: the task queue's upkeep from the command line.

use minibot_config::{Config, TaskBackend, load_agents};
use minibot_orchestrator::checks::workers;
use minibot_orchestrator::cli::QueueAction;
use minibot_protocol::route_for;
use minibot_queue::backend;
use std::process::ExitCode;

pub async fn run(config: &Config, action: &QueueAction) -> anyhow::Result<ExitCode> {
    match action {
        QueueAction::Migrate => migrate(config).await,
        QueueAction::Workers => workers(config).await,
    }
}

async fn migrate(config: &Config) -> anyhow::Result<ExitCode> {
    if config.tasks.backend != TaskBackend::Rabbitmq {
        println!("[tasks] backend is sqlite: its queue table upgrades itself; nothing to migrate");
        return Ok(ExitCode::SUCCESS);
    }
    let mut routes = vec![String::new()];
    if config.specialists_enabled() {
        let agents = load_agents(&config.resolve_path(&config.orchestration.directory))?;
        routes.extend(agents.iter().map(|a| route_for(Some(&a.name))));
    }
    let settings = backend::amqp_settings(config, &routes)?;
    for queue in minibot_queue::amqp::migrate::migrate(&settings).await? {
        if queue.converted {
            println!("{}: now a quorum queue; {} waiting task(s) kept", queue.queue, queue.tasks_moved);
        } else {
            println!("{}: already a quorum queue", queue.queue);
        }
        if queue.unsigned > 0 {
            println!(
                "{}: {} waiting task(s) are not signed (an older version queued them, or someone else did): workers \
                 refuse them into {}.dead; ask for those tasks again",
                queue.queue, queue.unsigned, config.rabbitmq.queue_name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Listens for one and a half heartbeats and prints who spoke.
async fn workers(config: &Config) -> anyhow::Result<ExitCode> {
    let queue = backend::open_orchestrator_queue(config, &[]).await?.queue;
    let window = workers::listen_window(config);
    let seen = workers::listen(queue.as_ref(), window).await;
    queue.close().await;
    let seen = seen?;
    if seen.is_empty() {
        println!("no worker sent a heartbeat in {} s", window.as_secs_f32());
        return Ok(ExitCode::from(1));
    }
    for worker in &seen {
        let specialists: Vec<String> =
            worker.specialists.iter().map(|s| format!("{}@{}", s.name, s.hash.get(..8).unwrap_or(&s.hash))).collect();
        println!(
            "{}  host={} pid={} version={} labels=[{}] load={}/{} specialists=[{}]",
            worker.worker_id,
            worker.host,
            worker.pid,
            worker.app_version,
            worker.labels.join(","),
            worker.load,
            worker.capacity,
            specialists.join(",")
        );
    }
    Ok(ExitCode::SUCCESS)
}
